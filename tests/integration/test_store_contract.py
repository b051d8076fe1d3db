"""The consumer's stores, one contract written once and run on both databases through
the `backend` fixture (PostgreSQL's stores and MariaDB's, each on a real server),
statement by statement: the claim's affected rows (new, duplicate, reclaimed), the
batch claim and marks, the version guard moving only forward, and a batch's versions
refusing a row another transaction inserted."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
import pytest

from cdcbox.databases import database_for
from cdcbox.event import Event
from cdcbox.names import DbNames
from cdcbox.seam.stores import Stores
from cdcbox.session import Session, SessionSource
from tests.helpers import mariadb_names, unique

pytestmark = pytest.mark.integration


@dataclass
class Backend:
    """One database's stores, an autocommit session on it, and how to reach its tables
    around the stores."""

    session: Session
    stores: Stores
    table: Callable[[str], str]  # DbNames field -> the table's name in raw SQL
    open_session: Callable[[], Session]  # another session (its own transaction)


@pytest.fixture(params=["PostgreSQL", "MariaDB"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "PostgreSQL":
        dsn: str = request.getfixturevalue("database")
        names = DbNames()
    else:
        dsn = request.getfixturevalue("mariadb_dsn")
        names = mariadb_names(dsn)
    state = database_for(dsn).consumer_state(names, durable_each_commit=True)
    others: list[SessionSource] = []

    def open_session() -> Session:
        # Another state's source: a session of its own.
        other = database_for(dsn).consumer_state(names, durable_each_commit=True).sessions
        others.append(other)
        return other()

    def table(field: str) -> str:
        if request.param == "MariaDB":
            return str(getattr(names, field))
        with psycopg.connect(dsn) as conn:
            return names.table(field).as_string(conn)

    yield Backend(state.sessions(), state.stores, table, open_session)
    for other in others:
        other.close()
    state.sessions.close()


def event(aggregate_id: str = "a1", version: int | None = 1, offset: int = 0) -> Event:
    return Event(
        event_id=uuid.uuid4(),
        event_type="Created",
        aggregate_type="order",
        aggregate_id=aggregate_id,
        aggregate_version=version,
        payload={},
        value=b"{}",
        occurred_at=datetime.now(UTC),
        trace_id=None,
        content_type="application/json",
        topic="outbox.event.order",
        partition=0,
        offset=offset,
    )


def status(db: Backend, e: Event, consumer: str) -> tuple[str, int]:
    row = db.session.execute(
        f"SELECT status, retry_count FROM {db.table('inbox')} "
        "WHERE event_id = %s AND consumer_name = %s",
        (str(e.event_id), consumer),
    ).fetchone()
    return row[0], row[1]


def test_the_claim_tells_new_duplicate_and_reclaimed(backend: Backend) -> None:
    conn = backend.session
    inbox, c, e = backend.stores.inbox, unique("c"), event()
    with conn.transaction():
        assert inbox.claim(conn, e, c) == "new"
    with conn.transaction():
        assert inbox.claim(conn, e, c) is None  # PROCESSED: a duplicate
    failed = event("a2")
    with conn.transaction():
        inbox.record_failure(conn, failed, c, 3, "boom")
    assert status(backend, failed, c) == ("FAILED", 3)
    with conn.transaction():
        assert inbox.claim(conn, failed, c) == "reclaimed"
    assert status(backend, failed, c) == ("PROCESSED", 4)
    with conn.transaction():
        inbox.record_failure(conn, failed, c, 2, "late")  # a finished row stays finished
    assert status(backend, failed, c) == ("PROCESSED", 4)


def test_a_claim_rolled_back_leaves_no_row(backend: Backend) -> None:
    conn = backend.session
    inbox, c, e = backend.stores.inbox, unique("c"), event()

    def claim_then_fail() -> None:
        with conn.transaction():
            assert inbox.claim(conn, e, c) == "new"
            raise RuntimeError("the handler failed")

    with pytest.raises(RuntimeError):
        claim_then_fail()
    with conn.transaction():
        assert inbox.claim(conn, e, c) == "new"


def test_a_batch_claims_the_new_and_the_failed_and_marks_them(backend: Backend) -> None:
    conn = backend.session
    inbox, c = backend.stores.inbox, unique("c")
    done, failed, fresh = event("a1"), event("a2"), event("a3")
    with conn.transaction():
        inbox.claim(conn, done, c)
        inbox.record_failure(conn, failed, c, 1, "boom")
    with conn.transaction():
        claimed = inbox.claim_many(conn, [(done, c), (failed, c), (fresh, c)], processed=False)
        assert claimed == {(failed.event_id, c): "reclaimed", (fresh.event_id, c): "new"}
        assert status(backend, fresh, c)[0] == "RECEIVED"
        inbox.finish_many(conn, [(failed, c, "PROCESSED", None), (fresh, c, "SKIPPED", "stale")])
    assert status(backend, failed, c) == ("PROCESSED", 2)
    assert status(backend, fresh, c) == ("SKIPPED", 0)


def test_the_version_only_moves_forward(backend: Backend) -> None:
    conn = backend.session
    both, c = backend.stores.claim_and_advance, unique("c")
    with conn.transaction():
        claim, first = both.run(conn, event(version=1), c)
    assert claim == "new" and (first.applied, first.previous) == (True, None)
    with conn.transaction():
        _, third = both.run(conn, event(version=3), c)
    assert (third.applied, third.previous, third.gap_before(3)) == (True, 1, True)
    for stale_version in (3, 2):
        with conn.transaction():
            _, stale = both.run(conn, event(version=stale_version), c)
        assert (stale.applied, stale.previous) == (False, 3)
    again = event(version=9)
    with conn.transaction():
        both.run(conn, again, c)
    with conn.transaction():
        claim, untouched = both.run(conn, again, c)  # a duplicate moves nothing
    assert claim is None and not untouched.applied


def test_a_batch_notices_a_version_row_inserted_meanwhile(backend: Backend) -> None:
    """The batch judged a1 new (no row); another transaction inserts a1 first: the
    batch's upsert moves it instead of inserting it, and says so."""
    conn = backend.session
    versions, c = backend.stores.versions, unique("c")
    key = (c, "order", "a1")
    with conn.transaction():
        current = versions.lock_many(conn, {key, (c, "order", "a2")})
        assert current == {}
        other = threading.Thread(target=insert_version, args=(backend, key, 1))
        other.start()
        other.join(timeout=30)
        assert not versions.advance_many(conn, {key: 2}, current)
    with conn.transaction():
        current = versions.lock_many(conn, {key})
        assert current == {key: 2}
        assert versions.advance_many(conn, {key: 3}, current)


def insert_version(backend: Backend, key: tuple[str, str, str], version: int) -> None:
    session = backend.open_session()
    with session.transaction():
        session.execute(
            f"INSERT INTO {backend.table('versions')} (consumer_name, aggregate_type, "
            "aggregate_id, version) VALUES (%s, %s, %s, %s)",
            (*key, version),
        )
