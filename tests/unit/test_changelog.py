"""The changelog's newest version is the package's (pyproject.toml, `cdc-ctl --version`)."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
CHANGELOG = Path(__file__).resolve().parents[2] / "CHANGELOG.md"


def test_the_newest_changelog_entry_is_the_packages_version() -> None:
    entries = re.findall(r"^## (\d+\.\d+\.\d+)\b", CHANGELOG.read_text(), flags=re.M)
    assert entries, "CHANGELOG.md has no version entry"
    assert entries[0] == version("cdcbox")
