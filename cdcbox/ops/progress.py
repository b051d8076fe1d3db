"""Whether a connector's replication slot still moves: the one sign, outside Connect, that
a task reporting RUNNING is publishing.

A healthy Debezium task confirms each position it has published (under exactly-once,
after each transaction) and, with the specs' heartbeat, at least every 10 s when idle;
so a slot whose confirmed position stays put while WAL is written after it belongs to a
task that has stopped publishing, whatever its status says (a transaction left open on
Connect's offsets topic, a producer that will not drain). `ProgressWatch` remembers
since when each slot has stood still with WAL after it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg


@dataclass(frozen=True)
class SlotPosition:
    """A slot's confirmed position and the WAL written after it, in bytes."""

    slot: str
    confirmed: str
    behind_bytes: int


def slot_position(conn: psycopg.Connection[Any], slot: str) -> SlotPosition | None:
    """`slot`'s position now; None when it does not exist or has confirmed nothing."""
    with conn.transaction():
        row = conn.execute(
            "SELECT confirmed_flush_lsn::text, "
            "pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint "
            "FROM pg_replication_slots WHERE slot_name = %s AND confirmed_flush_lsn IS NOT NULL",
            (slot,),
        ).fetchone()
    return None if row is None else SlotPosition(slot, row[0], max(0, int(row[1])))


class ProgressWatch:
    """Since when each slot has stood still at one position with WAL after it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._still_since: dict[str, tuple[str, float]] = {}

    def observe(self, position: SlotPosition) -> float:
        """Seconds the slot has stood still with WAL after it, this observation included
        (0 when it moved since the last one, or has nothing after it)."""
        now = self._clock()
        if position.behind_bytes == 0:
            self._still_since.pop(position.slot, None)
            return 0.0
        seen = self._still_since.get(position.slot)
        if seen is None or seen[0] != position.confirmed:
            self._still_since[position.slot] = (position.confirmed, now)
            return 0.0
        return now - seen[1]


def stalled_for(
    conn: psycopg.Connection[Any],
    slot: str,
    wait_s: float,
    poll_s: float = 0.5,
) -> tuple[float, SlotPosition | None]:
    """Watch `slot` for up to `wait_s`: (0, position) as soon as it moves or has nothing
    after it, else (seconds it stood still, its position). No slot: (0, None)."""
    first = slot_position(conn, slot)
    if first is None or first.behind_bytes == 0:
        return 0.0, first
    started = time.monotonic()
    while True:
        time.sleep(poll_s)
        position = slot_position(conn, slot)
        if position is None:
            return 0.0, None
        if position.confirmed != first.confirmed or position.behind_bytes == 0:
            return 0.0, position
        if (still := time.monotonic() - started) >= wait_s:
            return still, position
