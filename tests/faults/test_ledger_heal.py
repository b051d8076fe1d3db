"""The fault ledger's rows for a pipeline that reports RUNNING and publishes nothing
(issue 51), with the supervisor (`cdc-ctl connectors supervise`, the stack's default)
running beside the stack's Connect worker, and the safeguard-off row without it.

The stall is provoked, not waited for: a producer SIGKILLed inside a transaction on
Connect's offsets topic holds that topic's last stable offset back, and the exactly-once
task then waits for ever to read its offsets (as after a broker froze mid-transaction,
seen in CI). Without the supervisor nothing ends it before the transaction's own
timeout (10 minutes here), and the settle deadline counts the events lost."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from cdcbox.stack.endpoints import Endpoints
from tests.faults.conftest import NativeParts
from tests.faults.scenario import Scenario, assert_exact_on_the_topic
from tests.faults.test_ledger_cdc import BIG_TRANSACTION, killed_inside_a_big_transaction
from tests.supervision import abandoned_transaction, connect_offsets_topic, supervisor_running

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(420)]

# An offsets-topic key of a connector that does not exist: the record is never applied.
NOBODYS_OFFSET_KEY = json.dumps(["cdcbox-ledger", {"server": "nobody"}])
HELD = "a dead producer's transaction on Connect's offsets topic"


def holding(held: contextlib.ExitStack, stack: Endpoints) -> Callable[[Scenario], None]:
    """The fault: a transaction left open on Connect's offsets topic, kept in `held`."""
    topic = connect_offsets_topic(stack)

    def fault(s: Scenario) -> None:
        held.enter_context(abandoned_transaction(stack, topic, NOBODYS_OFFSET_KEY))

    return fault


def supervised(stack: Endpoints, tmp_path: Path) -> contextlib.AbstractContextManager[object]:
    """The supervisor as the stack starts it, every second instead of every 5 s."""
    return supervisor_running(stack, tmp_path / "supervisor.log", "--interval", "1")


def test_a_transaction_left_on_connects_offsets_is_healed_by_the_supervisor(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    with contextlib.ExitStack() as held, supervised(stack, tmp_path):
        scenario = Scenario(f"{HELD} (supervisor)", stack, tmp_path)
        result = scenario.run(holding(held, stack))
    assert_exact_on_the_topic(result, scenario)
    log = (tmp_path / "supervisor.log").read_text()
    assert "fence producer" in log and "connect-offsets-0" in log


def test_without_the_supervisor_the_same_transaction_stalls_the_pipeline(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    scenario = Scenario(HELD, stack, tmp_path, safeguard_off="supervisor", settle_timeout_s=30)
    with contextlib.ExitStack() as held:  # fenced at exit: later tests run unhindered
        result = scenario.run(holding(held, stack))
    assert result.lost > 0, result


def test_the_broker_frozen_10_s_under_cdc_with_the_supervisor(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    """No connector stopped around it, unlike the relay's freeze tests: a transaction
    the exactly-once task had open may be left hanging on the offsets topic, which the
    supervisor ends."""
    kafka = parts.kafka.pid_record()
    assert kafka is not None and kafka.alive()

    def fault(s: Scenario) -> None:
        os.kill(kafka.pid, signal.SIGSTOP)
        try:
            s.stream_on(1500)  # ~10 s of writes while the broker answers nothing
        finally:
            os.kill(kafka.pid, signal.SIGCONT)

    with supervised(stack, tmp_path):
        scenario = Scenario("broker frozen 10 s under CDC (supervisor)", stack, tmp_path)
        result = scenario.run(fault)
    assert_exact_on_the_topic(result, scenario)


def test_connect_sigkilled_inside_a_20000_row_transaction_with_the_supervisor(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    published_when_killed: list[int] = []
    fault = killed_inside_a_big_transaction(stack, parts, parts.connect, published_when_killed)
    with supervised(stack, tmp_path):
        scenario = Scenario(
            "connect SIGKILL inside a 20,000-row transaction (supervisor)", stack, tmp_path
        )
        result = scenario.run(fault)
    assert published_when_killed[0] < BIG_TRANSACTION
    assert_exact_on_the_topic(result, scenario)
