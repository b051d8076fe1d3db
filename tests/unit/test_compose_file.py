"""infra/docker-compose.yml, checked without a Docker engine: validated and resolved by
a real Compose implementation (Debian's docker-compose; `config` needs no engine), then
read for what would stop it from coming up. tests/compose bring it up for real."""

from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml

from cdcbox.resources import resource_dir
from cdcbox.stack.config import StackConfig, StackVersions
from cdcbox.stack.metrics import NativePrometheus

INFRA = resource_dir("infra")
VERSIONS = StackVersions.load(INFRA / "versions.env")


def resolve(secrets: Path, *profiles: str) -> dict[str, Any]:
    """The compose file as Debian's docker-compose resolves it, with `profiles` on."""
    compose = shutil.which("docker-compose")
    assert compose is not None, "scripts/test installs Debian's docker-compose"
    argv = [compose, "-p", "cdcbox", "--env-file", str(INFRA / "versions.env")]
    argv += ["-f", str(INFRA / "docker-compose.yml")]
    for profile in profiles:
        argv += ["--profile", profile]
    result = subprocess.run(
        [*argv, "config"],
        env={"CDCBOX_SECRETS_DIR": str(secrets), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = yaml.safe_load(result.stdout)
    return config


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return resolve(tmp_path_factory.mktemp("secrets"))


def test_images_are_the_native_stacks_versions(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    assert services["postgres"]["image"] == f"cdcbox/postgres:{VERSIONS.postgres_major}"
    kafka_image = f"cdcbox/kafka:{VERSIONS.kafka}-debezium-{VERSIONS.debezium}"
    assert services["kafka"]["image"] == services["connect"]["image"] == kafka_image
    args = services["connect"]["build"]["args"]
    assert (args["KAFKA_VERSION"], args["DEBEZIUM_VERSION"]) == (
        VERSIONS.kafka,
        VERSIONS.debezium,
    )


def test_every_image_is_built_here_on_one_debian_base(resolved: dict[str, Any]) -> None:
    """No image is pulled but debian:bookworm-slim (made from Debian's archive where no
    registry answers); builds use the host's network; no `# syntax=` line (it would
    pull a Dockerfile frontend from a registry)."""
    for name, service in resolved["services"].items():
        if service.get("profiles") == ["grafana"]:
            continue  # Grafana's official image: the one optional part that is pulled
        assert "build" in service, f"{name} is pulled, not built"
        assert service["build"]["network"] == "host", name
    for dockerfile in (INFRA / "images").glob("*.Dockerfile"):
        text = dockerfile.read_text()
        assert "# syntax=" not in text, dockerfile.name
        bases = re.findall(r"^FROM (\S+)", text, re.M)
        assert set(bases) <= {"debian:bookworm-slim", "${BUILD_BASE}"}, dockerfile.name
        default = re.search(r"^ARG BUILD_BASE=(\S+)", text, re.M)
        assert default is None or default.group(1) == "debian:bookworm-slim", dockerfile.name


def test_every_healthcheck_runs_something_its_image_contains(resolved: dict[str, Any]) -> None:
    """pg_isready ships with Debian's postgresql-15; bash is in every Debian base (the
    kafka image carries no Kafka command-line tools); the kafka image installs curl;
    the cdcbox image's virtual environment puts `python` first on PATH."""
    services = resolved["services"]
    tests = {name: s["healthcheck"]["test"] for name, s in services.items() if "healthcheck" in s}
    images = INFRA / "images"
    assert tests["postgres"][:2] == ["CMD", "pg_isready"]
    assert "postgresql-${POSTGRES_MAJOR}" in (images / "postgres.Dockerfile").read_text()
    assert tests["kafka"][:3] == ["CMD", "bash", "-c"]
    assert tests["connect"][0] == "CMD-SHELL" and tests["connect"][1].startswith("curl ")
    assert "openjdk-17-jre-headless curl" in (images / "kafka.Dockerfile").read_text()
    assert "ENV PATH=/opt/cdcbox/bin:$PATH" in (images / "cdcbox.Dockerfile").read_text()
    assert tests["mariadb"][0] == "CMD-SHELL" and "mariadb-admin" in tests["mariadb"][1]
    assert "mariadb-server" in (images / "mariadb.Dockerfile").read_text()
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
    # The uids that read them, as the images create their users.
    images = INFRA / "images"
    assert "chown -R 999:999 /out/postgres" in script
    assert "--uid 999" in (images / "postgres.Dockerfile").read_text()
    assert "chown -R 1000:1000 /out/connect" in script
    assert "--uid 1000 " in (images / "kafka.Dockerfile").read_text()
    assert "chown -R 10001:10001 /out/cdcbox" in script
    assert "--uid 10001" in (images / "cdcbox.Dockerfile").read_text()
    assert "chown -R 1002:1002 /out/mariadb" in script
    assert "--uid 1002 " in (images / "mariadb.Dockerfile").read_text()
    assert "/var/lib/mysql" in str(services["mariadb"]["volumes"])
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


def test_compose_runs_the_demo_fleet_a_database_per_service(resolved: dict[str, Any]) -> None:
    """The topology of consumer/fleet.py: each service's consumers on its own database
    (the same databases `stack up` creates natively), every handler of a service in one
    process, the fleet prepared by the one-shot migrate service."""
    from consumer.fleet import FLEET

    services = resolved["services"]
    databases = {f.name for f in FLEET}
    assert databases == set(StackConfig(Path("."), Path("."), INFRA).service_databases)
    init = (INFRA / "postgres-init" / "fleet-databases.sql").read_text()
    assert set(re.findall(r"CREATE DATABASE (\w+);", init)) == databases
    assert _mounts(services["postgres"])["/docker-entrypoint-initdb.d"] == str(
        INFRA / "postgres-init"
    )
    consuming = {n: s for n, s in services.items() if (s.get("command") or [None])[0] == "consume"}
    for fleet_service in FLEET:
        (service,) = [
            s
            for s in consuming.values()
            if s["command"][s["command"].index("--group") + 1] == fleet_service.name
        ]
        dsn = service["environment"]["CDCBOX_DSN"].split("?")[0]
        assert dsn.endswith(f"/{fleet_service.name}")
        # A portable service runs on MariaDB here, as the fleet runs it given one.
        assert dsn.startswith("mariadb://" if fleet_service.portable else "postgresql://")
        handlers = {c for c in service["command"] if ":" in c and c.startswith("consumer.")}
        assert handlers == {f"{h.__module__}:{h.__name__}" for h in fleet_service.handlers}
    assert "python -m consumer.fleet" in services["migrate"]["command"][0]


@pytest.fixture(scope="module")
def observability(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The file resolved with the `observability` and `grafana` profiles on."""
    return resolve(tmp_path_factory.mktemp("secrets"), "observability", "grafana")


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path → host path of a resolved service's bind mounts (the resolved
    file spells them `/host/path:/container/path:mode`)."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, *_mode = volume.split(":")
        if source.startswith("/"):
            mounts[target] = source
    return mounts


def test_observability_runs_the_native_stacks_prometheus_config_and_versions(
    observability: dict[str, Any], tmp_path: Path
) -> None:
    """The compose profile and `stack up --with-metrics` share prometheus.yml and the JMX
    exporter rules; only the target files differ, and both name the same jobs. Debian's
    prometheus (the native stack's) is the version the image is pinned to."""
    services = observability["services"]
    assert services["prometheus"]["image"] == f"cdcbox/prometheus:{VERSIONS.prometheus}"
    assert services["grafana"]["image"] == f"grafana/grafana:{VERSIONS.grafana}"
    debian = subprocess.run(
        ["apt-cache", "show", "prometheus"], capture_output=True, text=True, check=True
    ).stdout
    assert f"\nVersion: {VERSIONS.prometheus}+" in debian
    mounts = _mounts(services["prometheus"])
    observability_dir = INFRA / "observability"
    assert Path(mounts["/etc/prometheus/prometheus.yml"]) == observability_dir / "prometheus.yml"
    compose_targets = Path(mounts["/etc/prometheus/targets"])
    assert compose_targets == observability_dir / "targets-compose"

    native = NativePrometheus(StackConfig(state_dir=tmp_path, cache_dir=tmp_path, infra_dir=INFRA))
    native.write_configuration()
    scrape = yaml.safe_load((observability_dir / "prometheus.yml").read_text())
    jobs = {
        Path(f).name
        for job in scrape["scrape_configs"]
        for c in job["file_sd_configs"]
        for f in c["files"]
    }
    assert jobs == {p.name for p in compose_targets.glob("*.yml")}
    assert jobs == {p.name for p in (native.root / "targets").glob("*.yml")}
    assert (native.root / "prometheus.yml").read_text() == (
        observability_dir / "prometheus.yml"
    ).read_text()


def test_observability_targets_name_the_services_and_ports_they_serve(
    observability: dict[str, Any],
) -> None:
    services = observability["services"]
    targets_dir = INFRA / "observability" / "targets-compose"
    targets = {
        p.stem: [t for group in yaml.safe_load(p.read_text()) for t in group["targets"]]
        for p in targets_dir.glob("*.yml")
    }
    consumers = {n for n, s in services.items() if (s.get("command") or [None])[0] == "consume"}
    # <service>:9108, each example service by its name on the project's network.
    assert set(targets["consumer"]) == {f"{name}:9108" for name in consumers}
    assert targets["exporter"] == ["exporter:9109"]
    assert services["exporter"]["command"][-2:] == ["--metrics-port", "9109"]
    assert targets["connect"] == ["connect:9404"]
    agent = services["connect"]["environment"]["KAFKA_OPTS"]
    assert f"jmx_prometheus_javaagent-{VERSIONS.jmx_exporter}.jar=9404:" in agent
    dockerfile = (INFRA / "images" / "kafka.Dockerfile").read_text()
    assert "COPY observability/jmx-exporter.yml /opt/cdcbox/jmx-exporter.yml" in dockerfile
    assert agent.endswith(":/opt/cdcbox/jmx-exporter.yml")
    assert services["connect"]["build"]["args"]["JMX_EXPORTER_VERSION"] == VERSIONS.jmx_exporter


def test_grafana_is_provisioned_with_the_dashboard_on_the_prometheus_datasource(
    observability: dict[str, Any],
) -> None:
    """Grafana's official image is Alpine-based: its healthcheck uses busybox's wget.
    Prometheus's (Debian's package) uses its own promtool; the exporter's image is the
    cdcbox one (python)."""
    services = observability["services"]
    mounts = _mounts(services["grafana"])
    grafana_dir = INFRA / "observability" / "grafana"
    assert Path(mounts["/etc/grafana/provisioning"]) == grafana_dir / "provisioning"
    assert Path(mounts["/var/lib/grafana/dashboards"]) == grafana_dir / "dashboards"
    provider = yaml.safe_load((grafana_dir / "provisioning/dashboards/cdcbox.yml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
    source = yaml.safe_load((grafana_dir / "provisioning/datasources/prometheus.yml").read_text())
    (datasource,) = source["datasources"]
    assert datasource["url"] == "http://prometheus:9090"
    dashboard = json.loads((grafana_dir / "dashboards/cdcbox.json").read_text())
    # Importable into any Grafana: every query reads the datasource variable, which
    # defaults to the provisioned one here.
    uids = {t["datasource"]["uid"] for p in dashboard["panels"] for t in p["targets"]}
    assert uids == {"${datasource}"}
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["current"]["value"] == datasource["uid"]
    assert {"consumer", "group"} <= set(variables)
    titles = {p["title"] for p in dashboard["panels"]}
    assert {"Circuit breaker open", "Parked aggregates", "Sources the exporter reads"} <= titles
    tests = {n: s["healthcheck"]["test"] for n, s in services.items() if "healthcheck" in s}
    assert tests["prometheus"][:4] == ["CMD", "promtool", "query", "instant"]
    assert tests["grafana"][:2] == ["CMD", "wget"]
    assert tests["exporter"][:2] == ["CMD", "python"]
    for name in ("exporter", "prometheus"):
        assert services[name]["profiles"] == ["observability"]
    assert services["grafana"]["profiles"] == ["grafana"]


def test_the_pom_both_stacks_build_from_is_well_formed() -> None:
    """Maven refuses a comment holding `--`; this finds it before a stack start does."""
    ElementTree.parse(INFRA / "pom.xml")  # noqa: S314 - the project's own file


EXISTING_ENV = {
    "CDCBOX_DSN": "postgresql://shop@db.internal:5432/shop",
    "CDCBOX_BOOTSTRAP_SERVERS": "broker1:9092",
    "CDCBOX_CONNECT_URL": "http://connect.internal:8083",
    "CDCBOX_CONNECT_DB_HOST": "db.internal",
    "CDCBOX_CONNECT_DB_NAME": "shop",
    "CDCBOX_CONNECT_DB_SECRETS": "/etc/kafka-connect/debezium.properties",
}


def resolve_existing(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    compose = shutil.which("docker-compose")
    assert compose is not None, "scripts/test installs Debian's docker-compose"
    pgpass, password = tmp_path / "pgpass", tmp_path / "debezium.properties"
    pgpass.write_text("*:*:*:shop:x\n")
    password.write_text("password=x\n")
    argv = [compose, "-f", str(INFRA / "docker-compose.existing.yml")]
    files = {"CDCBOX_PGPASS": str(pgpass), "CDCBOX_DEBEZIUM_PASSWORD_FILE": str(password)}
    return subprocess.run(
        [*argv, "config"],
        env={**files, **env, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_existing_infrastructure_file_runs_only_cdcbox_against_your_endpoints(
    tmp_path: Path,
) -> None:
    result = resolve_existing(tmp_path, EXISTING_ENV)
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    always = {name for name, service in services.items() if not service.get("profiles")}
    assert always == {"migrate", "exporter", "supervisor"}  # no database, broker or worker
    env = services["migrate"]["environment"]
    assert env["CDCBOX_DSN"] == EXISTING_ENV["CDCBOX_DSN"]
    assert env["CDCBOX_CONNECT_URL"] == EXISTING_ENV["CDCBOX_CONNECT_URL"]
    assert env["CDCBOX_CONNECT_DB_SECRETS"] == EXISTING_ENV["CDCBOX_CONNECT_DB_SECRETS"]
    examples = {name for name, service in services.items() if service.get("profiles")}
    assert examples == {"inventory", "points"}
    assert all(services[name]["profiles"] == ["examples"] for name in examples)


def test_the_existing_infrastructure_file_refuses_a_missing_endpoint_naming_it(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in EXISTING_ENV.items() if k != "CDCBOX_CONNECT_URL"}
    result = resolve_existing(tmp_path, env)
    assert result.returncode != 0
    assert "your Kafka Connect REST URL" in result.stderr


def test_container_healthchecks_probe_liveness(resolved: dict[str, Any], tmp_path: Path) -> None:
    """A container is unhealthy when its loop is dead (/healthz), not while it waits for
    partitions or its database (/readyz is an orchestrator's readiness probe)."""
    existing = yaml.safe_load(resolve_existing(tmp_path, EXISTING_ENV).stdout)["services"]
    for services in (resolved["services"], existing):
        for name, service in services.items():
            probe = " ".join((service.get("healthcheck") or {}).get("test", []))
            assert "/readyz" not in probe, name


def render_connect_worker(tmp_path: Path, **env: str) -> dict[str, str]:
    """The worker properties the Connect image's entrypoint renders from `env`."""
    result = subprocess.run(
        ["sh", str(INFRA / "images" / "connect-entrypoint.sh")],
        env={
            "PATH": "/usr/bin:/bin",
            "CONNECT_DEFAULTS": str(INFRA / "connect-distributed.properties"),
            "CONNECT_PROPERTIES": str(tmp_path / "worker.properties"),
            "CONNECT_RENDER_ONLY": "1",
            **env,
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    pairs = [
        line.split("=", 1)
        for line in result.stdout.splitlines()
        if line.strip() and not line.startswith("#")
    ]
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), "a property set twice"
    return dict(pairs)


JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="c" password="${file:/run/s:p}";'
)


def test_the_connect_image_is_configured_by_environment(tmp_path: Path) -> None:
    """Existing Kafka: its brokers, replication factors, security and the payload limit
    come from CONNECT_* variables; everything else keeps the image's defaults."""
    worker = render_connect_worker(
        tmp_path,
        CONNECT_BOOTSTRAP_SERVERS="b1:9092,b2:9092",
        CONNECT_CONFIG_STORAGE_REPLICATION_FACTOR="3",
        CONNECT_SECURITY_PROTOCOL="SASL_SSL",
        CONNECT_SASL_JAAS_CONFIG=JAAS,
        CONNECT_PRODUCER_MAX_REQUEST_SIZE="2097152",
        CONNECT_SCHEDULED_REBALANCE_MAX_DELAY_MS="30000",
    )
    assert worker["bootstrap.servers"] == "b1:9092,b2:9092"
    assert worker["config.storage.replication.factor"] == "3"
    assert worker["security.protocol"] == "SASL_SSL"
    assert worker["sasl.jaas.config"] == JAAS
    assert worker["producer.max.request.size"] == "2097152"
    assert worker["scheduled.rebalance.max.delay.ms"] == "30000"
    assert worker["plugin.path"] == "/opt/plugins"  # a default kept
    assert render_connect_worker(tmp_path)["bootstrap.servers"] == "kafka:19092"
