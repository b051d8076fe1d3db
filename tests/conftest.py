"""One session-scoped stack for every test that needs services.

Order of preference: an existing stack named by environment variables (what
`scripts/test` exports after `cdc-ctl stack up`), docker compose through pytest-docker
when a Docker engine answers, else the native stack started here. In CI (CI=true) a
stack that cannot start fails the tests loudly; nothing skips.
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


@pytest.fixture(scope="session")
def stack(request: pytest.FixtureRequest) -> Iterator[Endpoints]:
    """Endpoints of a running stack, with migrations applied and the connector RUNNING."""
    endpoints = _external()
    started: StackConfig | None = None
    if endpoints is None:
        config = StackConfig(
            state_dir=ROOT / ".cdcbox" / "pytest-stack",
            cache_dir=Path(os.environ.get("CDCBOX_CACHE_DIR", Path.home() / ".cache" / "cdcbox")),
            infra_dir=resource_dir("infra"),
        )
        if docker_engine_answers():
            endpoints = _compose_stack(request, config)
        else:
            endpoints = runner.up(config, "native")
            started = config
    os.environ.update(endpoints.as_env())
    try:
        with psycopg.connect(endpoints.dsn) as conn:
            migrate(
                conn,
                debezium_password=read_password_properties(Path(endpoints.debezium_password_file)),
            )
        for spec in load_specs(resource_dir("connectors"), env=dict(os.environ)):
            apply(ConnectClient(endpoints.connect_url), spec)
        yield endpoints
    finally:
        if started is not None:
            runner.down(started)


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
def db(stack: Endpoints) -> Iterator[psycopg.Connection[Any]]:
    # autocommit: a bare query must not leave the connection inside an implicit
    # transaction that would turn the next `conn.transaction()` into a savepoint.
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="session")
def connect_client(stack: Endpoints) -> ConnectClient:
    return ConnectClient(stack.connect_url)
