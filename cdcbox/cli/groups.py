"""`cdc-ctl groups`: consumer groups, their lag, and rewinding them."""

from __future__ import annotations

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
from cdcbox.ops import groups


@click.group("groups")
def groups_group() -> None:
    """Consumer groups: list, lag, reset."""


@groups_group.command("list")
@json_option
@click.pass_context
def groups_list(ctx: click.Context, as_json: bool) -> None:
    rows = groups.list_groups(settings(ctx).kafka())
    if as_json:
        print_json([{"group": g, "state": s} for g, s in rows])
    else:
        print_table(rows, ["group", "state"])


@groups_group.command("lag")
@click.argument("group")
@json_option
@click.pass_context
def groups_lag(ctx: click.Context, group: str, as_json: bool) -> None:
    rows = groups.lag(settings(ctx).kafka(), group)
    if as_json:
        print_json([{**vars(r), "lag": r.lag} for r in rows])
    else:
        print_table(
            [(r.topic, r.partition, r.committed, r.end, r.lag) for r in rows],
            ["topic", "partition", "committed", "end", "lag"],
        )


@groups_group.command("reset")
@click.argument("group")
@click.option("--to", "to", required=True, help="earliest | latest | OFFSET | ISO datetime")
@click.option("--topic", default=None, help="Only this topic's partitions.")
@yes_option
@dry_run_option
@json_option
@click.pass_context
def groups_reset(
    ctx: click.Context,
    group: str,
    to: str,
    topic: str | None,
    yes: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Move a stopped group's committed offsets (the inbox dedupes what is read again)."""
    kafka = settings(ctx).kafka()
    if not dry_run:
        groups.parse_target(to)
        groups.check_resettable(kafka, group)  # refused before asking
        confirm(yes, f"move {group!r}'s committed offsets to {to}?")
    steps = groups.reset(kafka, group, to, topic, dry_run)
    if as_json:
        print_json([vars(s) for s in steps])
    else:
        print_table(
            [(s.topic, s.partition, s.current, s.target) for s in steps],
            ["topic", "partition", "current", "new"],
        )
        click.echo("dry run: nothing changed" if dry_run else f"{group}: offsets reset")
