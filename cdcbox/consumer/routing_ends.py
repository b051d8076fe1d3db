"""The ends of routing: what a routed record meets before its transaction. A record
that cannot be read or decoded ends here (counted, dead-lettered where it is poison),
an aggregate parked for a consumer holds the record back (the park gate), and the
consumers of the record's topic that take none of its event consume its version here,
so a later event of the aggregate never waits for it. What passes goes to the record's
transaction (`cdcbox.consumer.pipeline`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cdcbox.consumer.handler import BaseHandler, NoHandler
from cdcbox.consumer.stats import ConsumerStats, Outcome
from cdcbox.consumer.steps.dead_letter import DeadLetterStep
from cdcbox.consumer.steps.park_gate import ParkGate
from cdcbox.consumer.steps.route import Decoded, Routed, Undecodable, Unreadable, Unroutable
from cdcbox.db import ConnectionSource
from cdcbox.event import Event

Routing = list[Routed | Undecodable | Unreadable] | Unroutable  # what `Router.route` found


class RoutingEnds:
    """Guarantee: every record routed either passes on to be applied or is counted here
    as the one outcome it ends with."""

    def __init__(
        self,
        handlers: Mapping[str, Sequence[BaseHandler]],
        park_gate: ParkGate,
        dead_letter: DeadLetterStep,
        stats: ConsumerStats,
        group_id: str,
    ) -> None:
        self.park_gate, self.dead_letter, self.stats = park_gate, dead_letter, stats
        self.group_id = group_id
        self.consumers_of_topic: dict[str, list[str]] = {}
        for handler in {id(h): h for hs in handlers.values() for h in hs}.values():
            for topic in handler.subscribed_topics():
                names = self.consumers_of_topic.setdefault(topic, [])
                if handler.consumer_name not in names:
                    names.append(handler.consumer_name)

    def routed_alone(self, decoded: Decoded | Unroutable, routing: Routing) -> bool:
        """True when routing the record needs no statement and no earlier record's end:
        every handler of its topic takes it, none is parked (known without asking), it
        is no replayed copy. Such a record's transaction may begin while the earlier
        COMMIT is in flight; anything else waits for that COMMIT first."""
        if isinstance(decoded, Unroutable) or isinstance(routing, Unroutable) or decoded.replay:
            return False
        taken_by: set[str] = set()
        for r in routing:
            if not isinstance(r, Routed) or self.park_gate.might_hold(r.parked_key):
                return False
            taken_by.add(r.consumer)
        return taken_by.issuperset(self.consumers_of_topic.get(decoded.record.topic, []))

    def route(
        self, connection: ConnectionSource, decoded: Decoded | Unroutable, routing: Routing
    ) -> tuple[list[Routed], tuple[Event, list[str]] | None]:
        """The park gate after routing; what ends there is counted there. Returns the
        records to apply, and the consumers of the record's topic that take none of it
        and only need its version consumed (the caller does that, in order with the
        records to apply)."""
        if isinstance(decoded, Unroutable):
            self._end(decoded)
            return [], None
        if isinstance(routing, Unroutable):
            self._end(routing)
            if routing.error is not None or routing.event is None:
                return [], None
            event, taken_by = routing.event, set()
            candidates: list[Routed | Undecodable | Unreadable] = []
        else:
            event = next((e for r in routing if (e := _event(r)) is not None), decoded.event)
            taken_by = {_consumer(r) for r in routing}
            candidates = list(routing)
        skipped, unhandled = self._not_taken(decoded, event, taken_by)
        passing: list[Routed] = []
        for r in [*candidates, *skipped]:
            if isinstance(r, Unreadable):
                name = r.handler.consumer_name
                self.dead_letter.publish(r.record, None, name, r.error, attempts=0)
                self.stats.count(Outcome.DEAD_LETTERED, name)
            elif isinstance(r, Undecodable):
                self.dead_letter.give_up(connection, r.routed, r.error, attempts=0)
                self.stats.count(Outcome.DEAD_LETTERED, r.routed.consumer)
            elif self.park_gate.holds(connection, r):
                self.stats.count(Outcome.PARKED, r.consumer)
            else:
                passing.append(r)
        return passing, unhandled

    def _end(self, unroutable: Unroutable) -> None:
        """Count a record that ends at routing; dead-letter it when it is poison."""
        self.stats.count(unroutable.outcome, self.group_id)
        if unroutable.error is not None:
            self.dead_letter.publish(
                unroutable.record, unroutable.event, None, unroutable.error, attempts=0
            )

    def _not_taken(
        self, decoded: Decoded, event: Event, taken_by: set[str]
    ) -> tuple[list[Routed], tuple[Event, list[str]] | None]:
        """The consumers of the record's topic that take none of `event`: every event
        consumes its version for each of them, or `hold` would wait for it forever.

        Where the aggregate may be parked for a consumer (or the record is a copy replayed
        for it), the version must not move past the parked event: the record then goes
        the way of a handled one (park gate, inbox, guard) to a handler that skips it,
        so it follows the park to the dead letters and is consumed in order on replay.
        The others only need their version advanced: returned for the caller to do."""
        if event.aggregate_version is None:
            return [], None
        record, replay = decoded.record, decoded.replay
        others = [c for c in self.consumers_of_topic.get(record.topic, []) if c not in taken_by]
        if replay is not None:
            # A replayed copy is for one consumer; the others consumed the original.
            others = [c for c in others if c == replay.consumer]
        slow = [
            c
            for c in others
            if replay is not None
            or self.park_gate.might_hold((c, event.aggregate_type, event.aggregate_id))
        ]
        fast = [c for c in others if c not in slow]
        skipped = [Routed(record, event, NoHandler(c, event.event_type), replay) for c in slow]
        return skipped, ((event, fast) if fast else None)


def _event(r: Routed | Undecodable | Unreadable) -> Event | None:
    """The event as the handler reads it (None where its format cannot read it)."""
    if isinstance(r, Unreadable):
        return None
    return (r if isinstance(r, Routed) else r.routed).event


def _consumer(r: Routed | Undecodable | Unreadable) -> str:
    if isinstance(r, Unreadable):
        return r.handler.consumer_name
    return (r if isinstance(r, Routed) else r.routed).consumer
