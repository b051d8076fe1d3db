"""Step 1, decode and route: a Kafka record becomes an `Event` and the handler that takes
its type, or ends here as unhandled or undecodable.

Only the payloads of handled event types are decoded (Avro into the handler's pinned
schema version): a type no handler takes is counted as unhandled whatever its bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdcbox import wire
from cdcbox.avro import Catalogue
from cdcbox.consumer.config import Unhandled
from cdcbox.consumer.handler import Handler
from cdcbox.consumer.stats import Outcome
from cdcbox.errors import ConfigError, PoisonRecord
from cdcbox.event import Event, UndecodablePayload, decode, decode_payload, header
from cdcbox.parking import ParkedKey


@dataclass(frozen=True)
class Routed:
    """A decoded event and the handler that will apply it."""

    record: Any
    event: Event
    handler: Handler
    # Set on a dead letter `cdc-ctl dlq replay` (or a requeue) republished: the consumer
    # it is for, and how often it was requeued behind a held event.
    replay_for: str | None = None
    replay_hops: int = 0

    @classmethod
    def of(cls, record: Any, event: Event, handler: Handler) -> Routed:
        replay_for = header(record, wire.HEADER_REPLAY_FOR)
        if replay_for is None:
            return cls(record, event, handler)
        hops = header(record, wire.HEADER_REPLAY_HOPS) or b"0"
        return cls(
            record,
            event,
            handler,
            replay_for.decode(errors="replace"),
            int(hops) if hops.isdigit() else 0,
        )

    @property
    def consumer(self) -> str:
        return self.handler.consumer_name

    @property
    def parked_key(self) -> ParkedKey:
        return (self.handler.consumer_name, self.event.aggregate_type, self.event.aggregate_id)

    @property
    def replayed_for_me(self) -> bool:
        """A dead letter replayed (or requeued) for this record's consumer."""
        return self.replay_for == self.consumer


@dataclass(frozen=True)
class Unroutable:
    """A record that ends at routing: `UNHANDLED`, or `DEAD_LETTERED` with the error."""

    record: Any
    event: Event | None
    outcome: Outcome
    error: PoisonRecord | None = None


@dataclass(frozen=True)
class Undecodable:
    """A handled event whose payload cannot be decoded: dead-lettered like a handler
    failure, aggregate parked, so its later events are not applied past it."""

    routed: Routed
    error: PoisonRecord


class Router:
    """Guarantee: a handler gets only events of its types, decoded into the schema it
    reads with; a pinned schema version the catalogue lacks is refused here, at start."""

    def __init__(
        self, handlers: Mapping[str, Handler], catalogue: Catalogue | None, unhandled: Unhandled
    ) -> None:
        self.handlers = handlers
        self.catalogue = catalogue
        self.unhandled = unhandled
        for event_type, handler in handlers.items():
            self._check_pinned_version(event_type, handler)

    def _check_pinned_version(self, event_type: str, handler: Handler) -> None:
        pinned = handler.schema_version
        if pinned is None:
            return
        known = self.catalogue.events.get(event_type) if self.catalogue else None
        if known is None or all(v.version != pinned for v in known.versions):
            raise ConfigError(
                f"{type(handler).__name__} pins schema_version {pinned} for {event_type!r}, "
                "which the Avro catalogue does not have"
            )

    def route(self, record: Any) -> Routed | Unroutable | Undecodable:
        try:
            event = decode(record, self._decode_payload)
        except UndecodablePayload as e:
            return Undecodable(Routed.of(record, e.event, self.handlers[e.event.event_type]), e)
        except PoisonRecord as e:
            return Unroutable(record, None, Outcome.DEAD_LETTERED, e)
        handler = self.handlers.get(event.event_type)
        if handler is not None:
            return Routed.of(record, event, handler)
        if self.unhandled == "dead-letter":
            error = PoisonRecord(f"no handler takes event type {event.event_type!r}")
            return Unroutable(record, event, Outcome.DEAD_LETTERED, error)
        return Unroutable(record, event, Outcome.UNHANDLED)

    def _decode_payload(self, content_type: str, event_type: str, value: bytes) -> Any:
        handler = self.handlers.get(event_type)
        if handler is None:
            return value
        if self.catalogue is None or content_type != wire.CONTENT_TYPE_AVRO:
            return decode_payload(content_type, event_type, value)
        reader = self.catalogue.reader_schema(event_type, handler.schema_version)
        return self.catalogue.decode(value, reader)
