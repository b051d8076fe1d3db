"""What the compose suite adds to consumer.compose_demo: a fault-ledger row for the
notifications service, and containers found, SIGKILLed and watched come back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from typing import Any

import psycopg

from cdcbox import wire
from consumer.fleet import FLEET, ORDERS
from tests.faults.ledger import Ledger, delivered_ids


def notifications_ledger(scenario: str, admin_dsn: str, bootstrap_servers: str, run: str) -> Ledger:
    """The run's OrderCreated events against the notifications service's effects (its
    table has no unique key: an event applied twice is two rows), and the copies of them
    on the order topic."""
    like = (run + "-%",)
    with psycopg.connect(ORDERS.dsn(admin_dsn)) as conn:
        committed = {
            str(r[0])
            for r in conn.execute(
                "SELECT event_id FROM outbox_event WHERE event_type = 'OrderCreated' "
                "AND aggregate_id LIKE %s",
                like,
            ).fetchall()
        }
    on_topic = delivered_ids(bootstrap_servers, wire.topic_for("order"))
    delivered = [event_id for event_id in on_topic if event_id in committed]
    with psycopg.connect(FLEET[4].dsn(admin_dsn)) as conn:
        effects = [
            r[0]
            for r in conn.execute(
                "SELECT order_id FROM notification_outgoing WHERE order_id LIKE %s", like
            ).fetchall()
        ]
    distinct = set(effects)
    return Ledger(
        scenario=scenario,
        committed=len(committed),
        delivered=len(delivered),
        duplicates=len(delivered) - len(set(delivered)),
        applied=len(distinct),
        double_effects=len(effects) - len(distinct),
        lost=len(committed) - len(distinct),
        order_violations=0,  # one event per order: no per-aggregate order to hold
        rolled_back_seen=0,
    )


def container_id(project: str, service: str) -> str:
    out = subprocess.run(
        ["docker", "ps", "-q", "--filter", f"label=com.docker.compose.project={project}",
         "--filter", f"label=com.docker.compose.service={service}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert len(out) == 1, f"one running {service} container expected, found {out}"
    return out[0]


def inspect(container: str) -> dict[str, Any]:
    """`docker inspect` of one container."""
    out = subprocess.run(
        ["docker", "inspect", container], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, Any] = json.loads(out)[0]
    return found


def sigkill(container: str) -> int:
    """SIGKILL the container's main process by its pid, as a crash or the kernel's OOM
    killer would: unlike `docker kill`, the container's restart policy then applies.
    Returns the container's restart count before the kill."""
    before = inspect(container)
    os.kill(int(before["State"]["Pid"]), signal.SIGKILL)
    return int(before["RestartCount"])


def restarted(container: str, restarts_before: int) -> bool:
    """The container came back (its restart policy) and reports healthy."""
    now = inspect(container)
    health = now["State"].get("Health", {}).get("Status")
    return int(now["RestartCount"]) > restarts_before and health == "healthy"
