"""Replication slots against real PostgreSQL: created by `migrate`, and never dropped while
they hold events nobody has published."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from cdcbox.errors import UsageError
from cdcbox.migrate import migrate
from cdcbox.names import DbNames
from cdcbox.ops import slots
from cdcbox.producer.outbox import NewEvent, Outbox
from tests.helpers import drop_slot_once_released, migrated_schema, unique

pytestmark = pytest.mark.integration


@pytest.fixture
def slotted(database: str) -> Iterator[tuple[DbNames, str]]:
    """A schema of its own, with its own publication, migrated with slot `<schema>`."""
    schema = unique("slot")
    names = DbNames(schema=schema, publication=f"{schema}_pub")
    migrated_schema(database, names, mode="cdc", slot=schema)
    yield names, schema
    drop_slot_once_released(database, schema)
    with psycopg.connect(database, autocommit=True) as conn:
        publication = sql.Identifier(names.publication)
        conn.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(publication))


def _write(database: str, names: DbNames, n: int) -> None:
    with psycopg.connect(database) as conn, conn.transaction():
        Outbox(names).append_many(
            conn, [NewEvent("order", f"o{i}", "Created", {"i": i}) for i in range(n)]
        )


def test_migrate_creates_the_slot_once_and_it_retains_rows_written_after(
    database: str, slotted: tuple[DbNames, str]
) -> None:
    names, slot = slotted
    with psycopg.connect(database) as conn:
        assert migrate(conn, names=names, slot=slot) == []  # again: nothing, no error
        (row,) = [s for s in slots.slot_status(conn) if s.name == slot]
        assert row.plugin == "pgoutput" and not row.active
    _write(database, names, 3)
    with psycopg.connect(database, autocommit=True) as conn:
        assert slots.unpublished_inserts(conn, slot, names.publication) == 3


def test_a_slot_holding_unpublished_events_is_not_dropped_without_force(
    database: str, slotted: tuple[DbNames, str]
) -> None:
    names, slot = slotted
    _write(database, names, 2)
    with psycopg.connect(database, autocommit=True) as conn:
        plan = slots.plan_drop(conn, slot, [], names=names)
        assert plan.unpublished == 2
        with pytest.raises(UsageError, match="holds 2 unpublished outbox events"):
            slots.drop_slot(conn, plan)
        assert any(s.name == slot for s in slots.slot_status(conn))
        slots.drop_slot(conn, plan, force=True)
        assert not any(s.name == slot for s in slots.slot_status(conn))


def test_a_slot_a_connector_names_is_not_dropped_even_when_empty(
    database: str, slotted: tuple[DbNames, str]
) -> None:
    names, slot = slotted
    with psycopg.connect(database, autocommit=True) as conn:
        plan = slots.plan_drop(conn, slot, ["cdcbox-outbox"], names=names)
        assert plan.unpublished == 0
        with pytest.raises(UsageError, match="connector cdcbox-outbox streams from it"):
            slots.drop_slot(conn, plan)
        abandoned = slots.plan_drop(conn, slot, [], names=names)
        assert not abandoned.loses_something
        slots.drop_slot(conn, abandoned)
        assert not any(s.name == slot for s in slots.slot_status(conn))


def test_polling_mode_refuses_a_slot(database: str) -> None:
    with psycopg.connect(database) as conn, pytest.raises(UsageError, match="CDC relay"):
        migrate(conn, names=DbNames(), mode="polling", slot="never_created")
