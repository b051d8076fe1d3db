"""The consumer's stores on a real MariaDB, statement by statement: the claim's affected
rows (new, duplicate, reclaimed), the batch claim and marks, the version guard moving
only forward, and a batch's versions refusing a row another transaction inserted."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime

import pytest

from cdcbox.event import Event
from cdcbox.mariadb.inbox import MariaDbClaimAndAdvance, MariaDbInbox, MariaDbVersions
from cdcbox.mariadb.session import MariaDbSession, open_session
from cdcbox.names import DbNames
from tests.helpers import mariadb_names, unique

pytestmark = pytest.mark.integration


@pytest.fixture
def names(mariadb_dsn: str) -> DbNames:
    return mariadb_names(mariadb_dsn)


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


def status(mariadb: MariaDbSession, names: DbNames, e: Event, consumer: str) -> tuple[str, int]:
    row = mariadb.execute(
        f"SELECT status, retry_count FROM {names.inbox} WHERE event_id = %s AND consumer_name = %s",
        (str(e.event_id), consumer),
    ).fetchone()
    return row[0], row[1]


def test_the_claim_tells_new_duplicate_and_reclaimed(
    mariadb: MariaDbSession, names: DbNames
) -> None:
    inbox, c, e = MariaDbInbox(names), unique("c"), event()
    with mariadb.transaction():
        assert inbox.claim(mariadb, e, c) == "new"
    with mariadb.transaction():
        assert inbox.claim(mariadb, e, c) is None  # PROCESSED: a duplicate
    failed = event("a2")
    with mariadb.transaction():
        inbox.record_failure(mariadb, failed, c, 3, "boom")
    assert status(mariadb, names, failed, c) == ("FAILED", 3)
    with mariadb.transaction():
        assert inbox.claim(mariadb, failed, c) == "reclaimed"
    assert status(mariadb, names, failed, c) == ("PROCESSED", 4)
    with mariadb.transaction():
        inbox.record_failure(mariadb, failed, c, 2, "late")  # a finished row stays finished
    assert status(mariadb, names, failed, c) == ("PROCESSED", 4)


def test_a_claim_rolled_back_leaves_no_row(mariadb: MariaDbSession, names: DbNames) -> None:
    inbox, c, e = MariaDbInbox(names), unique("c"), event()

    def claim_then_fail() -> None:
        with mariadb.transaction():
            assert inbox.claim(mariadb, e, c) == "new"
            raise RuntimeError("the handler failed")

    with pytest.raises(RuntimeError):
        claim_then_fail()
    with mariadb.transaction():
        assert inbox.claim(mariadb, e, c) == "new"


def test_a_batch_claims_the_new_and_the_failed_and_marks_them(
    mariadb: MariaDbSession, names: DbNames
) -> None:
    inbox, c = MariaDbInbox(names), unique("c")
    done, failed, fresh = event("a1"), event("a2"), event("a3")
    with mariadb.transaction():
        inbox.claim(mariadb, done, c)
        inbox.record_failure(mariadb, failed, c, 1, "boom")
    with mariadb.transaction():
        claimed = inbox.claim_many(mariadb, [(done, c), (failed, c), (fresh, c)], processed=False)
        assert claimed == {(failed.event_id, c): "reclaimed", (fresh.event_id, c): "new"}
        assert status(mariadb, names, fresh, c)[0] == "RECEIVED"
        inbox.finish_many(mariadb, [(failed, c, "PROCESSED", None), (fresh, c, "SKIPPED", "stale")])
    assert status(mariadb, names, failed, c) == ("PROCESSED", 2)
    assert status(mariadb, names, fresh, c) == ("SKIPPED", 0)


def test_the_version_only_moves_forward(mariadb: MariaDbSession, names: DbNames) -> None:
    inbox, versions, c = MariaDbInbox(names), MariaDbVersions(names), unique("c")
    both = MariaDbClaimAndAdvance(inbox, versions)
    with mariadb.transaction():
        claim, first = both.run(mariadb, event(version=1), c)
    assert claim == "new" and (first.applied, first.previous) == (True, None)
    with mariadb.transaction():
        _, third = both.run(mariadb, event(version=3), c)
    assert (third.applied, third.previous, third.gap_before(3)) == (True, 1, True)
    for stale_version in (3, 2):
        with mariadb.transaction():
            _, stale = both.run(mariadb, event(version=stale_version), c)
        assert (stale.applied, stale.previous) == (False, 3)
    again = event(version=9)
    with mariadb.transaction():
        both.run(mariadb, again, c)
    with mariadb.transaction():
        claim, untouched = both.run(mariadb, again, c)  # a duplicate moves nothing
    assert claim is None and not untouched.applied


def test_a_batch_notices_a_version_row_inserted_meanwhile(
    mariadb_dsn: str, mariadb: MariaDbSession, names: DbNames
) -> None:
    """The batch judged a1 new (no row); another transaction inserts a1 first: the
    batch's upsert moves it instead of inserting it, and says so."""
    versions, c = MariaDbVersions(names), unique("c")
    key = (c, "order", "a1")
    with mariadb.transaction():
        current = versions.lock_many(mariadb, {key, (c, "order", "a2")})
        assert current == {}
        other = threading.Thread(target=insert_version, args=(mariadb_dsn, names, key, 1))
        other.start()
        other.join(timeout=30)
        assert not versions.advance_many(mariadb, {key: 2}, current)
    with mariadb.transaction():
        current = versions.lock_many(mariadb, {key})
        assert current == {key: 2}
        assert versions.advance_many(mariadb, {key: 3}, current)


def insert_version(dsn: str, names: DbNames, key: tuple[str, str, str], version: int) -> None:
    session = open_session(dsn)
    try:
        with session.transaction():
            session.execute(
                f"INSERT INTO {names.versions} (consumer_name, aggregate_type, aggregate_id, "
                "version) VALUES (%s, %s, %s, %s)",
                (*key, version),
            )
    finally:
        session.close()
