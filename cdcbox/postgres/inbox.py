"""The inbox (`consumer_inbox`): which events each consumer has applied, skipped or failed.

The claim is one `INSERT … ON CONFLICT` keyed by (event_id, consumer_name): no row back
means the event was already applied (or skipped) by this consumer. The row is written as
PROCESSED inside the handler's transaction, so it only survives if the handler's change
commits with it; a rollback leaves no trace. A FAILED row (dead-lettered earlier) may be
claimed again, which is how a replay from the dead-letter topic gets applied; so may a
RECEIVED row, which batch mode leaves for a record it defers to the per-record path.

Batch mode claims a whole poll batch with one multi-row INSERT (RECEIVED), then marks
the applied ones PROCESSED and the stale ones SKIPPED with one UPDATE each.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from psycopg import sql

from cdcbox.event import Event
from cdcbox.names import DbNames
from cdcbox.seam.stores import Claim, PurgePlan, claim_row
from cdcbox.session import Session


class Inbox:
    """The inbox table's statements. Guarantee: at most one PROCESSED or SKIPPED row per
    (event id, consumer name), written in the caller's transaction, so an effect committed
    with its row is never applied a second time by that consumer."""

    def __init__(self, names: DbNames = DbNames()) -> None:
        inbox = names.table("inbox")
        self.claim_statement = sql.SQL(
            "INSERT INTO {inbox} AS i (event_id, consumer_name, event_type, aggregate_type, "
            "aggregate_id, aggregate_version, status, processed_at, source_topic, "
            "source_partition, source_offset) "
            "VALUES (%s, %s, %s, %s, %s, %s, 'PROCESSED', now(), %s, %s, %s) "
            "ON CONFLICT (event_id, consumer_name) DO UPDATE SET status = 'PROCESSED', "
            "processed_at = now(), retry_count = i.retry_count + 1, error_message = NULL "
            "WHERE i.status IN ('FAILED', 'RECEIVED') RETURNING (xmax = 0)"
        ).format(inbox=inbox)
        # The hot statements are composed to bytes once: composing on every execute
        # costs more client time than the rest of the statement's work.
        self._claim = self.claim_statement.as_bytes()
        self._skip = sql.SQL(
            "UPDATE {} SET status = 'SKIPPED', skip_reason = %s "
            "WHERE event_id = %s AND consumer_name = %s"
        ).format(inbox)
        self._fail = sql.SQL(
            "INSERT INTO {inbox} AS i (event_id, consumer_name, event_type, aggregate_type, "
            "aggregate_id, aggregate_version, status, retry_count, error_message, "
            "source_topic, source_partition, source_offset, failed_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, 'FAILED', %s, %s, %s, %s, %s, now()) "
            "ON CONFLICT (event_id, consumer_name) DO UPDATE SET status = 'FAILED', "
            "retry_count = i.retry_count + EXCLUDED.retry_count, failed_at = now(), "
            "error_message = EXCLUDED.error_message "
            "WHERE i.status NOT IN ('PROCESSED', 'SKIPPED')"
        ).format(inbox=inbox)
        # An earlier event of the same aggregate (by its first position in the live topic)
        # that this consumer still holds FAILED: a replayed copy must not overtake it.
        self._held_before = sql.SQL(
            "SELECT 1 FROM {inbox} AS h JOIN {inbox} AS e ON e.event_id = %s "
            "AND e.consumer_name = %s WHERE h.consumer_name = e.consumer_name "
            "AND h.aggregate_type = e.aggregate_type AND h.aggregate_id = e.aggregate_id "
            "AND h.status = 'FAILED' AND h.event_id <> e.event_id "
            "AND h.source_topic = e.source_topic AND h.source_partition = e.source_partition "
            "AND h.source_offset < e.source_offset LIMIT 1"
        ).format(inbox=inbox)
        self._names = names  # the rarely run statements are composed when run
        self._failed_since = sql.SQL(
            "SELECT event_id, source_topic, source_partition FROM {} WHERE consumer_name = %s "
            "AND status = 'FAILED' AND failed_at >= %s ORDER BY failed_at"
        ).format(inbox)
        # Batch mode's claim: RECEIVED when the outcomes are marked afterwards, or
        # PROCESSED at once on the fast path (where the rare stale ones are re-marked).
        claim_many = (
            "INSERT INTO {inbox} AS i (event_id, consumer_name, event_type, aggregate_type, "
            "aggregate_id, aggregate_version, status, processed_at, source_topic, "
            "source_partition, source_offset) SELECT e.event_id, e.consumer_name, "
            "e.event_type, e.aggregate_type, e.aggregate_id, e.aggregate_version, {status}, "
            "{at}, e.t, e.p, e.o "
            "FROM unnest(%b::uuid[], %b::text[], %b::text[], %b::text[], %b::text[], "
            "%b::bigint[], %b::text[], %b::int[], %b::bigint[]) AS e(event_id, consumer_name, "
            "event_type, aggregate_type, aggregate_id, aggregate_version, t, p, o) "
            "ON CONFLICT (event_id, consumer_name) DO UPDATE SET status = EXCLUDED.status, "
            "processed_at = EXCLUDED.processed_at, retry_count = i.retry_count + 1, "
            "error_message = NULL WHERE i.status IN ('FAILED', 'RECEIVED') "
            "RETURNING event_id, consumer_name, (xmax = 0)"
        )
        self._claim_many = {
            done: sql.SQL(claim_many)
            .format(
                inbox=inbox,
                status=sql.Literal("PROCESSED" if done else "RECEIVED"),
                at=sql.SQL("now()" if done else "NULL"),
            )
            .as_bytes()
            for done in (False, True)
        }
        self._finish_many = (
            sql.SQL(
                "UPDATE {} AS i SET status = u.status, skip_reason = u.reason, "
                "processed_at = now() "
                "FROM unnest(%b::uuid[], %b::text[], %b::text[], %b::text[]) AS "
                "u(event_id, consumer_name, status, reason) "
                "WHERE i.event_id = u.event_id AND i.consumer_name = u.consumer_name"
            )
            .format(inbox)
            .as_bytes()
        )

    def counts(self, conn: Session) -> list[tuple[str, str, int, datetime]]:
        """Rows per consumer and status, and the oldest one's arrival."""
        counts = sql.SQL(
            "SELECT consumer_name, status, count(*), min(received_at) FROM {} "
            "GROUP BY 1, 2 ORDER BY 1, 2"
        ).format(self._names.table("inbox"))
        return conn.execute(counts).fetchall()

    def purge_plan(self, older_than: timedelta) -> PurgePlan:
        """The purge of finished rows last touched more than `older_than` ago."""
        count, delete = inbox_purge_statements(self._names)
        return PurgePlan(count, delete, (older_than,))

    def claim(self, conn: Session, event: Event, consumer: str) -> Claim | None:
        """Insert the inbox row as PROCESSED; None when this consumer already has it,
        "reclaimed" when it was FAILED (held back, now coming through)."""
        row = conn.execute(self._claim, claim_row(event, consumer)).fetchone()
        if row is None:
            return None
        return "new" if row[0] else "reclaimed"

    def claim_many(
        self, conn: Session, claims: list[tuple[Event, str]], processed: bool
    ) -> dict[tuple[uuid.UUID, str], Claim]:
        """Claim (event, consumer) pairs with one statement, as PROCESSED or RECEIVED;
        returns those claimed now."""
        if not claims:
            return {}
        columns = list(zip(*[claim_row(e, c) for e, c in claims], strict=True))
        statement = self._claim_many[processed]
        rows = conn.execute(statement, [list(col) for col in columns]).fetchall()
        return {(row[0], row[1]): "new" if row[2] else "reclaimed" for row in rows}

    def finish_many(self, conn: Session, results: list[tuple[Event, str, str, str | None]]) -> None:
        """Set the final status (PROCESSED/SKIPPED, reason) of claimed rows in one UPDATE."""
        if results:
            columns = list(
                zip(
                    *[(e.event_id, c, status, reason) for e, c, status, reason in results],
                    strict=True,
                )
            )
            conn.execute(self._finish_many, [list(col) for col in columns])

    def mark_skipped(self, conn: Session, event: Event, consumer: str, reason: str) -> None:
        conn.execute(self._skip, (reason, event.event_id, consumer))

    def failed_since(
        self, conn: Session, consumer: str, since: datetime
    ) -> list[tuple[uuid.UUID, str, int]]:
        """(event id, source topic, partition) of `consumer`'s FAILED rows that failed
        from `since` on."""
        return conn.execute(self._failed_since, (consumer, since)).fetchall()

    def held_before(self, conn: Session, event: Event, consumer: str) -> bool:
        """True when an earlier event of `event`'s aggregate is still FAILED for `consumer`."""
        return conn.execute(self._held_before, (event.event_id, consumer)).fetchone() is not None

    def record_failure(
        self, conn: Session, event: Event, consumer: str, attempts: int, error: str
    ) -> None:
        """Remember a dead-lettered event and why (own transaction, after the rollback)."""
        row = claim_row(event, consumer)
        conn.execute(self._fail, (*row[:6], attempts, error[:4000], *row[6:]))


def inbox_purge_statements(names: DbNames) -> tuple[sql.Composed, sql.Composed]:
    """The inbox purge's count and batch delete (parameters: the age, then the batch
    size). The expression and the status list are those of the partial index 0006
    creates. A batch takes the oldest rows in that index's order, which keeps the planner
    on the index even where its statistics (0014) say most of the inbox is old enough (a
    LIMIT over a sequential scan would read past every row earlier batches deleted), and
    deletes them by their row address, with no join the planner could make a scan of the
    whole table. A row updated meanwhile has moved and is left for the next purge."""
    table = names.table("inbox")
    touched = sql.SQL("coalesce(processed_at, received_at)")
    condition = sql.SQL("{} < now() - %s AND status IN ('PROCESSED', 'SKIPPED')").format(touched)
    count = sql.SQL("SELECT count(*) FROM {} WHERE {}").format(table, condition)
    delete = sql.SQL(
        "DELETE FROM {t} WHERE ctid = ANY(ARRAY("
        "SELECT ctid FROM {t} WHERE {c} ORDER BY {touched} LIMIT %s))"
    ).format(t=table, c=condition, touched=touched)
    return count, delete
