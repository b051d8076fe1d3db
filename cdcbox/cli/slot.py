"""`cdc-ctl slot`: replication slots, the WAL they retain, dropping abandoned ones."""

from __future__ import annotations

from pathlib import Path

import click

from cdcbox.cli.common import (
    confirm,
    dry_run_option,
    json_option,
    print_json,
    print_table,
    settings,
    yes_option,
)
from cdcbox.connect.connectors import connectors_using_slot, load_specs
from cdcbox.errors import ServiceUnavailable, UsageError
from cdcbox.ops import slots
from cdcbox.resources import resource_dir


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
                    s.database or "-",
                    s.plugin,
                    "active" if s.active else "inactive",
                    s.confirmed_flush_lsn,
                    s.retained_bytes,
                    "WARN" if s in over else "ok",
                )
                for s in rows
            ],
            ["slot", "database", "plugin", "state", "confirmed_flush_lsn", "retained_bytes", ""],
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
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(exists=True, path_type=Path),
    help="Connector specs that may name the slot [default: the shipped connectors/].",
)
@click.option(
    "--force",
    is_flag=True,
    help="Drop even a slot a connector names or that holds unpublished events (they are lost).",
)
@yes_option
@dry_run_option
@click.pass_context
def slot_drop(
    ctx: click.Context, name: str, spec_path: Path | None, force: bool, yes: bool, dry_run: bool
) -> None:
    """Drop an abandoned slot: refused while a connector (spec or live) names it or it
    holds outbox events not yet published, unless --force."""
    s = settings(ctx)
    specs = load_specs(spec_path or resource_dir("connectors"), names=s.names)
    client = s.connect_client() if s.connect_url else None
    try:
        claimed_by = connectors_using_slot(name, specs, client)
    except ServiceUnavailable as e:
        if not force:
            raise UsageError(
                f"cannot check which connectors use slot {name!r} ({e}); "
                "pass --force to drop it without that check"
            ) from e
        claimed_by = []
    with s.database() as conn:
        plan = slots.plan_drop(conn, name, claimed_by, names=s.names)
        if plan.loses_something and force:
            click.echo(
                f"warning: {plan.describe()}; {plan.unpublished} events will never be published",
                err=True,
            )
        if dry_run:
            click.echo(f"would drop replication slot {name!r}: {plan.describe()}")
            return
        confirm(yes, f"drop replication slot {name!r}?")
        slots.drop_slot(conn, plan, force=force)
    click.echo(f"dropped slot {name}")
