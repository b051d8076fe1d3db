"""The Strimzi resources of one deployment, from what `cdc-ctl apply` reads: its rendered
connector specs (their configs as `apply` sends them, secrets as Secret references), the
roles `cdcbox.acls` derives (a `KafkaUser` each, with its ACLs), the outbox topics the
services declare and the dead-letter topics of what the consumers read, sized as the
stack sizes them. One resource per file, named `<kind>-<name>.yaml`, in a stable order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from cdcbox import wire
from cdcbox.acls.plan import Fleet, plan
from cdcbox.connect.connectors import ConnectorSpec
from cdcbox.limits import DEAD_LETTER_ALLOWANCE, EventLimits
from cdcbox.strimzi import resources as r
from cdcbox.strimzi.resources import Resource


@dataclass(frozen=True)
class StrimziTarget:
    """Where the resources go: the Kafka cluster's name (Strimzi's `Kafka` resource), the
    namespace the Secrets live in, the image Strimzi builds Connect into, the pinned
    Debezium, the Connect worker's settings and the JMX exporter's rules."""

    kafka_cluster: str
    namespace: str
    image: str
    debezium_version: str
    worker: dict[str, str]
    jmx_rules: str
    limits: EventLimits = EventLimits()

    @property
    def connect(self) -> str:
        return r.resource_name(self.worker["group.id"])


def resources(
    specs: Sequence[ConnectorSpec], fleet: Fleet, target: StrimziTarget
) -> list[tuple[str, Resource]]:
    """(file name, resource) of every resource, in a stable order."""
    metrics = f"{target.connect}-metrics"
    found: list[Resource] = [
        r.kafka_connect(
            target.connect,
            target.kafka_cluster,
            target.worker,
            target.debezium_version,
            target.image,
            metrics,
        ),
        r.config_map(metrics, {"jmx-exporter.yml": target.jmx_rules}),
    ]
    secrets: set[str] = set()
    for spec in specs:
        secrets |= set(r.secrets_of(spec.config))
        found.append(
            r.kafka_connector(
                spec.name, target.connect, r.with_secrets(spec.config, target.namespace)
            )
        )
    if secrets:
        found += r.secret_reader(target.connect, target.namespace, sorted(secrets))
    found += _topics(fleet, target)
    grants = plan(fleet)
    for principal in fleet.principals():
        mine = [g for g in grants if g.principal == principal]
        found.append(r.kafka_user(principal.removeprefix("User:"), target.kafka_cluster, mine))
    return [(f"{res['kind'].lower()}-{res['metadata']['name']}.yaml", res) for res in found]


def _topics(fleet: Fleet, target: StrimziTarget) -> list[Resource]:
    """The outbox topics the services declare and the dead-letter topic of every topic
    a consumer reads, each taking the outbox's largest record (a dead letter's headers
    besides)."""
    largest = target.limits.max_record_bytes
    outbox = sorted({t for relay in fleet.relays for t in relay.topics})
    read = sorted({t for consumer in fleet.consumers for t in consumer.topics})
    topics = [
        r.kafka_topic(t, target.kafka_cluster, {"max.message.bytes": str(largest)})
        for t in sorted(set(outbox) | set(read))
    ]
    topics += [
        r.kafka_topic(
            t + wire.DLQ_SUFFIX,
            target.kafka_cluster,
            {"max.message.bytes": str(largest + DEAD_LETTER_ALLOWANCE)},
        )
        for t in read
    ]
    return topics


def write(found: Sequence[tuple[str, Resource]], directory: Path) -> list[Path]:
    """One YAML file per resource in `directory` (made if missing); returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, resource in found:
        path = directory / name
        path.write_text(yaml.safe_dump(resource, sort_keys=False))
        written.append(path)
    return written
