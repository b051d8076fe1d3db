"""`cdc-ctl relay run`: the polling relay (its DEAD rows: `cdc-ctl outbox dead`)."""

from __future__ import annotations

import os

import click

from cdcbox.cli.common import logging_options, settings, stop_on_signals
from cdcbox.fault_switches import ENV as FAULT_SWITCHES_ENV
from cdcbox.fault_switches import FaultSwitches
from cdcbox.relay import RelayConfig, RelayWorker
from cdcbox.relay.config import default_worker_id
from cdcbox.telemetry.log_format import LogFormat
from cdcbox.telemetry.log_format import configure as configure_log

_d = RelayConfig(dsn="", bootstrap_servers="")


@click.group("relay")
def relay() -> None:
    """The polling relay (where CDC is not wanted): SKIP LOCKED claims, leases, backoff."""


@relay.command("run")
@click.option(
    "--batch-size",
    type=int,
    default=_d.batch_size,
    show_default=True,
    envvar="CDCBOX_RELAY_BATCH_SIZE",
)
@click.option(
    "--lease",
    type=float,
    default=_d.lease_s,
    show_default=True,
    envvar="CDCBOX_RELAY_LEASE_S",
    help="Seconds a claimed batch stays ours.",
)
@click.option(
    "--poll-interval",
    type=float,
    default=_d.poll_interval_s,
    show_default=True,
    envvar="CDCBOX_RELAY_POLL_INTERVAL_S",
    help="Seconds between polls when no NOTIFY arrives.",
)
@click.option(
    "--max-attempts",
    type=int,
    default=_d.max_attempts,
    show_default=True,
    envvar="CDCBOX_RELAY_MAX_ATTEMPTS",
)
@click.option(
    "--send-timeout",
    type=float,
    default=_d.send_timeout_s,
    show_default=True,
    envvar="CDCBOX_RELAY_SEND_TIMEOUT_S",
    help="Seconds to wait for Kafka's acknowledgements before the batch counts as failed.",
)
@click.option(
    "--worker-id",
    default=None,
    envvar="CDCBOX_RELAY_WORKER_ID",
    help="Recorded in locked_by [host-pid].",
)
@click.option(
    "--listen/--no-listen",
    default=True,
    show_default=True,
    help="Wake on LISTEN/NOTIFY from the outbox trigger.",
)
@click.option("--unordered", is_flag=True, help="Do not hold an aggregate's later events.")
@click.option("--metrics-port", type=int, default=None, envvar="CDCBOX_METRICS_PORT")
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    envvar="CDCBOX_METRICS_HOST",
    help="Address the metrics endpoint binds (0.0.0.0 in a container).",
)
@logging_options
@click.pass_context
def run(
    ctx: click.Context,
    batch_size: int,
    lease: float,
    poll_interval: float,
    max_attempts: int,
    send_timeout: float,
    worker_id: str | None,
    listen: bool,
    unordered: bool,
    metrics_port: int | None,
    metrics_host: str,
    log_level: str,
    log_format: LogFormat,
) -> None:
    """Publish the outbox to Kafka until SIGTERM/SIGINT (the batch in flight finishes)."""
    configure_log(log_level.upper(), log_format)
    s = settings(ctx)
    worker = RelayWorker(
        RelayConfig(
            dsn=s.require_dsn(),
            bootstrap_servers=s.require_bootstrap(),
            kafka_security=s.kafka_security,
            worker_id=worker_id or default_worker_id(),
            batch_size=batch_size,
            lease_s=lease,
            poll_interval_s=poll_interval,
            max_attempts=max_attempts,
            send_timeout_s=send_timeout,
            ordered=not unordered,
            listen=listen,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
            limits=s.limits,
            fault_switches=FaultSwitches.parse(os.environ.get(FAULT_SWITCHES_ENV)),
        ),
        names=s.names,
    )

    stop_on_signals(worker.stop)
    stats = worker.run()
    click.echo(f"sent={stats.sent} failed={stats.failed} dead={stats.dead}", err=True)
