"""The consumer's tables, each behind the one store that owns its SQL (the seam of
`cdcbox.stores.protocols`: PostgreSQL's stores here by default, MariaDB's from
`cdcbox.mariadb.inbox` and `cdcbox.mariadb.consumer_state`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdcbox.names import DbNames
from cdcbox.stores.breaker_state import BreakerState
from cdcbox.stores.claim_guard import ClaimAndAdvance
from cdcbox.stores.group_binding import GroupBinding
from cdcbox.stores.inbox import Inbox
from cdcbox.stores.parking import Parking
from cdcbox.stores.protocols import (
    BindingStore,
    BreakerStore,
    ClaimAndAdvanceStore,
    InboxStore,
    ParkingStore,
    ReconciliationStore,
    VersionStore,
)
from cdcbox.stores.reconciliation import Reconciliation
from cdcbox.stores.version_guard import VersionGuard


@dataclass(frozen=True)
class Stores:
    """The consumer's tables of one schema, each behind the store that owns its SQL."""

    inbox: InboxStore = field(default_factory=Inbox)
    reconciliation: ReconciliationStore = field(default_factory=Reconciliation)
    parking: ParkingStore = field(default_factory=Parking)
    versions: VersionStore = field(default_factory=VersionGuard)
    bindings: BindingStore = field(default_factory=GroupBinding)
    claim_and_advance: ClaimAndAdvanceStore = field(default_factory=ClaimAndAdvance)
    breaker: BreakerStore = field(default_factory=BreakerState)

    @classmethod
    def for_schema(cls, names: DbNames) -> Stores:
        """PostgreSQL's stores of one schema."""
        return cls(
            Inbox(names),
            Reconciliation(names),
            Parking(names),
            VersionGuard(names),
            GroupBinding(names),
            ClaimAndAdvance(names),
            BreakerState(names),
        )
