"""Consumer groups: committed offsets, lag, and resets an operator can trust.

A reset is refused while the group has active members: their next commit would silently
undo it. `dry_run` computes the same plan without applying it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from cdcbox.errors import UsageError
from cdcbox.kafka.client import Admin, Consumer, KafkaSettings, TopicPartition
from cdcbox.kafka.lag import records_behind


@dataclass(frozen=True)
class PartitionLag:
    """A group's committed offset against the partition's end; `records`: the records
    between them where they were counted (cdcbox.kafka.lag: transaction markers are not
    lag)."""

    topic: str
    partition: int
    committed: int | None
    end: int
    records: int | None = None

    @property
    def lag(self) -> int:
        return self.records if self.records is not None else self.end - (self.committed or 0)


@dataclass(frozen=True)
class ResetStep:
    """One partition's move in a group reset: from its current offset to the target."""

    topic: str
    partition: int
    current: int | None
    target: int


def _offsets_reader(kafka: KafkaSettings) -> Consumer:
    return Consumer(kafka, group_id=None)


def list_groups(kafka: KafkaSettings) -> list[tuple[str, str]]:
    with Admin(kafka) as admin:
        return sorted(admin.list_groups())


def committed(kafka: KafkaSettings, group: str) -> dict[TopicPartition, int]:
    with Admin(kafka) as admin:
        return admin.group_offsets(group)


def lag(kafka: KafkaSettings, group: str) -> list[PartitionLag]:
    """Per partition the group has committed to: committed offset, end offset, lag."""
    done = committed(kafka, group)
    if not done:
        if group not in {g for g, _ in list_groups(kafka)}:
            raise UsageError(f"no consumer group named {group!r} (see `cdc-ctl groups list`)")
        return []
    with _offsets_reader(kafka) as reader:
        ends = reader.end_offsets(list(done))
        behind = records_behind(reader, {group: done}, ends)[group]
    return [
        PartitionLag(tp.topic, tp.partition, done.get(tp), ends[tp], behind.get(tp))
        for tp in sorted(done, key=lambda t: (t.topic, t.partition))
    ]


def active_members(kafka: KafkaSettings, group: str) -> list[str]:
    with Admin(kafka) as admin:
        return admin.group_members(group)


def plan_reset(kafka: KafkaSettings, group: str, to: str, topic: str | None) -> list[ResetStep]:
    """Where each partition would go: earliest, latest, an ISO datetime, or an offset."""
    target = parse_target(to)
    current = committed(kafka, group)
    with _offsets_reader(kafka) as reader:
        topics = [topic] if topic else sorted({tp.topic for tp in current})
        if not topics:
            raise UsageError(f"group {group!r} has no committed offsets; name a --topic")
        partitions = []
        for t in topics:
            ids = reader.partitions_for_topic(t)
            if not ids:
                raise UsageError(f"topic {t!r} does not exist")
            partitions += [TopicPartition(t, p) for p in sorted(ids)]
        targets = _targets(reader, partitions, target)
    return [ResetStep(tp.topic, tp.partition, current.get(tp), targets[tp]) for tp in partitions]


def parse_target(to: str) -> str | int | datetime:
    """Validate `--to` before any service is asked: earliest, latest, an offset or a
    datetime (a naive one is UTC)."""
    if to in ("earliest", "latest"):
        return to
    if to.isdigit():
        return int(to)
    try:
        when = datetime.fromisoformat(to)
    except ValueError as e:
        raise UsageError(
            f"--to {to!r}: expected earliest, latest, an offset or an ISO "
            "datetime such as 2026-12-02T10:00:00+00:00"
        ) from e
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _targets(
    reader: Consumer, partitions: list[TopicPartition], to: str | int | datetime
) -> dict[TopicPartition, int]:
    if to == "earliest":
        return reader.beginning_offsets(partitions)
    if to == "latest":
        return reader.end_offsets(partitions)
    if isinstance(to, int):
        return {tp: to for tp in partitions}
    assert isinstance(to, datetime)
    found = reader.offsets_for_times({tp: int(to.timestamp() * 1000) for tp in partitions})
    ends = reader.end_offsets(partitions)
    return {tp: o if (o := found.get(tp)) is not None else ends[tp] for tp in partitions}


def check_resettable(kafka: KafkaSettings, group: str) -> None:
    """Refuse a group with members: their next commit would undo a reset."""
    members = active_members(kafka, group)
    if members:
        raise UsageError(
            f"group {group!r} has {len(members)} active member(s); stop its "
            "consumers first, or their next commit undoes the reset"
        )


def reset(
    kafka: KafkaSettings, group: str, to: str, topic: str | None = None, dry_run: bool = False
) -> list[ResetStep]:
    """Move the group's committed offsets to `to` (validated first); refused while the
    group has members, whose next commit would undo it."""
    parse_target(to)
    if not dry_run:
        check_resettable(kafka, group)
    steps = plan_reset(kafka, group, to, topic)
    if not dry_run:
        with Admin(kafka) as admin:
            admin.alter_group_offsets(
                group, {TopicPartition(s.topic, s.partition): s.target for s in steps}
            )
    return steps
