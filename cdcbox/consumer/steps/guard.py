"""The version guard, inside the record's transaction: stale events end as STALE; under
`gap_policy=hold` an event that skips versions raises `RetryLater` (the missing ones may
still arrive), so the transaction rolls back, advance included.

A gap is a version no outcome of this consumer has consumed yet: every outcome of an
event of the aggregate advances the version — applied, skipped, refused, or an event
type this consumer has no handler for — so only a version not yet read is missing."""

from __future__ import annotations

from cdcbox.consumer.config import GapPolicy
from cdcbox.consumer.signals import RetryLater
from cdcbox.consumer.stats import Outcome
from cdcbox.event import Event
from cdcbox.seam.stores import GuardResult, VersionStore
from cdcbox.session import Session


class GuardStep:
    """The version guard inside a record's transaction, with the consumer's gap policy."""

    def __init__(self, guard: VersionStore, gap_policy: GapPolicy) -> None:
        self.guard = guard
        self.gap_policy = gap_policy

    def check(self, conn: Session, event: Event, consumer: str) -> Outcome | None:
        """None: apply the event (its version was advanced); `Outcome.STALE`: do not."""
        version = event.aggregate_version
        if version is None:
            return None  # unversioned events bypass the guard
        return self.judge(self.guard.advance(conn, event, consumer), version)

    def judge(self, result: GuardResult, version: int) -> Outcome | None:
        """The verdict on an advance already made: None (apply) or `Outcome.STALE`;
        `RetryLater` for a gap under `hold`."""
        if not result.applied:
            return Outcome.STALE
        if self.gap_policy == "hold" and result.gap_before(version):
            raise RetryLater(f"gap: version {version} after {result.previous}")
        return None

    def consume(self, conn: Session, event: Event, consumer: str) -> None:
        """Advance past an event that ends without being applied (skipped, refused, not
        this consumer's type), so `hold` never waits for a version that will not come."""
        if event.aggregate_version is not None:
            self.guard.advance(conn, event, consumer)
