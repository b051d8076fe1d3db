"""The project's own suite on cdcbox's pytest plugin (`cdcbox.testing`, the same one
users load): one session-scoped set of services, started as far as the selected tests
need. tests/unit need nothing; tests/integration only PostgreSQL (`database`);
tests/e2e and tests/faults the whole stack (`stack`). In CI (CI=true) a stack that
cannot start fails the tests loudly; nothing skips.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from cdcbox.connect.client import ConnectClient
from cdcbox.resources import resource_dir
from cdcbox.stack.compose import docker_engine_answers
from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import Endpoints
from cdcbox.testing import session_stack
from cdcbox.testing.session import external_stack
from tests.helpers import unavailable

if TYPE_CHECKING:
    from cdcbox.mariadb.session import MariaDbSession

ROOT = Path(__file__).resolve().parents[1]


LAYERS = ("unit", "integration", "e2e", "faults", "cluster", "compose")


def _layer(item: pytest.Item) -> str:
    """unit, integration, e2e or faults: the directory under tests/ the test lives in."""
    return Path(item.path).relative_to(ROOT / "tests").parts[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test carries the marker of its directory, so `-m unit` selects tests/unit."""
    for item in items:
        if _layer(item) in LAYERS:
            item.add_marker(_layer(item))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """In CI nothing may skip: a skipped test there is a failure that names itself."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if os.environ.get("CI") == "true" and report.skipped:
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which is not allowed: {report.longrepr}"


# tests/cluster start a second, 3-broker stack: run by `scripts/test --cluster` only.
# tests/compose run on a Docker engine of their own: `scripts/test` runs them after the
# rest, with CDCBOX_COMPOSE=1 and DOCKER_HOST naming that engine.
collect_ignore = [
    layer
    for layer, wanted in (("cluster", "CDCBOX_CLUSTER"), ("compose", "CDCBOX_COMPOSE"))
    if os.environ.get(wanted) != "1"
]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the native services the selected tests need before the first test runs, so
    no test's timeout includes a stack start (compose starts from its fixture)."""
    layers = {
        item.get_closest_marker(layer) and layer for item in session.items for layer in LAYERS
    }
    if external_stack() is not None or session.config.option.collectonly:
        return
    if docker_engine_answers():
        return  # compose starts from the first fixture that needs it
    stack = session_stack(session.config)
    if layers & {"e2e", "faults"}:
        stack.everything()
    elif "integration" in layers:
        stack.database()


@pytest.fixture(scope="session")
def database(cdcbox_database: str) -> str:
    """The DSN of a migrated PostgreSQL; tests/integration need nothing more."""
    return cdcbox_database


@pytest.fixture(scope="session")
def stack(cdcbox_stack: Endpoints) -> Endpoints:
    """Endpoints of the whole stack, migrated, with the connector RUNNING."""
    return cdcbox_stack


@pytest.fixture(scope="session")
def native_stack(pytestconfig: pytest.Config, stack: Endpoints) -> StackConfig:
    """The native stack's configuration, for fault tests that stop, pause or restart its
    processes by pid: the one this session started, or the one CDCBOX_STACK_DIR names."""
    session = session_stack(pytestconfig)
    if session.started_native:
        return session.config
    state_dir = os.environ.get("CDCBOX_STACK_DIR")
    if not state_dir:
        unavailable("fault tests need the native stack: set CDCBOX_STACK_DIR to its directory")
    return StackConfig(
        state_dir=Path(state_dir).resolve(),
        cache_dir=session.config.cache_dir,
        infra_dir=resource_dir("infra"),
        # A component a fault test restarts comes back as it was: with its metrics agent.
        with_metrics=bool(os.environ.get("CDCBOX_PROMETHEUS_URL")),
    )


@pytest.fixture
def db(database: str) -> Iterator[psycopg.Connection[Any]]:
    # autocommit: a bare query must not leave the connection inside an implicit
    # transaction that would turn the next `conn.transaction()` into a savepoint.
    with psycopg.connect(database, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="session")
def connect_client(stack: Endpoints) -> ConnectClient:
    return ConnectClient(stack.connect_url)


@pytest.fixture(scope="session")
def mariadb_dsn(cdcbox_mariadb: str) -> str:
    """The DSN of a migrated MariaDB database (the native stack's, or CDCBOX_MARIADB_DSN)."""
    return cdcbox_mariadb


@pytest.fixture
def mariadb(mariadb_dsn: str) -> Iterator[MariaDbSession]:
    """An autocommit `MariaDbSession` on that database, closed after the test."""
    from cdcbox.mariadb.session import open_session

    session = open_session(mariadb_dsn)
    yield session
    session.close()
