"""A consumer on the host, against the stack in containers: events committed to the
outbox in the container's PostgreSQL, published by Debezium in the Connect container
(the shipped connector, applied by the compose file's `migrate`), applied once each, in
each aggregate's order, and a full redelivery applying nothing again."""

from __future__ import annotations

import psycopg
import pytest

from cdcbox import wire
from cdcbox.consumer import Consumer, ConsumerConfig, Outcome
from cdcbox.kafka.client import KafkaSettings
from cdcbox.ops import groups
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.conftest import EFFECTS_DDL, effects, recording_handler, running_in_thread
from tests.helpers import eventually, unique

pytestmark = pytest.mark.compose

AGGREGATES, VERSIONS = 10, 5


def test_a_host_consumer_applies_each_event_from_the_containers_once(
    containers: Endpoints,
) -> None:
    aggregate_type, group = unique("hosted"), unique("host")
    with psycopg.connect(containers.dsn) as conn:
        conn.execute(EFFECTS_DDL)
        for version in range(1, VERSIONS + 1):
            with conn.transaction():
                for n in range(AGGREGATES):
                    Outbox().append(
                        conn,
                        NewEvent(aggregate_type, f"a-{n}", "Noted", {"v": version}, version),
                    )
    total = AGGREGATES * VERSIONS
    handler = recording_handler(group, aggregate_type, {"Noted"})
    config = ConsumerConfig(
        bootstrap_servers=containers.bootstrap_servers, dsn=containers.dsn, group_id=group
    )
    with running_in_thread(Consumer([handler], config), group) as running:
        eventually(lambda: running.stats[Outcome.PROCESSED] == total, what="every event")
    with psycopg.connect(containers.dsn) as conn:
        rows = effects(conn, group)
    assert len(rows) == len({r[0] for r in rows}) == total
    per_aggregate: dict[str, list[int]] = {}
    for _, aggregate_id, version, _, _ in rows:
        per_aggregate.setdefault(aggregate_id, []).append(version)
    assert all(v == list(range(1, VERSIONS + 1)) for v in per_aggregate.values())

    # Everything again, from the start of the topic: the inbox drops every copy.
    kafka = KafkaSettings(containers.bootstrap_servers)
    eventually(lambda: not groups.active_members(kafka, group), what="the group empty")
    groups.reset(kafka, group, "earliest", wire.topic_for(aggregate_type))
    with running_in_thread(Consumer([handler], config), group) as running:
        eventually(lambda: running.stats[Outcome.DUPLICATE] == total, what="every copy dropped")
    with psycopg.connect(containers.dsn) as conn:
        assert len(effects(conn, group)) == total
