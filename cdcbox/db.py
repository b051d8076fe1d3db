"""Opening PostgreSQL connections; psycopg's connection errors become `ServiceUnavailable`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import psycopg
from psycopg import pq
from psycopg.pq import TransactionStatus

from cdcbox.dsn import database_kind
from cdcbox.errors import ConfigError, DatabaseUnavailable, LoginRefused, SessionChanged
from cdcbox.session import Session


class PipelineAwareCursor(psycopg.Cursor[Any]):
    """psycopg's cursor, but `rowcount` and `statusmessage` are right in pipeline mode
    too: read before the statement's result arrived (where psycopg says -1 and None),
    they sync the pipeline first, as fetching a row does. So code written for a
    connection outside a pipeline (`if cur.rowcount == 0: ...`) keeps its meaning when
    cdcbox pipelines it; it only pays the round trip it reads."""

    def _await_result(self) -> None:
        conn = self.connection
        if self.pgresult is None and conn.pgconn.pipeline_status != pq.PipelineStatus.OFF:
            with conn.pipeline() as pipeline:  # nested: the pipeline already open
                pipeline.sync()

    @property
    def rowcount(self) -> int:
        self._await_result()
        return super().rowcount

    @property
    def statusmessage(self) -> str | None:
        self._await_result()
        return super().statusmessage


# How the consumer's steps get their connection: called each time, so a `Reconnecting`
# can hand out a fresh one after the database restarted.
ConnectionSource = Callable[[], Session]  # the consumer's session, reopened when broken


def connect(
    dsn: str, *, autocommit: bool = False, synchronous_commit: bool = True
) -> psycopg.Connection[Any]:
    """A connection, or `ConfigError` for a malformed DSN and `ServiceUnavailable` for a
    server that does not answer. `synchronous_commit=False` sets the session's COMMITs
    to return before their WAL is flushed (see `durability_barrier`)."""
    extra: dict[str, Any] = {}
    if not synchronous_commit:
        try:
            options = psycopg.conninfo.conninfo_to_dict(dsn).get("options") or ""
        except psycopg.ProgrammingError:
            options = ""  # malformed: psycopg.connect below names it
        extra["options"] = f"{options} -c synchronous_commit=off".strip()
    try:
        return psycopg.connect(
            dsn,
            autocommit=autocommit,
            application_name="cdcbox",
            cursor_factory=PipelineAwareCursor,
            **extra,
        )
    except psycopg.ProgrammingError as e:
        if database_kind(dsn) == "MariaDB":
            raise ConfigError(
                "a MariaDB DSN where PostgreSQL is needed: on MariaDB cdcbox runs "
                "`db migrate` and `relay run` (see the guide, Services on MariaDB)"
            ) from None
        # libpq quotes the token it could not parse, which may be the password (or a
        # misspelt password option's value): what it quotes is never shown.
        detail = _QUOTED.sub("(a token)", " ".join(str(e).split()))
        raise ConfigError(f"the PostgreSQL DSN is malformed: {detail}") from None
    except psycopg.OperationalError as e:
        detail = _without(" ".join(str(e).split()), dsn)  # libpq's message spans lines
        if _LOGIN_REFUSED.search(detail):
            raise LoginRefused(
                f"PostgreSQL at {describe_dsn(dsn)} refused the login: {detail} (check the "
                "user and password of the DSN)"
            ) from None
        raise DatabaseUnavailable(
            f"PostgreSQL at {describe_dsn(dsn)} is unreachable: {detail}".strip()
        ) from e


def check_login(dsn: str) -> None:
    """Log in once and leave: a refused login (`LoginRefused`) is raised, for a
    long-running command to exit on at start; a server that does not answer is left to
    the command, which waits it out."""
    try:
        connect(dsn).close()
    except DatabaseUnavailable:
        return


# What libpq says when the server refused the login (its connection errors carry no
# SQLSTATE): a wrong password, no pg_hba.conf entry, no such role, no password given.
_LOGIN_REFUSED = re.compile(
    r"authentication failed|no pg_hba\.conf entry|role \"[^\"]*\" does not exist|"
    r"no password supplied"
)

# SQLSTATEs of a session the server ended: admin_shutdown, crash_shutdown,
# cannot_connect_now. Class 08 is a lost or refused connection.
_SESSION_ENDED = {"57P01", "57P02", "57P03"}


def is_outage(error: BaseException) -> bool:
    """True when `error` says the database is unreachable or ended the session: the
    record in flight is not at fault, and waiting for the database is the remedy."""
    if isinstance(error, DatabaseUnavailable):
        return True
    if not isinstance(error, psycopg.OperationalError):
        return False
    if isinstance(error, psycopg.errors.PipelineAborted):
        # No SQLSTATE, yet the server answered: an earlier statement of the pipeline
        # failed (psycopg may raise this in its place: `statement_error`).
        return False
    state = error.sqlstate
    return state is None or state.startswith("08") or state in _SESSION_ENDED


def describe_dsn(dsn: str) -> str:
    """`user@host:port/dbname` of a DSN in either syntax: what locates the server, never
    its password (or any other option). Every message that names a database uses this."""
    try:
        parts = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "a malformed DSN"
    user = f"{parts['user']}@" if parts.get("user") else ""
    port = f":{parts['port']}" if parts.get("port") else ""
    dbname = f"/{parts['dbname']}" if parts.get("dbname") else ""
    return f"{user}{parts.get('host') or 'localhost'}{port}{dbname}"


_QUOTED = re.compile(r'"[^"]*"?')


def _without(message: str, dsn: str) -> str:
    """`message` with the DSN's password blanked, should a driver ever quote it."""
    try:
        password = psycopg.conninfo.conninfo_to_dict(dsn).get("password")
    except psycopg.ProgrammingError:
        password = None
    return message.replace(str(password), "***") if password else message


class Reconnecting:
    """One autocommit connection, reopened after it broke. Autocommit because every
    transaction of the consumer and the relay is an explicit `conn.transaction()` block;
    a long-running process must survive a database restart without being restarted."""

    def __init__(self, dsn: str, *, synchronous_commit: bool = True) -> None:
        self.dsn = dsn
        self.synchronous_commit = synchronous_commit
        self._conn: psycopg.Connection[Any] | None = None
        self._guarded = False

    def __call__(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            if self._guarded and self._conn is not None:
                raise SessionChanged(
                    "the database session ended with commits not yet flushed to WAL; "
                    "the work since the last durability barrier is done again"
                )
            self._conn = connect(
                self.dsn, autocommit=True, synchronous_commit=self.synchronous_commit
            )
        return self._conn

    def guard(self) -> None:
        """From now until `unguard`, refuse to replace the session: its asynchronous
        COMMITs are durable only once a barrier ran on it, and a barrier on another
        session would not cover them (the old one may have died with the server and
        its unflushed WAL). `SessionChanged` then tells the caller to redo its work."""
        self()
        self._guarded = True

    def unguard(self) -> None:
        self._guarded = False

    @property
    def guarded(self) -> bool:
        return self._guarded

    @property
    def alive(self) -> bool:
        """The session is open and usable (False also after it broke)."""
        return self._conn is not None and not self._conn.closed and not self._conn.broken

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@contextmanager
def pipelined_transaction(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """One transaction on an autocommit connection whose statements do not wait for one
    another: BEGIN travels with the first statement whose result is read, and COMMIT
    with the statements queued after it, so a block that reads one result and then only
    writes waits for the server twice however many statements it sends
    (tests/integration/test_pipelined_transaction.py counts the waits).

    Atomic like `conn.transaction()`: an error of a queued statement surfaces at the
    next result read or at COMMIT, and then (or on any exception of the block) the
    transaction is rolled back and the error raised. On connections from `connect`,
    reading `cursor.rowcount` waits for its statement (`PipelineAwareCursor`). Inside
    it, psycopg refuses `conn.commit()` as it does in any `conn.transaction()` block,
    and a `conn.transaction()` inside is a savepoint.

    psycopg's `Transaction` is entered directly: `conn.transaction()` inside a pipeline
    wraps it in nested pipelines that wait for BEGIN alone on entry and for the block's
    statements before COMMIT, five waits for the same block (psycopg 3.3)."""
    try:
        with conn.pipeline() as pipeline, psycopg.Transaction(conn):
            # A Sync queued after BEGIN, sent with the first statement and not waited
            # for: libpq learns the session is in a transaction only from the
            # ReadyForQuery a Sync brings back, and psycopg's `conn.transaction()` inside
            # decides between BEGIN and a savepoint by it (after a read that only
            # flushed, libpq would still say idle). Only psycopg's queue keeps it after
            # the BEGIN still waiting in that queue, hence its private method.
            pipeline._enqueue_sync()
            yield
    except BaseException as e:
        end_failed_pipeline(conn)
        raise_statement_error(e)


@contextmanager
def pipeline(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """`conn.pipeline()` inside the caller's transaction; leaving it waits for every queued
    result, so a failed statement raises at the latest there. A connection a failure left
    unusable (see `end_failed_pipeline`) is closed, for `Reconnecting` to replace."""
    try:
        with conn.pipeline():
            yield
    except BaseException as e:
        _close_if_unusable(conn)
        raise_statement_error(e)


def statement_error(error: BaseException) -> BaseException:
    """The failed statement's own error where psycopg raised `PipelineAborted` in its
    place. Leaving a pipeline, psycopg raises the first error among the results it has
    read, then reads the rest in a `finally`: when the commands after the failed one
    answer only then, their PipelineAborted replaces that error, which stays its
    `__context__` (psycopg 3.3)."""
    while isinstance(error, psycopg.errors.PipelineAborted) and isinstance(
        error.__context__, psycopg.Error
    ):
        error = error.__context__
    return error


def raise_statement_error(error: BaseException) -> NoReturn:
    """Raise `error`, or the statement error a PipelineAborted stands for."""
    own = statement_error(error)
    if own is error:
        raise error
    raise own from None


def end_failed_pipeline(conn: psycopg.Connection[Any]) -> None:
    """After a pipelined transaction failed: roll it back, or close the connection when
    it cannot be trusted. A session terminated while a pipeline awaited its results can
    leave libpq in pipeline mode on a connection psycopg does not call broken; every
    later statement would fail on it, so it is closed, and `Reconnecting` opens another
    (the server rolls back what was open)."""
    if conn.closed or _close_if_unusable(conn):
        return
    if conn.info.transaction_status != TransactionStatus.IDLE:
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            conn.close()


def _close_if_unusable(conn: psycopg.Connection[Any]) -> bool:
    """Close a connection a failed pipeline left broken or still in pipeline mode."""
    if not conn.closed and (conn.broken or conn.pgconn.pipeline_status != pq.PipelineStatus.OFF):
        conn.close()
        return True
    return False


def durability_barrier(conn: psycopg.Connection[Any]) -> None:
    """Return once every transaction this session committed so far is flushed to WAL.

    A session with `synchronous_commit=off` gets its COMMIT back before the WAL flush;
    a crash of PostgreSQL may then lose its last commits. This transaction writes WAL
    (a logical message, which needs no table, and which the connector spec's
    `message.prefix.exclude.list` keeps out of Kafka) and commits synchronously: its
    COMMIT waits for the WAL up to its own commit record, which holds every earlier
    commit. (A transaction that writes no WAL would commit without a flush.) Called
    before Kafka offsets are committed, a lost commit is always one whose records Kafka
    will deliver again."""
    with pipelined_transaction(conn):  # meant as one round trip (see above)
        conn.execute("SET LOCAL synchronous_commit = on")
        conn.execute(
            "SELECT pg_logical_emit_message(true, %s, 'durability barrier')", (HEARTBEAT_PREFIX,)
        )


# The prefix of the logical messages cdcbox writes only to move WAL (the connector's
# heartbeat, the barrier); connectors/outbox-postgres.yaml excludes it from Kafka.
HEARTBEAT_PREFIX = "cdcbox-heartbeat"
