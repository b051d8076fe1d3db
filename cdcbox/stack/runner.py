"""`stack up|down|status|env`: one entry point over the native and the compose runner.

`up` is idempotent (a running component is left alone) and records which mode it used,
so `down` stops exactly what `up` started.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Literal

from cdcbox.errors import StackError
from cdcbox.stack.compose import ComposeStack, docker_engine_answers
from cdcbox.stack.config import StackConfig
from cdcbox.stack.connect_worker import NativeConnect
from cdcbox.stack.endpoints import ComponentStatus, Endpoints
from cdcbox.stack.jars import resolve_jars
from cdcbox.stack.kafka import NativeKafka
from cdcbox.stack.postgres import NativePostgres
from cdcbox.stack.secrets import StackSecrets

Mode = Literal["native", "compose"]


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
    secrets = _prepare(config, mode)
    if mode == "compose":
        endpoints = ComposeStack(config, secrets).up()
    else:
        endpoints = _native_up(config, secrets)
    endpoints.save(config.state_dir / "endpoints.json")
    return endpoints


def _prepare(config: StackConfig, mode: Mode) -> StackSecrets:
    config.state_dir.mkdir(parents=True, exist_ok=True)
    config.state_dir.chmod(0o755)
    secrets = _secrets(config)
    secrets.ensure(config.host, config.ports.postgres)
    _mode_file(config).write_text(json.dumps({"mode": mode}) + "\n")
    return secrets


def postgres_up(config: StackConfig) -> tuple[str, str]:
    """Start only the native PostgreSQL (for tests and tools that need nothing else);
    returns its DSN and the PGPASSFILE that holds its password. A later `up` of the
    same state directory leaves it running and adds the rest; `down` stops it."""
    secrets = _prepare(config, "native")
    postgres = NativePostgres(config, secrets)
    postgres.start()
    return postgres.dsn(), str(secrets.pgpass)


def _native_up(config: StackConfig, secrets: StackSecrets) -> Endpoints:
    postgres = NativePostgres(config, secrets)
    postgres.start()
    layout = resolve_jars(config)
    kafka = NativeKafka(config, layout)
    kafka.start()
    connect = NativeConnect(config, layout, kafka.bootstrap)
    connect.start()
    return Endpoints(
        dsn=postgres.dsn(),
        pgpassfile=str(secrets.pgpass),
        bootstrap_servers=kafka.bootstrap,
        connect_url=connect.url,
        connect_db_host=config.host,
        connect_db_port=str(config.ports.postgres),
        connect_db_name=config.database,
        connect_db_secrets=str(secrets.debezium_properties),
        debezium_password_file=str(secrets.debezium_properties),
    )


def _recorded_mode(config: StackConfig) -> Mode | None:
    try:
        mode = json.loads(_mode_file(config).read_text())["mode"]
    except (OSError, ValueError, KeyError):
        return None
    return "compose" if mode == "compose" else "native"


def down(config: StackConfig, purge: bool = False) -> None:
    """Stop what `up` started, in reverse order, by pid; `purge` also deletes its data."""
    mode = _recorded_mode(config)
    if mode == "compose":
        ComposeStack(config, _secrets(config)).down(purge=purge)
    elif mode == "native":
        errors = []
        for component in _native_components(config):
            try:
                component.stop()
            except (StackError, OSError) as e:
                errors.append(f"{component.name}: {e}")
        if errors:
            raise StackError("could not stop: " + "; ".join(errors))
    if purge and config.state_dir.exists():
        if mode == "native":
            NativePostgres(config, _secrets(config)).purge()
        shutil.rmtree(config.state_dir)


def _native_components(config: StackConfig) -> list[NativeConnect | NativeKafka | NativePostgres]:
    """The native components in stop order; built without jars, pid files suffice."""
    kafka = NativeKafka(config, None)
    return [
        NativeConnect(config, None, kafka.bootstrap),
        kafka,
        NativePostgres(config, _secrets(config)),
    ]


def status(config: StackConfig) -> list[ComponentStatus]:
    if _recorded_mode(config) == "compose":
        return ComposeStack(config, _secrets(config)).status()
    result = []
    for component in reversed(_native_components(config)):
        record = component.pid_record()
        running = record is not None and record.alive()
        detail = f"pid {record.pid}, log {component.log_file}" if record and running else "stopped"
        result.append(ComponentStatus(component.name, running, detail))
    return result


def endpoints(config: StackConfig) -> Endpoints:
    path = config.state_dir / "endpoints.json"
    if not path.exists():
        raise StackError(f"no stack has been started in {config.state_dir}: run `cdc-ctl stack up`")
    return Endpoints.load(path)
