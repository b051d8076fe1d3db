"""Debezium's source offsets through Kafka Connect's offsets API (KIP-875).

Altering offsets requires the connector to be STOPPED; `change_offsets` stops it, applies
the change, and resumes it, returning the offsets before and after.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from cdcbox.connect.client import ConnectClient
from cdcbox.errors import UsageError


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
    client: ConnectClient, name: str, change: Callable[[], None], timeout_s: float = 60
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Stop the connector, apply `change`, resume it (even when `change` failed). The
    offsets after are read until they differ from those before (Connect may answer the
    GET before the PATCH is visible), for at most `timeout_s`."""
    before = client.offsets(name)
    client.stop(name)
    client.wait_until(name, "STOPPED", timeout_s)
    try:
        change()
        deadline = time.monotonic() + timeout_s
        after = client.offsets(name)
        while after == before and time.monotonic() < deadline:
            time.sleep(0.2)
            after = client.offsets(name)
    finally:
        client.resume(name)
    return before, after


def read_position(client: ConnectClient, name: str) -> datetime:
    """When (UTC, naive) the last change the connector committed an offset for was
    committed in PostgreSQL: every outbox row committed before it has been read.

    Raises `UsageError` when the connector has no committed offset yet, since then
    nothing is known to be read."""
    found = client.offsets(name).get("offsets", [])
    ts = found[0]["offset"].get("ts_usec") if found else None
    if ts is None:
        raise UsageError(
            f"connector {name!r} has no committed offsets yet: nothing is known to be read"
        )
    return datetime.fromtimestamp(int(ts) / 1e6, UTC).replace(tzinfo=None)


def delete_forgetting_offsets(client: ConnectClient, name: str, timeout_s: float = 60) -> None:
    """Delete connector `name` and its offsets (stopped first: Connect resets offsets
    only of a STOPPED connector). Connect keeps a deleted connector's offsets, and a
    connector created later under the same name resumes from them: once its slot was
    dropped and made anew, Debezium refuses to start ("no longer available on the
    server"). Forgetting them lets it start from its new slot."""
    client.stop(name)
    client.wait_until(name, "STOPPED", timeout_s)
    client.reset_offsets(name)
    client.delete(name)
