"""cdcbox: the transactional outbox and inbox on PostgreSQL, Debezium and Kafka.

Producers append events in their own transaction (`cdcbox.outbox`), a relay (Debezium or the
polling relay) publishes them, and consumers apply each one exactly once (`cdcbox.consumer`).
"""

from cdcbox.errors import CdcboxError

__all__ = ["CdcboxError"]
__version__ = "0.1.0"
