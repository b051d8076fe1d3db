"""The grants each role needs, derived from what cdcbox already knows: the connector
specs (which connectors Connect runs, which aggregate types a producing service emits)
and the consuming services' handlers (which topics they read, under which group).

One principal per role, named after it:

- `connect`: Kafka Connect's worker. Its group; its config, offsets and status topics;
  with exactly-once source support, the transactional ids KIP-618 documents (the
  leader's `connect-cluster-<group>`, each connector's `<group>-<connector>-<task>`) and
  IdempotentWrite; the outbox topics its connectors publish and Debezium's heartbeat
  topic of each.
- `<service>-relay`: a producing service's polling relay (an idempotent producer):
  Write on its own outbox topics only.
- `<service>-consumer`: a consuming service. Read on the topics its handlers subscribe
  to, its own group, and its own dead-letter topics (`<topic>.dlq` of those topics:
  Write to dead-letter, Read to replay).
- `supervisor`: `connectors supervise`. Aborts a hanging transaction (Kafka's
  WriteTxnMarkers, which needs ClusterAction on the cluster) and fences Connect's
  transactional ids; reads what it must to find them.
- `operator`: `cdc-ctl`'s admin commands (offsets, dead letters, retention of topics,
  groups). It cannot change ACLs: `acls apply` runs as the bootstrap admin.

The brokers and the bootstrap admin are super users (`cdcbox.stack`), so they are not
planned here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from cdcbox import wire
from cdcbox.acls.grants import CLUSTER, Grant, Operation, each, user

CONNECT_USER = "connect"
SUPERVISOR_USER = "supervisor"
OPERATOR_USER = "operator"
# Debezium's heartbeat topic for a connector's `topic.prefix` (its default
# `topic.heartbeat.prefix`).
HEARTBEAT_PREFIX = "__debezium-heartbeat."


@dataclass(frozen=True)
class ConnectRole:
    """Kafka Connect's worker (`infra/connect-distributed.properties` names its group and
    topics) and the connectors it runs: each connector's name, its `topic.prefix`, and the
    outbox topics it publishes (None: the service declared none, so every outbox topic)."""

    group: str = "cdcbox-connect"
    storage_topics: tuple[str, ...] = (
        "cdcbox-connect-configs",
        "cdcbox-connect-offsets",
        "cdcbox-connect-status",
    )
    # (name, topic.prefix) of each connector; None: any connector of the worker's group
    connectors: tuple[tuple[str, str], ...] | None = ()
    publishes: tuple[str, ...] | None = ()
    exactly_once: bool = True


@dataclass(frozen=True)
class RelayRole:
    """A producing service's polling relay and the outbox topics it owns."""

    service: str
    topics: tuple[str, ...]

    @property
    def user(self) -> str:
        return f"{self.service.replace('_', '-')}-relay"


@dataclass(frozen=True)
class ConsumerRole:
    """A consuming service: its group (the service's name unless said) and the topics its
    handlers subscribe to."""

    service: str
    topics: tuple[str, ...]
    group: str = ""

    @property
    def user(self) -> str:
        return f"{self.service.replace('_', '-')}-consumer"

    @property
    def group_id(self) -> str:
        return self.group or self.service


@dataclass(frozen=True)
class Fleet:
    """Every role of one deployment."""

    connect: ConnectRole = field(default_factory=ConnectRole)
    relays: tuple[RelayRole, ...] = ()
    consumers: tuple[ConsumerRole, ...] = ()

    def principals(self) -> list[str]:
        """Every principal the plan names, in the plan's order."""
        return [
            user(CONNECT_USER),
            *(user(r.user) for r in self.relays),
            *(user(c.user) for c in self.consumers),
            user(SUPERVISOR_USER),
            user(OPERATOR_USER),
        ]


def plan(fleet: Fleet) -> list[Grant]:
    """Every grant of `fleet`'s roles, sorted, each once."""
    grants = [
        *connect_grants(fleet.connect),
        *(g for relay in fleet.relays for g in relay_grants(relay)),
        *(g for consumer in fleet.consumers for g in consumer_grants(consumer)),
        *supervisor_grants(fleet.connect),
        *operator_grants(),
    ]
    return sorted(set(grants))


def connect_grants(role: ConnectRole) -> list[Grant]:
    me = user(CONNECT_USER)
    grants = [
        *each(me, "GROUP", [role.group], ("READ", "DESCRIBE")),
        *each(
            me,
            "TOPIC",
            role.storage_topics,
            ("READ", "WRITE", "DESCRIBE", "CREATE", "DESCRIBE_CONFIGS"),
        ),
        *each(me, "CLUSTER", [CLUSTER], ("DESCRIBE",)),
        *_publishing(me, role.publishes, ("WRITE", "DESCRIBE", "CREATE")),
    ]
    if role.connectors is None:
        grants += each(me, "TOPIC", [HEARTBEAT_PREFIX], ("WRITE", "DESCRIBE", "CREATE"), "PREFIXED")
    else:
        grants += each(
            me,
            "TOPIC",
            [HEARTBEAT_PREFIX + prefix for _, prefix in role.connectors],
            ("WRITE", "DESCRIBE", "CREATE"),
        )
    if role.exactly_once:
        grants += [
            *each(me, "TRANSACTIONAL_ID", [f"connect-cluster-{role.group}"], ("WRITE", "DESCRIBE")),
            *each(
                me,
                "TRANSACTIONAL_ID",
                [f"{role.group}-"]
                if role.connectors is None
                else [f"{role.group}-{name}-" for name, _ in role.connectors],
                ("WRITE", "DESCRIBE"),
                "PREFIXED",
            ),
            *each(me, "CLUSTER", [CLUSTER], ("IDEMPOTENT_WRITE",)),
        ]
    return grants


def relay_grants(role: RelayRole) -> list[Grant]:
    me = user(role.user)
    return [
        *each(me, "TOPIC", role.topics, ("WRITE", "DESCRIBE", "CREATE")),
        *each(me, "CLUSTER", [CLUSTER], ("IDEMPOTENT_WRITE",)),
    ]


def consumer_grants(role: ConsumerRole) -> list[Grant]:
    """Read what it subscribes to (Create too: a consumer may start before its producer
    and makes the empty topic, so it is not blind to it), its group, its dead letters."""
    me = user(role.user)
    dead_letters = [t + wire.DLQ_SUFFIX for t in role.topics]
    return [
        *each(me, "TOPIC", role.topics, ("READ", "DESCRIBE", "CREATE", "DESCRIBE_CONFIGS")),
        *each(me, "GROUP", [role.group_id], ("READ", "DESCRIBE")),
        *each(
            me,
            "TOPIC",
            dead_letters,
            ("READ", "WRITE", "DESCRIBE", "CREATE", "DESCRIBE_CONFIGS"),
        ),
        *each(me, "CLUSTER", [CLUSTER], ("IDEMPOTENT_WRITE",)),
    ]


def supervisor_grants(connect: ConnectRole) -> list[Grant]:
    """Find open transactions (DescribeProducers reads the outbox topics' partitions;
    ListTransactions and DescribeTransactions describe the ids), abort a hanging one
    (ClusterAction), fence Connect's task producers (Write on their ids)."""
    me = user(SUPERVISOR_USER)
    return [
        *_publishing(me, connect.publishes, ("READ", "DESCRIBE")),
        *each(me, "TOPIC", connect.storage_topics, ("READ", "DESCRIBE")),
        *each(me, "CLUSTER", [CLUSTER], ("DESCRIBE", "CLUSTER_ACTION")),
        *each(me, "TRANSACTIONAL_ID", [f"{connect.group}-"], ("DESCRIBE", "WRITE"), "PREFIXED"),
        *each(me, "TRANSACTIONAL_ID", [f"connect-cluster-{connect.group}"], ("DESCRIBE",)),
    ]


def operator_grants() -> list[Grant]:
    """`cdc-ctl`'s admin commands on every topic and group: offsets, dead letters,
    topic retention and deletion. Not ACLs, not transactions."""
    me = user(OPERATOR_USER)
    return [
        *each(
            me,
            "TOPIC",
            ["*"],
            ("READ", "WRITE", "CREATE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
        ),
        *each(me, "GROUP", ["*"], ("READ", "DESCRIBE", "DELETE")),
        *each(me, "CLUSTER", [CLUSTER], ("DESCRIBE", "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE")),
    ]


def _publishing(
    principal: str, topics: tuple[str, ...] | None, operations: tuple[Operation, ...]
) -> list[Grant]:
    """On `topics`, or on every outbox topic (a prefix) when they are not declared."""
    if topics is None:
        return each(principal, "TOPIC", [wire.TOPIC_PREFIX], operations, "PREFIXED")
    return each(principal, "TOPIC", topics, operations)


def topics_of(aggregate_types: Iterable[str]) -> tuple[str, ...]:
    """The outbox topics of `aggregate_types`, sorted."""
    return tuple(sorted(wire.topic_for(a) for a in aggregate_types))
