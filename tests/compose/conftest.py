"""The compose suite: infra/docker-compose.yml built and brought up for real, through
pytest-docker, on the Docker engine the environment names (scripts/test starts one on a
private socket and runs this suite with `CDCBOX_COMPOSE=1`; the rest of the suite stays
on the native stack). The project and its ports are the suite's own, so a native stack
or a user's `cdc-ctl stack up --mode compose` on the defaults never collides with it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pytest_docker.plugin import Services

from cdcbox.resources import resource_dir
from cdcbox.stack import runner
from cdcbox.stack.compose import ComposeStack, docker_engine_answers
from cdcbox.stack.config import Ports, StackConfig
from cdcbox.stack.endpoints import Endpoints
from tests.helpers import unavailable

ROOT = Path(__file__).resolve().parents[2]
# Below Linux's ephemeral range (32768-60999), away from the native stack's ports.
# Every published port is the suite's own, so a native stack on the defaults (registry
# and MariaDB included) runs beside it.
SUITE_PORTS = Ports(
    postgres=25432, kafka=29192, controller=29193, connect=28083, registry=29081, mariadb=29306
)
PROMETHEUS_PORT = 29090  # the observability profile's


@pytest.fixture(scope="session")
def compose_config() -> StackConfig:
    if not docker_engine_answers():
        unavailable("no Docker engine answers (DOCKER_HOST): the compose suite needs one")
    build_ca = os.environ.get("CDCBOX_BUILD_CA")
    return StackConfig(
        state_dir=ROOT / ".cdcbox" / "compose-suite",
        cache_dir=Path(os.environ.get("CDCBOX_CACHE_DIR", Path.home() / ".cache" / "cdcbox")),
        infra_dir=resource_dir("infra"),
        ports=SUITE_PORTS,
        compose_project="cdcbox-suite",
        build_ca=Path(build_ca) if build_ca else None,
    )


@pytest.fixture(scope="session")
def compose_stack(compose_config: StackConfig) -> ComposeStack:
    """Secrets made, the mode recorded, the images' base ready; compose's variables set
    for pytest-docker's `docker compose` (and the `cdc-ctl stack` commands of a test)."""
    stack = runner.compose_stack(compose_config)
    # The native suite's setting (scripts/test): `cdc-ctl stack up` here is compose.
    os.environ.pop("CDCBOX_STACK_WITH_METRICS", None)
    os.environ.update(stack.environment())
    os.environ.update(
        CDCBOX_STACK_DIR=str(compose_config.state_dir),
        CDCBOX_COMPOSE_PROJECT=compose_config.compose_project,
        CDCBOX_PG_PORT=str(SUITE_PORTS.postgres),
        CDCBOX_KAFKA_PORT=str(SUITE_PORTS.kafka),
        CDCBOX_CONNECT_PORT=str(SUITE_PORTS.connect),
        CDCBOX_REGISTRY_PORT=str(SUITE_PORTS.registry),
        CDCBOX_MARIADB_PORT=str(SUITE_PORTS.mariadb),
        CDCBOX_PROMETHEUS_PORT=str(PROMETHEUS_PORT),
    )
    return stack


@pytest.fixture(scope="session")
def docker_compose_command(compose_stack: ComposeStack) -> str:
    return f"docker compose --env-file {compose_stack.config.infra_dir / 'versions.env'}"


@pytest.fixture(scope="session")
def docker_compose_file(compose_stack: ComposeStack) -> str:
    return str(compose_stack.config.infra_dir / "docker-compose.yml")


@pytest.fixture(scope="session")
def docker_compose_project_name(compose_stack: ComposeStack) -> str:
    return compose_stack.project


@pytest.fixture(scope="session")
def docker_setup() -> list[str]:
    # Built, started, and every service healthy (the one-shot ones: finished).
    return ["up --build --wait"]


@pytest.fixture(scope="session")
def docker_cleanup() -> list[str]:
    return ["down --volumes --timeout 10"]


@pytest.fixture(scope="session")
def containers(compose_stack: ComposeStack, docker_services: Services) -> Endpoints:
    """The stack in containers, up and healthy: how the host reaches it."""
    endpoints = compose_stack.endpoints()
    endpoints.save(compose_stack.config.state_dir / "endpoints.json")
    os.environ.update(endpoints.as_env())
    os.environ["PGPASSFILE"] = endpoints.pgpassfile
    return endpoints
