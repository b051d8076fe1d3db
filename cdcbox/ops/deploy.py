"""Applying connector specs with the database checks that keep a connector from running
while it publishes nothing: each spec is checked against its own service's database.

Guarantee: a connector whose table is outside its publication, or whose slot belongs to
another database, is refused before Connect hears of it (`refuse_unpublishable`); so is
one whose aggregate types' topics collide, in Kafka's eyes, with a topic the cluster has
or another spec's (`topic_collisions`): each outbox refuses colliding types of its own
schema (migration 0010), but Kafka's names are the cluster's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from cdcbox import wire
from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import ApplyResult, ConnectorSpec, apply, routed_topic
from cdcbox.db import connect
from cdcbox.errors import UsageError
from cdcbox.kafka.client import Admin, KafkaSettings
from cdcbox.kafka.topics import colliding_topics
from cdcbox.names import DbNames
from cdcbox.ops.check import Check
from cdcbox.ops.doctor import refuse_unpublishable


def spec_database(spec: ConnectorSpec, dsn: str, names: DbNames) -> tuple[str, DbNames]:
    """The DSN and names of the database `spec`'s connector reads: its service's, else
    the operator's DSN turned to the connector's `database.dbname` (the DSN may name
    another database of the server), with `names` as given."""
    if spec.service is not None:
        return spec.service.dsn(dsn), spec.service.names
    database = spec.config.get("database.dbname")
    return (make_conninfo(dsn, dbname=database) if database else dsn), names


def apply_checked(
    client: ConnectClient,
    spec: ConnectorSpec,
    dsn: str | None,
    names: DbNames,
    timeout_s: float = 120,
    progress: Callable[[str], None] | None = None,
) -> ApplyResult:
    """`apply`, after the checks against the spec's database (none without a DSN);
    `progress` also hears the checks' warnings."""
    say = progress or (lambda _message: None)
    if dsn:
        service_dsn, service_names = spec_database(spec, dsn, names)
        with connect(service_dsn, autocommit=True) as conn:
            for warning in refuse_unpublishable(conn, spec.config, service_names):
                say(f"warning: {warning}")
    return apply(client, spec, timeout_s=timeout_s, progress=say)


def claimed_topics(conn: psycopg.Connection[Any], spec: ConnectorSpec, names: DbNames) -> set[str]:
    """The topics `spec`'s connector publishes to (and their dead-letter topics): one per
    aggregate type its outbox has claimed (migration 0010's topic keys), routed as the
    spec routes them. Empty before the outbox's first write, or its migration."""
    schema = spec.config.get("table.include.list", names.outbox_qualified).partition(".")[0]
    names = dataclasses.replace(names, schema=schema)
    table = names.table("topic_keys")
    with conn.transaction():
        exists = conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.{names.topic_keys}",)
        ).fetchone()
        if not exists or not exists[0]:
            return set()
        types = conn.execute(
            sql.SQL("SELECT DISTINCT aggregate_type FROM {}").format(table)
        ).fetchall()
    topics = {routed_topic(spec.config, t) for (t,) in types}
    return topics | {t + wire.DLQ_SUFFIX for t in topics}


def spec_topics(specs: Iterable[ConnectorSpec], dsn: str, names: DbNames) -> dict[str, set[str]]:
    """`claimed_topics` of each spec (by its label), read in the database it reads."""
    found: dict[str, set[str]] = {}
    for spec in specs:
        service_dsn, service_names = spec_database(spec, dsn, names)
        with connect(service_dsn, autocommit=True) as conn:
            found[spec.label] = claimed_topics(conn, spec, service_names)
    return found


def topic_collisions(kafka: KafkaSettings, topics_of: dict[str, set[str]]) -> list[str]:
    """Each group of topic names Kafka takes for one (it reads '.' and '_' alike) that
    holds a topic of one of the specs, described: which spec's, which the cluster has."""
    with Admin(kafka) as admin:
        existing = admin.list_topics()
    owner = {t: label for label, topics in topics_of.items() for t in topics}
    problems = []
    for group in colliding_topics(existing | set(owner)):
        if not any(t in owner for t in group):
            continue  # the cluster's own, not this deployment's
        whose = [f"{t} ({owner.get(t, 'in Kafka')})" for t in group]
        problems.append(" collides with ".join(whose))
    return problems


TOPIC_COLLISION_FIX = (
    "Kafka reads '.' and '_' alike in topic names, so the later topic cannot be created "
    "and its connector's task fails; rename one aggregate type"
)


def topic_names_check(kafka: KafkaSettings, topics_of: dict[str, set[str]]) -> Check:
    """`topic_collisions` as one of `doctor`'s checks."""
    problems = topic_collisions(kafka, topics_of)
    return Check(
        "topic names across the cluster",
        not problems,
        "; ".join(problems) or "no aggregate type's topic collides with another",
        TOPIC_COLLISION_FIX,
    )


def refuse_colliding_topics(kafka: KafkaSettings, topics_of: dict[str, set[str]]) -> None:
    """Raise `UsageError` naming each collision (`topic_collisions`): the second topic of
    a group cannot be created, and the connector that publishes to it fails."""
    problems = topic_collisions(kafka, topics_of)
    if problems:
        raise UsageError("; ".join(problems) + ": " + TOPIC_COLLISION_FIX)
