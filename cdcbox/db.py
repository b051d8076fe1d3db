"""Opening PostgreSQL connections; psycopg's connection errors become `ServiceUnavailable`."""

from __future__ import annotations

from typing import Any

import psycopg

from cdcbox.errors import ServiceUnavailable


def connect(dsn: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(dsn, autocommit=autocommit, application_name="cdcbox")
    except psycopg.OperationalError as e:
        host = dsn.split("@")[-1].split("?")[0]
        raise ServiceUnavailable(f"PostgreSQL at {host} is unreachable: {e}".strip()) from e
