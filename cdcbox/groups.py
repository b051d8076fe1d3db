"""Consumer groups: committed offsets, lag, and resets an operator can trust.

A reset is refused while the group has active members: their next commit would silently
undo it. `dry_run` computes the same plan without applying it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from cdcbox.errors import ServiceUnavailable, UsageError
from cdcbox.kafka_admin import admin_client


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None
    end: int

    @property
    def lag(self) -> int:
        return self.end - (self.committed or 0)


@dataclass(frozen=True)
class ResetStep:
    topic: str
    partition: int
    current: int | None
    target: int


@contextmanager
def _offsets_reader(bootstrap: str) -> Iterator[KafkaConsumer]:
    try:
        reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    except KafkaError as e:
        raise ServiceUnavailable(f"Kafka at {bootstrap} is unreachable: {e}") from e
    try:
        yield reader
    finally:
        reader.close()


def list_groups(bootstrap: str) -> list[tuple[str, str]]:
    with admin_client(bootstrap) as admin:
        groups = admin.list_groups()
    return sorted((g["group_id"], str(g.get("group_state", "?"))) for g in groups)


def committed(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    with admin_client(bootstrap) as admin:
        offsets = admin.list_group_offsets({group: None}).get(group, {})
    return {tp: om.offset for tp, om in offsets.items() if om.offset >= 0}


def lag(bootstrap: str, group: str) -> list[PartitionLag]:
    """Per partition the group has committed to: committed offset, end offset, lag."""
    done = committed(bootstrap, group)
    if not done:
        return []
    with _offsets_reader(bootstrap) as reader:
        ends = reader.end_offsets(list(done))
    return [
        PartitionLag(tp.topic, tp.partition, done.get(tp), ends[tp])
        for tp in sorted(done, key=lambda t: (t.topic, t.partition))
    ]


def active_members(bootstrap: str, group: str) -> list[str]:
    with admin_client(bootstrap) as admin:
        description: dict[str, Any] = admin.describe_groups([group]).get(group, {})
    return [str(m.get("member_id")) for m in description.get("members", []) or []]


def plan_reset(bootstrap: str, group: str, to: str, topic: str | None) -> list[ResetStep]:
    """Where each partition would go: earliest, latest, an ISO datetime, or an offset."""
    current = committed(bootstrap, group)
    with _offsets_reader(bootstrap) as reader:
        topics = [topic] if topic else sorted({tp.topic for tp in current})
        if not topics:
            raise UsageError(f"group {group!r} has no committed offsets; name a --topic")
        partitions = []
        for t in topics:
            ids = reader.partitions_for_topic(t)
            if not ids:
                raise UsageError(f"topic {t!r} does not exist")
            partitions += [TopicPartition(t, p) for p in sorted(ids)]
        targets = _targets(reader, partitions, to)
    return [ResetStep(tp.topic, tp.partition, current.get(tp), targets[tp]) for tp in partitions]


def _targets(
    reader: KafkaConsumer, partitions: list[TopicPartition], to: str
) -> dict[TopicPartition, int]:
    if to == "earliest":
        return dict(reader.beginning_offsets(partitions))
    if to == "latest":
        return dict(reader.end_offsets(partitions))
    if to.isdigit():
        return {tp: int(to) for tp in partitions}
    try:
        when = datetime.fromisoformat(to)
    except ValueError as e:
        raise UsageError(
            f"--to {to!r}: expected earliest, latest, an offset or an ISO "
            "datetime such as 2026-12-02T10:00:00+00:00"
        ) from e
    ms = int(when.timestamp() * 1000)
    found = reader.offsets_for_times({tp: ms for tp in partitions})
    ends = reader.end_offsets(partitions)
    return {tp: (found[tp].offset if found.get(tp) else ends[tp]) for tp in partitions}


def reset(
    bootstrap: str, group: str, to: str, topic: str | None = None, dry_run: bool = False
) -> list[ResetStep]:
    members = active_members(bootstrap, group)
    if members and not dry_run:
        raise UsageError(
            f"group {group!r} has {len(members)} active member(s); stop its "
            "consumers first, or their next commit undoes the reset"
        )
    steps = plan_reset(bootstrap, group, to, topic)
    if not dry_run:
        with admin_client(bootstrap) as admin:
            admin.alter_group_offsets(
                group,
                {
                    TopicPartition(s.topic, s.partition): OffsetAndMetadata(s.target, "", -1)
                    for s in steps
                },
            )
    return steps
