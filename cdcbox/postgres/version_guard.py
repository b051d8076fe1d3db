"""The aggregate-version guard: the last applied version per (consumer, aggregate type,
aggregate id), in `consumer_aggregate_version`.

`advance` reads the previous version and moves it forward in one round trip, inside the
caller's transaction; the row lock of the upsert serialises two consumers racing on one
aggregate, and a rollback of the handler's transaction undoes the advance with it. An
event not newer than the last applied one is stale: `advance` leaves the row unchanged.

Batch mode reads a poll batch's versions with one locking SELECT (`lock_many`), judges
the records in memory (`BatchVersions`) and writes the new versions with one upsert
(`advance_many`), which reports whether every row moved as judged: an aggregate that
was new when read and that another transaction inserted meanwhile makes it False.
"""

from __future__ import annotations

from psycopg import sql

from cdcbox.event import Event
from cdcbox.names import DbNames
from cdcbox.seam.stores import GuardResult, VersionKey
from cdcbox.session import Session


class VersionGuard:
    """The last version each consumer applied per aggregate (`consumer_aggregate_version`).

    Guarantee: the version only moves forward, so an event not newer than it is stale."""

    def __init__(self, names: DbNames = DbNames()) -> None:
        self._advance = (
            sql.SQL(
                "WITH prev AS (SELECT version FROM {v} WHERE consumer_name = %(c)s "
                "AND aggregate_type = %(t)s AND aggregate_id = %(a)s), "
                "up AS (INSERT INTO {v} AS cv (consumer_name, aggregate_type, aggregate_id, "
                "version) "
                "VALUES (%(c)s, %(t)s, %(a)s, %(n)s) ON CONFLICT "
                "(consumer_name, aggregate_type, aggregate_id) DO UPDATE SET version = "
                "EXCLUDED.version, updated_at = now() WHERE cv.version < EXCLUDED.version "
                "RETURNING 1) SELECT (SELECT version FROM prev), (SELECT count(*) FROM up)"
            )
            .format(v=names.table("versions"))
            .as_bytes()
        )

        v = names.table("versions")
        self._lock_many = (
            sql.SQL(
                "SELECT consumer_name, aggregate_type, aggregate_id, version FROM {v} "
                "WHERE (consumer_name, aggregate_type, aggregate_id) IN (SELECT * FROM "
                "unnest(%s::text[], %s::text[], %s::text[])) ORDER BY 1, 2, 3 FOR UPDATE"
            )
            .format(v=v)
            .as_bytes()
        )
        self._advance_many = (
            sql.SQL(
                "INSERT INTO {v} AS cv (consumer_name, aggregate_type, aggregate_id, version) "
                "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[]) "
                "ON CONFLICT (consumer_name, aggregate_type, aggregate_id) DO UPDATE SET "
                "version = EXCLUDED.version, updated_at = now() "
                "WHERE cv.version < EXCLUDED.version "
                # xmax is 0 on a row this statement inserted, not on one it updated.
                "RETURNING consumer_name, aggregate_type, aggregate_id, xmax = 0"
            )
            .format(v=v)
            .as_bytes()
        )

    def lock_many(self, conn: Session, keys: set[VersionKey]) -> dict[VersionKey, int]:
        """The current versions of `keys` (absent: none applied yet), locked until the
        caller's transaction ends; rows are locked in key order, so two batches over
        the same aggregates cannot deadlock each other."""
        if not keys:
            return {}
        columns = [list(c) for c in zip(*sorted(keys), strict=True)]
        rows = conn.execute(self._lock_many, columns).fetchall()
        return {(r[0], r[1], r[2]): r[3] for r in rows}

    def advance_many(
        self, conn: Session, versions: dict[VersionKey, int], current: dict[VersionKey, int]
    ) -> bool:
        """Write the batch's new versions; False when a row did not move as judged: one
        not written (another transaction put a version at least as new), or one judged
        new (absent from `current`) that another transaction inserted meanwhile."""
        if not versions:
            return True
        keys = sorted(versions)
        columns = [list(c) for c in zip(*keys, strict=True)]
        rows = conn.execute(self._advance_many, [*columns, [versions[k] for k in keys]])
        written = {(r[0], r[1], r[2]): bool(r[3]) for r in rows.fetchall()}
        return written.keys() == set(keys) and all(written[k] for k in keys if k not in current)

    def advance(self, conn: Session, event: Event, consumer: str) -> GuardResult:
        """Advance the aggregate's version to the event's if the event is newer."""
        assert event.aggregate_version is not None
        row = conn.execute(
            self._advance,
            {
                "c": consumer,
                "t": event.aggregate_type,
                "a": event.aggregate_id,
                "n": event.aggregate_version,
            },
        ).fetchone()
        assert row is not None
        return GuardResult(applied=bool(row[1]), previous=row[0])
