"""`cdc-ctl outbox`: backlog statistics, retention, and the polling relay's DEAD rows."""

from __future__ import annotations

from typing import cast

import click

from cdcbox.cli.common import (
    DeletingProgress,
    confirm,
    dry_run_option,
    json_option,
    max_rate_option,
    print_json,
    print_table,
    settings,
    yes_option,
)
from cdcbox.connect import offsets as connector_offsets
from cdcbox.migrate import RelayMode, recorded_relay_mode
from cdcbox.ops import retention
from cdcbox.ops.pacing import Pace
from cdcbox.postgres.relay_store import RelayStore
from cdcbox.postgres.relay_store import outbox_stats as outbox_stats_of


@click.group("outbox")
def outbox() -> None:
    """Inspect, purge and repair the outbox table."""


@outbox.command("stats")
@json_option
@click.pass_context
def outbox_stats(ctx: click.Context, as_json: bool) -> None:
    s = settings(ctx)
    with s.database() as conn:
        stats = outbox_stats_of(conn, s.names)
    if as_json:
        print_json(vars(stats))
        return
    print_table(sorted(stats.by_status.items()), ["status", "rows"])
    age = stats.oldest_pending_age_s
    click.echo(
        f"oldest pending: {age:.0f}s; dead: {stats.dead}"
        if age is not None
        else f"no pending rows; dead: {stats.dead}"
    )


@outbox.command("purge")
@click.option("--older-than", required=True, help="e.g. 7d")
@click.option(
    "--relay",
    type=click.Choice(["cdc", "polling"]),
    default=None,
    help="Which relay the database serves [read from its migrations]; a contradiction is refused.",
)
@click.option(
    "--connector",
    default="cdcbox-outbox",
    show_default=True,
    help="CDC mode: never delete past what this connector confirmed reading.",
)
@click.option("--batch", type=int, default=5000, show_default=True)
@max_rate_option
@yes_option
@dry_run_option
@click.pass_context
def outbox_purge(
    ctx: click.Context,
    older_than: str,
    relay: str | None,
    connector: str,
    batch: int,
    max_rate: float | None,
    yes: bool,
    dry_run: bool,
) -> None:
    """Delete old rows no relay needs (CDC: only what the connector has read); says how
    many first and asks, unless --yes."""
    s = settings(ctx)
    age = retention.parse_duration(older_than)
    pace = Pace(max_rate)
    with s.database() as conn, DeletingProgress() as bar:
        mode = cast(RelayMode, relay) if relay else recorded_relay_mode(conn, s.names)
        read_until, config = None, None
        if mode == "cdc":
            client = s.connect_client()
            read_until = connector_offsets.read_position(client, connector)
            config = client.config(connector) or {}

        def purge(dry: bool) -> retention.OutboxPurge:
            return retention.purge_outbox(
                conn,
                age,
                mode,
                read_until=read_until,
                names=s.names,
                batch=batch,
                progress=bar,
                connector_config=config,
                dry_run=dry,
                pace=pace,
            )

        plan = purge(dry=True)
        if plan.capped_by_connector:
            click.echo(
                f"connector {connector} has read up to {plan.cutoff.isoformat()}Z; "
                "purging only rows before that",
                err=True,
            )
        before = f"created before {plan.cutoff.isoformat()}Z"
        if dry_run:
            click.echo(f"would delete {plan.deleted} outbox rows {before}")
            return
        confirm(yes, f"delete {plan.deleted} outbox rows {before}?")
        result = purge(dry=False)
    click.echo(f"deleted {result.deleted} outbox rows created before {result.cutoff.isoformat()}Z")


@outbox.group("dead")
def dead() -> None:
    """Rows the polling relay gave up on."""


@dead.command("list")
@click.option("--limit", type=int, default=100, show_default=True)
@json_option
@click.pass_context
def dead_list(ctx: click.Context, limit: int, as_json: bool) -> None:
    s = settings(ctx)
    with s.database() as conn:
        rows = RelayStore(s.names).dead(conn, limit)
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
@click.pass_context
def dead_retry(ctx: click.Context, ids: tuple[int, ...]) -> None:
    """Put DEAD rows back to RETRY (attempts reset); the relay picks them up next."""
    s = settings(ctx)
    with s.database() as conn:
        retried = RelayStore(s.names).retry_dead(conn, list(ids))
    missing = sorted(set(ids) - set(retried))
    click.echo(f"retrying {len(retried)} row(s)" + (f"; not DEAD: {missing}" if missing else ""))
    if missing:
        raise SystemExit(1)
