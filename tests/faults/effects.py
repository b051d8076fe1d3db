"""The ledger's business table (`fault_effect`) in a consumer's database, PostgreSQL or
MariaDB: one row per handler call and no unique constraint, so an event applied twice
shows as two rows. `tests.faults.handlers.LedgerHandler` writes it with the same SQL on
both."""

from __future__ import annotations

import uuid
from typing import Any

from cdcbox.dsn import database_kind
from tests.helpers import database_session

EFFECTS_DDL = """
CREATE TABLE IF NOT EXISTS fault_effect (
    seq           bigserial PRIMARY KEY,
    consumer_name text      NOT NULL,
    event_id      uuid      NOT NULL,
    aggregate_id  text      NOT NULL,
    n             bigint    NOT NULL,
    applied_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
ALTER TABLE fault_effect
    ADD COLUMN IF NOT EXISTS applied_at timestamptz NOT NULL DEFAULT clock_timestamp()"""
MARIADB_EFFECTS_DDL = (
    "CREATE TABLE IF NOT EXISTS fault_effect (seq BIGINT AUTO_INCREMENT PRIMARY KEY, "
    "consumer_name VARCHAR(200) NOT NULL, event_id CHAR(36) NOT NULL, "
    "aggregate_id VARCHAR(200) NOT NULL, n BIGINT NOT NULL, "
    "applied_at DATETIME(6) NOT NULL DEFAULT UTC_TIMESTAMP(6), KEY (consumer_name, seq)) "
    "ENGINE = InnoDB"
)
_GAPS = {
    False: "extract(epoch FROM applied_at - lag(applied_at) OVER (ORDER BY seq))",
    True: "TIMESTAMPDIFF(MICROSECOND, lag(applied_at) OVER (ORDER BY seq), applied_at) / 1e6",
}


def create_effects(dsn: str) -> None:
    with database_session(dsn) as conn:
        conn.execute(MARIADB_EFFECTS_DDL if database_kind(dsn) == "MariaDB" else EFFECTS_DDL)


def max_stall_s(dsn: str, consumer: str) -> float:
    """The longest gap between consecutive effects (writers never pause that long)."""
    gap = _GAPS[database_kind(dsn) == "MariaDB"]
    with database_session(dsn) as conn:
        row = conn.execute(
            f"SELECT coalesce(max(gap), 0) FROM (SELECT {gap} AS gap FROM fault_effect "
            "WHERE consumer_name = %s) AS gaps",
            (consumer,),
        ).fetchone()
    return round(float(row[0]) if row else 0.0, 1)


def effect_rows(dsn: str, consumer: str) -> list[tuple[uuid.UUID, str, int]]:
    with database_session(dsn) as conn:
        rows = conn.execute(
            "SELECT event_id, aggregate_id, n FROM fault_effect WHERE consumer_name = %s "
            "ORDER BY seq",
            (consumer,),
        ).fetchall()
    return [(_uuid(r[0]), r[1], int(r[2])) for r in rows]


def applied_ids(dsn: str, consumer: str) -> set[uuid.UUID]:
    with database_session(dsn) as conn:
        rows = conn.execute(
            "SELECT DISTINCT event_id FROM fault_effect WHERE consumer_name = %s", (consumer,)
        ).fetchall()
    return {_uuid(r[0]) for r in rows}


def _uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)
