"""Kafka Connect: the REST client (`client`), the connector specs in `connectors/`
(`connectors`), Debezium's stored source offsets (`offsets`) and a read-only look at the
WAL a slot still holds (`wal_peek`).
"""

from cdcbox.connect.client import ConnectClient

__all__ = ["ConnectClient"]
