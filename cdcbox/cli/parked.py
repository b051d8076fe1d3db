"""`cdc-ctl parked`: aggregates held back behind a dead-lettered event."""

from __future__ import annotations

import click

from cdcbox.cli.common import json_option, print_json, print_table, settings
from cdcbox.errors import UsageError


@click.group("parked")
def parked() -> None:
    """Aggregates held back behind a dead-lettered event."""


@parked.command("list")
@json_option
@click.pass_context
def parked_list(ctx: click.Context, as_json: bool) -> None:
    with settings(ctx).consumer_database() as db:
        conn = db.sessions()
        with conn.transaction():
            rows = db.stores.parking.list(conn)
    keys = ["consumer", "aggregate_type", "aggregate_id", "event_id", "reason", "parked_at"]
    if as_json:
        print_json([dict(zip(keys, r, strict=True)) for r in rows])
    else:
        print_table(rows, keys)


@parked.command("release")
@click.argument("consumer")
@click.argument("aggregate_type")
@click.argument("aggregate_id")
@click.pass_context
def parked_release(
    ctx: click.Context, consumer: str, aggregate_type: str, aggregate_id: str
) -> None:
    """Let the aggregate's next events be applied again (replay its dead letters first)."""
    with settings(ctx).consumer_database() as db:
        conn = db.sessions()
        with conn.transaction():
            released = db.stores.parking.release(conn, consumer, aggregate_type, aggregate_id)
    if not released:
        raise UsageError(f"{aggregate_type}/{aggregate_id} is not parked for {consumer}")
    click.echo(f"released {aggregate_type}/{aggregate_id} for {consumer}")
