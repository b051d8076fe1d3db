"""The route step: a Kafka record is decoded once (`Decoded`: its envelope in each wire
format its topic's handlers read, and its replay marks), then becomes an `Event` for each
handler that takes its type on its topic, or ends here as unhandled or undecodable.

Only the payloads of handled event types are decoded (Avro into the handler's pinned
schema version): a type no handler takes is counted as unhandled whatever its bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdcbox import wire
from cdcbox.avro import Catalogue
from cdcbox.consumer.config import Unhandled
from cdcbox.consumer.handler import BaseHandler
from cdcbox.consumer.payloads import check_payload_types, typed
from cdcbox.consumer.stats import Outcome
from cdcbox.errors import ConfigError, PoisonRecord, RegistryUnavailable
from cdcbox.event import Event, UndecodablePayload, decode_envelope, decode_payload, header
from cdcbox.schema_registry import is_framed
from cdcbox.seam.stores import ParkedKey
from cdcbox.wire import ConsumedRecord


@dataclass(frozen=True)
class ReplayMarks:
    """Set on a dead letter `cdc-ctl dlq replay` (or a requeue) republished: the consumer
    it is for, and how often it was requeued behind a held event."""

    consumer: str
    hops: int = 0

    @classmethod
    def of(cls, record: ConsumedRecord) -> ReplayMarks | None:
        replay_for = header(record, wire.HEADER_REPLAY_FOR)
        if replay_for is None:
            return None
        hops = header(record, wire.HEADER_REPLAY_HOPS) or b"0"
        return cls(replay_for.decode(errors="replace"), int(hops) if hops.isdigit() else 0)


@dataclass(frozen=True)
class Decoded:
    """What decoding one record found, read from it once: its envelope (payload not yet
    decoded) in each wire format its topic's handlers read, and its replay marks."""

    record: ConsumedRecord
    envelopes: dict[wire.WireFormat, Event]
    replay: ReplayMarks | None
    # The formats that could not read it, and why: poison for their handlers alone.
    unreadable: dict[wire.WireFormat, PoisonRecord] = field(default_factory=dict)

    @property
    def event(self) -> Event:
        """The envelope in the topic's first wire format (almost always its only one)."""
        return next(iter(self.envelopes.values()))


@dataclass(frozen=True)
class Routed:
    """A decoded event and the handler that will apply it."""

    record: ConsumedRecord
    event: Event
    handler: BaseHandler
    replay: ReplayMarks | None = None

    @property
    def consumer(self) -> str:
        return self.handler.consumer_name

    @property
    def parked_key(self) -> ParkedKey:
        return (self.handler.consumer_name, self.event.aggregate_type, self.event.aggregate_id)

    @property
    def replayed_for_me(self) -> bool:
        """A dead letter replayed (or requeued) for this record's consumer."""
        return self.replay is not None and self.replay.consumer == self.consumer

    @property
    def replay_hops(self) -> int:
        return self.replay.hops if self.replay is not None else 0


@dataclass(frozen=True)
class Unroutable:
    """A record that ends at routing: `UNHANDLED`, or `DEAD_LETTERED` with the error."""

    record: ConsumedRecord
    event: Event | None
    outcome: Outcome
    error: PoisonRecord | None = None


@dataclass(frozen=True)
class Unreadable:
    """A record the wire format of this handler cannot read (while another handler's
    can): dead-lettered for this handler's consumer alone, nothing to park."""

    record: ConsumedRecord
    handler: BaseHandler
    error: PoisonRecord


@dataclass(frozen=True)
class Undecodable:
    """A handled event whose payload cannot be decoded: dead-lettered like a handler
    failure, aggregate parked, so its later events are not applied past it."""

    routed: Routed
    error: PoisonRecord


class Router:
    """Guarantee: a handler gets only events of its types from its own topics, decoded
    into the schema it reads with; several handlers (each its own consumer name) may take
    one event type, and each gets its own `Routed`. A pinned schema version the catalogue
    lacks is refused here, at start."""

    def __init__(
        self,
        handlers: Mapping[str, Sequence[BaseHandler]],
        catalogue: Catalogue | None,
        unhandled: Unhandled,
    ) -> None:
        self.handlers = handlers
        self.catalogue = catalogue
        self.unhandled = unhandled
        everyone = {id(h): h for hs in handlers.values() for h in hs}.values()
        self._by_topic: dict[str, list[BaseHandler]] = {}
        for handler in everyone:
            for topic in handler.subscribed_topics():
                self._by_topic.setdefault(topic, []).append(handler)
        # The wire formats each topic's handlers read, distinct, in order: a record is
        # decoded once in each (almost always one).
        self._formats = {
            topic: list(dict.fromkeys(h.wire_format for h in takers))
            for topic, takers in self._by_topic.items()
        }
        for event_type, takers in handlers.items():
            for handler in takers:
                self._check_pinned_version(event_type, handler)
                check_payload_types(
                    type(handler).__name__, handler.payload_types, handler.event_types
                )

    def _check_pinned_version(self, event_type: str, handler: BaseHandler) -> None:
        pinned = handler.schema_version
        if pinned is None:
            return
        known = self.catalogue.events.get(event_type) if self.catalogue else None
        if known is None or all(v.version != pinned for v in known.versions):
            raise ConfigError(
                f"{type(handler).__name__} pins schema_version {pinned} for {event_type!r}, "
                "which the Avro catalogue does not have"
            )

    def decode(self, record: ConsumedRecord) -> Decoded | Unroutable:
        """The record's envelope in each wire format its topic's handlers read, or
        `DEAD_LETTERED` when one of them cannot read it."""
        envelopes: dict[wire.WireFormat, Event] = {}
        unreadable: dict[wire.WireFormat, PoisonRecord] = {}
        for fmt in self._formats.get(record.topic) or [wire.DEFAULT_FORMAT]:
            try:
                envelopes[fmt] = decode_envelope(record, fmt)
            except Exception as e:  # whatever a record makes decoding raise
                unreadable[fmt] = _poison(e)
        if not envelopes:
            error = next(iter(unreadable.values()))
            return Unroutable(record, None, Outcome.DEAD_LETTERED, error)
        return Decoded(record, envelopes, ReplayMarks.of(record), unreadable)

    def route(self, decoded: Decoded) -> list[Routed | Undecodable | Unreadable] | Unroutable:
        """One `Routed` per handler that takes the record (or `Undecodable` where its
        payload cannot be decoded into that handler's schema, `Unreadable` where its
        wire format cannot read the record); else why it ends here."""
        record, envelopes = decoded.record, decoded.envelopes
        candidates = self._by_topic.get(record.topic, [])
        unreadable: list[Routed | Undecodable | Unreadable] = [
            Unreadable(record, h, decoded.unreadable[h.wire_format])
            for h in candidates
            if h.wire_format in decoded.unreadable
        ]
        takers = [
            h
            for h in candidates
            if h.wire_format in envelopes and h.takes(envelopes[h.wire_format].event_type)
        ]
        envelope = decoded.event
        if not takers and unreadable:
            return unreadable
        if not takers:
            if self.unhandled == "dead-letter":
                error = PoisonRecord(f"no handler takes event type {envelope.event_type!r}")
                return Unroutable(record, envelope, Outcome.DEAD_LETTERED, error)
            return Unroutable(record, envelope, Outcome.UNHANDLED)
        routed = unreadable
        for handler in takers:
            own = envelopes[handler.wire_format]
            try:
                payload = self._decode_payload(handler, own)
            except RegistryUnavailable:
                raise  # the registry's outage, not the record's fault: the record waits
            except Exception as e:  # any decoding failure of one record
                error = UndecodablePayload(str(_poison(e)), own)
                routed.append(Undecodable(Routed(record, own, handler, decoded.replay), error))
                continue
            routed.append(Routed(record, own.with_payload(payload), handler, decoded.replay))
        return routed

    def _decode_payload(self, handler: BaseHandler, event: Event) -> Any:
        if self.catalogue is None or not self._is_avro(event):
            payload = decode_payload(event.content_type, event.event_type, event.value)
        else:
            reader = self.catalogue.reader_schema(event.event_type, handler.schema_version)
            payload = self.catalogue.decode(event.value, reader)
        payload_type = handler.payload_types.get(event.event_type)
        return payload if payload_type is None else typed(payload_type, payload, event.event_type)

    def _is_avro(self, event: Event) -> bool:
        """Declared Avro, or, from a producer that declares nothing (Confluent's
        serializers), framed in the Confluent wire format for a consumer with a registry."""
        if event.content_type == wire.CONTENT_TYPE_AVRO:
            return True
        registry = self.catalogue is not None and self.catalogue.registry is not None
        return registry and event.content_type == "" and is_framed(event.value)


def _poison(error: Exception) -> PoisonRecord:
    """Any failure to decode one record makes it poison: dead-lettered, never a crash
    the consumer would meet again at every restart."""
    if isinstance(error, PoisonRecord):
        return error
    poison = PoisonRecord(f"cannot decode the record: {type(error).__name__}: {error}"[:1000])
    poison.__cause__ = error
    return poison
