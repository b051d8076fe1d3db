"""How PostgreSQL plans cdcbox's readings of large tables: the exporter's recent counts
and the purges' batches, on analyzed tables of history in which every row is old."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox.migrate import RelayMode
from cdcbox.names import DbNames
from cdcbox.observe.pipeline_state import RECENT_S, inbox_counts_statement
from cdcbox.ops.retention import outbox_purge_statements
from cdcbox.postgres.inbox import inbox_purge_statements
from tests.helpers import migrated_schema, old_inbox_rows, unique

pytestmark = pytest.mark.integration
HISTORY_ROWS = 50_000


@pytest.fixture(scope="module")
def history(database: str) -> DbNames:
    """An inbox of `HISTORY_ROWS` rows processed 40 to 39 days ago, analyzed."""
    names = migrated_schema(database, DbNames(schema=unique("plans")))
    old_inbox_rows(database, names, HISTORY_ROWS)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("ANALYZE {}").format(names.table("inbox")))
    return names


def _plan(dsn: str, statement: sql.Composed, params: tuple[Any, ...]) -> dict[str, Any]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + statement, params).fetchone()
    assert row is not None
    document = row[0] if isinstance(row[0], list) else json.loads(row[0])
    return dict(document[0]["Plan"])


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def test_the_exporter_expects_few_recent_rows_in_a_large_old_inbox(
    database: str, history: DbNames
) -> None:
    """Estimated at a third of the inbox, a count of the last minute's few rows was
    planned as a parallel scan compiled by JIT: ~40 ms per scrape at 10M rows."""
    plan = _plan(database, inbox_counts_statement(history), (RECENT_S,))
    recent = [n for n in _nodes(plan) if n.get("Index Name") == f"{history.inbox}_purge_idx"]
    assert recent, f"the recent rows are not read through the purge index: {plan}"
    assert recent[0]["Plan Rows"] < HISTORY_ROWS // 100
    assert not [n for n in _nodes(plan) if n["Node Type"].startswith("Gather")]


def test_the_purge_batch_reads_the_index_when_the_whole_inbox_is_old(
    database: str, history: DbNames
) -> None:
    """Each batch must find its rows through the purge index: a LIMIT over a sequential
    scan would read past every row the earlier batches deleted, again and again."""
    _count, delete = inbox_purge_statements(history)
    plan = _plan(database, delete, (timedelta(days=10), 5000))
    scans = [n for n in _nodes(plan) if n.get("Relation Name") == history.inbox]
    assert scans
    assert not [n for n in scans if n["Node Type"] == "Seq Scan"], plan
    assert any(n.get("Index Name") == f"{history.inbox}_purge_idx" for n in scans), plan


def _outbox_history(database: str, mode: RelayMode) -> DbNames:
    """An outbox of `HISTORY_ROWS` rows written 40 to 39 days ago, analyzed; in polling
    mode all of them SENT."""
    names = migrated_schema(database, DbNames(schema=unique("plans")), mode=mode)
    status = "SENT" if mode == "polling" else "PENDING"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (event_id, aggregate_type, aggregate_id, event_type, payload, "
                "status, created_at) SELECT gen_random_uuid(), 'order', g::text, 'Created', "
                "'{{}}', %s, (now() AT TIME ZONE 'UTC') - interval '40 days' "
                "+ g * interval '1 second' FROM generate_series(1, %s) AS g"
            ).format(names.table("outbox")),
            (status, HISTORY_ROWS),
        )
        conn.execute(sql.SQL("ANALYZE {}").format(names.table("outbox")))
    return names


@pytest.mark.parametrize("mode", ["cdc", "polling"])
def test_the_outbox_purge_batch_never_scans_the_whole_outbox(
    database: str, mode: RelayMode
) -> None:
    """Each batch must find its rows through an index: a sequential scan would read the
    whole outbox (the rows earlier batches deleted included) once per batch."""
    history = _outbox_history(database, mode)
    _count, delete = outbox_purge_statements(history, mode)
    cutoff = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=10)
    plan = _plan(database, delete, (cutoff, 5000))
    scans = [n for n in _nodes(plan) if n.get("Relation Name") == history.outbox]
    assert scans
    assert not [n for n in scans if n["Node Type"] == "Seq Scan"], plan
