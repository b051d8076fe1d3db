"""The polling relay's claim against a large backlog in real PostgreSQL: the plans must
read the partial indexes in order, never sort the backlog."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox.names import DbNames
from cdcbox.postgres.relay_store import RelayStore
from tests.helpers import migrated_schema, unique

pytestmark = pytest.mark.integration
BACKLOG = 1_000_000


@pytest.fixture(scope="module")
def backlog(database: str) -> Iterator[DbNames]:
    """A polling outbox of its own with a million rows: 90 % SENT history over 1,000
    aggregates, the rest PENDING, a few RETRY and PROCESSING."""
    names = migrated_schema(
        database, DbNames(schema=unique("claim"), publication=unique("claim_pub"))
    )
    with psycopg.connect(database) as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (event_id, aggregate_type, aggregate_id, event_type, payload, "
                "status, next_retry_at) SELECT gen_random_uuid(), 'order', 'a' || (n %% 1000), "
                "'Changed', '{{}}', CASE WHEN n <= %s THEN 'SENT' WHEN n %% 97 = 0 THEN 'RETRY' "
                "WHEN n %% 89 = 0 THEN 'PROCESSING' ELSE 'PENDING' END, "
                "CASE WHEN n %% 97 = 0 THEN now() + interval '1 hour' END "
                "FROM generate_series(1, %s) AS n"
            ).format(names.table("outbox")),
            (BACKLOG * 9 // 10, BACKLOG),
        )
        conn.commit()
        conn.execute(sql.SQL("ANALYZE {}").format(names.table("outbox")))
        conn.commit()
    yield names
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(names.schema)))
        publication = sql.Identifier(names.publication)
        conn.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(publication))


def _plan(conn: psycopg.Connection[Any], query: sql.Composable, params: tuple[Any, ...]) -> str:
    rows = conn.execute(sql.SQL("EXPLAIN ") + query, params).fetchall()
    return "\n".join(r[0] for r in rows)


def test_the_claim_reads_the_unsent_index_in_order_without_sorting_the_backlog(
    database: str, backlog: DbNames
) -> None:
    with psycopg.connect(database) as conn:
        plan = _plan(conn, RelayStore(backlog).claim_query, (500,))
    assert "outbox_event_unsent_idx" in plan, plan
    assert "Sort" not in plan, plan


def test_the_blocker_lookup_reads_only_unsent_rows_of_the_aggregates(
    database: str, backlog: DbNames
) -> None:
    store = RelayStore(backlog)
    with psycopg.connect(database) as conn:
        plan = _plan(
            conn,
            store.blockers_query,
            (["order", "order"], ["a1", "a2"], [BACKLOG - 1], BACKLOG),
        )
    # Each aggregate has ~900 SENT rows of history: the partial index holds none of them.
    assert "outbox_event_blocker_idx" in plan, plan
    assert "Seq Scan" not in plan, plan
