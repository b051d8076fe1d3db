"""The one exception hierarchy of cdcbox, rooted in `CdcboxError`.

Real errors also subclass a builtin so callers that only know Python's exceptions still
catch them; control-flow signals for handlers live in `cdcbox.consumer.signals`.
"""

from __future__ import annotations


class CdcboxError(Exception):
    """Base of every error cdcbox raises on purpose."""


class ConfigError(CdcboxError, ValueError):
    """A setting, spec or argument is wrong; the message names it and the fix."""


class LoginRefused(ConfigError):
    """A server refused the login (a wrong user or password, no access to the database):
    a configuration error that waiting never fixes, so no long-running command retries
    it; the message is the driver's, without the password."""


class UsageError(CdcboxError, RuntimeError):
    """The library was called in a way its contract forbids (e.g. outside a transaction)."""


class StackError(CdcboxError, RuntimeError):
    """A stack component failed to install, start or stop; names the component and log."""


class ServiceUnavailable(CdcboxError, ConnectionError):
    """A service (PostgreSQL, Kafka, Kafka Connect) did not answer."""


class DatabaseUnavailable(ServiceUnavailable):
    """PostgreSQL refused or did not answer a new connection: an outage, waited out by
    the long-running processes, never charged to the record in flight."""


class DatabaseError(CdcboxError, RuntimeError):
    """A statement failed on a database reached through a driver other than psycopg
    (MariaDB): the driver's error is the cause. psycopg's errors are raised as they are."""


class SlotUnavailable(CdcboxError, RuntimeError):
    """The outbox without a table (messages mode) found its replication slot missing or
    invalidated: an event emitted then could never be published, so none was."""


class SessionChanged(CdcboxError, RuntimeError):
    """The consumer's database session ended while commits on it were not yet proven
    durable: the poll batch is processed again from its start."""


class ConnectError(CdcboxError, RuntimeError):
    """Kafka Connect refused a request; carries its HTTP status and message."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class SpecError(ConfigError):
    """A connector spec is invalid; refused before anything reaches Connect."""


class SchemaError(CdcboxError, ValueError):
    """A payload, schema or migration does not match what it must."""


class PoisonRecord(CdcboxError, ValueError):
    """A Kafka record cannot be decoded into an event; it goes to the dead-letter topic."""


class KafkaRequestError(CdcboxError, RuntimeError):
    """Kafka refused a request (too large, not authorised, …); `kind` names kafka-python's
    error class, so callers can tell a permanent refusal from a passing one."""

    def __init__(self, message: str, *, kind: str, retriable: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.retriable = retriable


class CommitRefused(KafkaRequestError):
    """The group rebalanced before an offset commit; the records will be redelivered."""


class EventsGone(CdcboxError, RuntimeError):
    """A group's position is no longer on the topic: retention (or a deletion) removed
    records it never read. Never skipped silently: the operator decides."""


class KafkaUnavailable(ServiceUnavailable):
    """No broker answered in time (retriable: connection, timeout, no leader)."""


class RegistryUnavailable(ServiceUnavailable):
    """The schema registry did not answer (refused, timed out, a 5xx): no record is at
    fault. A producer's append refuses before writing anything; a consumer waits."""
