"""The fault ledger with MariaDB consumers (issue 37): the writers, Debezium and Kafka of
test_ledger_cdc, and `cdc-ctl consume` processes whose inbox, versions and business
table (`fault_effect`, written by the same `LedgerHandler`) are in MariaDB. Each fault
must leave lost = 0 and effects exactly once; the safeguard-off row shows the same kill
applying events twice without the inbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.mariadb import NativeMariaDB
from tests.faults.conftest import NativeParts
from tests.faults.scenario import Scenario, assert_exact
from tests.faults.test_ledger_cdc import (
    kill_and_restart,
    kill_between_db_and_offset_commit,
    sigkill,
)
from tests.faults.test_ledger_database import outage_waits
from tests.helpers import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(420)]


@pytest.mark.parametrize("mode", ["per-record", "batch"])
def test_mariadb_consumers_sigkilled_repeatedly(
    stack: Endpoints, parts: NativeParts, mariadb_dsn: str, tmp_path: Path, mode: str
) -> None:
    flags = ("--batch",) if mode == "batch" else ()
    scenario = Scenario(
        f"MariaDB consumers SIGKILL x3 ({mode})",
        stack,
        tmp_path,
        flags=flags,
        consumer_dsn=mariadb_dsn,
    )
    assert_exact(scenario.run(kill_and_restart(3)), scenario)  # type: ignore[arg-type]


def test_mariadb_consumer_killed_between_the_database_commit_and_the_offset_commit(
    stack: Endpoints, parts: NativeParts, mariadb_dsn: str, tmp_path: Path
) -> None:
    scenario = Scenario(
        "MariaDB consumer killed after db commit, before offset commit",
        stack,
        tmp_path,
        consumer_dsn=mariadb_dsn,
    )
    assert_exact(scenario.run(kill_between_db_and_offset_commit), scenario)


def test_without_inbox_dedupe_on_mariadb_the_same_kill_applies_events_twice(
    stack: Endpoints, parts: NativeParts, mariadb_dsn: str, tmp_path: Path
) -> None:
    scenario = Scenario(
        "MariaDB consumer killed after db commit, before offset commit",
        stack,
        tmp_path,
        versioned=False,  # the inbox alone in play (see test_ledger_cdc)
        fault_switches="no-inbox-dedupe",
        safeguard_off="inbox dedupe",
        consumer_dsn=mariadb_dsn,
    )
    result = scenario.run(kill_between_db_and_offset_commit)
    assert result.double_effects > 0, result
    assert result.lost == 0


def test_mariadb_sigkilled_under_its_consumers(
    stack: Endpoints,
    parts: NativeParts,
    native_stack: StackConfig,
    mariadb_dsn: str,
    tmp_path: Path,
) -> None:
    """The consumers' MariaDB SIGKILLed mid-stream and started again (crash recovery):
    the consumers wait for it, charging no record, and resume where they were."""
    server = NativeMariaDB(native_stack)

    def fault(s: Scenario) -> None:
        sigkill(server)
        s.stream_on(300)
        server.start()
        applied = s.applied()
        eventually(lambda: s.applied() > applied, timeout=60, what="effects flowing again")
        assert len(s.group.running()) == s.consumers  # none exited
        assert max(outage_waits(s)) > 0  # they did meet the outage

    scenario = Scenario("MariaDB SIGKILL", stack, tmp_path, consumer_dsn=mariadb_dsn)
    assert_exact(scenario.run(fault), scenario)
