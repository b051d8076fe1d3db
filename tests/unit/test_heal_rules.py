"""The rules that decide what heals: when a transaction is hanging, and when a slot has
stood still (issue 51). The real stalls are in tests/e2e/test_heal.py."""

from __future__ import annotations

import threading

import pytest

from cdcbox.errors import ConnectError, KafkaRequestError, LoginRefused, ServiceUnavailable
from cdcbox.kafka.transactions import OpenTransaction
from cdcbox.ops.heal import HealAction, HealPolicy, RestartBackoff, watched_topics
from cdcbox.ops.progress import ProgressWatch, SlotPosition
from cdcbox.ops.supervisor import HealMetrics, supervise
from tests.helpers import FakeTime

pytestmark = pytest.mark.unit

NOW = 1_000_000_000


def known(**changes: object) -> OpenTransaction:
    """A transaction its coordinator knows and holds open on this partition."""
    fields: dict[str, object] = {
        "topic": "outbox.event.order",
        "partition": 0,
        "producer_id": 7,
        "producer_epoch": 3,
        "coordinator_epoch": -1,
        "first_offset": 10,
        "last_write_ms": NOW - 65_000,
        "transactional_id": "svc-1",
        "coordinator_state": "Ongoing",
        "coordinator_epoch_of_producer": 3,
        "started_ms": NOW - 68_000,
        "timeout_ms": 60_000,
        "coordinator_has_partition": True,
    }
    fields.update(changes)
    return OpenTransaction(**fields)  # type: ignore[arg-type]


def test_a_transaction_its_coordinator_holds_open_is_not_hanging() -> None:
    txn = known()
    assert txn.hanging(NOW) is None
    assert txn.age_s(NOW) == 68.0
    assert txn.idle_s(NOW) == 65.0
    assert txn.describe(NOW) == (
        "svc-1 holds outbox.event.order-0 open from offset 10 for 68 s (last write 65 s ago)"
    )


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"transactional_id": None}, "no coordinator knows its producer"),
        ({"coordinator_state": "CompleteAbort"}, "its coordinator has it CompleteAbort"),
        (
            {"coordinator_epoch_of_producer": 4},
            "its coordinator is at producer epoch 4, the partition at 3",
        ),
        (
            {"coordinator_has_partition": False},
            "its coordinator does not count this partition in it",
        ),
        ({"started_ms": NOW - 200_000}, "open past its own 60 s timeout"),
    ],
)
def test_a_transaction_nothing_else_will_end_is_hanging(
    changes: dict[str, object], reason: str
) -> None:
    assert known(**changes).hanging(NOW) == reason


def test_a_transaction_its_producer_wrote_to_lately_is_never_hanging() -> None:
    """The partition is read before the coordinator: a transaction that committed, and
    the next that began, in between would look let go (and aborting it could abort the
    next one). Only a producer idle on the partition for a minute is judged."""
    lately = NOW - 5_000
    for changes in (
        {"coordinator_state": "CompleteCommit"},
        {"coordinator_epoch_of_producer": 4},
        {"coordinator_has_partition": False},
        {"transactional_id": None},
    ):
        assert known(**changes, last_write_ms=lately).hanging(NOW) is None
        assert known(**changes).hanging(NOW) is not None


def test_an_unknown_transaction_is_aged_from_its_last_write() -> None:
    txn = known(transactional_id=None, started_ms=None)
    assert txn.age_s(NOW) == 65.0
    assert txn.describe(NOW).startswith("producer 7 holds outbox.event.order-0")


def test_kafkas_internal_topics_are_not_watched() -> None:
    topics = ["__consumer_offsets", "b", "connect-offsets", "__transaction_state"]
    assert watched_topics(topics) == ["b", "connect-offsets"]


def test_a_slot_counts_as_still_only_at_one_position_with_wal_after_it() -> None:
    clock = FakeTime()
    watch = ProgressWatch(clock.clock)
    assert watch.observe(SlotPosition("s", "0/10", 100)) == 0.0
    clock.sleep(30)
    assert watch.observe(SlotPosition("s", "0/10", 150)) == 30.0
    clock.sleep(5)
    assert watch.observe(SlotPosition("s", "0/20", 150)) == 0.0  # it moved
    clock.sleep(40)
    assert watch.observe(SlotPosition("s", "0/20", 0)) == 0.0  # caught up: nothing waits
    clock.sleep(40)
    assert watch.observe(SlotPosition("s", "0/20", 10)) == 0.0  # WAL again: the clock restarts
    clock.sleep(1)
    assert watch.observe(SlotPosition("s", "0/20", 10)) == 1.0


def test_a_target_is_restarted_at_once_then_less_and_less_often() -> None:
    clock = FakeTime()
    backoff = RestartBackoff(clock.clock, first_s=30, max_s=100)
    assert backoff.allows("c-0")
    backoff.restarted("c-0")
    clock.sleep(29)
    assert not backoff.allows("c-0")
    assert backoff.allows("other-0")  # each target on its own clock
    clock.sleep(1)
    assert backoff.allows("c-0")
    backoff.restarted("c-0")  # next after 60 s
    clock.sleep(59)
    assert not backoff.allows("c-0")
    clock.sleep(1)
    backoff.restarted("c-0")  # 120 s, capped at 100
    clock.sleep(100)
    assert backoff.allows("c-0")


class FlakyHealer:
    """A healer whose rounds raise what a broken pipeline raises, then a refused login."""

    policy = HealPolicy()

    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors
        self.rounds = 0

    def round(self) -> list[tuple[HealAction, str]]:
        self.rounds += 1
        raise self.errors.pop(0)


def test_the_supervisor_outlives_a_broken_pipeline_and_exits_on_a_refused_login() -> None:
    """Issue 51: a broker that lost its metadata and a worker answering 404 while it
    starts ended the supervisor in the fault ledger's runs; only configuration does."""
    healer = FlakyHealer(
        [
            KafkaRequestError("describe producers: UnknownBrokerIdError: -1", kind="x"),
            ConnectError("Kafka Connect GET /connectors: HTTP 404", status=404),
            ServiceUnavailable("Kafka Connect is unreachable"),
            LoginRefused("PostgreSQL refused the login"),
        ]
    )
    with pytest.raises(LoginRefused):
        supervise(healer, 0.0, threading.Event(), HealMetrics())  # type: ignore[arg-type]
    assert healer.rounds == 4
