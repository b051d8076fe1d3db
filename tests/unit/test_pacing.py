"""`Pace`: a bulk job held to a rate waits exactly as long as it is ahead of it."""

from __future__ import annotations

import pytest

from cdcbox.errors import UsageError
from cdcbox.ops.pacing import Pace
from tests.helpers import FakeTime


def test_work_ahead_of_the_rate_waits_until_it_is_not() -> None:
    time = FakeTime()
    pace = Pace(1000, clock=time.clock, sleep=time.sleep)
    pace.start()
    time.now += 0.5  # 2,000 rows in 0.5 s: 1.5 s ahead of 1,000 per second
    pace.done(2000)
    assert time.waits == [pytest.approx(1.5)]
    time.now += 3.0  # 1,000 more in 3 s: behind the rate, so no wait
    pace.done(3000)
    assert len(time.waits) == 1


def test_the_rate_is_an_average_since_the_start_not_per_piece() -> None:
    time = FakeTime()
    pace = Pace(100, clock=time.clock, sleep=time.sleep)
    pace.start()
    for done in range(50, 501, 50):  # instantaneous pieces of 50
        pace.done(done)
    assert time.now - 100.0 == pytest.approx(5.0)  # 500 rows at 100 per second


def test_no_rate_never_waits() -> None:
    time = FakeTime()
    pace = Pace(None, clock=time.clock, sleep=time.sleep)
    pace.start()
    pace.done(10**9)
    assert time.waits == []


@pytest.mark.parametrize("rate", [0, -5])
def test_a_rate_that_is_not_positive_is_refused(rate: float) -> None:
    with pytest.raises(UsageError, match="not positive"):
        Pace(rate)
