"""One reading of the whole pipeline's state: what `cdc-ctl top` draws and what the
`cdc-ctl exporter` serves to Prometheus.

Guarantee: a reading only reads (no statement writes, no offset moves), and a source
that cannot be reached is named in `errors` instead of failing the whole reading, so a
dashboard shows a broker outage as an outage rather than going blank. Every query is
bounded by an index or by the catalogue (`pg_replication_slots`), however large the
tables grow: the inbox is read for its unfinished rows (a partial index holds only
those) and for the rows finished in the last minute (the purge index, by time), never
counted whole.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from cdcbox.connect.client import ConnectClient, tasks_by_id
from cdcbox.db import check_login, connect
from cdcbox.errors import CdcboxError, UsageError
from cdcbox.kafka.client import Admin, Consumer, KafkaSettings, TopicPartition
from cdcbox.kafka.lag import records_behind
from cdcbox.migrate import recorded_relay_mode
from cdcbox.names import DbNames
from cdcbox.observe.transaction_state import TransactionState, read_transactions
from cdcbox.ops.slots import SlotStatus, slot_status


@dataclass(frozen=True)
class OutboxState:
    """`last_id` grows by one per appended event (its rate is the append rate). The
    rest is the polling relay's backlog, read when the database was migrated for that
    relay, else None (under CDC rows keep their first status: the CDC backlog is the
    slot's retained WAL)."""

    last_id: int
    pending: int | None = None
    dead: int | None = None
    oldest_pending_s: float | None = None
    service: str = ""  # whose outbox ("": the one database of --dsn)
    # The outbox without a table: whether its producers can emit (its slot is healthy);
    # None for the table outbox. Its events leave no rows, so `last_id` stays 0.
    emit_ready: bool | None = None


# The window of the inbox's finished rows a reading counts (PROCESSED, SKIPPED).
RECENT_S = 60


@dataclass(frozen=True)
class InboxCount:
    """Inbox rows of one consumer name in one status: FAILED (dead-lettered) and RECEIVED
    (a batch in flight) as they are now; PROCESSED and SKIPPED finished in the last
    `RECENT_S` seconds."""

    consumer: str
    status: str
    rows: int
    service: str = ""  # whose database ("": the one database of --dsn)

    @property
    def finished(self) -> bool:
        return self.status in ("PROCESSED", "SKIPPED")


@dataclass(frozen=True)
class InboxSize:
    """An inbox's rows as PostgreSQL estimates them (`pg_class.reltuples`, as of the last
    VACUUM or ANALYZE): how large retention lets it grow, read without counting."""

    rows: int
    service: str = ""


@dataclass(frozen=True)
class ParkedCount:
    """Aggregates one consumer name holds parked behind a dead-lettered event."""

    consumer: str
    aggregates: int
    service: str = ""


@dataclass(frozen=True)
class ConnectorState:
    """A connector's state and each of its tasks' states."""

    name: str
    state: str
    tasks: tuple[str, ...]  # each task's state, by task id


@dataclass(frozen=True)
class PartitionLag:
    """How far one group is behind on one partition."""

    group: str
    topic: str
    partition: int
    lag: int


@dataclass(frozen=True)
class ServiceDb:
    """One service's database, read for its outbox and inbox; `name` labels its lines."""

    name: str
    dsn: str


@dataclass(frozen=True)
class Sources:
    """Where to read; a source left None is not read (and not an error). With
    `services`, each service's database is read (and named) instead of `dsn`'s."""

    dsn: str | None = None
    kafka: KafkaSettings | None = None
    connect: ConnectClient | None = None
    names: DbNames = DbNames()
    # Consumer groups whose lag is read and consumer names whose inbox rows are counted,
    # as shell patterns (fnmatch); empty: all of them.
    groups: tuple[str, ...] = ()
    consumers: tuple[str, ...] = ()
    services: tuple[ServiceDb, ...] = ()

    def databases(self) -> tuple[ServiceDb, ...]:
        """What PostgreSQL is read from: the services, else the one `dsn` (unnamed)."""
        if self.services:
            return self.services
        return (ServiceDb("", self.dsn),) if self.dsn is not None else ()

    @staticmethod
    def source_name(database: ServiceDb) -> str:
        """How `errors` and `cdcbox_source_up` name a database: postgres[/service]."""
        return f"postgres/{database.name}" if database.name else "postgres"


@dataclass(frozen=True)
class PipelineState:
    """One read-only reading of every source at `taken_at`; a source that could not be read
    is in `errors`, never shown with stale values."""

    taken_at: float
    outboxes: Sequence[OutboxState] = ()  # one per database that has an outbox
    slots: Sequence[SlotStatus] = ()
    inbox: Sequence[InboxCount] = ()
    connectors: Sequence[ConnectorState] = ()
    lags: Sequence[PartitionLag] = ()
    errors: dict[str, str] = field(default_factory=dict)  # source → why it was not read
    parked: Sequence[ParkedCount] = ()
    inbox_sizes: Sequence[InboxSize] = ()
    transactions: Sequence[TransactionState] = ()


def check_logins(sources: Sources) -> None:
    """Log in to each database once: a refused login (`LoginRefused`) is raised, for a
    long-running reader to exit on; a database that does not answer is left to the
    readings, which report it."""
    for database in sources.databases():
        check_login(database.dsn)


def read_state(sources: Sources) -> PipelineState:
    """Read every configured source once; see the module docstring."""
    errors: dict[str, str] = {}
    outboxes: list[OutboxState] = []
    slots: dict[str, SlotStatus] = {}  # per cluster: the same slot seen from each database
    inbox: list[InboxCount] = []
    parked: list[ParkedCount] = []
    sizes: list[InboxSize] = []
    connectors: Sequence[ConnectorState] = ()
    lags: Sequence[PartitionLag] = ()
    transactions: Sequence[TransactionState] = ()
    for database in sources.databases():
        try:
            with connect(database.dsn) as conn:
                outbox, counts, held, size = read_database(conn, sources.names, database.name)
                outboxes += [outbox] if outbox is not None else []
                sizes += [size] if size is not None else []
                inbox += [c for c in counts if matches(c.consumer, sources.consumers)]
                parked += [p for p in held if matches(p.consumer, sources.consumers)]
                slots.update((s.name, s) for s in slot_status(conn))
        except (CdcboxError, psycopg.Error) as e:
            errors[Sources.source_name(database)] = _one_line(e)
    if sources.connect is not None:
        try:
            connectors = read_connectors(sources.connect)
        except CdcboxError as e:
            errors["connect"] = _one_line(e)
    if sources.kafka is not None:
        try:
            lags = read_lags(sources.kafka, sources.groups)
            transactions = read_transactions(sources.kafka)
        except CdcboxError as e:
            errors["kafka"] = _one_line(e)
    ordered_slots = [slots[name] for name in sorted(slots)]
    return PipelineState(
        time.time(),
        outboxes,
        ordered_slots,
        inbox,
        connectors,
        lags,
        errors,
        parked,
        sizes,
        transactions,
    )


def read_database(
    conn: psycopg.Connection[Any], names: DbNames, service: str
) -> tuple[OutboxState | None, list[InboxCount], list[ParkedCount], InboxSize | None]:
    """One database's outbox, inbox counts, parked aggregates and inbox size, each only
    where its table exists: a consume-only database has no outbox, a produce-only one no
    inbox."""
    present = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL, to_regclass(%s) IS NOT NULL",
        (f'"{names.schema}"."{names.outbox}"', f'"{names.schema}"."{names.inbox}"'),
    ).fetchone()
    has_outbox, has_inbox = present or (False, False)
    if not (has_outbox or has_inbox):
        raise UsageError(
            f"schema {names.schema!r} has neither outbox nor inbox: run `cdc-ctl db migrate`"
        )
    outbox = None
    if has_outbox:
        mode = recorded_relay_mode(conn, names)
        outbox = dataclasses.replace(
            read_outbox(conn, names, mode == "polling"),
            service=service,
            emit_ready=emit_ready(conn, names) if mode == "messages" else None,
        )
    if not has_inbox:
        return outbox, [], [], None
    estimate = conn.execute(
        "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass(%s)",
        (f'"{names.schema}"."{names.inbox}"',),
    ).fetchone()
    size = InboxSize(int(estimate[0]) if estimate else 0, service)
    return outbox, read_inbox(conn, names, service), read_parked(conn, names, service), size


def read_parked(conn: psycopg.Connection[Any], names: DbNames, service: str) -> list[ParkedCount]:
    """Parked aggregates per consumer name (a table of the few held back: no scan of note)."""
    rows = conn.execute(
        sql.SQL("SELECT consumer_name, count(*) FROM {} GROUP BY 1 ORDER BY 1").format(
            names.table("parked")
        )
    ).fetchall()
    return [ParkedCount(consumer, int(n), service) for consumer, n in rows]


def emit_ready(conn: psycopg.Connection[Any], names: DbNames) -> bool:
    """Whether the outbox without a table can emit now (migration `emit_function_sql`)."""
    row = conn.execute(sql.SQL("SELECT {}()").format(names.emit_ready_function)).fetchone()
    return bool(row and row[0])


def read_outbox(conn: psycopg.Connection[Any], names: DbNames, polling: bool) -> OutboxState:
    table = names.table("outbox")
    if not polling:
        last = conn.execute(sql.SQL("SELECT coalesce(max(id), 0) FROM {}").format(table))
        (last_id,) = last.fetchone() or (0,)
        return OutboxState(int(last_id))
    row = conn.execute(
        sql.SQL(
            "SELECT (SELECT coalesce(max(id), 0) FROM {t}), "
            "(SELECT count(*) FROM {t} WHERE status IN ('PENDING', 'RETRY', 'PROCESSING')), "
            "(SELECT count(*) FROM {t} WHERE status = 'DEAD'), "
            "(SELECT extract(epoch FROM (now() AT TIME ZONE 'UTC') - min(created_at)) "
            " FROM {t} WHERE status IN ('PENDING', 'RETRY'))"
        ).format(t=table)
    ).fetchone()
    assert row is not None
    last_id, pending, dead, oldest = row
    return OutboxState(
        int(last_id), int(pending), int(dead), None if oldest is None else float(oldest)
    )


def read_inbox(
    conn: psycopg.Connection[Any], names: DbNames, service: str = ""
) -> list[InboxCount]:
    """See `InboxCount`: each count reads one partial index (migrations 0006 and 0012), so
    a reading costs what the unfinished and the last minute's rows do, not the inbox."""
    rows = conn.execute(inbox_counts_statement(names), (RECENT_S,)).fetchall()
    return [InboxCount(consumer, status, int(n), service) for consumer, status, n in rows]


def inbox_counts_statement(names: DbNames) -> sql.Composed:
    """The counts `read_inbox` makes (parameter: the seconds that make "recent"). The
    planner estimates the recent rows from the statistics migration 0014 keeps on the
    purge index's expression; without them it assumes a third of the inbox and plans
    a parallel scan with JIT compilation (tens of milliseconds) to count a few rows."""
    return sql.SQL(
        "SELECT consumer_name, status, count(*) FROM {inbox} "
        "WHERE status IN ('FAILED', 'RECEIVED') GROUP BY 1, 2 "
        "UNION ALL SELECT consumer_name, status, count(*) FROM {inbox} "
        "WHERE status IN ('PROCESSED', 'SKIPPED') "
        "AND coalesce(processed_at, received_at) > now() - make_interval(secs => %s) "
        "GROUP BY 1, 2 ORDER BY 1, 2"
    ).format(inbox=names.table("inbox"))


def read_connectors(client: ConnectClient) -> list[ConnectorState]:
    states = []
    for name in sorted(client.connectors()):
        status = client.status(name)
        if status is None:  # deleted between the two requests
            continue
        tasks = tasks_by_id(status)
        states.append(
            ConnectorState(
                name,
                str(status.get("connector", {}).get("state", "UNKNOWN")),
                tuple(str(t.get("state", "UNKNOWN")) for t in tasks),
            )
        )
    return states


def read_lags(kafka: KafkaSettings, patterns: Sequence[str] = ()) -> list[PartitionLag]:
    """Every matching group's lag per committed partition: one offsets request per group
    on one admin connection, then one end-offsets request for all their partitions."""
    with Admin(kafka) as admin:
        groups = sorted(g for g, _state in admin.list_groups() if matches(g, patterns))
        committed = {g: admin.group_offsets(g) for g in groups}
    partitions = sorted({tp for offsets in committed.values() for tp in offsets})
    if not partitions:
        return []
    with Consumer(kafka, group_id=None) as reader:
        ends: dict[TopicPartition, int] = reader.end_offsets(partitions)
        behind = records_behind(reader, committed, ends)
    return [
        PartitionLag(group, tp.topic, tp.partition, lag)
        for group, lags in behind.items()
        for tp, lag in sorted(lags.items())
    ]


def matches(name: str, patterns: Sequence[str]) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
