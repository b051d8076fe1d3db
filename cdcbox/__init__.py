"""cdcbox: the transactional outbox and inbox on PostgreSQL, Debezium and Kafka.

Producers append events in their own transaction (`cdcbox.outbox`), a relay (Debezium or the
polling relay) publishes them, and consumers apply each one exactly once (`cdcbox.consumer`).
"""

from importlib.metadata import version

from cdcbox.errors import CdcboxError

__all__ = ["CdcboxError"]
__version__ = version("cdcbox")  # one place: pyproject.toml
