"""`cdc-ctl top` (a live view of the pipeline) and `cdc-ctl exporter` (the same state
for Prometheus): shells over `cdcbox.observe.pipeline_state`."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import click
from psycopg.conninfo import make_conninfo
from rich.console import Console
from rich.live import Live

from cdcbox.cli.common import Settings, settings, stop_on_signals
from cdcbox.errors import ConfigError
from cdcbox.observe.exporter import serve_exporter
from cdcbox.observe.pipeline_state import ServiceDb, Sources, check_logins, read_state
from cdcbox.observe.top_view import SlotClock, frame


def filter_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--service`, `--group` and `--consumer`, the options `top` and `exporter` share."""
    command = click.option(
        "--service",
        "services",
        multiple=True,
        envvar="CDCBOX_SERVICES",
        help="A service's database to read, NAME (the database NAME of --dsn's cluster) or "
        "NAME=DSN (repeatable; CDCBOX_SERVICES: space-separated) [the one --dsn].",
    )(command)
    command = click.option(
        "--consumer",
        "consumers",
        multiple=True,
        help="Only consumer names matching this shell pattern (repeatable) [all].",
    )(command)
    return click.option(
        "--group",
        "groups",
        multiple=True,
        help="Only consumer groups matching this shell pattern (repeatable) [all].",
    )(command)


def service_databases(s: Settings, services: tuple[str, ...]) -> tuple[ServiceDb, ...]:
    """`--service` values: NAME=DSN, or NAME for that database of --dsn's cluster."""
    found = []
    for value in services:
        name, _, dsn = value.partition("=")
        if not name:
            raise ConfigError(f"--service {value!r}: expected NAME or NAME=DSN")
        if not dsn:
            if not s.dsn:
                raise ConfigError(
                    f"--service {name}: no DSN given and no --dsn / CDCBOX_DSN to take its "
                    "cluster from (use NAME=DSN)"
                )
            dsn = make_conninfo(s.dsn, dbname=name)
        found.append(ServiceDb(name, dsn))
    return tuple(found)


def _sources(
    s: Settings, groups: tuple[str, ...], consumers: tuple[str, ...], services: tuple[str, ...]
) -> Sources:
    """Every service the settings name; at least one must be named."""
    if not (s.dsn or s.bootstrap_servers or s.connect_url or services):
        raise ConfigError(
            "nothing to read: set CDCBOX_DSN, CDCBOX_BOOTSTRAP_SERVERS or CDCBOX_CONNECT_URL "
            "(see `cdc-ctl stack env`)"
        )
    return Sources(
        dsn=s.dsn,
        kafka=s.kafka() if s.bootstrap_servers else None,
        connect=s.connect_client() if s.connect_url else None,
        names=s.names,
        groups=groups,
        consumers=consumers,
        services=service_databases(s, services),
    )


@click.command("top")
@click.option("--once", is_flag=True, help="Print one frame and exit (rates over --interval).")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2),
    default=1.0,
    show_default=True,
    help="Seconds between readings.",
)
@filter_options
@click.pass_context
def top(
    ctx: click.Context,
    once: bool,
    interval: float,
    groups: tuple[str, ...],
    consumers: tuple[str, ...],
    services: tuple[str, ...],
) -> None:
    """Live view: outbox, slots, connectors, consumers' rates and consumer-group lag;
    with --service, each service's outbox and inbox, named."""
    sources = _sources(settings(ctx), groups, consumers, services)
    # Not a terminal (a pipe, a file): wide enough that no column is cut.
    console = Console() if sys.stdout.isatty() else Console(width=160)
    clock = SlotClock()
    previous = read_state(sources)
    clock.observe(previous)
    if once:
        time.sleep(interval)  # the two readings a rate needs, `interval` apart
        current = read_state(sources)
        console.print(frame(current, previous, clock.observe(current)))
        return
    stop = threading.Event()
    stop_on_signals(stop.set)
    with Live(frame(previous), console=console, auto_refresh=False, screen=False) as live:
        while not stop.wait(interval):
            current = read_state(sources)
            live.update(frame(current, previous, clock.observe(current)), refresh=True)
            previous = current


@click.command("exporter")
@click.option(
    "--metrics-host", default="127.0.0.1", show_default=True, envvar="CDCBOX_METRICS_HOST"
)
@click.option(
    "--metrics-port", type=int, default=9109, show_default=True, envvar="CDCBOX_EXPORTER_PORT"
)
@filter_options
@click.pass_context
def exporter(
    ctx: click.Context,
    metrics_host: str,
    metrics_port: int,
    groups: tuple[str, ...],
    consumers: tuple[str, ...],
    services: tuple[str, ...],
) -> None:
    """Serve the pipeline's state (outbox, slots, connectors, inbox, group lag) to
    Prometheus on /metrics, one fresh reading per scrape, until SIGTERM/SIGINT; with
    --service, each service's outbox and inbox with a `service` label."""
    sources = _sources(settings(ctx), groups, consumers, services)
    check_logins(sources)
    server = serve_exporter(sources, metrics_host, metrics_port)
    click.echo(f"exporter: serving http://{metrics_host}:{metrics_port}/metrics", err=True)
    stop = threading.Event()
    stop_on_signals(stop.set)
    stop.wait()
    server.shutdown()
