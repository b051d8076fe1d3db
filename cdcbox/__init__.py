"""cdcbox: the transactional outbox and inbox on PostgreSQL, Debezium and Kafka.

Producers append events in their own transaction (`Outbox`, `UnitOfWork`), a relay
(Debezium or the polling relay, `cdcbox.relay`) publishes them, and consumers apply each
one exactly once (`Handler` subclasses run by a `Consumer`)::

    from cdcbox import Consumer, ConsumerConfig, Event, Handler, NewEvent, Outbox

The names below are the API users write; everything else is imported from its module.
The consumer's names load on first use, so a producer-only install (psycopg alone)
imports none of Kafka, Avro or the CLI.

The package is layered, and imports run one way only (tests/unit/test_layering.py):
this face re-exports; `cli`, `testing`; services (`consumer`, `relay`, `ops`, `observe`,
`stack`); adapters and stores (`producer`, `stores`, `kafka`, `connect`, `telemetry`,
`mariadb`);
the shared core at the top of the package (`errors`, `wire`, `event`, ...).
"""

from __future__ import annotations

import importlib
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from cdcbox.errors import CdcboxError
from cdcbox.event import Event
from cdcbox.producer import NewEvent, Outbox, UnitOfWork
from cdcbox.session import AsyncSession, Session
from cdcbox.wire import WireFormat

if TYPE_CHECKING:
    from cdcbox.consumer import (
        AsyncHandler,
        Consumer,
        ConsumerConfig,
        Handler,
        Outcome,
        RefuseTransition,
        RetryLater,
        SkipEvent,
    )

__all__ = [
    "AsyncHandler",
    "AsyncSession",
    "CdcboxError",
    "Consumer",
    "ConsumerConfig",
    "Event",
    "Handler",
    "NewEvent",
    "Outbox",
    "Outcome",
    "RefuseTransition",
    "RetryLater",
    "Session",
    "SkipEvent",
    "UnitOfWork",
    "WireFormat",
]
__version__ = version("cdcbox")  # one place: pyproject.toml

# Names that need the `consumer` extra (kafka-python, fastavro): imported on first use.
_CONSUMER_NAMES = frozenset(
    {
        "AsyncHandler",
        "Consumer",
        "ConsumerConfig",
        "Handler",
        "Outcome",
        "RefuseTransition",
        "RetryLater",
        "SkipEvent",
    }
)


def __getattr__(name: str) -> Any:
    if name in _CONSUMER_NAMES:
        return getattr(importlib.import_module("cdcbox.consumer"), name)
    raise AttributeError(f"module 'cdcbox' has no attribute {name!r}")
