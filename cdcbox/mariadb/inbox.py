"""The inbox and the version guard on MariaDB: `cdcbox.seam.stores`' `InboxStore`,
`VersionStore` and `ClaimAndAdvanceStore`, with the guarantees of the PostgreSQL stores.

The claim is the pattern's `INSERT IGNORE` made strict: `INSERT … ON DUPLICATE KEY UPDATE
event_id = event_id` changes nothing on a duplicate, so the driver reports 0 affected
rows for it and 1 for a new row (PyMySQL does not set CLIENT_FOUND_ROWS), while every
other error (a value too long, a failed CHECK) still fails the statement: `IGNORE` would
turn those into warnings and write a cut row. A FAILED or RECEIVED row is claimed again
by an UPDATE, as the PostgreSQL claim's `ON CONFLICT … WHERE` does.

The version upsert reports 1 (inserted), 2 (moved forward) or 0 (not newer: stale).
Within `ON DUPLICATE KEY UPDATE` an assignment sees the columns as the ones before it
left them, so `updated_at` is set before `version` moves.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import datetime, timedelta

from cdcbox.event import Event
from cdcbox.names import DbNames
from cdcbox.seam.stores import Claim, GuardResult, PurgePlan, VersionKey, claim_row
from cdcbox.session import Session

_FINISHED = "('PROCESSED', 'SKIPPED')"


def placeholders(rows: int, columns: int) -> str:
    """`(%s, %s), (%s, %s)` for 2 rows of 2 columns: a multi-row VALUES or row IN list."""
    row = "(" + ", ".join(["%s"] * columns) + ")"
    return ", ".join([row] * rows)


class MariaDbInbox:
    """The inbox table's statements on MariaDB (see the module docstring)."""

    def __init__(self, names: DbNames = DbNames()) -> None:
        self.table = inbox = names.inbox
        self._counts = (
            f"SELECT consumer_name, status, count(*), min(received_at) FROM {inbox} "
            "GROUP BY 1, 2 ORDER BY 1, 2"
        )
        # Finished rows, oldest first, along the (status, processed_at) index; the age is
        # in microseconds.
        finished = (
            f"FROM {inbox} WHERE status IN {_FINISHED} AND "
            "COALESCE(processed_at, received_at) < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND"
        )
        self._purge = (
            f"SELECT count(*) {finished}",
            f"DELETE {finished} ORDER BY processed_at LIMIT %s",
        )
        self._columns = (
            f"INSERT INTO {inbox} (event_id, consumer_name, event_type, aggregate_type, "
            "aggregate_id, aggregate_version, source_topic, source_partition, source_offset, "
            "status, processed_at) VALUES "
        )
        self._claim = (
            self._columns + _claim_values(processed=True) + " "
            "ON DUPLICATE KEY UPDATE event_id = event_id"
        )
        self._skip = (
            f"UPDATE {inbox} SET status = 'SKIPPED', skip_reason = %s "
            "WHERE event_id = %s AND consumer_name = %s"
        )
        # status last: the assignments before it read the status the row had.
        keep = f"status IN {_FINISHED}"
        self._fail = (
            f"INSERT INTO {inbox} (event_id, consumer_name, event_type, aggregate_type, "
            "aggregate_id, aggregate_version, status, retry_count, error_message, "
            "source_topic, source_partition, source_offset, failed_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, 'FAILED', %s, %s, %s, %s, %s, UTC_TIMESTAMP(6)) "
            "ON DUPLICATE KEY UPDATE "
            f"retry_count = IF({keep}, retry_count, retry_count + VALUES(retry_count)), "
            f"failed_at = IF({keep}, failed_at, VALUES(failed_at)), "
            f"error_message = IF({keep}, error_message, VALUES(error_message)), "
            f"status = IF({keep}, status, 'FAILED')"
        )
        self._held_before = (
            f"SELECT 1 FROM {inbox} AS h JOIN {inbox} AS e ON e.event_id = %s "
            "AND e.consumer_name = %s WHERE h.consumer_name = e.consumer_name "
            "AND h.status = 'FAILED' AND h.aggregate_type = e.aggregate_type "
            "AND h.aggregate_id = e.aggregate_id AND h.event_id <> e.event_id "
            "AND h.source_topic = e.source_topic AND h.source_partition = e.source_partition "
            "AND h.source_offset < e.source_offset LIMIT 1"
        )
        self._failed_since = (
            f"SELECT event_id, source_topic, source_partition FROM {inbox} "
            "WHERE consumer_name = %s AND status = 'FAILED' AND failed_at >= %s "
            "ORDER BY failed_at"
        )

    def counts(self, conn: Session) -> list[tuple[str, str, int, datetime]]:
        """Rows per consumer and status, and the oldest one's arrival."""
        rows = conn.execute(self._counts).fetchall()
        return [(c, st, int(n), oldest) for c, st, n, oldest in rows]

    def purge_plan(self, older_than: timedelta) -> PurgePlan:
        """The purge of finished rows last touched more than `older_than` ago."""
        count, delete = self._purge
        return PurgePlan(count, delete, (older_than // timedelta(microseconds=1),))

    def claim(self, conn: Session, event: Event, consumer: str) -> Claim | None:
        """Insert the inbox row as PROCESSED; None when this consumer already has it,
        "reclaimed" when it was FAILED or RECEIVED."""
        if conn.execute(self._claim, _row(event, consumer)).rowcount == 1:
            return "new"
        again = conn.execute(_reclaim(self.table, 1, processed=True), _row(event, consumer)[:2])
        return "reclaimed" if again.rowcount == 1 else None

    def claim_many(
        self, conn: Session, claims: list[tuple[Event, str]], processed: bool
    ) -> dict[tuple[uuid.UUID, str], Claim]:
        """Claim (event, consumer) pairs as PROCESSED or RECEIVED; returns those claimed
        now. The rows there are locked first: a row inserted meanwhile by another
        transaction fails the INSERT (a duplicate key), and with it the batch."""
        if not claims:
            return {}
        keys = [(str(e.event_id), c) for e, c in claims]
        existing = {
            (event_id, consumer): status
            for event_id, consumer, status in conn.execute(
                f"SELECT event_id, consumer_name, status FROM {self.table} "
                f"WHERE (event_id, consumer_name) IN ({placeholders(len(keys), 2)}) FOR UPDATE",
                [v for k in keys for v in k],
            ).fetchall()
        }
        fresh = [(e, c) for e, c in claims if (str(e.event_id), c) not in existing]
        if fresh:
            values = ", ".join([_claim_values(processed)] * len(fresh))
            conn.execute(self._columns + values, [v for e, c in fresh for v in _row(e, c)])
        again = [k for k, status in existing.items() if status in ("FAILED", "RECEIVED")]
        if again:
            conn.execute(_reclaim(self.table, len(again), processed), [v for k in again for v in k])
        claimed: dict[tuple[uuid.UUID, str], Claim] = {(e.event_id, c): "new" for e, c in fresh}
        claimed.update({(uuid.UUID(i), c): "reclaimed" for i, c in again})
        return claimed

    def finish_many(self, conn: Session, results: list[tuple[Event, str, str, str | None]]) -> None:
        """Set the final status (PROCESSED/SKIPPED, reason) of claimed rows: one UPDATE
        per distinct (status, reason)."""
        groups: dict[tuple[str, str | None], list[str]] = defaultdict(list)
        for event, consumer, status, reason in results:
            groups[(status, reason)].extend((str(event.event_id), consumer))
        for (status, reason), keys in groups.items():
            conn.execute(
                f"UPDATE {self.table} SET status = %s, skip_reason = %s, "
                "processed_at = UTC_TIMESTAMP(6) WHERE (event_id, consumer_name) IN "
                f"({placeholders(len(keys) // 2, 2)})",
                [status, reason, *keys],
            )

    def mark_skipped(self, conn: Session, event: Event, consumer: str, reason: str) -> None:
        conn.execute(self._skip, (reason, str(event.event_id), consumer))

    def failed_since(
        self, conn: Session, consumer: str, since: datetime
    ) -> list[tuple[uuid.UUID, str, int]]:
        rows = conn.execute(self._failed_since, (consumer, since)).fetchall()
        return [(uuid.UUID(event_id), topic, partition) for event_id, topic, partition in rows]

    def held_before(self, conn: Session, event: Event, consumer: str) -> bool:
        row = conn.execute(self._held_before, (str(event.event_id), consumer)).fetchone()
        return row is not None

    def record_failure(
        self, conn: Session, event: Event, consumer: str, attempts: int, error: str
    ) -> None:
        row = _row(event, consumer)
        conn.execute(self._fail, (*row[:6], attempts, error[:4000], *row[6:]))


class MariaDbVersions:
    """The last version each consumer applied per aggregate, on MariaDB; it only moves
    forward (see the module docstring)."""

    def __init__(self, names: DbNames = DbNames()) -> None:
        self.table = v = names.versions
        self._previous = (
            f"SELECT version FROM {v} WHERE consumer_name = %s AND aggregate_type = %s "
            "AND aggregate_id = %s FOR UPDATE"
        )
        self._upsert = (
            f"INSERT INTO {v} (consumer_name, aggregate_type, aggregate_id, version) VALUES "
        )
        self._on_duplicate = (
            " ON DUPLICATE KEY UPDATE updated_at = IF(version < VALUES(version), "
            "UTC_TIMESTAMP(6), updated_at), version = GREATEST(version, VALUES(version))"
        )

    def advance(self, conn: Session, event: Event, consumer: str) -> GuardResult:
        """Advance the aggregate's version to the event's if the event is newer."""
        assert event.aggregate_version is not None
        key = (consumer, event.aggregate_type, event.aggregate_id)
        row = conn.execute(self._previous, key).fetchone()
        moved = conn.execute(
            self._upsert + "(%s, %s, %s, %s)" + self._on_duplicate,
            (*key, event.aggregate_version),
        ).rowcount
        return GuardResult(applied=moved > 0, previous=None if row is None else int(row[0]))

    def lock_many(self, conn: Session, keys: set[VersionKey]) -> dict[VersionKey, int]:
        """The current versions of `keys`, locked (in key order) until the caller's
        transaction ends."""
        if not keys:
            return {}
        rows = conn.execute(
            f"SELECT consumer_name, aggregate_type, aggregate_id, version FROM {self.table} "
            f"WHERE (consumer_name, aggregate_type, aggregate_id) IN "
            f"({placeholders(len(keys), 3)}) ORDER BY 1, 2, 3 FOR UPDATE",
            [v for k in sorted(keys) for v in k],
        ).fetchall()
        return {(c, t, aggregate_id_text(a)): int(n) for c, t, a, n in rows}

    def advance_many(
        self, conn: Session, versions: dict[VersionKey, int], current: dict[VersionKey, int]
    ) -> bool:
        """Write the batch's new versions; False when a row did not move as judged: each
        row locked as `current` must be moved (2), each other one inserted (1)."""
        if not versions:
            return True
        keys = sorted(versions)
        moved = conn.execute(
            self._upsert + placeholders(len(keys), 4) + self._on_duplicate,
            [v for k in keys for v in (*k, versions[k])],
        ).rowcount
        return moved == sum(2 if k in current else 1 for k in keys)


class MariaDbClaimAndAdvance:
    """The inbox claim, then (only when it claimed) the version advance."""

    def __init__(self, inbox: MariaDbInbox, versions: MariaDbVersions) -> None:
        self.inbox, self.versions = inbox, versions

    def run(self, conn: Session, event: Event, consumer: str) -> tuple[Claim | None, GuardResult]:
        claim = self.inbox.claim(conn, event, consumer)
        if claim is None:
            return None, GuardResult(applied=False, previous=None)
        return claim, self.versions.advance(conn, event, consumer)


def _row(event: Event, consumer: str) -> tuple[object, ...]:
    row = claim_row(event, consumer)
    return (str(row[0]), *row[1:])


def _claim_values(processed: bool) -> str:
    """One claimed row's VALUES (the `_row` columns, then status and processed_at)."""
    done = "'PROCESSED', UTC_TIMESTAMP(6)" if processed else "'RECEIVED', NULL"
    return f"(%s, %s, %s, %s, %s, %s, %s, %s, %s, {done})"


def _reclaim(table: str, rows: int, processed: bool) -> str:
    """Claim again the FAILED or RECEIVED rows among `rows` (event id, consumer) keys."""
    done = "'PROCESSED', processed_at = UTC_TIMESTAMP(6)" if processed else "'RECEIVED'"
    return (
        f"UPDATE {table} SET status = {done}, retry_count = retry_count + 1, "
        "error_message = NULL WHERE status IN ('FAILED', 'RECEIVED') "
        f"AND (event_id, consumer_name) IN ({placeholders(rows, 2)})"
    )


def aggregate_id_text(value: bytes | str) -> str:
    """An aggregate id as stored (VARBINARY) back to text."""
    return value.decode() if isinstance(value, bytes) else value
