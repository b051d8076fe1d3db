"""`cdc-ctl relay run` and `cdc-ctl outbox dead list|retry`: the polling relay."""

from __future__ import annotations

import click

from cdcbox.cli.common import (
    configure_logging,
    handle_errors,
    print_json,
    print_table,
    settings,
    stop_on_signals,
)
from cdcbox.db import connect
from cdcbox.names import DbNames
from cdcbox.relay import RelayConfig, RelayWorker
from cdcbox.relay.config import default_worker_id
from cdcbox.relay.store import RelayStore

_d = RelayConfig(dsn="", bootstrap_servers="")
schema_option = click.option(
    "--schema",
    default="public",
    show_default=True,
    envvar="CDCBOX_SCHEMA",
    help="Schema of the outbox table.",
)


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
    help="Fallback when no NOTIFY arrives.",
)
@click.option(
    "--max-attempts",
    type=int,
    default=_d.max_attempts,
    show_default=True,
    envvar="CDCBOX_RELAY_MAX_ATTEMPTS",
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
    "--schema",
    default="public",
    show_default=True,
    envvar="CDCBOX_SCHEMA",
    help="Schema of the outbox table.",
)
@click.pass_context
@handle_errors
def run(
    ctx: click.Context,
    batch_size: int,
    lease: float,
    poll_interval: float,
    max_attempts: int,
    worker_id: str | None,
    listen: bool,
    unordered: bool,
    metrics_port: int | None,
    schema: str,
) -> None:
    """Publish the outbox to Kafka until SIGTERM/SIGINT (the batch in flight finishes)."""
    configure_logging()
    s = settings(ctx)
    worker = RelayWorker(
        RelayConfig(
            dsn=s.require_dsn(),
            bootstrap_servers=s.require_bootstrap(),
            worker_id=worker_id or default_worker_id(),
            batch_size=batch_size,
            lease_s=lease,
            poll_interval_s=poll_interval,
            max_attempts=max_attempts,
            ordered=not unordered,
            listen=listen,
            metrics_port=metrics_port,
        ),
        names=DbNames(schema=schema),
    )

    stop_on_signals(worker.stop)
    stats = worker.run()
    click.echo(f"sent={stats.sent} failed={stats.failed} dead={stats.dead}", err=True)


@click.group("outbox")
def outbox() -> None:
    """Inspect and repair the outbox table."""


@outbox.group("dead")
def dead() -> None:
    """Rows the polling relay gave up on."""


@dead.command("list")
@click.option("--limit", type=int, default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@schema_option
@click.pass_context
@handle_errors
def dead_list(ctx: click.Context, limit: int, as_json: bool, schema: str) -> None:
    with connect(settings(ctx).require_dsn(), autocommit=True) as conn:
        rows = RelayStore(DbNames(schema=schema)).dead(conn, limit)
    keys = [
        "id",
        "event_id",
        "aggregate_type",
        "aggregate_id",
        "event_type",
        "retry_count",
        "last_error",
    ]
    if as_json:
        print_json([dict(zip(keys, r, strict=True)) for r in rows])
    else:
        print_table([(*r[:6], (r[6] or "")[:60]) for r in rows], keys)


@dead.command("retry")
@click.argument("ids", nargs=-1, type=int, required=True)
@schema_option
@click.pass_context
@handle_errors
def dead_retry(ctx: click.Context, ids: tuple[int, ...], schema: str) -> None:
    """Put DEAD rows back to RETRY (attempts reset); the relay picks them up next."""
    with connect(settings(ctx).require_dsn(), autocommit=True) as conn:
        retried = RelayStore(DbNames(schema=schema)).retry_dead(conn, list(ids))
    missing = sorted(set(ids) - set(retried))
    click.echo(f"retrying {len(retried)} row(s)" + (f"; not DEAD: {missing}" if missing else ""))
    if missing:
        raise SystemExit(1)
