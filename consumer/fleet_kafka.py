"""Who the demo fleet logs in to Kafka as, and the demo's own reads of it.

On a stack without security everyone is anonymous. On a secured one each service may log
in as its own principal (`cdc-ctl acls apply --users-dir` makes them, with the grants
its role needs), while the demo's probes, its reader of inventory's answers and the
rewind an operator's `groups reset` would do run as the operator."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cdcbox.kafka.client import Admin, Consumer, KafkaSettings, TopicPartition
from cdcbox.kafka.security import KafkaSecurity
from consumer.fleet import FleetService


@dataclass(frozen=True)
class FleetKafka:
    """The operator's settings, and each service's own login where it has one."""

    operator: KafkaSettings
    principals: Mapping[str, KafkaSecurity] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return self.operator.bootstrap_servers

    def security_of(self, service: FleetService) -> KafkaSecurity:
        return self.principals.get(service.name, self.operator.security)


def end_offsets(kafka: KafkaSettings, topic: str) -> dict[TopicPartition, int]:
    with Consumer(kafka, group_id=None) as probe:
        partitions = [TopicPartition(topic, p) for p in sorted(probe.partitions_for_topic(topic))]
        return probe.end_offsets(partitions) if partitions else {}


def rewind(kafka: KafkaSettings, group: str, offsets: dict[TopicPartition, int]) -> None:
    """What an operator's `groups reset` does: move an idle group back."""
    with Admin(kafka) as admin:
        admin.alter_group_offsets(group, offsets)


def keys_and_types(kafka: KafkaSettings, topic: str, key_prefix: str) -> list[tuple[str, str]]:
    """(event type, key) of every record of `topic` whose key starts with `key_prefix`,
    as a read_committed reader sees them."""
    with Consumer(kafka, group_id=None) as reader:
        tps = [TopicPartition(topic, p) for p in sorted(reader.partitions_for_topic(topic))]
        reader.assign(tps)
        reader.seek_to_beginning(*tps)
        ends = reader.end_offsets(tps)
        found: list[tuple[str, str]] = []
        while any(reader.position(tp) < end for tp, end in ends.items()):
            for records in reader.poll(timeout_ms=500).values():
                found += [
                    (dict(r.headers).get("event_type", b"").decode(), r.key.decode())
                    for r in records
                    if r.key and r.key.decode().startswith(key_prefix)
                ]
        return found
