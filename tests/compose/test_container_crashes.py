"""Containers of the compose stack SIGKILLed mid-stream, as a crash or the OOM killer
would, and brought back by their restart policy: a consumer service's container and the
Connect container. Each run is a row of the fault ledger: nothing lost, nothing applied
twice (Connect's restart may put copies on the topic; the inbox drops them)."""

from __future__ import annotations

import threading

import pytest

from cdcbox.stack.compose import ComposeStack
from cdcbox.stack.endpoints import Endpoints
from consumer.compose_demo import applied, await_first_hop, expected, new_run, place_orders
from tests.compose.fleet import container_id, notifications_ledger, restarted, sigkill
from tests.helpers import eventually

pytestmark = pytest.mark.compose

ORDERS_COUNT = 120
RATE = 30.0  # orders/s: the kill lands while orders are still being written


@pytest.mark.parametrize("service", ["notifications", "connect"])
def test_a_container_sigkilled_mid_stream_loses_and_doubles_nothing(
    containers: Endpoints, compose_stack: ComposeStack, service: str
) -> None:
    run = new_run()
    writer = threading.Thread(
        target=place_orders, args=(containers.dsn, run, ORDERS_COUNT, RATE), daemon=True
    )
    writer.start()
    eventually(
        lambda: applied(containers.dsn, run)["notifications"] > 0,
        timeout=120,
        what="the first orders of the run applied",
    )
    container = container_id(compose_stack.project, service)
    restarts = sigkill(container)
    writer.join(timeout=120)
    assert not writer.is_alive(), "the writers finished"
    eventually(
        lambda: restarted(container, restarts), timeout=180, what=f"{service} restarted healthy"
    )
    await_first_hop(containers.dsn, run, ORDERS_COUNT)
    ledger = notifications_ledger(
        f"{service} container SIGKILLed mid-stream (compose)",
        containers.dsn,
        containers.bootstrap_servers,
        run,
    )
    ledger.record()
    assert applied(containers.dsn, run) == expected(ORDERS_COUNT)
    assert ledger.exact, ledger
    assert (ledger.committed, ledger.applied) == (ORDERS_COUNT, ORDERS_COUNT), ledger
