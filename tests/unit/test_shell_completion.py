"""`cdc-ctl` completes its commands in bash, as the README says to set it up."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def test_bash_completion_offers_the_command_groups() -> None:
    beside = Path(sys.executable).parent / "cdc-ctl"  # the venv's, even if not on PATH
    cdc_ctl = str(beside) if beside.exists() else shutil.which("cdc-ctl")
    assert cdc_ctl is not None
    env = {**os.environ, "_CDC_CTL_COMPLETE": "bash_source"}
    script = subprocess.run([cdc_ctl], env=env, capture_output=True, text=True, check=True)
    assert "_cdc_ctl_completion()" in script.stdout
    env = {
        **os.environ,
        "_CDC_CTL_COMPLETE": "bash_complete",
        "COMP_WORDS": "cdc-ctl conn",
        "COMP_CWORD": "1",
    }
    offered = subprocess.run([cdc_ctl], env=env, capture_output=True, text=True, check=True)
    assert "plain,connectors" in offered.stdout.splitlines()
