"""The fault ledger on the production shape: three brokers (RF 3, min.insync.replicas 2)
and two Connect workers. Any one broker killed, the worker running the Debezium task
killed, every broker restarted in turn, exactly-once source turned on worker by worker:
lost = 0, effects once, order held, and no copy on the topic (exactly-once source). The
ledger's max_stall_s column shows how long effects stopped (leader election, task
failover)."""

from __future__ import annotations

import dataclasses
import os
import signal
from functools import partial
from pathlib import Path

import pytest

from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import ConnectorSpec, apply, load_specs
from cdcbox.resources import resource_dir
from cdcbox.stack.config import ExactlyOnce, StackConfig
from cdcbox.stack.connect_worker import NativeConnect
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.jars import resolve_jars
from cdcbox.stack.kafka import NativeKafka
from tests.faults.scenario import Scenario, assert_exact_on_the_topic
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
    assert_exact_on_the_topic(scenario.run(fault), scenario)


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
    assert_exact_on_the_topic(result, scenario)


def test_a_rolling_restart_of_every_broker(
    cluster: tuple[StackConfig, Endpoints], tmp_path: Path
) -> None:
    config, stack = cluster

    def fault(s: Scenario) -> None:
        for node in nodes(config):
            node.stop()  # SIGTERM: a controlled shutdown moves leadership away first
            node.start()

    scenario = Scenario("cluster: rolling restart of 3 brokers", stack, tmp_path)
    assert_exact_on_the_topic(scenario.run(fault), scenario)


def _spec(stack: Endpoints) -> ConnectorSpec:
    (spec,) = load_specs(resource_dir("connectors"), env={**os.environ, **stack.as_env()})
    return spec


def roll(config: StackConfig, setting: ExactlyOnce) -> None:
    """Every worker restarted in turn (SIGTERM, then started) with
    exactly.once.source.support=`setting`, the next only once the task runs again (as
    the restarted worker reports it)."""
    for worker in workers(dataclasses.replace(config, exactly_once=setting)):
        worker.stop()
        worker.start()
        eventually(
            partial(task_worker, ConnectClient(worker.url)),
            timeout=120,
            interval=1.0,
            what="task RUNNING",
        )


def test_exactly_once_turned_on_worker_by_worker(
    cluster: tuple[StackConfig, Endpoints], tmp_path: Path
) -> None:
    """Kafka's procedure for a running cluster (KIP-618): every worker to `preparing`, one
    at a time, then every worker to `enabled`, one at a time, then the connector asks
    for `required`; events stream throughout."""
    config, stack = cluster
    client = ConnectClient(stack.connect_url)
    spec = _spec(stack)
    roll(config, "disabled")  # the starting point: a cluster without it
    said: list[str] = []
    apply(client, spec, progress=said.append)
    assert (client.config(CONNECTOR) or {})["exactly.once.support"] == "requested"
    assert any("registering with exactly.once.support=requested" in line for line in said)

    def fault(s: Scenario) -> None:
        roll(config, "preparing")
        roll(config, "enabled")
        apply(client, spec)

    scenario = Scenario("cluster: exactly-once turned on worker by worker", stack, tmp_path)
    result = scenario.run(fault)
    assert (client.config(CONNECTOR) or {})["exactly.once.support"] == "required"
    assert_exact_on_the_topic(result, scenario)
