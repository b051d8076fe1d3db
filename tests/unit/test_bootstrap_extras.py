"""scripts/bootstrap.sh reinstalls when an extra the caller needs is missing: `scripts/demo`
(test) then `scripts/bench` (test,bench) used to find the stamp and skip matplotlib."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "scripts" / "lib" / "extras.sh"


def merged(installed: str, wanted: str) -> str:
    result = subprocess.run(
        ["bash", "-c", f'. "{LIB}"; merged_extras "$1" "$2"', "-", installed, wanted],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


@pytest.mark.parametrize(
    ("installed", "wanted", "extras"),
    [
        ("", "binary,test,", "binary,test"),
        ("binary,test", "binary,test,test,bench", "binary,test,bench"),  # bench was missing
        ("binary,test,bench", "binary,test,", "binary,test,bench"),  # nothing to add
    ],
)
def test_the_stamp_names_every_installed_extra(installed: str, wanted: str, extras: str) -> None:
    assert merged(installed, wanted) == extras
