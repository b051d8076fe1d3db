"""infra/docker-compose.yml, checked as far as a machine without a Docker engine can:
validated and resolved by a real Compose implementation (Debian's docker-compose;
`config` needs no engine), then read for what would stop it from coming up. It has never
been brought up here; the README says so."""

from __future__ import annotations

import importlib
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdcbox.resources import resource_dir
from cdcbox.stack.config import StackVersions

INFRA = resource_dir("infra")
VERSIONS = StackVersions.load(INFRA / "versions.env")


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    compose = shutil.which("docker-compose")
    assert compose is not None, "scripts/test installs Debian's docker-compose"
    secrets = tmp_path_factory.mktemp("secrets")
    result = subprocess.run(
        [
            compose,
            "-p",
            "cdcbox",
            "--env-file",
            str(INFRA / "versions.env"),
            "-f",
            str(INFRA / "docker-compose.yml"),
            "config",
        ],
        env={"CDCBOX_SECRETS_DIR": str(secrets), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = yaml.safe_load(result.stdout)
    return config


def test_images_are_the_native_stacks_versions(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    assert services["postgres"]["image"] == f"postgres:{VERSIONS.postgres_major}"
    assert services["kafka"]["image"] == f"apache/kafka:{VERSIONS.kafka}"
    args = services["connect"]["build"]["args"]
    assert (args["KAFKA_VERSION"], args["DEBEZIUM_VERSION"]) == (
        VERSIONS.kafka,
        VERSIONS.debezium,
    )


def test_every_healthcheck_runs_something_its_image_contains(resolved: dict[str, Any]) -> None:
    """pg_isready ships in the postgres image; /opt/kafka/bin is Kafka's distribution,
    unpacked by the apache/kafka Dockerfile; curl is not in apache/kafka (its Dockerfile
    deletes wget after use), so connect.Dockerfile installs it; the cdcbox image is
    python:3.11-slim."""
    services = resolved["services"]
    tests = {name: s["healthcheck"]["test"] for name, s in services.items() if "healthcheck" in s}
    assert tests["postgres"][:2] == ["CMD", "pg_isready"]
    assert tests["kafka"][1].startswith("/opt/kafka/bin/")
    assert tests["connect"][0] == "CMD-SHELL" and tests["connect"][1].startswith("curl ")
    assert "apk add --no-cache curl" in (INFRA / "connect.Dockerfile").read_text()
    assert "FROM python:3.11-slim" in (INFRA / "cdcbox.Dockerfile").read_text()
    consumers = {"inventory", "marketing", "points", "notifications", "search-index"}
    for name in consumers:
        assert tests[name][:2] == ["CMD", "python"]


def test_state_survives_down_and_secrets_reach_each_reader_as_its_own_user(
    resolved: dict[str, Any],
) -> None:
    services = resolved["services"]
    assert "/var/lib/postgresql/data" in str(services["postgres"]["volumes"])
    assert "/var/lib/kafka/data" in str(services["kafka"]["volumes"])
    assert services["kafka"]["environment"]["KAFKA_LOG_DIRS"] == "/var/lib/kafka/data"
    script = services["secrets"]["command"][0]
    # The uids that read them: postgres in its image, appuser in apache/kafka (the first
    # user its Dockerfile adds), and the user infra/cdcbox.Dockerfile creates.
    assert "chown -R 999:999 /out/postgres" in script
    assert "chown -R 1000:1000 /out/connect" in script
    assert "chown -R 10001:10001 /out/cdcbox" in script
    assert "--uid 10001" in (INFRA / "cdcbox.Dockerfile").read_text()
    for reader in ("postgres", "connect", "migrate", "inventory"):
        depends = services[reader]["depends_on"]
        assert depends, reader
    assert services["migrate"]["depends_on"]["connect"]["condition"] == "service_healthy"
    assert (
        services["inventory"]["depends_on"]["migrate"]["condition"]
        == "service_completed_successfully"
    )
    password = services["postgres"]["environment"]["POSTGRES_PASSWORD_FILE"]
    assert password == "/run/cdcbox-secrets/postgres/postgres.password"


def test_the_example_services_name_handlers_that_exist(resolved: dict[str, Any]) -> None:
    root = Path(__file__).resolve().parents[2]
    for name, service in resolved["services"].items():
        command = service.get("command")
        if not (isinstance(command, list) and command[:1] == ["consume"]):
            continue
        module, _, attribute = command[1].partition(":")
        assert (root / (module.replace(".", "/") + ".py")).is_file(), name
        assert hasattr(importlib.import_module(module), attribute), name
        assert "0.0.0.0" in command, f"{name}: metrics reachable from outside"  # noqa: S104
