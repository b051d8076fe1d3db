"""One session-scoped set of services, started as far as the selected tests need.

tests/unit need nothing; tests/integration only PostgreSQL (`database`); tests/e2e and
tests/faults the whole stack (`stack`). Order of preference: a stack named by
environment variables (`cdc-ctl stack env`), docker compose through pytest-docker when
a Docker engine answers, else the native stack started here. In CI (CI=true) a stack
that cannot start fails the tests loudly; nothing skips.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cdcbox.connect import ConnectClient
from cdcbox.connectors import apply, load_specs
from cdcbox.errors import CdcboxError
from cdcbox.migrate import migrate
from cdcbox.resources import resource_dir
from cdcbox.stack import runner
from cdcbox.stack.compose import ComposeStack, docker_engine_answers
from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import ENV_NAMES, Endpoints
from cdcbox.stack.secrets import StackSecrets, read_password_properties

ROOT = Path(__file__).resolve().parents[1]


LAYERS = ("unit", "integration", "e2e", "faults", "cluster")


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


def _external() -> Endpoints | None:
    if all(os.environ.get(name) for name in ENV_NAMES.values()):
        return Endpoints.from_env(dict(os.environ))
    return None


class SessionStack:
    """The services this test session runs against: a stack named by the environment,
    or started here as the tests need it (PostgreSQL alone for tests/integration, all
    of it for tests/e2e and tests/faults); what was started here is stopped at the end."""

    def __init__(self) -> None:
        self.request: pytest.FixtureRequest | None = None  # pytest-docker needs one
        self.config = StackConfig(
            state_dir=ROOT / ".cdcbox" / "pytest-stack",
            cache_dir=Path(os.environ.get("CDCBOX_CACHE_DIR", Path.home() / ".cache" / "cdcbox")),
            infra_dir=resource_dir("infra"),
        )
        self.started_native = False
        self._external = _external()
        self._endpoints: Endpoints | None = None
        self._dsn: str | None = None

    def database(self) -> str:
        """A migrated PostgreSQL (public schema), starting nothing else if it can."""
        if self._dsn is None:
            if self._external is not None or docker_engine_answers():
                return self.everything().dsn
            self._dsn, pgpassfile = runner.postgres_up(self.config)
            self.started_native = True
            os.environ["PGPASSFILE"] = pgpassfile
            secrets = StackSecrets(self.config.state_dir / "secrets")
            _migrate(self._dsn, secrets.debezium_properties)
        return self._dsn

    def everything(self) -> Endpoints:
        """The whole stack, migrated, with the shipped connector RUNNING."""
        if self._endpoints is None:
            endpoints = self._external
            if endpoints is None and docker_engine_answers():
                assert self.request is not None, "compose starts from a fixture"
                endpoints = _compose_stack(self.request, self.config)
            elif endpoints is None:
                endpoints = runner.up(self.config, "native")
                self.started_native = True
            os.environ.update(endpoints.as_env())
            _migrate(endpoints.dsn, Path(endpoints.debezium_password_file))
            for spec in load_specs(resource_dir("connectors"), env=dict(os.environ)):
                apply(ConnectClient(endpoints.connect_url), spec)
            self._endpoints, self._dsn = endpoints, endpoints.dsn
        return self._endpoints

    def stop(self) -> None:
        if self.started_native:
            runner.down(self.config)


def _migrate(dsn: str, debezium_password_file: Path) -> None:
    with psycopg.connect(dsn) as conn:
        migrate(conn, debezium_password=read_password_properties(debezium_password_file))


SESSION = SessionStack()
# tests/cluster start a second, 3-broker stack: run by `scripts/test --cluster` only.
collect_ignore = [] if os.environ.get("CDCBOX_CLUSTER") == "1" else ["cluster"]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the native services the selected tests need before the first test runs, so
    no test's timeout includes a stack start (compose starts from its fixture)."""
    layers = {
        item.get_closest_marker(layer) and layer for item in session.items for layer in LAYERS
    }
    if _external() is not None or docker_engine_answers() or session.config.option.collectonly:
        return
    if layers & {"e2e", "faults"}:
        SESSION.everything()
    elif "integration" in layers:
        SESSION.database()


def pytest_sessionfinish(session: pytest.Session) -> None:
    SESSION.stop()


@pytest.fixture(scope="session")
def session_stack(request: pytest.FixtureRequest) -> SessionStack:
    SESSION.request = request
    return SESSION


@pytest.fixture(scope="session")
def database(session_stack: SessionStack) -> str:
    """The DSN of a migrated PostgreSQL; tests/integration need nothing more."""
    return session_stack.database()


@pytest.fixture(scope="session")
def stack(session_stack: SessionStack) -> Endpoints:
    """Endpoints of the whole stack, migrated, with the connector RUNNING."""
    return session_stack.everything()


@pytest.fixture(scope="session")
def native_stack(session_stack: SessionStack, stack: Endpoints) -> StackConfig:
    """The native stack's configuration, for fault tests that stop, pause or restart its
    processes by pid: the one this session started, or the one CDCBOX_STACK_DIR names."""
    if session_stack.started_native:
        return session_stack.config
    state_dir = os.environ.get("CDCBOX_STACK_DIR")
    if not state_dir:
        reason = "fault tests need the native stack: set CDCBOX_STACK_DIR to its directory"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)  # in CI nothing may skip
        pytest.skip(reason)
    return StackConfig(
        state_dir=Path(state_dir).resolve(),
        cache_dir=session_stack.config.cache_dir,
        infra_dir=resource_dir("infra"),
    )


def _compose_stack(request: pytest.FixtureRequest, config: StackConfig) -> Endpoints:
    """pytest-docker runs infra/docker-compose.yml; we wait until Connect lists Debezium."""
    compose = ComposeStack(config, StackSecrets(config.state_dir / "secrets"))
    compose.secrets.ensure(config.host, config.ports.postgres)
    os.environ.update(compose.environment())
    services = request.getfixturevalue("docker_services")
    endpoints = compose.endpoints()
    services.wait_until_responsive(
        check=lambda: _lists_debezium(endpoints.connect_url), timeout=300.0, pause=1.0
    )
    return endpoints


def _lists_debezium(url: str) -> bool:
    try:
        return any("PostgresConnector" in p["class"] for p in ConnectClient(url).plugins())
    except CdcboxError:
        return False


@pytest.fixture(scope="session")
def docker_compose_command() -> str:
    return f"docker compose --env-file {resource_dir('infra') / 'versions.env'}"


@pytest.fixture(scope="session")
def docker_compose_file() -> str:
    return str(resource_dir("infra") / "docker-compose.yml")


@pytest.fixture(scope="session")
def docker_compose_project_name() -> str:
    return "cdcbox-pytest"


@pytest.fixture
def db(database: str) -> Iterator[psycopg.Connection[Any]]:
    # autocommit: a bare query must not leave the connection inside an implicit
    # transaction that would turn the next `conn.transaction()` into a savepoint.
    with psycopg.connect(database, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="session")
def connect_client(stack: Endpoints) -> ConnectClient:
    return ConnectClient(stack.connect_url)
