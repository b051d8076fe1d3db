"""Outbox and inbox statistics and retention, backlog figures and cleanup.

Purges delete in small batches (one short transaction each) so they never hold locks or
bloat WAL for long. They never delete what is still needed: in CDC mode no outbox row the
connector may not have read yet; in polling mode only SENT rows; in the inbox only rows
older than the safety floor, past which no redelivery of the event can arrive.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from cdcbox.errors import UsageError
from cdcbox.kafka.client import Admin, KafkaSettings
from cdcbox.kafka.topics import topic_retention
from cdcbox.migrate import RelayMode, recorded_relay_mode
from cdcbox.names import DbNames
from cdcbox.ops.pacing import Pace
from cdcbox.postgres.inbox import Inbox
from cdcbox.replication import publication_covers
from cdcbox.seam.stores import BindingStore, InboxStore
from cdcbox.session import Session

_DURATION = re.compile(r"(\d+)\s*([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    """'7d', '12h', '1w2d', '90m' → timedelta; anything else is a usage error."""
    parts = _DURATION.findall(text.replace(" ", ""))
    if not parts or "".join(a + b for a, b in parts) != text.replace(" ", ""):
        raise UsageError(f"{text!r} is not a duration like 7d, 12h, 30m or 1w2d")
    return sum((timedelta(**{_UNITS[u]: int(n)}) for n, u in parts), timedelta())


def inbox_stats(conn: Session, inbox: InboxStore) -> list[tuple[str, str, int, datetime]]:
    """Rows per consumer and status, and the oldest one's arrival (either database)."""
    with conn.transaction():
        rows = inbox.counts(conn)
    return [(c, st, int(n), oldest) for c, st, n, oldest in rows]


def _purge(
    conn: Session,
    count: Any,
    delete: Any,
    params: tuple[Any, ...],
    batch: int,
    progress: Callable[[int, int], None],
    dry_run: bool = False,
    pace: Pace | None = None,
) -> int:
    """Count, then delete in batches; `progress(deleted so far, counted)` after each.
    `dry_run`: only count (what a purge would delete now). `pace`: wait between batches
    to hold the deletion to its rate."""
    with conn.transaction():
        row = conn.execute(count, params).fetchone()
    total = int(row[0]) if row else 0
    if dry_run:
        return total
    deleted = 0
    pace = pace or Pace(None)
    pace.start()
    while deleted < total:
        with conn.transaction():
            n = conn.execute(delete, (*params, batch)).rowcount
        if n == 0:
            break
        deleted += n
        progress(deleted, max(total, deleted))
        if deleted < total:
            pace.done(deleted)
    return deleted


@dataclass(frozen=True)
class OutboxPurge:
    """What an outbox purge deleted, and whether the connector's position capped it."""

    deleted: int  # with dry_run: how many it would delete
    cutoff: datetime  # rows created before this (UTC, naive) were deleted
    capped_by_connector: bool  # the connector's position was earlier than asked


def purge_outbox(
    conn: psycopg.Connection[Any],
    older_than: timedelta,
    mode: RelayMode | None = None,
    read_until: datetime | None = None,
    names: DbNames = DbNames(),
    batch: int = 5000,
    progress: Callable[[int, int], None] = lambda done, total: None,
    connector_config: Mapping[str, str] | None = None,
    dry_run: bool = False,
    pace: Pace | None = None,
) -> OutboxPurge:
    """Delete outbox rows older than `older_than` that no relay needs any more.

    The mode is the one the database was migrated for (`migrate.recorded_relay_mode`);
    passing the other one is refused, since a CDC purge of a polling outbox would delete
    unsent rows. Polling mode deletes only SENT rows. In CDC mode rows stay PENDING
    forever, so the connector's position (`connector_offsets.read_position`) is required
    as `read_until` and caps the cutoff: a row the connector may not have read yet is
    never deleted. That position says something of this outbox only if the connector
    streams this table through a publication that covers it (`connector_config`): a
    connector of another outbox moves on past rows it never saw, so that is refused.
    """
    recorded = recorded_relay_mode(conn, names)
    if mode is not None and mode != recorded:
        raise UsageError(
            f"schema {names.schema!r} was migrated for the {recorded} relay; a {mode}-mode "
            f"purge would delete rows that relay still needs (use --relay {recorded})"
        )
    mode = recorded
    if mode == "messages":
        raise UsageError(
            f"schema {names.schema!r} was migrated for the outbox without a table: it "
            "writes no rows, so there is nothing to purge (Kafka's retention is its only copy)"
        )
    cutoff = datetime.now(UTC).replace(tzinfo=None) - older_than
    capped = False
    if mode == "cdc":
        if read_until is None or connector_config is None:
            raise UsageError(
                "a CDC-mode purge needs the connector's position and configuration: without "
                "them a row the connector has not read yet could be deleted"
            )
        _check_connector_reads(conn, connector_config, names)
        if read_until < cutoff:
            cutoff, capped = read_until, True
    count, delete = outbox_purge_statements(names, mode)
    deleted = _purge(conn, count, delete, (cutoff,), batch, progress, dry_run, pace)
    return OutboxPurge(deleted, cutoff, capped)


def outbox_purge_statements(names: DbNames, mode: RelayMode) -> tuple[sql.Composed, sql.Composed]:
    """The outbox purge's count and batch delete (parameters: the cutoff, then the batch
    size). A batch takes the oldest rows in the key's order and deletes them by row
    address (as the inbox purge does): a join back to the outbox by id could be planned
    as a scan of the whole outbox, once per batch."""
    table = names.table("outbox")
    condition = (
        sql.SQL("created_at < %s")
        if mode == "cdc"
        else sql.SQL("created_at < %s AND status = 'SENT'")
    )
    count = sql.SQL("SELECT count(*) FROM {} WHERE {}").format(table, condition)
    delete = sql.SQL(
        "DELETE FROM {t} WHERE ctid = ANY(ARRAY("
        "SELECT ctid FROM {t} WHERE {c} ORDER BY id LIMIT %s))"
    ).format(t=table, c=condition)
    return count, delete


def _check_connector_reads(
    conn: psycopg.Connection[Any], config: Mapping[str, str], names: DbNames
) -> None:
    table = config.get("table.include.list", "")
    publication = config.get("publication.name", "")
    if table != names.outbox_qualified:
        raise UsageError(
            f"the connector streams {table or 'no table'}, not {names.outbox_qualified}: its "
            "position says nothing of this outbox (pass this outbox's --connector)"
        )
    with conn.transaction():
        covered = publication_covers(conn, publication, table)
    if not covered:
        raise UsageError(
            f"publication {publication!r} does not cover {table}: the connector has published "
            "none of its rows, whatever its position (see `cdc-ctl doctor`)"
        )


@dataclass(frozen=True)
class InboxFloor:
    """The retention floor: no redelivery can arrive after topic retention + the longest
    retry window + the window people need to repair and replay by hand. A topic that
    keeps events forever (`topic_retention` None) leaves no safe floor at all."""

    topic_retention: timedelta | None
    retry_window: timedelta
    repair_window: timedelta
    retention_source: str = "given"

    @property
    def total(self) -> timedelta | None:
        if self.topic_retention is None:
            return None
        return self.topic_retention + self.retry_window + self.repair_window


def inbox_floor(
    kafka: KafkaSettings,
    retry_window: timedelta,
    repair_window: timedelta,
    subscribed: Iterable[str] = (),
) -> InboxFloor:
    """The floor for this deployment, from the longest effective retention, as Kafka
    reports it, of the outbox topics, of the `subscribed` topics the inbox's consumers
    read (`inbox_topics`), and of their dead-letter topics."""
    found = topic_retention(kafka, also=subscribed)
    return InboxFloor(found.duration, retry_window, repair_window, found.reason)


def inbox_topics(conn: Session, kafka: KafkaSettings, bindings: BindingStore) -> list[str]:
    """The topics the consumers of this inbox read, whatever their names: those their
    consumer groups (bound to their names at start) have committed offsets on."""
    with conn.transaction():
        groups = bindings.groups(conn)
    with Admin(kafka) as admin:
        return sorted({tp.topic for group in groups for tp in admin.group_offsets(group)})


def check_inbox_retention(older_than: timedelta, floor: InboxFloor, force: bool) -> None:
    if force:
        return
    if floor.total is None:
        raise UsageError(
            f"no inbox row is ever safe to purge: {floor.retention_source}, so any event "
            "can be redelivered and would be applied again. Use --force if you know better"
        )
    if older_than < floor.total:
        raise UsageError(
            f"inbox retention {older_than} is shorter than the safety floor {floor.total} "
            f"(topic retention {floor.topic_retention} [{floor.retention_source}] + retry "
            f"window {floor.retry_window} + repair window {floor.repair_window}): a "
            "redelivered event would be applied again. Use a longer --older-than, or "
            "--force if you know better"
        )


def purge_inbox(
    conn: Session,
    older_than: timedelta,
    floor: InboxFloor,
    force: bool = False,
    inbox: InboxStore | None = None,
    batch: int = 5000,
    progress: Callable[[int, int], None] = lambda done, total: None,
    dry_run: bool = False,
    pace: Pace | None = None,
) -> int:
    """Delete PROCESSED/SKIPPED inbox rows last touched more than `older_than` ago (FAILED
    ones stay for replay; a replayed row counts from when it was processed); refused
    below the safety floor unless forced. `dry_run`: how many it would delete. `inbox`:
    the store whose statements it runs (its database's; PostgreSQL's public schema by
    default)."""
    check_inbox_retention(older_than, floor, force)
    plan = (inbox or Inbox()).purge_plan(older_than)
    return _purge(conn, plan.count, plan.delete, plan.params, batch, progress, dry_run, pace)
