"""The polling relay's SQL over a MariaDB outbox: the same claim, lease and settling as
`cdcbox.postgres.relay_store` (the PostgreSQL outbox), written for MariaDB 10.6+.

The claim locks due rows with FOR UPDATE SKIP LOCKED under READ COMMITTED, reading the
claim index in id order, so InnoDB locks only the rows it returns and workers never wait
on each other; rows whose aggregate has an earlier unsent row
outside the claim are dropped; the rest are leased, in one transaction. Settling changes
only rows this worker still holds. Times are UTC (`UTC_TIMESTAMP(6)`), as `created_at`.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from cdcbox.errors import DatabaseUnavailable, UsageError
from cdcbox.mariadb.connection import is_outage
from cdcbox.mariadb.session import MariaDbSessions
from cdcbox.names import DbNames
from cdcbox.producer.columns import EVENT_COLUMNS
from cdcbox.seam.relay import OutboxRow

_ROW = ("id", *EVENT_COLUMNS, "created_at", "occurred_at", "retry_count")
_NOW = "UTC_TIMESTAMP(6)"


def _in(values: list[Any]) -> str:
    return ", ".join(["%s"] * len(values))


class MariaDbRelayStore:
    """Claim due rows of a MariaDB outbox with SKIP LOCKED under a lease; mark them SENT
    only while the lease is still this worker's; back off failures."""

    def __init__(self, names: DbNames = DbNames(), lease_check: bool = True) -> None:
        """`lease_check` False (the fault suite only) lets a worker take rows another
        worker holds under a lease that has not expired."""
        self.table = names.outbox
        lease_expired = f"locked_until < {_NOW}" if lease_check else "TRUE"
        # One locking read per status, each an equality on the claim index's first
        # column, so InnoDB reads the index in id order and stops at the limit: with
        # `status IN (...)` it sorts all due rows first, locking every one of them, and a
        # second worker's SKIP LOCKED finds nothing. Rows due again (a lease expired, a
        # retry's time come) go first, being the oldest; then PENDING ones.
        self.claim_queries = tuple(
            f"SELECT {', '.join(_ROW)} FROM {self.table} FORCE INDEX ({self.table}_claim) "
            f"WHERE status = '{status}' AND {due} "
            "ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED"
            for status, due in (
                ("PROCESSING", lease_expired),
                ("RETRY", f"(next_retry_at IS NULL OR next_retry_at <= {_NOW})"),
                ("PENDING", "TRUE"),
            )
        )

    def claim(
        self, conn: Any, worker: str, limit: int, lease_s: float, ordered: bool
    ) -> list[OutboxRow]:
        """Lease up to `limit` due rows to `worker`, oldest first (one transaction)."""
        with conn.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            conn.begin()
            try:
                rows: list[OutboxRow] = []
                for query in self.claim_queries:
                    if len(rows) < limit:
                        cur.execute(query, (limit - len(rows),))
                        rows += [_row(r) for r in cur.fetchall()]
                rows.sort(key=lambda r: r.id)
                if rows and ordered:
                    rows = self._without_blocked(cur, rows)
                if rows:
                    ids = [r.id for r in rows]
                    cur.execute(
                        f"UPDATE {self.table} SET status = 'PROCESSING', locked_by = %s, "
                        f"locked_until = {_NOW} + INTERVAL %s MICROSECOND "
                        f"WHERE id IN ({_in(ids)})",
                        (worker, int(lease_s * 1_000_000), *ids),
                    )
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
        return rows

    def _without_blocked(self, cur: Any, rows: list[OutboxRow]) -> list[OutboxRow]:
        """Drop each row whose aggregate has an earlier unsent row outside the claim."""
        aggregates = sorted({(r.aggregate_type, r.aggregate_id) for r in rows})
        ids = [r.id for r in rows]
        pairs = ", ".join(["(%s, %s)"] * len(aggregates))
        cur.execute(
            f"SELECT aggregate_type, aggregate_id, MIN(id) FROM {self.table} "
            f"WHERE (aggregate_type, aggregate_id) IN ({pairs}) AND status <> 'SENT' "
            f"AND id NOT IN ({_in(ids)}) AND id < %s GROUP BY aggregate_type, aggregate_id",
            (*(v for a in aggregates for v in a), *ids, max(ids)),
        )
        blockers = {(t, i): first for t, i, first in cur.fetchall()}
        return [
            r for r in rows if r.id < blockers.get((r.aggregate_type, r.aggregate_id), r.id + 1)
        ]

    def mark_sent(self, conn: Any, worker: str, ids: list[int]) -> int:
        """Mark `ids` SENT where `worker` still holds them; returns how many it marked."""
        if not ids:
            return 0
        return self._update(
            conn,
            f"UPDATE {self.table} SET status = 'SENT', sent_at = {_NOW}, locked_by = NULL, "
            "locked_until = NULL, last_error = NULL "
            f"WHERE id IN ({_in(ids)}) AND status = 'PROCESSING' AND locked_by = %s",
            [(*ids, worker)],
        )

    def mark_failed(
        self,
        conn: Any,
        worker: str,
        max_attempts: int,
        failures: list[tuple[int, float, str, bool]],
    ) -> int:
        """(id, delay, error, permanent): RETRY after the delay, or DEAD once the attempts
        are used up or at once when `permanent`."""
        return self._update(
            conn,
            f"UPDATE {self.table} SET "
            "status = CASE WHEN %s OR retry_count + 1 >= %s THEN 'DEAD' ELSE 'RETRY' END, "
            "retry_count = retry_count + 1, "
            f"next_retry_at = {_NOW} + INTERVAL %s MICROSECOND, last_error = %s, "
            "locked_by = NULL, locked_until = NULL "
            "WHERE id = %s AND status = 'PROCESSING' AND locked_by = %s",
            [
                (dead, max_attempts, int(delay * 1_000_000), error, i, worker)
                for i, delay, error, dead in failures
            ],
        )

    def release(self, conn: Any, worker: str, ids: list[int]) -> int:
        """Give rows back unsent, without spending an attempt."""
        if not ids:
            return 0
        return self._update(
            conn,
            f"UPDATE {self.table} SET "
            "status = CASE WHEN retry_count > 0 THEN 'RETRY' ELSE 'PENDING' END, "
            "locked_by = NULL, locked_until = NULL "
            f"WHERE id IN ({_in(ids)}) AND status = 'PROCESSING' AND locked_by = %s",
            [(*ids, worker)],
        )

    @staticmethod
    def _update(conn: Any, statement: str, params: list[tuple[Any, ...]]) -> int:
        """Run `statement` once per parameter tuple in one transaction; rows changed."""
        if not params:
            return 0
        changed = 0
        conn.begin()  # the session is in autocommit mode between transactions
        try:
            with conn.cursor() as cur:
                for values in params:
                    changed += cur.execute(statement, values)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        return changed


def _row(values: tuple[Any, ...]) -> OutboxRow:
    row = dict(zip(_ROW, values, strict=True))
    row["event_id"] = uuid.UUID(row["event_id"])
    row["payload"] = bytes(row["payload"])
    return OutboxRow(**row)


class MariaDbRelayDatabase:
    """The outbox table of a MariaDB database, polled: MariaDB has no NOTIFY. The session
    is the consumer's kind (`MariaDbSessions`, reopened after it broke); a statement that
    finds the server gone drops it and raises `DatabaseUnavailable`, the next one opens
    another."""

    notifies = False

    def __init__(self, dsn: str, names: DbNames, lease_check: bool) -> None:
        self.sessions = MariaDbSessions(dsn)
        self.store = MariaDbRelayStore(names, lease_check=lease_check)
        self._servable = False  # the outbox table checked on the first session

    def _run(self, call: Any, *args: Any) -> Any:
        """`call(connection, *args)` on the session's PyMySQL connection."""
        try:
            return call(self.sessions().raw, *args)
        except Exception as e:
            if not is_outage(e):
                raise
            self.close()
            raise DatabaseUnavailable(
                f"MariaDB at {self.sessions.dsn.describe()} went away: "
                f"{e.args[-1] if e.args else e}"
            ) from e

    def open(self, listen: bool) -> None:
        if not self._servable:
            self._run(self._refuse_unmigrated)
            self._servable = True
        self.sessions()

    def _refuse_unmigrated(self, conn: Any) -> None:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.tables "
                "WHERE table_schema = DATABASE() AND table_name = %s",
                (self.store.table,),
            )
            (found,) = cur.fetchone()
        if not found:
            raise UsageError(
                f"no outbox table {self.store.table!r} in MariaDB database "
                f"{self.sessions.dsn.database!r}: run `cdc-ctl db migrate` on it first"
            )

    def claim(self, worker: str, limit: int, lease_s: float, ordered: bool) -> list[OutboxRow]:
        rows: list[OutboxRow] = self._run(self.store.claim, worker, limit, lease_s, ordered)
        return rows

    def mark_sent(self, worker: str, ids: list[int]) -> int:
        return int(self._run(self.store.mark_sent, worker, ids))

    def mark_failed(
        self, worker: str, max_attempts: int, failures: list[tuple[int, float, str, bool]]
    ) -> int:
        return int(self._run(self.store.mark_failed, worker, max_attempts, failures))

    def release(self, worker: str, ids: list[int]) -> int:
        return int(self._run(self.store.release, worker, ids))

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a dead socket has nothing left to close
            self.sessions.close()
