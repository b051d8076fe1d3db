"""Debezium's source offsets through Kafka Connect's offsets API (KIP-875).

Altering offsets requires the connector to be STOPPED; `change_offsets` stops it, applies
the change, and resumes it, returning the offsets before and after.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from cdcbox.connect import ConnectClient
from cdcbox.errors import ConnectError


def wait_state(client: ConnectClient, name: str, state: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = client.status(name)
        if status and status["connector"]["state"] == state:
            return
        time.sleep(0.3)
    raise ConnectError(f"connector {name!r} did not reach {state} within {timeout_s:.0f}s")


def lsn_offsets(client: ConnectClient, name: str, lsn: int) -> dict[str, Any]:
    """The offsets body that points a Debezium PostgreSQL connector at `lsn`."""
    current = client.offsets(name).get("offsets", [])
    if not current:
        config = client.config(name) or {}
        partition = {"server": config.get("topic.prefix", name)}
    else:
        partition = current[0]["partition"]
    return {
        "offsets": [
            {"partition": partition, "offset": {"lsn": lsn, "lsn_proc": lsn, "lsn_commit": lsn}}
        ]
    }


def change_offsets(
    client: ConnectClient, name: str, change: Callable[[], None]
) -> tuple[dict[str, Any], dict[str, Any]]:
    before = client.offsets(name)
    client.stop(name)
    wait_state(client, name, "STOPPED")
    try:
        change()
        after = client.offsets(name)
    finally:
        client.resume(name)
    return before, after
