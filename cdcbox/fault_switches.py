"""Test-only switches for the fault suite (tests/faults): each turns one safeguard off, or
stops the process at one exact point, so a fault scenario can show that the safeguard is
what keeps the ledger exact. All are off by default; only `CDCBOX_FAULT_SWITCHES` (read
by `cdc-ctl consume` and `cdc-ctl relay run`) turns them on. Never set it in production.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Any

from cdcbox.errors import ConfigError

ENV = "CDCBOX_FAULT_SWITCHES"
_FLAGS = {
    "no-inbox-dedupe": "no_inbox_dedupe",
    "offsets-before-db-commit": "offsets_before_db_commit",
    "no-relay-lease-check": "no_relay_lease_check",
    "no-durability-barrier": "no_durability_barrier",
    "no-session-check": "no_session_check",
}


@dataclass(frozen=True)
class FaultSwitches:
    """Test-only safeguard switches and kill points; all off by default (see the module)."""

    # A redelivered record is handled again although its inbox row exists.
    no_inbox_dedupe: bool = False
    # A poll batch's offsets are committed before its records' transactions.
    offsets_before_db_commit: bool = False
    # A relay worker marks rows SENT without checking it still holds their lease.
    no_relay_lease_check: bool = False
    # The consumer commits offsets without first flushing its asynchronous COMMITs.
    no_durability_barrier: bool = False
    # The consumer trusts the barrier even when the batch's commits began on a session
    # that has since ended (with the server, perhaps, and its unflushed WAL).
    no_session_check: bool = False
    # The consumer SIGKILLs itself right after this many records committed in the
    # database, before their offsets are committed.
    kill_after_records: int | None = None

    @classmethod
    def parse(cls, text: str | None) -> FaultSwitches:
        """'no-inbox-dedupe,kill-after-records=40' (comma-separated); '' is all off."""
        flags: dict[str, Any] = {}
        kill_after = None
        for item in filter(None, (part.strip() for part in (text or "").split(","))):
            name, _, value = item.partition("=")
            if name == "kill-after-records" and value.isdigit():
                kill_after = int(value)
            elif name in _FLAGS and not value:
                flags[_FLAGS[name]] = True
            else:
                raise ConfigError(f"{ENV}: unknown switch {item!r}")
        return cls(**flags, kill_after_records=kill_after)

    def committed(self, records: int) -> None:
        """Called with the count of records committed in the database so far, before
        their offsets are committed."""
        if self.kill_after_records is not None and records >= self.kill_after_records:
            os.kill(os.getpid(), signal.SIGKILL)
