"""The polling relay: the outbox published to Kafka without CDC, with the same wire
contract as the Debezium path, claimed with FOR UPDATE SKIP LOCKED under leases."""

from cdcbox.relay.config import RelayConfig
from cdcbox.relay.worker import RelayWorker

__all__ = ["RelayConfig", "RelayWorker"]
