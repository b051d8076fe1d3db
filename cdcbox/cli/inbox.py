"""`cdc-ctl inbox`: inbox statistics and retention above the safety floor."""

from __future__ import annotations

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
from cdcbox.ops import retention
from cdcbox.ops.pacing import Pace


@click.group("inbox")
def inbox_group() -> None:
    """Inbox statistics and retention."""


@inbox_group.command("stats")
@json_option
@click.pass_context
def inbox_stats(ctx: click.Context, as_json: bool) -> None:
    s = settings(ctx)
    with s.consumer_database() as db:
        rows = retention.inbox_stats(db.sessions(), db.stores.inbox)
    if as_json:
        print_json([{"consumer": c, "status": st, "rows": n, "oldest": o} for c, st, n, o in rows])
    else:
        print_table(rows, ["consumer", "status", "rows", "oldest received"])


@inbox_group.command("purge")
@click.option("--older-than", required=True, help="e.g. 14d")
@click.option(
    "--topic-retention",
    default=None,
    help="Override the topics' retention.ms read from Kafka (e.g. 7d).",
)
@click.option(
    "--retry-window",
    default="1h",
    show_default=True,
    help="Longest time a record can spend in retries.",
)
@click.option(
    "--repair-window",
    default="3d",
    show_default=True,
    help="Time people need to repair and replay by hand.",
)
@click.option("--force", is_flag=True, help="Purge below the safety floor anyway.")
@click.option("--batch", type=int, default=5000, show_default=True)
@max_rate_option
@yes_option
@dry_run_option
@click.pass_context
def inbox_purge(
    ctx: click.Context,
    older_than: str,
    topic_retention: str | None,
    retry_window: str,
    repair_window: str,
    force: bool,
    batch: int,
    max_rate: float | None,
    yes: bool,
    dry_run: bool,
) -> None:
    """Delete processed inbox rows older than the retention, never below the safety
    floor; says how many first and asks, unless --yes."""
    s = settings(ctx)
    age = retention.parse_duration(older_than)
    retry, repair = retention.parse_duration(retry_window), retention.parse_duration(repair_window)
    pace = Pace(max_rate)
    with s.consumer_database() as db, DeletingProgress() as bar:
        conn = db.sessions()
        floor = (
            retention.InboxFloor(
                retention.parse_duration(topic_retention), retry, repair, "--topic-retention"
            )
            if topic_retention
            else retention.inbox_floor(
                s.kafka(),
                retry,
                repair,
                retention.inbox_topics(conn, s.kafka(), db.stores.bindings),
            )
        )

        def purge(dry: bool) -> int:
            return retention.purge_inbox(
                conn, age, floor, force=force, inbox=db.stores.inbox, batch=batch, progress=bar,
                dry_run=dry, pace=pace,
            )  # fmt: skip

        planned = purge(dry=True)
        if dry_run:
            click.echo(f"would delete {planned} inbox rows")
            return
        confirm(yes, f"delete {planned} processed inbox rows older than {older_than}?")
        deleted = purge(dry=False)
    click.echo(f"deleted {deleted} inbox rows")
