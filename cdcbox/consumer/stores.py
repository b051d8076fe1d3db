"""The consumer's tables, each behind the one module that owns its SQL."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdcbox.names import DbNames
from cdcbox.stores.claim_guard import ClaimAndAdvance
from cdcbox.stores.group_binding import GroupBinding
from cdcbox.stores.inbox import Inbox
from cdcbox.stores.parking import Parking
from cdcbox.stores.reconciliation import Reconciliation
from cdcbox.stores.version_guard import VersionGuard


@dataclass(frozen=True)
class Stores:
    """The consumer's tables of one schema, each behind the store that owns its SQL."""

    inbox: Inbox = field(default_factory=Inbox)
    reconciliation: Reconciliation = field(default_factory=Reconciliation)
    parking: Parking = field(default_factory=Parking)
    versions: VersionGuard = field(default_factory=VersionGuard)
    bindings: GroupBinding = field(default_factory=GroupBinding)
    claim_and_advance: ClaimAndAdvance = field(default_factory=ClaimAndAdvance)

    @classmethod
    def for_schema(cls, names: DbNames) -> Stores:
        return cls(
            Inbox(names),
            Reconciliation(names),
            Parking(names),
            VersionGuard(names),
            GroupBinding(names),
            ClaimAndAdvance(names),
        )
