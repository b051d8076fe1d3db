"""Containers of the compose stack SIGKILLed mid-stream, as a crash or the OOM killer
would, and brought back by their restart policy: a consumer service's container and the
Connect container. Each run is a row of the fault ledger: nothing lost, nothing applied
twice, and with exactly-once source support on (the default) no duplicate on the topic
for a read_committed reader. The safeguard-off row runs the Connect worker without it:
the same crash then puts copies on the topic (the inbox still drops them)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from cdcbox.cli.main import cli
from cdcbox.resources import resource_dir
from cdcbox.stack.compose import ComposeStack
from cdcbox.stack.endpoints import Endpoints
from consumer.compose_demo import applied, await_first_hop, expected, new_run, place_orders
from tests.compose.fleet import container_id, notifications_ledger, restarted, sigkill
from tests.faults.ledger import Ledger
from tests.helpers import eventually

pytestmark = pytest.mark.compose

ORDERS_COUNT = 150
RATE = 50.0  # orders/s: the kill lands while orders are still being written


def crash_mid_stream(
    containers: Endpoints, project: str, service: str, scenario: str, safeguard_off: str = ""
) -> Ledger:
    """Orders streaming, `service`'s container SIGKILLed, back by its restart policy,
    every order through the first hop: the notifications service's ledger row. The kill
    lands while orders are still being written (asserted), with the pipeline already
    flowing: one order first, through to the notifications service (a Connect worker
    just recreated may start streaming only after a few seconds of writes, and a kill
    after the last of them finds everything sent, and its source offsets flushed)."""
    flowing = new_run()
    place_orders(containers.dsn, flowing, 1)
    eventually(
        lambda: applied(containers.dsn, flowing, containers.mariadb_dsn)["notifications"] > 0,
        timeout=180,
        what="an order through to the notifications service before the run",
    )
    run = new_run()
    writer = threading.Thread(
        target=place_orders, args=(containers.dsn, run, ORDERS_COUNT, RATE), daemon=True
    )
    writer.start()
    eventually(
        lambda: applied(containers.dsn, run, containers.mariadb_dsn)["notifications"] > 0,
        timeout=120,
        what="the first orders of the run applied",
    )
    container = container_id(project, service)
    restarts = sigkill(container)
    assert writer.is_alive(), "the kill landed after the last order was written"
    writer.join(timeout=120)
    assert not writer.is_alive(), "the writers finished"
    eventually(
        lambda: restarted(container, restarts), timeout=180, what=f"{service} restarted healthy"
    )
    await_first_hop(containers.dsn, run, ORDERS_COUNT, mariadb_dsn=containers.mariadb_dsn)
    ledger = notifications_ledger(scenario, containers.dsn, containers.bootstrap_servers, run)
    ledger = dataclasses.replace(ledger, safeguard_off=safeguard_off)
    ledger.record()
    assert applied(containers.dsn, run, containers.mariadb_dsn) == expected(ORDERS_COUNT)
    return ledger


@pytest.mark.parametrize("service", ["notifications", "connect"])
def test_a_container_sigkilled_mid_stream_loses_and_doubles_nothing(
    containers: Endpoints, compose_stack: ComposeStack, service: str
) -> None:
    ledger = crash_mid_stream(
        containers,
        compose_stack.project,
        service,
        f"{service} container SIGKILLed mid-stream (compose)",
    )
    assert ledger.exact, ledger
    assert (ledger.committed, ledger.applied) == (ORDERS_COUNT, ORDERS_COUNT), ledger
    assert ledger.duplicates == 0, "exactly-once source: no copy on the topic"


@pytest.fixture
def worker_without_exactly_once(compose_stack: ComposeStack) -> Iterator[str]:
    """The Connect container recreated without exactly-once source support (the stack
    config's `exactly_once`, as `stack up --exactly-once disabled` sets it) and the
    fleet's connectors applied to it (as `requested`: what `apply` prints is yielded);
    afterwards recreated with it and applied again."""

    def recreate_and_apply(stack: ComposeStack) -> str:
        up = stack.run_compose("up", "--detach", "--wait", "connect")
        assert up.returncode == 0, up.stderr[-2000:]
        applied = CliRunner().invoke(cli, ["apply", str(resource_dir("connectors") / "fleet")])
        assert applied.exit_code == 0, applied.output
        return applied.output

    without = dataclasses.replace(compose_stack.config, exactly_once="disabled")
    try:
        yield recreate_and_apply(ComposeStack(without, compose_stack.secrets))
    finally:
        recreate_and_apply(compose_stack)


def test_without_exactly_once_a_connect_crash_puts_copies_on_the_topic(
    containers: Endpoints, compose_stack: ComposeStack, worker_without_exactly_once: str
) -> None:
    assert "registering with exactly.once.support=requested" in worker_without_exactly_once
    doctor = CliRunner().invoke(cli, ["doctor", str(resource_dir("connectors") / "fleet")])
    assert "exactly.once.source.support=enabled" in doctor.output, doctor.output
    ledger = crash_mid_stream(
        containers,
        compose_stack.project,
        "connect",
        "connect container SIGKILLed mid-stream (compose)",
        safeguard_off="exactly-once source support",
    )
    # Still exact through the inbox; the copies are on the topic for every other reader.
    assert ledger.exact, ledger
    assert ledger.duplicates > 0, ledger
