"""A database outage longer than the retry budget (audit 26, case 9): the record waits it
out with backoff, is applied once the database is back, and is never dead-lettered nor
ends the consumer. Real PostgreSQL: the consumer's role is refused logins while its
session is terminated, for more waits than the retry policy has attempts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import psycopg
import pytest
from psycopg import sql

from cdcbox.consumer import Event, Handler, Outcome
from cdcbox.names import DbNames
from cdcbox.producer import NewEvent
from cdcbox.testing import Harness
from tests.helpers import login_role, unique

pytestmark = pytest.mark.integration

OUTAGE_WAITS = 6  # the harness's retry policy has 2 attempts


@pytest.fixture
def consumer_role(database: str, cdcbox_schema: DbNames) -> Iterator[tuple[str, str]]:
    """A login role that owns nothing but may use the test's schema; its DSN."""
    with login_role(database, "outage") as (role, role_dsn):
        with psycopg.connect(database, autocommit=True) as admin:
            admin.execute(
                sql.SQL(
                    "GRANT ALL ON SCHEMA {s} TO {r}; GRANT ALL ON ALL TABLES IN SCHEMA {s} TO {r}"
                ).format(s=sql.Identifier(cdcbox_schema.schema), r=sql.Identifier(role))
            )
        yield role, role_dsn


def set_login(database: str, role: str, allowed: bool) -> None:
    with psycopg.connect(database, autocommit=True) as admin:
        admin.execute(
            sql.SQL("ALTER ROLE {} {}").format(
                sql.Identifier(role), sql.SQL("LOGIN" if allowed else "NOLOGIN")
            )
        )


@pytest.mark.parametrize("batch_mode", [False, True], ids=["per-record", "batch"])
def test_a_record_waits_out_an_outage_longer_than_the_retry_budget(
    database: str, cdcbox_schema: DbNames, consumer_role: tuple[str, str], batch_mode: bool
) -> None:
    role, role_dsn = consumer_role
    aggregate = unique("Pay")
    waits: list[float] = []

    class Outage(Handler):
        consumer_name = unique("c")
        aggregate_types = (aggregate,)
        event_types = frozenset({"Paid"})
        applied: ClassVar[list[str]] = []

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            if not waits:  # the first time: the database goes away under the handler
                set_login(database, role, allowed=False)
                # Its result read: a pipelined handler (batch mode) would otherwise see
                # the failure only when the batch's pipeline ends, after the append below.
                conn.execute("SELECT pg_terminate_backend(pg_backend_pid())").fetchone()
            self.applied.append(event.aggregate_id)

    def wait(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == OUTAGE_WAITS:
            set_login(database, role, allowed=True)

    handler = Outage()
    with Harness(role_dsn, [handler], names=cdcbox_schema, batch_mode=batch_mode) as harness:
        harness.pipeline.retry.sleep = wait
        ended = harness.send(NewEvent(aggregate, "o1", "Paid", {}, 1))
        letters = harness.dead_letters(harness.record(NewEvent(aggregate, "x", "Paid", {})).topic)
    assert len(waits) >= OUTAGE_WAITS
    assert handler.applied == ["o1"]
    assert ended == {Outcome.PROCESSED: 1}
    assert letters == []
