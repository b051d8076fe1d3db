"""Group churn: members join and leave while events stream, so partitions move between
live processes mid-batch (kafka-python 3 finishes each join on its IO thread, possibly
while a batch is being applied). Async handlers in batch mode: the handler's
AsyncConnection shares the record's session, which nothing else may then touch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cdcbox.stack.endpoints import Endpoints
from tests.faults.scenario import Scenario, assert_exact


def members_joining_and_leaving(times: int) -> Callable[[Scenario], None]:
    def fault(s: Scenario) -> None:
        for _ in range(times):
            s.group.start(1)  # a third member: every partition is reassigned
            s.stream_on(300)
            s.group.stop_one()  # it leaves cleanly: reassigned again
            s.stream_on(300)

    return fault


def test_members_joining_and_leaving_with_async_handlers_in_batch_mode(
    stack: Endpoints, tmp_path: Path
) -> None:
    scenario = Scenario(
        "members joining and leaving x4 (async handlers, batch)",
        stack,
        tmp_path,
        flags=("--batch",),
        handler="tests.faults.handlers:AsyncLedgerHandler",
    )
    assert_exact(scenario.run(members_joining_and_leaving(4)), scenario)
