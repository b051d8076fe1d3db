"""`cdc-ctl stack`: run the local PostgreSQL + Kafka + Connect/Debezium stack."""

from __future__ import annotations

import dataclasses
import functools
import logging
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar, cast, get_args

import click

from cdcbox.cli.common import (
    default_cache_dir,
    default_state_dir,
    json_option,
    print_json,
    print_table,
    settings,
)
from cdcbox.resources import resource_dir
from cdcbox.stack import runner
from cdcbox.stack.config import ExactlyOnce, Ports, StackConfig
from cdcbox.stack.runner import Mode

# Each port option of the stack commands: (option, environment variable, `Ports` field,
# what it is). Every port is one, so two stacks (other state dirs) run side by side.
PORT_OPTIONS = (
    ("--pg-port", "CDCBOX_PG_PORT", "postgres", "PostgreSQL."),
    ("--kafka-port", "CDCBOX_KAFKA_PORT", "kafka", "Kafka (node i: + 2i)."),
    ("--controller-port", "CDCBOX_CONTROLLER_PORT", "controller", "KRaft's controller."),
    ("--connect-port", "CDCBOX_CONNECT_PORT", "connect", "Connect's REST API (worker j: + j)."),
    (
        "--registry-port",
        "CDCBOX_REGISTRY_PORT",
        "registry",
        "The schema registry's API (its health checks on the next port).",
    ),
    ("--mariadb-port", "CDCBOX_MARIADB_PORT", "mariadb", "MariaDB (--with-mariadb)."),
    ("--prometheus-port", "CDCBOX_PROMETHEUS_PORT", "prometheus", "Prometheus (--with-metrics)."),
    ("--exporter-port", "CDCBOX_EXPORTER_PORT", "exporter", "The exporter (--with-metrics)."),
    ("--supervisor-port", "CDCBOX_SUPERVISOR_PORT", "supervisor", "The supervisor's /metrics."),
)


def _config(state_dir: Path | None, cache_dir: Path | None, ports: dict[str, int]) -> StackConfig:
    fields: dict[str, Any] = {**ports, "registry_management": ports["registry"] + 1}
    return StackConfig(
        state_dir=(state_dir or default_state_dir()).resolve(),
        cache_dir=(cache_dir or default_cache_dir()).resolve(),
        infra_dir=resource_dir("infra"),
        ports=Ports(**fields),
        limits=settings(click.get_current_context()).limits,
    )


P = ParamSpec("P")
R = TypeVar("R")
_defaults = Ports()
state_options = [
    click.option(
        "--state-dir",
        type=click.Path(path_type=Path),
        envvar="CDCBOX_STACK_DIR",
        help="Data, logs, pids and secrets of this stack [.cdcbox/stack].",
    ),
    click.option(
        "--cache-dir",
        type=click.Path(path_type=Path),
        envvar="CDCBOX_CACHE_DIR",
        help="Resolved jars, shared by all stacks [~/.cache/cdcbox].",
    ),
    *(
        click.option(
            flag,
            field,
            type=click.IntRange(1, 65535),
            default=getattr(_defaults, field),
            envvar=env,
            show_default=True,
            help=what,
        )
        for flag, env, field, what in PORT_OPTIONS
    ),
    click.option(
        "--compose-project",
        default="cdcbox",
        envvar="CDCBOX_COMPOSE_PROJECT",
        show_default=True,
        help="Compose: the project's name (its containers, network and volumes).",
    ),
]


def with_stack_config(fn: Callable[Concatenate[StackConfig, P], R]) -> Callable[P, R]:
    """The state options (`--state-dir`, `--cache-dir`, the ports) on a command, handed to
    it as one `StackConfig`, its first argument."""

    @functools.wraps(fn)
    def command(*args: P.args, **kwargs: P.kwargs) -> R:
        options = {name: kwargs.pop(name) for name in _STATE_OPTIONS}
        config = _config(
            state_dir=cast("Path | None", options["state_dir"]),
            cache_dir=cast("Path | None", options["cache_dir"]),
            ports={field: cast(int, options[field]) for _, _, field, _ in PORT_OPTIONS},
        )
        config = dataclasses.replace(config, compose_project=cast(str, options["compose_project"]))
        return fn(config, *args, **kwargs)

    for option in reversed(state_options):
        command = option(command)
    return command


_STATE_OPTIONS = (
    "state_dir",
    "cache_dir",
    *(field for _, _, field, _ in PORT_OPTIONS),
    "compose_project",
)


@click.group("stack")
def stack() -> None:
    """Start, stop and inspect the local stack (native processes or docker compose)."""


@stack.command()
@with_stack_config
@click.option(
    "--mode",
    type=click.Choice(["native", "compose"]),
    default=None,
    help="Force a runner; default: compose when a Docker engine answers, else native.",
)
@click.option(
    "--brokers",
    type=click.Choice(["1", "3"]),
    default="1",
    show_default=True,
    envvar="CDCBOX_STACK_BROKERS",
    help="KRaft nodes; 3 is the production shape (RF 3, min.insync.replicas 2).",
)
@click.option(
    "--connect-workers",
    type=click.IntRange(1, 4),
    default=1,
    show_default=True,
    envvar="CDCBOX_STACK_CONNECT_WORKERS",
    help="Kafka Connect workers in one group (REST on --connect-port + i).",
)
@click.option(
    "--secure",
    is_flag=True,
    envvar="CDCBOX_STACK_SECURE",
    help="Kafka over SASL_SSL (SCRAM-SHA-512 users) and PostgreSQL with ssl=on, from a "
    "generated CA; `stack env` then prints the clients' CDCBOX_KAFKA_* settings.",
)
@click.option(
    "--with-metrics",
    is_flag=True,
    envvar="CDCBOX_STACK_WITH_METRICS",
    help="Also Prometheus (Debian's package) on port 59090, the pipeline exporter on "
    "59109 and the JMX exporter in Connect (58180 + i); consumers run with "
    "--metrics-port 29100..29104 and relays with 29105..29106 are scraped.",
)
@click.option(
    "--build-ca",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    envvar="CDCBOX_BUILD_CA",
    help="Compose: a PEM CA bundle the image builds trust (pip, Maven), for a network "
    "that intercepts TLS, e.g. /etc/ssl/certs/ca-certificates.crt.",
)
@click.option(
    "--exactly-once",
    type=click.Choice(list(get_args(ExactlyOnce))),
    default="enabled",
    show_default=True,
    envvar="CDCBOX_STACK_EXACTLY_ONCE",
    help="Every Connect worker's exactly.once.source.support: enabled puts no duplicate "
    "on the topics after a worker crash; preparing is the step of a rolling upgrade.",
)
@click.option(
    "--registry/--no-registry",
    "with_registry",
    default=True,
    envvar="CDCBOX_STACK_REGISTRY",
    help="The schema registry (Apicurio, Confluent-compatible API on port 28081; Java 21+, "
    "found beside the stack's JDK or named by CDCBOX_REGISTRY_JAVA_HOME) [on].",
)
@click.option(
    "--with-mariadb",
    is_flag=True,
    envvar="CDCBOX_STACK_MARIADB",
    help="Also MariaDB (Debian's mariadb-server, installed when absent) on port 23306, for "
    "services whose outbox lives there; `stack env` then exports CDCBOX_MARIADB_DSN.",
)
@click.option(
    "--supervisor/--no-supervisor",
    "with_supervisor",
    default=True,
    envvar="CDCBOX_STACK_SUPERVISOR",
    help="`cdc-ctl connectors supervise` beside Connect (its /metrics on port 59110): it "
    "restarts FAILED or stuck tasks and ends Kafka transactions that hold readers back "
    "[on].",
)
def up(
    config: StackConfig,
    mode: str | None,
    brokers: str,
    connect_workers: int,
    secure: bool,
    with_metrics: bool,
    build_ca: Path | None,
    exactly_once: str,
    with_registry: bool,
    with_mariadb: bool,
    with_supervisor: bool,
) -> None:
    """Start PostgreSQL, the schema registry, Kafka, Kafka Connect and the supervisor;
    wait until each answers."""
    config = dataclasses.replace(
        config,
        brokers=int(brokers),
        connect_workers=connect_workers,
        secure=secure,
        with_metrics=with_metrics,
        build_ca=build_ca,
        exactly_once=cast(ExactlyOnce, exactly_once),
        with_registry=with_registry,
        with_mariadb=with_mariadb,
        with_supervisor=with_supervisor,
    )
    _show_steps()
    endpoints = runner.up(config, cast("Mode | None", mode))
    click.echo(f"stack is up ({config.state_dir}); to use it:", err=True)
    click.echo(endpoints.exports(), nl=False)


def _show_steps() -> None:
    """The steps of `up` (cdcbox.stack.steps) on stderr, unless logging is set up."""
    logger = logging.getLogger("cdcbox.stack")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("stack: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


@stack.command()
@with_stack_config
@click.option("--purge", is_flag=True, help="Also delete data, logs and secrets.")
def down(config: StackConfig, purge: bool) -> None:
    """Stop exactly the processes `up` started (by pid)."""
    runner.down(config, purge=purge)
    click.echo("stack is down" + (" and purged" if purge else ""))


@stack.command()
@with_stack_config
@json_option
def status(config: StackConfig, as_json: bool) -> None:
    """Show each component's state; exit 1 unless every one runs."""
    rows = runner.status(config)
    if as_json:
        print_json([vars(r) for r in rows])
    else:
        print_table(
            [(r.name, "running" if r.running else "stopped", r.detail) for r in rows],
            ["component", "state", "detail"],
        )
    if not all(r.running for r in rows):
        raise SystemExit(1)


@stack.command()
@with_stack_config
@click.option(
    "--compose",
    "for_compose",
    is_flag=True,
    help="Also what the raw `docker compose` commands of the docs need: the secrets "
    "directory, the ports and the database the compose file reads.",
)
def env(config: StackConfig, for_compose: bool) -> None:
    """Print the DSN, bootstrap servers and Connect URL as shell exports."""
    exports = runner.endpoints(config).exports()
    if for_compose:
        compose = runner.compose_environment(config)
        exports += "".join(f"export {k}={shlex.quote(v)}\n" for k, v in compose.items())
        exports += (
            "# then: docker compose -p cdcbox --env-file infra/versions.env "
            "-f infra/docker-compose.yml COMMAND\n"
        )
    click.echo(exports, nl=False)
