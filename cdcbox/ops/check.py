"""One preflight check's outcome, as `cdc-ctl doctor` prints it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Check:
    """One preflight check's outcome: what, whether it passed, what was found, how to fix it."""

    name: str
    ok: bool
    detail: str
    fix: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
