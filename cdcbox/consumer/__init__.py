"""The consumer framework: subclass `Handler` (or `AsyncHandler`), give it to a
`Consumer`, call `run()`.

Each record goes decode → inbox → version guard → handler → commit → Kafka offset
(`cdcbox.consumer.pipeline`), so at-least-once delivery becomes an exactly-once effect.
"""

from cdcbox.consumer.async_handler import AsyncHandler
from cdcbox.consumer.config import ConsumerConfig, RetryPolicy
from cdcbox.consumer.handler import Handler
from cdcbox.consumer.runner import Consumer
from cdcbox.consumer.signals import RefuseTransition, RetryLater, SkipEvent
from cdcbox.consumer.stats import ConsumerStats, Outcome
from cdcbox.event import Event
from cdcbox.producer.outbox import NewEvent
from cdcbox.wire import ANY_EVENT_TYPE, WireFormat

__all__ = [
    "ANY_EVENT_TYPE",
    "AsyncHandler",
    "Consumer",
    "ConsumerConfig",
    "ConsumerStats",
    "Event",
    "Handler",
    "NewEvent",
    "Outcome",
    "RefuseTransition",
    "RetryLater",
    "RetryPolicy",
    "SkipEvent",
    "WireFormat",
]
