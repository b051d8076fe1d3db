"""A stack process of ours that answers over HTTP: started, awaited and stopped by pid."""

from __future__ import annotations

from pathlib import Path

import requests

from cdcbox.errors import StackError
from cdcbox.stack import process


class Spawned(process.PidTracked):
    """A process of ours tracked by its pid file, ready when `_ready` answers."""

    name: str
    log_file: Path
    url: str
    stop_timeout_s = 30

    def _ready(self) -> bool:
        raise NotImplementedError

    def _await(self, record: process.PidRecord, timeout_s: float) -> None:
        if not process.wait_until(lambda: self._ready() or not record.alive(), timeout_s):
            raise StackError(
                f"{self.name} did not answer at {self.url} within {timeout_s:.0f} s "
                f"(log: {self.log_file}):\n{process.tail(self.log_file)}"
            )
        if not record.alive():
            raise StackError(
                f"{self.name} exited during start-up (log: {self.log_file}):\n"
                f"{process.tail(self.log_file)}"
            )


def answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False
