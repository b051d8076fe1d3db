"""`cdc-ctl offsets`: a connector's source offsets (Kafka Connect's offsets API)."""

from __future__ import annotations

import json
from collections.abc import Callable

import click

from cdcbox.cli.common import (
    LSN,
    confirm,
    dry_run_option,
    json_option,
    print_json,
    settings,
    yes_option,
)
from cdcbox.connect import offsets as connector_offsets
from cdcbox.connect.client import ConnectClient


@click.group("offsets")
def offsets() -> None:
    """A connector's source offsets (Kafka Connect's offsets API)."""


@offsets.command("show")
@click.argument("connector")
@json_option
@click.pass_context
def offsets_show(ctx: click.Context, connector: str, as_json: bool) -> None:
    """The connector's stored source offsets, one line per source partition."""
    stored = settings(ctx).connect_client().offsets(connector)
    if as_json:
        print_json(stored)
        return
    entries = stored.get("offsets") or []
    if not entries:
        click.echo(f"{connector}: no stored offsets")
    for entry in entries:
        partition = ", ".join(f"{k}={v}" for k, v in (entry.get("partition") or {}).items())
        offset = ", ".join(f"{k}={v}" for k, v in (entry.get("offset") or {}).items())
        click.echo(f"{partition or '-'}: {offset or '-'}")


def _change(
    ctx: click.Context,
    connector: str,
    what: str,
    yes: bool,
    apply: Callable[[ConnectClient], None],
    dry_run: bool = False,
) -> None:
    client = settings(ctx).connect_client()
    if dry_run:
        click.echo(f"would {what} for {connector!r}; its offsets now: ")
        click.echo(json.dumps(client.offsets(connector)))
        return
    confirm(yes, f"{what} for {connector!r}: the connector is stopped meanwhile. Go on?")
    before, after = connector_offsets.change_offsets(client, connector, lambda: apply(client))
    click.echo("before: " + json.dumps(before))
    click.echo("after:  " + json.dumps(after))


@offsets.command("reset")
@click.argument("connector")
@yes_option
@dry_run_option
@click.pass_context
def offsets_reset(ctx: click.Context, connector: str, yes: bool, dry_run: bool) -> None:
    """Forget the offsets (with snapshot.mode=no_data it resumes at the slot's position)."""
    _change(ctx, connector, "reset offsets", yes, lambda c: c.reset_offsets(connector), dry_run)


@offsets.command("set")
@click.argument("connector")
@click.option(
    "--lsn",
    type=LSN,
    required=True,
    help="WAL position to resume from: 0/16B3748 (as PostgreSQL writes it) or an integer.",
)
@yes_option
@dry_run_option
@click.pass_context
def offsets_set(ctx: click.Context, connector: str, lsn: int, yes: bool, dry_run: bool) -> None:
    """Point the connector at a WAL position (events before it are not published again)."""
    _change(
        ctx,
        connector,
        f"set lsn={lsn}",
        yes,
        lambda c: c.alter_offsets(connector, connector_offsets.lsn_offsets(c, connector, lsn)),
        dry_run,
    )
