"""Kafka Connect: the REST client (`client`), the connector specs in `connectors/`
(`connectors`), Debezium's stored source offsets (`offsets`) and a read-only look at the
WAL a slot still holds (`wal_peek`).
"""

from typing import Any

from cdcbox.connect.client import ConnectClient

__all__ = ["ConnectClient"]


def __getattr__(name: str) -> Any:
    # `cdcbox.connect` was the REST client's module: its other names, deprecated here.
    from cdcbox import warn_moved
    from cdcbox.connect import client

    if name.startswith("_") or not hasattr(client, name):
        raise AttributeError(f"module 'cdcbox.connect' has no attribute {name!r}")
    warn_moved(f"cdcbox.connect.{name}", f"cdcbox.connect.client.{name}")
    return getattr(client, name)
