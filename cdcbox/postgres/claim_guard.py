"""The per-record path's first statement: the inbox claim and, only when it claimed,
the version guard's advance, in one round trip.

Data-modifying CTEs run together: `up` inserts or advances the version row only when
`claim` returned a row, so a duplicate leaves the version untouched, and a rollback of
the record's transaction undoes both, exactly like the two statements sent one by one.
"""

from __future__ import annotations

from psycopg import sql

from cdcbox.event import Event
from cdcbox.names import DbNames
from cdcbox.postgres.inbox import Inbox
from cdcbox.seam.stores import Claim, GuardResult, claim_row
from cdcbox.session import Rows, Session


class ClaimAndAdvance:
    """Inbox claim and version advance in one statement (one round trip per record): the
    version moves only if the claim inserted the row."""

    def __init__(self, names: DbNames = DbNames()) -> None:
        self._statement = (
            sql.SQL(
                "WITH claim AS ({claim}), "
                "prev AS (SELECT version FROM {v} WHERE consumer_name = %s "
                "AND aggregate_type = %s AND aggregate_id = %s), "
                "up AS (INSERT INTO {v} AS cv (consumer_name, aggregate_type, aggregate_id, "
                "version) SELECT %s, %s, %s, %s WHERE EXISTS (SELECT FROM claim) ON CONFLICT "
                "(consumer_name, aggregate_type, aggregate_id) DO UPDATE SET version = "
                "EXCLUDED.version, updated_at = now() WHERE cv.version < EXCLUDED.version "
                "RETURNING 1) "
                "SELECT (SELECT * FROM claim), (SELECT version FROM prev), "
                "(SELECT count(*) FROM up)"
            )
            .format(claim=Inbox(names).claim_statement, v=names.table("versions"))
            .as_bytes()
        )

    def run(self, conn: Session, event: Event, consumer: str) -> tuple[Claim | None, GuardResult]:
        """The claim (None: a duplicate) and, when claimed, the guard's verdict."""
        return self.read(self.send(conn, event, consumer))

    def send(self, conn: Session, event: Event, consumer: str) -> Rows:
        """The statement sent; its answer is read by `read` (pipelined, after a wait)."""
        assert event.aggregate_version is not None
        key = (consumer, event.aggregate_type, event.aggregate_id)
        return conn.execute(
            self._statement, (*claim_row(event, consumer), *key, *key, event.aggregate_version)
        )

    @staticmethod
    def read(rows: Rows) -> tuple[Claim | None, GuardResult]:
        row = rows.fetchone()
        assert row is not None
        claim: Claim | None = None if row[0] is None else "new" if row[0] else "reclaimed"
        return claim, GuardResult(applied=bool(row[2]), previous=row[1])
