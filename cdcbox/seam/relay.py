"""The polling relay's side of the seam: the outbox row it reads, and the store it claims
and settles rows through (`cdcbox.postgres.relay_store`, `cdcbox.mariadb.relay_store`).
The worker's loop, its Kafka side and its guarantees are the same for both databases;
only the session and the SQL differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class OutboxRow:
    """One outbox row as the relay reads it: the producer's columns between the row id
    and the row's bookkeeping, in this order (`_ROW`)."""

    id: int
    event_id: Any
    aggregate_type: str
    aggregate_id: str
    aggregate_version: int
    event_type: str
    payload: bytes
    content_type: str
    trace_id: str
    causation_id: str
    created_at: datetime
    occurred_at: str
    retry_count: int


class RelayDatabase(Protocol):
    """One worker's session on its outbox, and the relay's statements over it. The
    session reconnects after the server went away; a statement that met the outage
    raises one of the database's `outages` (`Database.outages`), which the worker waits
    out."""

    # Whether new rows can wake the worker (PostgreSQL's NOTIFY); without it, it polls.
    notifies: bool

    def open(self, listen: bool) -> None:
        """Open the session; the first one refuses an outbox this relay must not serve."""

    def claim(self, worker: str, limit: int, lease_s: float, ordered: bool) -> list[OutboxRow]:
        """Lease up to `limit` due rows to `worker`, oldest first."""

    def mark_sent(self, worker: str, ids: list[int]) -> int:
        """Mark `ids` SENT where `worker` still holds them."""

    def mark_failed(
        self, worker: str, max_attempts: int, failures: list[tuple[int, float, str, bool]]
    ) -> int:
        """(id, delay, error, permanent): RETRY after the delay, or DEAD."""

    def release(self, worker: str, ids: list[int]) -> int:
        """Give rows back unsent, without spending an attempt."""

    def close(self) -> None: ...
