"""The park gate, before a record's transaction: an aggregate with a dead-lettered event
sends its later events after it, so none is applied past the event it waits for.

While the aggregate's dead letters are replayed, its live events are requeued behind the
replayed copies instead (FAILED too), and a copy is applied only once no earlier event of
the aggregate is held: the aggregate drains in order, and its last commit releases it.
An aggregate that was never parked costs no statement here (`Parking.might_be_parked`).
"""

from __future__ import annotations

from cdcbox.consumer.steps.dead_letter import DeadLetterStep
from cdcbox.consumer.steps.route import Routed
from cdcbox.db import ConnectionSource
from cdcbox.errors import PoisonRecord
from cdcbox.seam.stores import ParkedKey, Stores

# A live event of an aggregate being replayed is put back behind the replayed copies at
# most this often; then it goes to the DLQ (an earlier event is held, not in flight).
MAX_REQUEUES = 5


class ParkGate:
    """Guarantee: a record of a parked aggregate is never applied; it follows its
    aggregate to the dead letters (or is requeued behind the aggregate's replay)."""

    def __init__(self, stores: Stores, dead_letter: DeadLetterStep, enabled: bool) -> None:
        self.stores = stores
        self.dead_letter = dead_letter
        self.enabled = enabled

    def might_hold(self, key: ParkedKey) -> bool:
        """False only when the aggregate is surely not parked (no statement)."""
        return self.enabled and self.stores.parking.might_be_parked(key)

    def holds(self, connection: ConnectionSource, routed: Routed) -> bool:
        """True when the record must wait behind a held event of its aggregate: it was
        requeued behind a replay in progress, or sent to the DLQ after its predecessor.

        A copy replayed for this consumer passes once no earlier event of its aggregate
        is still held; a live event passes when the aggregate is not parked.
        """
        if not self.enabled:
            return False
        key = routed.parked_key
        if not routed.replayed_for_me and not self.stores.parking.might_be_parked(key):
            return False
        conn = connection()
        with conn.transaction():
            state = self.stores.parking.state(conn, key)
            if state is None:
                return False
            if routed.replayed_for_me and not self.stores.inbox.held_before(
                conn, routed.event, routed.consumer
            ):
                return False
        if state == "replaying" and routed.replay_hops < MAX_REQUEUES:
            self.dead_letter.requeue(connection, routed, routed.replay_hops + 1)
            return True
        event = routed.event
        error = PoisonRecord(
            f"aggregate {event.aggregate_type}/{event.aggregate_id} is "
            "parked behind an earlier dead-lettered event"
        )
        self.dead_letter.give_up(connection, routed, error, attempts=0)
        return True
