"""Test helpers: unique names, schemas of their own, slots dropped once released; waiting
for a condition with a deadline is the plugin's `eventually` (never a bare sleep)."""

from __future__ import annotations

import os
import secrets
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import psycopg
import pytest
from psycopg import sql

from cdcbox.names import DbNames
from cdcbox.session import Session
from cdcbox.testing.harness import Record
from cdcbox.testing.schemas import migrated_schema
from cdcbox.testing.waits import eventually

__all__ = [
    "a_record",
    "drop_slot_once_released",
    "dsn_as",
    "eventually",
    "login_role",
    "migrated_schema",
    "schema_with_orders",
    "unique",
]


def unavailable(reason: str) -> NoReturn:
    """What a test does when something it needs is not there: in CI (`CI=true`) it fails,
    naming the reason; elsewhere (a partial local run) it is skipped."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def unique(prefix: str) -> str:
    """A name no other test (or earlier run against the same stack) uses."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def drop_slot_once_released(dsn: str, slot: str, timeout: float = 60.0) -> None:
    """Drop replication slot `slot` (if it exists) once no walsender holds it.

    A connector's task can still be starting while the connector is deleted, so the slot
    may show inactive and be taken again a moment later; the drop is retried until it
    succeeds rather than trusting one `active = false` reading."""
    with psycopg.connect(dsn, autocommit=True) as conn:

        def dropped() -> bool:
            try:
                conn.execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    "WHERE slot_name = %s",
                    (slot,),
                )
            except psycopg.errors.ObjectInUse:
                return False
            return True

        eventually(dropped, timeout=timeout, interval=0.2, what=f"slot {slot} dropped")


def schema_with_orders(dsn: str, prefix: str) -> DbNames:
    """A migrated schema of its own (CDC mode, no slot) with a business table `orders`."""
    names = migrated_schema(dsn, DbNames(schema=unique(prefix)), mode="cdc")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {}.orders (id text PRIMARY KEY)").format(
                sql.Identifier(names.schema)
            )
        )
    return names


def dsn_as(dsn: str, user: str, password: str) -> str:
    """`dsn` logging in as `user` with `password`."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    info.update(user=user, password=password)
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})


@contextmanager
def login_role(dsn: str, prefix: str) -> Iterator[tuple[str, str]]:
    """A new LOGIN role without SUPERUSER or REPLICATION, as a managed database hands
    out: its name and a DSN that logs in as it. Afterwards its sessions are ended and it
    is dropped with everything it owns."""
    role, password = unique(prefix), secrets.token_hex(16)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOREPLICATION PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(password)
            )
        )
    try:
        yield role, dsn_as(dsn, role, password)
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            admin.execute(
                sql.SQL("DROP OWNED BY {r}; DROP ROLE {r}").format(r=sql.Identifier(role))
            )


def a_record(
    key: bytes | None = b"o-1",
    value: bytes | None = b'{"a":1}',
    headers: list[tuple[str, bytes | None]] | None = None,
    topic: str = "outbox.event.order",
    partition: int = 0,
    offset: int = 7,
) -> Record:
    """A consumed record (the harness's `Record`, kafka-python's shape) with test defaults."""
    return Record(topic, partition, offset, key, value, list(headers or []))


def free_port() -> int:
    """A port no socket uses now (bound to 0, then released), for a server a test starts:
    a fixed port in the ephemeral range can be a client connection's local port."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports (all held while they are picked)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


class FakeTime:
    """A clock that moves only when told to: by work, or by the pace's own waits."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def old_inbox_rows(dsn: str, names: DbNames, rows: int) -> None:
    """`rows` PROCESSED inbox rows of four consumer names, processed 40 days ago, one
    second apart."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (event_id, consumer_name, event_type, status, received_at, "
                "processed_at) SELECT gen_random_uuid(), 'c' || (g %% 4), 'Created', "
                "'PROCESSED', t, t FROM generate_series(1, %s) AS g, "
                "LATERAL (SELECT now() - interval '40 days' + g * interval '1 second') AS h(t)"
            ).format(names.table("inbox")),
            (rows,),
        )


def parked_count(conn: psycopg.Connection[Any], names: DbNames, consumer: str) -> int:
    """How many aggregates `consumer` has parked in `names`' schema."""
    with conn.transaction():
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE consumer_name = %s").format(
                names.table("parked")
            ),
            (consumer,),
        ).fetchone()
    return int(row[0]) if row else 0


@contextmanager
def database_session(dsn: str) -> Iterator[Session]:
    """An autocommit session on the DSN's database, PostgreSQL or MariaDB."""
    from cdcbox.dsn import database_kind
    from cdcbox.mariadb.session import open_session

    if database_kind(dsn) == "MariaDB":
        session = open_session(dsn)
        try:
            yield session
        finally:
            session.close()
    else:
        with psycopg.connect(dsn, autocommit=True) as conn:
            yield conn


def mariadb_names(dsn: str) -> DbNames:
    """Every cdcbox table (outbox and consumers') of its own in the MariaDB database
    `dsn`, migrated."""
    tables = ("inbox", "versions", "reconciliation", "parked", "bindings", "breakers")
    names = DbNames(
        outbox=unique("outbox"),
        migrations=unique("migrations"),
        breaker_failures=unique("breaker_failures"),
        **{table: unique(table) for table in tables},
    )
    return mariadb_outbox(dsn, names)


def mariadb_outbox(dsn: str, names: DbNames | None = None) -> DbNames:
    """An outbox table (of its own, unless `names` are given) in the MariaDB database
    `dsn`, migrated."""
    from cdcbox.mariadb import connect
    from cdcbox.mariadb import migrate as migrate_mariadb

    names = names or DbNames(outbox=unique("outbox"), migrations=unique("migrations"))
    conn = connect(dsn)
    try:
        migrate_mariadb(conn, names)
    finally:
        conn.close()
    return names
