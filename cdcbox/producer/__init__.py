"""The producer side: append events to the outbox in the caller's own transaction.

`Outbox` (psycopg), `AsyncOutbox` (psycopg's `AsyncConnection`) and `UnitOfWork` (domain
events recorded on aggregates) never open or commit a transaction: the event is published
if and only if the business change it describes commits. The SQLAlchemy integration is
`cdcbox.producer.sqlalchemy` (the `sqlalchemy` extra), imported on its own.
"""

from cdcbox.producer.async_outbox import AsyncOutbox
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.producer.unit_of_work import AggregateRoot, UnitOfWork

__all__ = ["AggregateRoot", "AsyncOutbox", "NewEvent", "Outbox", "UnitOfWork"]
