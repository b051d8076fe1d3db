"""The fault ledger on the production shape: three brokers (RF 3, min.insync.replicas 2)
and two Connect workers. Any one broker killed, the worker running the Debezium task
killed, every broker restarted in turn: lost = 0, effects once, order held. The ledger's
max_stall_s column shows how long effects stopped (leader election, task failover)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from cdcbox.connect.client import ConnectClient
from cdcbox.stack.config import StackConfig
from cdcbox.stack.connect_worker import NativeConnect
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.jars import resolve_jars
from cdcbox.stack.kafka import NativeKafka
from tests.faults.scenario import Scenario, assert_exact
from tests.helpers import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(480)]
CONNECTOR = "cdcbox-outbox"


def nodes(config: StackConfig) -> list[NativeKafka]:
    layout = resolve_jars(config)
    return [NativeKafka(config, layout, n) for n in range(config.brokers)]


def workers(config: StackConfig) -> list[NativeConnect]:
    layout = resolve_jars(config)
    return [
        NativeConnect(config, layout, config.bootstrap_servers, w)
        for w in range(config.connect_workers)
    ]


def task_worker(client: ConnectClient) -> str | None:
    """host:port of the worker running the connector's task, while it is RUNNING."""
    status = client.status(CONNECTOR) or {}
    tasks = status.get("tasks", [])
    if [t["state"] for t in tasks] == ["RUNNING"]:
        return str(tasks[0]["worker_id"])
    return None


def sigkill(component: NativeKafka | NativeConnect) -> None:
    record = component.pid_record()
    assert record is not None and record.alive(), f"{component.name} is not running"
    os.kill(record.pid, signal.SIGKILL)
    eventually(lambda: not record.alive(), timeout=30, what=f"{component.name} killed")


def test_any_one_broker_sigkilled_mid_stream(
    cluster: tuple[StackConfig, Endpoints], tmp_path: Path
) -> None:
    config, stack = cluster
    victim = nodes(config)[1]

    def fault(s: Scenario) -> None:
        sigkill(victim)
        s.stream_on(1500)  # ~10 s on two brokers of three: min.insync.replicas still met
        victim.start()

    scenario = Scenario("cluster: one of 3 brokers SIGKILL", stack, tmp_path)
    assert_exact(scenario.run(fault), scenario)


def test_the_worker_running_the_debezium_task_sigkilled(
    cluster: tuple[StackConfig, Endpoints], tmp_path: Path
) -> None:
    config, stack = cluster
    client = ConnectClient(stack.connect_url)
    moved_to: list[str] = []

    def fault(s: Scenario) -> None:
        running_on: str = eventually(lambda: task_worker(client), timeout=60, what="task RUNNING")
        both = workers(config)
        (victim,) = [w for w in both if w.url.endswith(":" + running_on.split(":")[-1])]
        (survivor,) = [w for w in both if w is not victim]
        sigkill(victim)
        survivor_client = ConnectClient(survivor.url)
        moved_to.append(
            eventually(
                lambda: task_worker(survivor_client),
                timeout=120,
                interval=1.0,
                what="the task running on the other worker",
            )
        )
        victim.start()

    scenario = Scenario("cluster: the task's Connect worker SIGKILL", stack, tmp_path)
    result = scenario.run(fault)
    assert moved_to and moved_to[0] != ""  # it resumed elsewhere from the committed offset
    assert_exact(result, scenario)


def test_a_rolling_restart_of_every_broker(
    cluster: tuple[StackConfig, Endpoints], tmp_path: Path
) -> None:
    config, stack = cluster

    def fault(s: Scenario) -> None:
        for node in nodes(config):
            node.stop()  # SIGTERM: a controlled shutdown moves leadership away first
            node.start()

    scenario = Scenario("cluster: rolling restart of 3 brokers", stack, tmp_path)
    assert_exact(scenario.run(fault), scenario)
