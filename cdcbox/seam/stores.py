"""The store seam: what the consumer asks of each of its tables, whichever the database.

`cdcbox.postgres` implements these on PostgreSQL, `cdcbox.mariadb.inbox` and
`cdcbox.mariadb.consumer_state` on MariaDB; the consumer's steps know only these (and
`cdcbox.session.Session`), so no SQL of either database is written in the pipeline.
Each method runs in the caller's transaction unless it says otherwise.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from cdcbox.errors import ConfigError
from cdcbox.event import Event
from cdcbox.session import Session

VersionKey = tuple[str, str, str]  # (consumer name, aggregate type, aggregate id)


@dataclass(frozen=True)
class GuardResult:
    """The answer of a version advance: applied or stale, and the version before it."""

    applied: bool  # False: the event is stale (not newer than the last applied)
    previous: int | None  # the version applied before, None for a new aggregate

    def gap_before(self, version: int) -> bool:
        """True when versions between the previous one and `version` were never applied."""
        return self.applied and self.previous is not None and version > self.previous + 1


Claim = Literal["new", "reclaimed"]
ParkedKey = tuple[str, str, str]  # consumer_name, aggregate_type, aggregate_id
# held: live events go to the DLQ behind the failed one; replaying: its dead letters are
# on their way back, and live events are requeued behind them.
ParkState = Literal["held", "replaying"]


@dataclass(frozen=True)
class PurgePlan:
    """An inbox purge: the count of rows it deletes and the statement deleting a batch of
    them (its parameters: `params`, then the batch size)."""

    count: Any
    delete: Any
    params: tuple[Any, ...]


class InboxStore(Protocol):
    """At most one PROCESSED or SKIPPED row per (event id, consumer name)."""

    def counts(self, conn: Session) -> list[tuple[str, str, int, datetime]]: ...

    def purge_plan(self, older_than: timedelta) -> PurgePlan: ...

    def claim(self, conn: Session, event: Event, consumer: str) -> Claim | None: ...

    def claim_many(
        self, conn: Session, claims: list[tuple[Event, str]], processed: bool
    ) -> dict[tuple[uuid.UUID, str], Claim]: ...

    def finish_many(
        self, conn: Session, results: list[tuple[Event, str, str, str | None]]
    ) -> None: ...

    def mark_skipped(self, conn: Session, event: Event, consumer: str, reason: str) -> None: ...

    def failed_since(
        self, conn: Session, consumer: str, since: datetime
    ) -> list[tuple[uuid.UUID, str, int]]: ...

    def held_before(self, conn: Session, event: Event, consumer: str) -> bool: ...

    def record_failure(
        self, conn: Session, event: Event, consumer: str, attempts: int, error: str
    ) -> None: ...


class VersionStore(Protocol):
    """The last version each consumer applied per aggregate; it only moves forward."""

    def advance(self, conn: Session, event: Event, consumer: str) -> GuardResult: ...

    def lock_many(self, conn: Session, keys: set[VersionKey]) -> dict[VersionKey, int]: ...

    def advance_many(
        self, conn: Session, versions: dict[VersionKey, int], current: dict[VersionKey, int]
    ) -> bool:
        """Write `versions` (judged against `current`, what `lock_many` returned);
        False when a row did not move as judged."""
        ...


class ClaimAndAdvanceStore(Protocol):
    """The inbox claim and, only when it claimed, the version advance."""

    def run(
        self, conn: Session, event: Event, consumer: str
    ) -> tuple[Claim | None, GuardResult]: ...


class ParkingStore(Protocol):
    """Parked aggregates, and this process's cache of them."""

    def refresh(self, conn: Session, consumers: list[str]) -> None: ...

    def invalidate(self) -> None: ...

    def might_be_parked(self, key: ParkedKey) -> bool: ...

    def state(self, conn: Session, key: ParkedKey) -> ParkState | None: ...

    def mark_replaying(
        self, conn: Session, keys: list[ParkedKey], event_ids: list[str]
    ) -> None: ...

    def park(self, conn: Session, event: Event, consumer: str, reason: str) -> None: ...

    def remember(self, key: ParkedKey) -> None: ...

    def release(
        self, conn: Session, consumer: str, aggregate_type: str, aggregate_id: str
    ) -> bool: ...

    def release_if_drained(self, conn: Session, key: ParkedKey) -> bool: ...

    def list(self, conn: Session) -> list[tuple[Any, ...]]:
        """(consumer, aggregate type, aggregate id, event id, reason, parked at) of every
        parked aggregate, oldest first."""
        ...


class ReconciliationStore(Protocol):
    """Events a handler refused as illegal transitions, once per event and consumer."""

    def record(self, conn: Session, event: Event, consumer: str, reason: str) -> None: ...


class BindingStore(Protocol):
    """One consumer name, one consumer group (its own transaction)."""

    def bind(
        self, conn: Session, consumer_names: Sequence[str], group_id: str, move: bool = False
    ) -> None: ...

    def groups(self, conn: Session) -> list[str]:
        """Every group a consumer name of these tables is bound to."""
        ...


class BreakerStore(Protocol):
    """The circuit breaker's shared state (see `cdcbox.postgres.breaker_state`)."""

    def lock(self, conn: Session, consumer: str) -> tuple[bool, datetime | None]: ...

    def failing(
        self,
        conn: Session,
        consumer: str,
        window_s: float,
        closed_at: datetime | None,
        aggregate: tuple[str, str],
    ) -> int: ...

    def note(self, conn: Session, consumer: str, aggregate: tuple[str, str]) -> None: ...

    def open(self, conn: Session, consumer: str) -> None: ...

    def close(self, conn: Session, consumer: str, window_s: float) -> datetime | None: ...


@dataclass
class BatchVersions:
    """The versions of one poll batch's aggregates, judged in memory in record order as
    `VersionGuard.advance` would judge them one by one."""

    current: dict[VersionKey, int]
    advanced: dict[VersionKey, int] = field(default_factory=dict)

    def advance(self, key: VersionKey, version: int) -> GuardResult:
        previous = self.advanced.get(key, self.current.get(key))
        if previous is not None and version <= previous:
            return GuardResult(applied=False, previous=previous)
        self.advanced[key] = version
        return GuardResult(applied=True, previous=previous)


def claim_row(event: Event, consumer: str) -> tuple[Any, ...]:
    """The inbox row's identity and source columns, in the statements' column order."""
    return (
        event.event_id,
        consumer,
        event.event_type,
        event.aggregate_type,
        event.aggregate_id,
        event.aggregate_version,
        event.topic,
        event.partition,
        event.offset,
    )


def names_to_move(bound: list[tuple[str, str]], group_id: str, move: bool) -> list[str]:
    """Of the (name, group) bindings read, the names bound to another group than
    `group_id`: to be moved when `move`, refused (ConfigError) otherwise."""
    elsewhere = {name: group for name, group in bound if group != group_id}
    if elsewhere and not move:
        name, group = sorted(elsewhere.items())[0]
        raise ConfigError(
            f"consumer name {name!r} runs in group {group!r}, not {group_id!r}: two "
            "groups would each apply every event and split its inbox and parking; "
            "use that group, or move the name with --move-to-group"
        )
    return sorted(elsewhere)


@dataclass(frozen=True)
class Stores:
    """The consumer's tables of one schema (or MariaDB database), each behind the store
    that owns its SQL: what `cdcbox.seam.database.Database.consumer_state` gives."""

    inbox: InboxStore
    reconciliation: ReconciliationStore
    parking: ParkingStore
    versions: VersionStore
    bindings: BindingStore
    claim_and_advance: ClaimAndAdvanceStore
    breaker: BreakerStore
