"""The fault ledger over a chain of two services (order → inventory → order), crossing
the WAL, Debezium and Kafka twice: inventory's handler applies each order event and
answers it from its own outbox in the same transaction; a second consumer applies the
answers. Under SIGKILLs of inventory's consumers (one of them between the database
commit and the offset commit) and of Kafka Connect, both hops are exact: no effect lost
or doubled, no answer emitted twice. With inventory's inbox dedupe switched off, the
same kill makes inventory answer a redelivered order again — under a new event id, so
the second hop applies it twice, which no inbox downstream can prevent."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdcbox.stack.endpoints import Endpoints
from tests.faults.conftest import NativeParts
from tests.faults.scenario import TwoHopScenario, assert_exact
from tests.faults.test_ledger_cdc import (
    kill_and_restart,
    kill_between_db_and_offset_commit,
    killed_and_restarted,
)

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(480)]
NAME = "two hops, order → inventory → order"


def assert_both_hops_exact(scenario: TwoHopScenario, first: object) -> None:
    assert_exact(first, scenario)  # type: ignore[arg-type]
    chain = scenario.chain
    assert chain is not None
    assert chain.exact, f"{chain}\n{scenario.second.logs()}"
    assert chain.committed == first.committed  # type: ignore[attr-defined]


def test_inventory_consumers_sigkilled_repeatedly(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    scenario = TwoHopScenario(f"{NAME}: inventory consumers SIGKILL x3", stack, tmp_path)
    assert_both_hops_exact(scenario, scenario.run(kill_and_restart(3)))  # type: ignore[arg-type]


def test_inventory_killed_between_its_database_commit_and_its_offset_commit(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    scenario = TwoHopScenario(
        f"{NAME}: inventory killed after db commit, before offset commit", stack, tmp_path
    )
    assert_both_hops_exact(scenario, scenario.run(kill_between_db_and_offset_commit))


def test_kafka_connect_sigkilled_under_the_chain(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    scenario = TwoHopScenario(f"{NAME}: connect SIGKILL", stack, tmp_path)
    fault = killed_and_restarted(parts.connect, parts.client)
    assert_both_hops_exact(scenario, scenario.run(fault))


def test_without_inventorys_inbox_dedupe_the_second_hop_applies_answers_twice(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    # Unversioned: the version guard would otherwise drop the redelivered orders at
    # hop 1, and the inbox must be the only safeguard in play.
    scenario = TwoHopScenario(
        f"{NAME}: inventory killed after db commit, before offset commit",
        stack,
        tmp_path,
        versioned=False,
        fault_switches="no-inbox-dedupe",
        safeguard_off="inventory's inbox dedupe",
    )
    first = scenario.run(kill_between_db_and_offset_commit)
    chain = scenario.chain
    assert chain is not None
    assert first.double_effects > 0, first
    assert chain.double_effects > 0, chain  # answered twice, applied twice downstream
    assert (first.lost, chain.lost) == (0, 0)
