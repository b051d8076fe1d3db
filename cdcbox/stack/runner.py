"""`stack up|down|status|env`: one entry point over the native and the compose runner.

`up` is idempotent (a running component is left alone) and records which mode it used,
so `down` stops exactly what `up` started.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any, Literal

from cdcbox.acls.plan import OPERATOR_USER
from cdcbox.errors import StackError
from cdcbox.stack import rest_auth
from cdcbox.stack.compose import ComposeStack, docker_engine_answers
from cdcbox.stack.config import StackConfig
from cdcbox.stack.connect_worker import NativeConnect
from cdcbox.stack.endpoints import ComponentStatus, Endpoints
from cdcbox.stack.grants import grant_roles
from cdcbox.stack.jars import resolve_jars
from cdcbox.stack.kafka import NativeKafka
from cdcbox.stack.mariadb import NativeMariaDB
from cdcbox.stack.metrics import NativeExporter, NativePrometheus
from cdcbox.stack.postgres import NativePostgres
from cdcbox.stack.registry import NativeRegistry
from cdcbox.stack.rest_auth import ConnectRestAuth
from cdcbox.stack.secrets import StackSecrets
from cdcbox.stack.steps import step
from cdcbox.stack.supervisor import NativeSupervisor
from cdcbox.stack.tls import MECHANISM, StackTls

Mode = Literal["native", "compose"]


# What stack.json records of a stack's shape, and what a file without a key meant.
_SHAPE_DEFAULTS: dict[str, object] = {"brokers": 1, "connect_workers": 1, "secure": False}


def _mode_file(config: StackConfig) -> Path:
    return config.state_dir / "stack.json"


def _secrets(config: StackConfig) -> StackSecrets:
    return StackSecrets(config.state_dir / "secrets")


def choose_mode(requested: Mode | None) -> Mode:
    if requested is not None:
        return requested
    return "compose" if docker_engine_answers() else "native"


def up(config: StackConfig, mode: Mode | None = None) -> Endpoints:
    """Start every component and wait until each answers; return how to reach them."""
    mode = choose_mode(mode)
    if mode == "compose" and (config.brokers > 1 or config.connect_workers > 1):
        raise StackError(
            "the compose file runs one broker and one Connect worker: the cluster shape "
            "(--brokers, --connect-workers) is native only"
        )
    if mode == "native":
        config = _keeping_running_metrics(config)
    secrets = _prepare(config, mode)
    if mode == "compose":
        endpoints = compose_stack(config, secrets).up()
    else:
        endpoints = _native_up(config, secrets)
    endpoints.save(config.state_dir / "endpoints.json")
    return endpoints


def _prepare(config: StackConfig, mode: Mode) -> StackSecrets:
    config.state_dir.mkdir(parents=True, exist_ok=True)
    config.state_dir.chmod(0o755)
    recorded = _recorded(config)
    shape = {
        "brokers": config.brokers,
        "connect_workers": config.connect_workers,
        "secure": config.secure,
    }
    was = {k: recorded.get(k, default) for k, default in _SHAPE_DEFAULTS.items()}
    if recorded and was != shape and (config.state_dir / "kafka" / "data").exists():
        secured = "secured" if was["secure"] else "not secured"
        raise StackError(
            f"the stack in {config.state_dir} has {was['brokers']} broker(s) and "
            f"{was['connect_workers']} Connect worker(s) and is {secured}: start it like "
            "that, or `cdc-ctl stack down --purge` it first"
        )
    secrets = _secrets(config)
    secrets.ensure(config.host, config.ports.postgres)
    if config.secure:
        if mode == "compose":
            raise StackError("--secure is native only: the compose file has no secured mode")
        with step("certificates and SCRAM users (openssl; made on the first run only)"):
            StackTls.of(config.state_dir).ensure(config.host)
    if config.with_metrics and mode == "compose":
        raise StackError(
            "--with-metrics is native only: with compose, use its `observability` profile"
        )
    recorded_flags = {
        "with_metrics": config.with_metrics,
        "with_registry": config.with_registry,
        "with_mariadb": config.with_mariadb,
        "with_supervisor": config.with_supervisor,
    }
    _mode_file(config).write_text(json.dumps({"mode": mode, **shape, **recorded_flags}) + "\n")
    return secrets


def compose_stack(config: StackConfig, secrets: StackSecrets | None = None) -> ComposeStack:
    """The compose stack of `config` with its secrets made, its mode recorded (so `down`
    stops it) and its images' base ready: all `up --mode compose` does before `docker
    compose up` (tests/compose hand that step to pytest-docker)."""
    stack = ComposeStack(config, secrets or _prepare(config, "compose"))
    stack.prepare_images()
    return stack


def postgres_up(config: StackConfig) -> tuple[str, str]:
    """Start only the native PostgreSQL (for tests and tools that need nothing else);
    returns its DSN and the PGPASSFILE that holds its password. A later `up` of the
    same state directory leaves it running and adds the rest; `down` stops it."""
    config = _keeping_running_metrics(config)
    secrets = _prepare(config, "native")
    postgres = NativePostgres(config, secrets)
    with step(f"PostgreSQL {config.versions.postgres_major} on port {config.ports.postgres}"):
        postgres.start()
    return postgres.dsn(), str(secrets.pgpass)


def _native_up(config: StackConfig, secrets: StackSecrets) -> Endpoints:
    postgres = NativePostgres(config, secrets)
    with step(f"PostgreSQL {config.versions.postgres_major} on port {config.ports.postgres}"):
        postgres.start()
    registry_url = ""
    if config.with_registry:
        registry = NativeRegistry(config)
        version, port = config.versions.apicurio, config.ports.registry
        with step(f"Apicurio Registry {version} (schema registry) on port {port}"):
            registry.start()
        registry_url = registry.url
    mariadb_dsn = ""
    if config.with_mariadb:
        mariadb = NativeMariaDB(config)
        with step(f"MariaDB (Debian's package) on port {config.ports.mariadb}"):
            mariadb.start()
        mariadb_dsn = mariadb.dsn()
    with step("Kafka and Debezium jars (Maven; downloaded on the first run only)"):
        layout = resolve_jars(config)
    nodes = [NativeKafka(config, layout, n) for n in range(config.brokers)]
    with step(f"Kafka {config.versions.kafka}, {config.brokers} node(s), KRaft"):
        for node in nodes:  # all of a quorum must be starting before one can answer
            node.spawn()
        for node in nodes:
            node.await_ready()
    if config.secure:
        with step("Kafka ACLs: each role its own principal (cdcbox.acls)"):
            grant_roles(config)
    workers = [
        NativeConnect(config, layout, config.bootstrap_servers, w)
        for w in range(config.connect_workers)
    ]
    for worker in workers:
        with step(f"Kafka Connect {worker.name} with Debezium {config.versions.debezium}"):
            worker.start()
    endpoints = Endpoints(
        dsn=postgres.dsn(),
        pgpassfile=str(secrets.pgpass),
        bootstrap_servers=config.bootstrap_servers,
        connect_url=workers[0].url,
        connect_db_host=config.host,
        connect_db_port=str(config.ports.postgres),
        connect_db_name=config.database,
        connect_db_secrets=str(secrets.debezium_properties),
        debezium_password_file=str(secrets.debezium_properties),
        security_env=_security_env(config),
        registry_url=registry_url,
        mariadb_dsn=mariadb_dsn,
    )
    if config.with_supervisor:
        with step(f"supervisor (`connectors supervise`) on port {config.ports.supervisor}"):
            NativeSupervisor(config).start(endpoints)
    if not config.with_metrics:
        return endpoints
    with step(f"pipeline exporter on port {config.ports.exporter}"):
        NativeExporter(config).start(endpoints)
    prometheus = NativePrometheus(config)
    version, port = config.versions.prometheus, config.ports.prometheus
    with step(f"Prometheus {version} (Debian's package) on port {port}"):
        prometheus.start()
    return dataclasses.replace(endpoints, prometheus_url=prometheus.url)


def _security_env(config: StackConfig) -> dict[str, str]:
    """How cdcbox's clients reach a --secure stack: as the `operator` SCRAM user over
    SASL_SSL, trusting the stack's CA; Debezium's JDBC connection encrypted. Every
    role's password file is in `CDCBOX_KAFKA_USERS_DIR` (`kafka-<user>.password`)."""
    if not config.secure:
        return {}
    tls = StackTls.of(config.state_dir)
    return {
        "CDCBOX_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "CDCBOX_KAFKA_SASL_MECHANISM": MECHANISM,
        "CDCBOX_KAFKA_USERNAME": OPERATOR_USER,
        "CDCBOX_KAFKA_PASSWORD_FILE": str(tls.password_file(OPERATOR_USER)),
        "CDCBOX_KAFKA_USERS_DIR": str(tls.directory),
        "CDCBOX_KAFKA_CA_FILE": str(tls.ca),
        "CDCBOX_CONNECT_DB_SSLMODE": "require",
        "CDCBOX_CONNECT_USER": rest_auth.USER,
        "CDCBOX_CONNECT_PASSWORD_FILE": str(ConnectRestAuth.of(config.state_dir).password_file),
    }


def _recorded(config: StackConfig) -> dict[str, Any]:
    """What `up` wrote to stack.json: the mode and the cluster shape."""
    try:
        recorded = json.loads(_mode_file(config).read_text())
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def _recorded_mode(config: StackConfig) -> Mode | None:
    mode = _recorded(config).get("mode")
    if mode is None:
        return None
    return "compose" if mode == "compose" else "native"


def down(config: StackConfig, purge: bool = False) -> None:
    """Stop what `up` started, in reverse order, by pid; `purge` also deletes its data."""
    mode = _recorded_mode(config)
    if mode == "compose":
        ComposeStack(config, _secrets(config)).down(purge=purge)
    elif mode == "native":
        errors = []
        for component in native_components(config):
            try:
                component.stop()
            except (StackError, OSError) as e:
                errors.append(f"{component.name}: {e}")
        if errors:
            raise StackError("could not stop: " + "; ".join(errors))
    if purge and config.state_dir.exists():
        if mode == "native":
            NativePostgres(config, _secrets(config)).purge()
            NativeMariaDB(config).purge()
        shutil.rmtree(config.state_dir)


Component = (
    NativeConnect
    | NativeKafka
    | NativePostgres
    | NativeRegistry
    | NativeMariaDB
    | NativeExporter
    | NativePrometheus
    | NativeSupervisor
)


def _running_metrics(config: StackConfig) -> bool:
    return NativePrometheus(config).running() or NativeExporter(config).running()


def _keeping_running_metrics(config: StackConfig) -> StackConfig:
    """A stack started with metrics keeps them while they still run, though this `up`
    did not ask for them: a restarted Connect gets its agent back, and `stack env`
    names Prometheus."""
    if config.with_metrics or not _running_metrics(config):
        return config
    return dataclasses.replace(config, with_metrics=True)


def native_components(config: StackConfig) -> list[Component]:
    """The native components in stop order, in the shape `up` recorded; built without
    jars (pid files suffice to stop or inspect them)."""
    recorded = _recorded(config)
    shape = dataclasses.replace(
        config,
        brokers=int(recorded.get("brokers", config.brokers)),
        connect_workers=int(recorded.get("connect_workers", config.connect_workers)),
    )
    workers = [
        NativeConnect(shape, None, shape.bootstrap_servers, w) for w in range(shape.connect_workers)
    ]
    nodes = [NativeKafka(shape, None, n) for n in range(shape.brokers)]
    metrics: list[Component] = []
    if recorded.get("with_metrics") or _running_metrics(shape):
        metrics = [NativePrometheus(shape), NativeExporter(shape)]
    registry = NativeRegistry(shape)
    registries = [registry] if recorded.get("with_registry") or registry.running() else []
    mariadb = NativeMariaDB(shape)
    mariadbs = [mariadb] if recorded.get("with_mariadb") or mariadb.running() else []
    supervisor = NativeSupervisor(shape)
    supervisors = [supervisor] if recorded.get("with_supervisor") or supervisor.running() else []
    return [
        *supervisors,
        *metrics,
        *workers,
        *nodes,
        *registries,
        *mariadbs,
        NativePostgres(shape, _secrets(shape)),
    ]


def status(config: StackConfig) -> list[ComponentStatus]:
    if _recorded_mode(config) == "compose":
        return ComposeStack(config, _secrets(config)).status()
    result = []
    components = native_components(config)
    by_kind = [c for c in components if c.name == "postgres"]
    by_kind += [c for c in components if c.name in ("mariadb", "registry")]
    by_kind += sorted((c for c in components if c.name.startswith("kafka")), key=_order)
    by_kind += sorted((c for c in components if c.name.startswith("connect")), key=_order)
    by_kind += [c for c in components if c.name in ("supervisor", "exporter", "prometheus")]
    for component in by_kind:
        record = component.pid_record()
        running = record is not None and record.alive()
        detail = f"pid {record.pid}, log {component.log_file}" if record and running else "stopped"
        if running and isinstance(component, NativeRegistry):
            health = "ready" if component.ready() else "not ready"
            detail = f"{component.url} {health}, {detail}"
        result.append(ComponentStatus(component.name, running, detail))
    return result


def _order(component: Component) -> tuple[int, str]:
    return len(component.name), component.name  # kafka, kafka-1, kafka-2


def compose_environment(config: StackConfig) -> dict[str, str]:
    """The variables infra/docker-compose.yml reads for this stack (its secrets, ports
    and database), as `stack up --mode compose` passes them."""
    return ComposeStack(config, _secrets(config)).environment()


def endpoints(config: StackConfig) -> Endpoints:
    path = config.state_dir / "endpoints.json"
    if not path.exists():
        raise StackError(f"no stack has been started in {config.state_dir}: run `cdc-ctl stack up`")
    return Endpoints.load(path)
