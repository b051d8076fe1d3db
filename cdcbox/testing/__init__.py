"""cdcbox's pytest plugin, for your own test suite (and cdcbox's).

Registered as the `pytest11` entry point `cdcbox.testing`, so it loads wherever cdcbox
is installed; it does nothing until a test asks for one of its fixtures (disable it
with `-p no:cdcbox.testing`). Fixtures:

- `cdcbox_stack` (session): the whole stack's `Endpoints` — the stack the `CDCBOX_*`
  variables name, else docker compose when a Docker engine answers, else the native
  stack, started for the session and stopped after it; migrated, connector applied.
- `cdcbox_database` (session): the DSN of a migrated PostgreSQL, starting only
  PostgreSQL when nothing else is needed.
- `cdcbox_mariadb` (session): the DSN of a migrated MariaDB database (`CDCBOX_MARIADB_DSN`,
  else the native stack's MariaDB, started for the session; the `mariadb` extra).
- `cdcbox_schema`: a schema of its own for one test, migrated (`DbNames`), dropped after.
- `cdcbox_aggregate_type`: an aggregate type (and so a topic) no other test uses.
- `cdcbox_harness`: builds a `Harness` that feeds events to your handlers through the
  real consumer pipeline against the session's PostgreSQL, with no Kafka.

Helpers: `eventually`, `wait_applied` (an event applied by a handler), `read_topic`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox.consumer.handler import BaseHandler
from cdcbox.names import DEFAULT_PUBLICATION, DbNames
from cdcbox.stack.endpoints import Endpoints
from cdcbox.testing.harness import Harness, MemoryTopics, Record
from cdcbox.testing.schemas import migrated_schema
from cdcbox.testing.session import SessionStack
from cdcbox.testing.waits import eventually, read_topic, wait_applied

__all__ = [
    "Harness",
    "MemoryTopics",
    "Record",
    "SessionStack",
    "eventually",
    "migrated_schema",
    "read_topic",
    "wait_applied",
]

_SESSION_KEY = pytest.StashKey[SessionStack]()


def session_stack(config: pytest.Config) -> SessionStack:
    """The session's `SessionStack` (one per pytest run, stopped when it ends)."""
    if _SESSION_KEY not in config.stash:
        config.stash[_SESSION_KEY] = SessionStack(config.rootpath)
    return config.stash[_SESSION_KEY]


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION_KEY in config.stash:
        config.stash[_SESSION_KEY].stop()


@pytest.fixture(scope="session")
def cdcbox_stack(pytestconfig: pytest.Config) -> Endpoints:
    return session_stack(pytestconfig).everything()


@pytest.fixture(scope="session")
def cdcbox_database(pytestconfig: pytest.Config) -> str:
    return session_stack(pytestconfig).database()


@pytest.fixture(scope="session")
def cdcbox_mariadb(pytestconfig: pytest.Config) -> str:
    """The DSN of a migrated MariaDB database (needs the `mariadb` extra)."""
    return session_stack(pytestconfig).mariadb()


@pytest.fixture
def cdcbox_schema(cdcbox_database: str) -> Iterator[DbNames]:
    names = migrated_schema(cdcbox_database, DbNames(schema=f"t_{uuid.uuid4().hex[:12]}"), "cdc")
    yield names
    with psycopg.connect(cdcbox_database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(names.schema)))
        if names.publication != DEFAULT_PUBLICATION:  # never the shared one
            conn.execute(
                sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(names.publication))
            )


@pytest.fixture
def cdcbox_aggregate_type() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def cdcbox_harness(
    cdcbox_database: str, cdcbox_schema: DbNames
) -> Iterator[Callable[..., Harness]]:
    """`cdcbox_harness(handlers, batch_mode=False, **ConsumerConfig options)`: a
    `Harness` over a schema of its own, closed after the test."""
    made: list[Harness] = []

    def make(handlers: list[BaseHandler], **options: Any) -> Harness:
        harness = Harness(cdcbox_database, handlers, names=cdcbox_schema, **options)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.close()
