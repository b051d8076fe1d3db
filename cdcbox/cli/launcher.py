"""`cdc-ctl`'s console script: the CLI needs the `cli` extra (click, Kafka and Connect
clients, the terminal UI); installed without it, cdc-ctl says so in one line instead of
a traceback."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from cdcbox.cli.main import main as run
    except ModuleNotFoundError as missing:
        sys.stderr.write(
            f"error: cdc-ctl needs the cli extra ({missing.name} is not installed): "
            "pip install 'cdcbox[cli]'\n"
        )
        raise SystemExit(2) from None
    run()
