"""Aggregate types whose topics Kafka would take for one (audit 26, case 10): Kafka reads
'.' and '_' alike in topic names, so `Order.Line` and `Order_Line` collide, and so do
`Order_dlq` and the dead letters of `Order` (`outbox.event.Order.dlq`). Whichever comes
second cannot be created and Debezium's task fails; the outbox refuses it at write, raw
SQL and concurrent writers included."""

from __future__ import annotations

import threading

import psycopg
import pytest
from psycopg import sql

from cdcbox.errors import SchemaError
from cdcbox.names import DbNames
from cdcbox.producer import NewEvent, Outbox
from tests.helpers import eventually

pytestmark = pytest.mark.integration


def append(database: str, names: DbNames, aggregate_type: str) -> None:
    with psycopg.connect(database) as conn, conn.transaction():
        Outbox(names).append(conn, NewEvent(aggregate_type, "a1", "Created", {}))


@pytest.mark.parametrize(
    ("first", "second"),
    [("Order.Line", "Order_Line"), ("Order_Line", "Order.Line"), ("Order", "Order_dlq")],
)
def test_an_aggregate_type_whose_topic_collides_is_refused(
    database: str, cdcbox_schema: DbNames, first: str, second: str
) -> None:
    append(database, cdcbox_schema, first)
    append(database, cdcbox_schema, first)  # the same type again is fine
    with pytest.raises((SchemaError, psycopg.errors.CheckViolation), match=first):
        append(database, cdcbox_schema, second)


def test_raw_sql_is_refused_too(database: str, cdcbox_schema: DbNames) -> None:
    append(database, cdcbox_schema, "Invoice")
    with psycopg.connect(database) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (event_id, aggregate_type, aggregate_id, aggregate_version, "
                "event_type, payload, content_type, trace_id, created_at, occurred_at) "
                "VALUES (gen_random_uuid(), 'Invoice_dlq', 'i1', 0, 'Created', '{{}}', "
                "'application/json', '', now(), '')"
            ).format(cdcbox_schema.table("outbox"))
        )


def waits_on_a_lock(database: str, pid: int) -> bool:
    with psycopg.connect(database) as conn:
        row = conn.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
    return row is not None and row[0] == "Lock"


def test_two_writers_racing_with_colliding_types_cannot_both_commit(
    database: str, cdcbox_schema: DbNames
) -> None:
    outbox = Outbox(cdcbox_schema)
    committed: list[str] = []
    with psycopg.connect(database) as a, psycopg.connect(database) as b:
        a.execute("BEGIN")
        outbox.append(a, NewEvent("Race.Type", "r", "Created", {}))
        b.execute("BEGIN")
        b_pid = b.info.backend_pid
        errors: list[BaseException] = []

        def second() -> None:
            try:
                outbox.append(b, NewEvent("Race_Type", "r", "Created", {}))
                b.execute("COMMIT")
                committed.append("Race_Type")
            except psycopg.Error as e:
                errors.append(e)
                b.rollback()

        thread = threading.Thread(target=second)
        thread.start()
        eventually(lambda: waits_on_a_lock(database, b_pid), what="b waiting for a's key")
        a.execute("COMMIT")
        committed.append("Race.Type")
        thread.join(timeout=30)
    assert committed == ["Race.Type"]
    assert len(errors) == 1


def test_a_session_checks_a_type_once_and_forgets_a_claim_it_rolled_back(
    database: str, cdcbox_schema: DbNames
) -> None:
    """Each session checks a type at its first row and remembers it (migration 0013); a
    claim rolled back is forgotten with it, so the type is checked again: here another
    writer took the colliding key meanwhile, and the second attempt is refused."""
    outbox = Outbox(cdcbox_schema)
    with psycopg.connect(database) as conn:
        with conn.transaction():
            outbox.append(conn, NewEvent("Undone.Type", "u", "Created", {}))
            raise psycopg.Rollback()
        assert "Undone.Type" not in (
            conn.execute(
                "SELECT current_setting('cdcbox.checked_aggregate_types', true)"
            ).fetchone()[0]
            or ""
        )
        append(database, cdcbox_schema, "Undone_Type")  # another session claims the key
        with pytest.raises(psycopg.errors.CheckViolation, match="Undone_Type"), conn.transaction():
            outbox.append(conn, NewEvent("Undone.Type", "u", "Created", {}))
        with conn.transaction():  # a type checked in this session is not checked again
            outbox.append(conn, NewEvent("Checked", "c", "Created", {}))
            outbox.append(conn, NewEvent("Checked", "c", "Created", {}))
        cached = conn.execute("SELECT current_setting('cdcbox.checked_aggregate_types')")
        assert cached.fetchone() == (f"|{cdcbox_schema.schema}.outbox_topic_key:Checked|",)
