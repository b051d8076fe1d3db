"""`cdc-ctl slot`: replication slots, the WAL they retain, dropping abandoned ones."""

from __future__ import annotations

import click

from cdcbox import slots
from cdcbox.cli.common import (
    handle_errors,
    json_option,
    print_json,
    print_table,
    settings,
    yes_option,
)


@click.group("slot")
def slot() -> None:
    """Replication slots: WAL they retain, dropping abandoned ones."""


@slot.command("status")
@click.option(
    "--warn-bytes",
    type=int,
    default=1 << 30,
    show_default=True,
    envvar="CDCBOX_SLOT_WARN_BYTES",
    help="Exit 1 when a slot retains more WAL.",
)
@json_option
@click.pass_context
@handle_errors
def slot_status(ctx: click.Context, warn_bytes: int, as_json: bool) -> None:
    with settings(ctx).database() as conn:
        rows = slots.slot_status(conn)
    over = [s for s in rows if s.retained_bytes > warn_bytes]
    if as_json:
        print_json([{**vars(s), "over_threshold": s in over} for s in rows])
    else:
        print_table(
            [
                (
                    s.name,
                    s.plugin,
                    "active" if s.active else "inactive",
                    s.confirmed_flush_lsn,
                    s.retained_bytes,
                    "WARN" if s in over else "ok",
                )
                for s in rows
            ],
            ["slot", "plugin", "state", "confirmed_flush_lsn", "retained_bytes", ""],
        )
    for s in over:
        click.echo(
            f"warning: slot {s.name} retains {s.retained_bytes} bytes of WAL (> {warn_bytes})",
            err=True,
        )
    if over:
        raise SystemExit(1)


@slot.command("drop")
@click.argument("name")
@yes_option
@click.pass_context
@handle_errors
def slot_drop(ctx: click.Context, name: str, yes: bool) -> None:
    """Drop an inactive slot (its connector then starts over from its snapshot mode)."""
    if not yes:
        click.confirm(f"drop replication slot {name!r}?", abort=True)
    with settings(ctx).database() as conn:
        slots.drop_slot(conn, name)
    click.echo(f"dropped slot {name}")
