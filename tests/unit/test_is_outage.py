"""Which database errors the consumer waits out (no attempt charged to the record) and
which are the record's to retry or dead-letter."""

from __future__ import annotations

import psycopg
import pytest

from cdcbox.db import is_outage
from cdcbox.errors import DatabaseUnavailable


@pytest.mark.parametrize(
    "error",
    [
        DatabaseUnavailable("PostgreSQL at h:5432 is unreachable"),
        psycopg.OperationalError("connection failed"),  # no SQLSTATE: no server answered
        psycopg.errors.AdminShutdown("terminating connection"),
        psycopg.errors.ConnectionFailure("connection failure"),
    ],
)
def test_the_database_gone_is_an_outage(error: BaseException) -> None:
    assert is_outage(error)


@pytest.mark.parametrize(
    "error",
    [
        # Failed before: an OperationalError without a SQLSTATE, though it only says an
        # earlier statement of the pipeline failed (psycopg may raise it in place of
        # that statement's error when the error was read while COMMIT was being sent).
        psycopg.errors.PipelineAborted("pipeline aborted"),
        psycopg.errors.DivisionByZero("division by zero"),
        psycopg.errors.UniqueViolation("duplicate key"),
        RuntimeError("a handler's bug"),
    ],
)
def test_a_failed_statement_is_not_an_outage(error: BaseException) -> None:
    assert not is_outage(error)
