"""`cdc-ctl stack up` where util-linux's runuser is not on PATH (a minimal PATH without
/usr/sbin): one line naming it and an exit code, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_stack_up_without_runuser_says_so_in_one_line(tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    result = subprocess.run(
        [str(bin_dir / "cdc-ctl"), "stack", "up", "--state-dir", str(tmp_path / "stack")],
        env={**os.environ, "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "runuser (util-linux) is not on PATH" in result.stderr
