"""All SQL of the polling relay: claim due rows under a lease, then settle them.

Claiming locks due rows with FOR UPDATE SKIP LOCKED (workers never wait on each other),
drops those whose aggregate has an earlier unsent row outside the claim, and marks the
rest PROCESSING with this worker's id and lease, in one transaction. Settling changes
only rows this worker still holds: a row whose lease expired and was taken over is not
overwritten by the late worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cdcbox.db import Reconnecting, pipelined_transaction
from cdcbox.errors import UsageError
from cdcbox.migrate import notify_trigger_exists, recorded_relay_mode
from cdcbox.names import DbNames
from cdcbox.producer.columns import EVENT_COLUMNS
from cdcbox.seam.relay import OutboxRow

_ROW = ("id", *EVENT_COLUMNS, "created_at", "occurred_at", "retry_count")


class RelayStore:
    """The polling relay's SQL over the outbox: claim due rows with SKIP LOCKED under a
    lease, mark them SENT only while the lease is still this worker's, back off failures."""

    def __init__(self, names: DbNames = DbNames(), lease_check: bool = True) -> None:
        """`lease_check` False (the fault suite only) lets a worker take rows another
        worker holds under a lease that has not expired."""
        t = names.table("outbox")
        cols = sql.SQL(", ").join(map(sql.Identifier, _ROW))
        # The first condition is the unsent index's predicate, so the planner reads that
        # index in id order (no sort of the backlog); the rest picks the due rows.
        self.claim_query = sql.SQL(
            "SELECT {cols} FROM {t} WHERE status IN ('PENDING', 'PROCESSING', 'RETRY') AND "
            "((status IN ('PENDING', 'RETRY') AND "
            "(next_retry_at IS NULL OR next_retry_at <= now())) OR "
            "(status = 'PROCESSING' AND {lease_expired})) "
            "ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED"
        ).format(
            cols=cols,
            t=t,
            lease_expired=sql.SQL("locked_until < now()" if lease_check else "true"),
        )
        # The first unsent row of each candidate aggregate that is not itself a candidate:
        # candidates after it must wait.
        self.blockers_query = sql.SQL(
            "SELECT o.aggregate_type, o.aggregate_id, min(o.id) FROM {t} o "
            "JOIN unnest(%s::text[], %s::text[]) AS a(t, i) "
            "ON o.aggregate_type = a.t AND o.aggregate_id = a.i "
            "WHERE o.status <> 'SENT' "
            "AND NOT (o.id = ANY(%s)) AND o.id < %s GROUP BY 1, 2"
        ).format(t=t)
        self._lease = sql.SQL(
            "UPDATE {t} SET status = 'PROCESSING', locked_by = %s, "
            "locked_until = now() + make_interval(secs => %s) WHERE id = ANY(%s)"
        ).format(t=t)
        self._sent = sql.SQL(
            "UPDATE {t} SET status = 'SENT', sent_at = now(), locked_by = NULL, "
            "locked_until = NULL, last_error = NULL "
            "WHERE id = ANY(%s) AND status = 'PROCESSING' AND locked_by = %s"
        ).format(t=t)
        self._failed = sql.SQL(
            "UPDATE {t} AS o SET status = CASE WHEN f.dead OR o.retry_count + 1 >= %s "
            "THEN 'DEAD' ELSE 'RETRY' END, retry_count = o.retry_count + 1, "
            "next_retry_at = now() + make_interval(secs => f.delay), last_error = f.error, "
            "locked_by = NULL, locked_until = NULL "
            "FROM unnest(%s::bigint[], %s::float8[], %s::text[], %s::bool[]) "
            "AS f(id, delay, error, dead) "
            "WHERE o.id = f.id AND o.status = 'PROCESSING' AND o.locked_by = %s"
        ).format(t=t)
        self._by_id = sql.SQL("SELECT {cols} FROM {t} WHERE id = ANY(%s)").format(cols=cols, t=t)
        self._release = sql.SQL(
            "UPDATE {t} SET status = CASE WHEN retry_count > 0 THEN 'RETRY' ELSE 'PENDING' END, "
            "locked_by = NULL, locked_until = NULL "
            "WHERE id = ANY(%s) AND status = 'PROCESSING' AND locked_by = %s"
        ).format(t=t)
        self._dead = sql.SQL(
            "SELECT id, event_id, aggregate_type, aggregate_id, event_type, retry_count, "
            "last_error FROM {t} WHERE status = 'DEAD' ORDER BY id LIMIT %s"
        ).format(t=t)
        self._retry_dead = sql.SQL(
            "UPDATE {t} SET status = 'RETRY', retry_count = 0, next_retry_at = now() "
            "WHERE status = 'DEAD' AND id = ANY(%s) RETURNING id"
        ).format(t=t)

    def rows_by_id(self, conn: psycopg.Connection[Any], ids: list[int]) -> dict[int, OutboxRow]:
        """The rows with these ids (whatever their status), by id."""
        found = conn.execute(self._by_id, (ids,))
        return {row.id: row for row in (OutboxRow(*r) for r in found)}

    def claim(
        self, conn: psycopg.Connection[Any], worker: str, limit: int, lease_s: float, ordered: bool
    ) -> list[OutboxRow]:
        """Lease up to `limit` due rows to `worker`, oldest first.

        Pipelined: BEGIN, the setting and the claim go in one round trip, the lease and
        COMMIT in another (bench.relay_tail: each round trip is in every event's
        latency)."""
        with pipelined_transaction(conn):
            # The lease need not be durable: a claim lost in a crash leaves its rows due
            # (PENDING, or under a lease that expires), and they are published again, as
            # after any crash before `mark_sent`. Not waiting for that WAL flush takes one
            # flush off every batch's path, and off the relay's tail (bench.relay_tail).
            conn.execute("SET LOCAL synchronous_commit TO off")
            rows = [OutboxRow(*r) for r in conn.execute(self.claim_query, (limit,))]
            if not rows:
                return []
            if ordered:
                rows = self._without_blocked(conn, rows)
            if rows:
                conn.execute(self._lease, (worker, lease_s, [r.id for r in rows]))
        return rows

    def _without_blocked(
        self, conn: psycopg.Connection[Any], rows: list[OutboxRow]
    ) -> list[OutboxRow]:
        aggregates = sorted({(r.aggregate_type, r.aggregate_id) for r in rows})
        blockers = {
            (t, i): first
            for t, i, first in conn.execute(
                self.blockers_query,
                (
                    [a[0] for a in aggregates],
                    [a[1] for a in aggregates],
                    [r.id for r in rows],
                    max(r.id for r in rows),
                ),
            )
        }
        return [
            r for r in rows if r.id < blockers.get((r.aggregate_type, r.aggregate_id), r.id + 1)
        ]

    def mark_sent(self, conn: psycopg.Connection[Any], worker: str, ids: list[int]) -> int:
        """Mark `ids` SENT where `worker` still holds them (BEGIN, UPDATE and COMMIT in
        one round trip); returns how many it marked."""
        with pipelined_transaction(conn):
            marked = conn.execute(self._sent, (ids, worker))
        return marked.rowcount

    def mark_failed(
        self,
        conn: psycopg.Connection[Any],
        worker: str,
        max_attempts: int,
        failures: list[tuple[int, float, str, bool]],
    ) -> int:
        """(id, delay, error, permanent): RETRY after the delay, or DEAD once the attempts
        are used up or at once when `permanent`."""
        if not failures:
            return 0
        ids, delays, errors, dead = (list(c) for c in zip(*failures, strict=True))
        with conn.transaction():
            params = (max_attempts, ids, delays, errors, dead, worker)
            return conn.execute(self._failed, params).rowcount

    def release(self, conn: psycopg.Connection[Any], worker: str, ids: list[int]) -> int:
        with conn.transaction():
            return conn.execute(self._release, (ids, worker)).rowcount

    def dead(self, conn: psycopg.Connection[Any], limit: int = 100) -> list[tuple[Any, ...]]:
        with conn.transaction():
            return conn.execute(self._dead, (limit,)).fetchall()

    def retry_dead(self, conn: psycopg.Connection[Any], ids: list[int]) -> list[int]:
        with conn.transaction():
            return [r[0] for r in conn.execute(self._retry_dead, (ids,))]


@dataclass(frozen=True)
class OutboxStats:
    """Outbox rows by status, the age of the oldest pending one, and the dead ones."""

    by_status: dict[str, int]
    oldest_pending_age_s: float | None
    dead: int


def outbox_stats(conn: psycopg.Connection[Any], names: DbNames = DbNames()) -> OutboxStats:
    with conn.transaction():
        rows = conn.execute(
            sql.SQL(
                "SELECT status, count(*), extract(epoch FROM (now() AT TIME ZONE 'UTC') - "
                "min(created_at)) FROM {} GROUP BY status"
            ).format(names.table("outbox"))
        ).fetchall()
    by_status = {s: int(n) for s, n, _ in rows}
    pending_age = next((float(a) for s, _, a in rows if s == "PENDING"), None)
    return OutboxStats(by_status, pending_age, by_status.get("DEAD", 0))


def refuse_unservable(conn: psycopg.Connection[Any], names: DbNames, listen: bool) -> None:
    """Raise `UsageError` (one line: what is wrong, the command that mends it) where a
    polling relay must not run: on an outbox migrated for CDC, whose connector already
    publishes it (the relay would publish every event a second time); or with `listen`
    where no NOTIFY trigger would wake it (it would poll in silence)."""
    recorded = recorded_relay_mode(conn, names)
    if recorded == "messages":
        raise UsageError(
            f"schema {names.schema!r} was migrated for the outbox without a table: its "
            "events are logical decoding messages, which only its connector reads"
        )
    if recorded != "polling":
        raise UsageError(
            f"schema {names.schema!r} was migrated for CDC: its connector publishes the "
            "outbox, and a polling relay would publish every event a second time; "
            "`cdc-ctl db migrate --relay polling` migrates it for the relay (its claim "
            "indexes and NOTIFY trigger), after which no connector may read that outbox"
        )
    if listen and not notify_trigger_exists(conn, names):
        raise UsageError(
            f"no NOTIFY trigger on {names.outbox_qualified}: a listening relay would never "
            "be woken; run `cdc-ctl db migrate --relay polling` to restore it, or "
            "`relay run --no-listen` to poll on purpose"
        )


class PostgresRelayDatabase:
    """The outbox table of a PostgreSQL schema migrated for the polling relay."""

    notifies = True

    def __init__(self, dsn: str, names: DbNames, lease_check: bool) -> None:
        self.names = names
        self.store = RelayStore(names, lease_check=lease_check)
        self.connection = Reconnecting(dsn)
        self._servable = False

    def open(self, listen: bool) -> None:
        conn = self.connection()
        if not self._servable:
            refuse_unservable(conn, self.names, listen)
            self._servable = True

    def claim(self, worker: str, limit: int, lease_s: float, ordered: bool) -> list[OutboxRow]:
        return self.store.claim(self.connection(), worker, limit, lease_s, ordered)

    def mark_sent(self, worker: str, ids: list[int]) -> int:
        return self.store.mark_sent(self.connection(), worker, ids)

    def mark_failed(
        self, worker: str, max_attempts: int, failures: list[tuple[int, float, str, bool]]
    ) -> int:
        return self.store.mark_failed(self.connection(), worker, max_attempts, failures)

    def release(self, worker: str, ids: list[int]) -> int:
        return self.store.release(self.connection(), worker, ids)

    def close(self) -> None:
        self.connection.close()
