"""The operator's `cdc-ctl` commands: connectors, offsets, groups, slots, retention,
dead letters, parked aggregates and `doctor`. Each parses, calls one library function,
prints (a table, or JSON with --json)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import click

from cdcbox import connector_offsets, groups, retention, slots
from cdcbox import dlq as dead_letters
from cdcbox.cli.common import handle_errors, print_json, print_table, settings
from cdcbox.cli.connectors import client, connectors_group
from cdcbox.cli.relay import outbox as outbox_group
from cdcbox.connect import ConnectClient
from cdcbox.connectors import load_specs
from cdcbox.db import connect
from cdcbox.doctor import DoctorInputs, run_checks
from cdcbox.errors import UsageError
from cdcbox.kafka_client import KafkaSettings
from cdcbox.migrate import RelayMode
from cdcbox.names import DbNames
from cdcbox.parking import Parking
from cdcbox.resources import resource_dir
from cdcbox.stack.config import StackVersions
from cdcbox.topics import topic_retention_ms

json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
yes_option = click.option("--yes", is_flag=True, help="Do not ask for confirmation.")


def _db(ctx: click.Context) -> Any:
    return connect(settings(ctx).require_dsn(), autocommit=True)


# --- connectors ------------------------------------------------------------------------
def _simple(name: str, help_text: str, action: str) -> None:
    @connectors_group.command(name, help=help_text)
    @click.argument("connector")
    @click.pass_context
    @handle_errors
    def command(ctx: click.Context, connector: str) -> None:
        getattr(client(ctx), action)(connector)
        click.echo(f"{connector}: {name} requested")


_simple("pause", "Pause a connector (tasks stay assigned).", "pause")
_simple("resume", "Resume a paused or stopped connector.", "resume")
_simple("stop", "Stop a connector (STOPPED: tasks shut down, config kept).", "stop")
_simple("delete", "Delete a connector (its slot stays: `cdc-ctl slot drop`).", "delete")


@connectors_group.command("restart")
@click.argument("connector")
@click.option("--failed-only", is_flag=True)
@click.option("--include-tasks", is_flag=True)
@click.pass_context
@handle_errors
def restart(ctx: click.Context, connector: str, failed_only: bool, include_tasks: bool) -> None:
    client(ctx).restart(connector, include_tasks=include_tasks, only_failed=failed_only)
    click.echo(f"{connector}: restart requested")


# --- connector offsets ---------------------------------------------------------------
@click.group("offsets")
def offsets() -> None:
    """A connector's source offsets (Kafka Connect's offsets API)."""


@offsets.command("show")
@click.argument("connector")
@click.pass_context
@handle_errors
def offsets_show(ctx: click.Context, connector: str) -> None:
    print_json(client(ctx).offsets(connector))


def _change(ctx: click.Context, connector: str, what: str, yes: bool, apply: Any) -> None:
    connect_client: ConnectClient = client(ctx)
    if not yes:
        click.confirm(
            f"{what} for {connector!r}: the connector is stopped meanwhile. Go on?", abort=True
        )
    before, after = connector_offsets.change_offsets(
        connect_client, connector, lambda: apply(connect_client)
    )
    click.echo("before: " + json.dumps(before))
    click.echo("after:  " + json.dumps(after))


@offsets.command("reset")
@click.argument("connector")
@yes_option
@click.pass_context
@handle_errors
def offsets_reset(ctx: click.Context, connector: str, yes: bool) -> None:
    """Forget the offsets (with snapshot.mode=no_data it resumes at the slot's position)."""
    _change(ctx, connector, "reset offsets", yes, lambda c: c.reset_offsets(connector))


@offsets.command("set")
@click.argument("connector")
@click.option("--lsn", type=int, required=True, help="WAL position (integer) to resume from.")
@yes_option
@click.pass_context
@handle_errors
def offsets_set(ctx: click.Context, connector: str, lsn: int, yes: bool) -> None:
    _change(
        ctx,
        connector,
        f"set lsn={lsn}",
        yes,
        lambda c: c.alter_offsets(connector, connector_offsets.lsn_offsets(c, connector, lsn)),
    )


# --- consumer groups -----------------------------------------------------------------
@click.group("groups")
def groups_group() -> None:
    """Consumer groups: list, lag, reset."""


@groups_group.command("list")
@json_option
@click.pass_context
@handle_errors
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
@handle_errors
def groups_lag(ctx: click.Context, group: str, as_json: bool) -> None:
    rows = groups.lag(settings(ctx).kafka(), group)
    if as_json:
        print_json(
            [
                {
                    "topic": r.topic,
                    "partition": r.partition,
                    "committed": r.committed,
                    "end": r.end,
                    "lag": r.lag,
                }
                for r in rows
            ]
        )
    else:
        print_table(
            [(r.topic, r.partition, r.committed, r.end, r.lag) for r in rows],
            ["topic", "partition", "committed", "end", "lag"],
        )


@groups_group.command("reset")
@click.argument("group")
@click.option("--to", "to", required=True, help="earliest | latest | OFFSET | ISO datetime")
@click.option("--topic", default=None)
@click.option("--dry-run", is_flag=True, help="Print what would change, change nothing.")
@json_option
@click.pass_context
@handle_errors
def groups_reset(
    ctx: click.Context, group: str, to: str, topic: str | None, dry_run: bool, as_json: bool
) -> None:
    steps = groups.reset(settings(ctx).kafka(), group, to, topic, dry_run)
    if as_json:
        print_json([vars(s) for s in steps])
    else:
        print_table(
            [(s.topic, s.partition, s.current, s.target) for s in steps],
            ["topic", "partition", "current", "new"],
        )
        click.echo("dry run: nothing changed" if dry_run else f"{group}: offsets reset")


# --- replication slots ---------------------------------------------------------------
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
    with _db(ctx) as conn:
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
    with _db(ctx) as conn:
        slots.drop_slot(conn, name)
    click.echo(f"dropped slot {name}")


# --- retention -----------------------------------------------------------------------
@outbox_group.command("stats")
@json_option
@click.pass_context
@handle_errors
def outbox_stats(ctx: click.Context, as_json: bool) -> None:
    with _db(ctx) as conn:
        stats = retention.outbox_stats(conn)
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


@outbox_group.command("purge")
@click.option("--older-than", required=True, help="e.g. 7d")
@click.option("--relay", type=click.Choice(["cdc", "polling"]), default="cdc", show_default=True)
@click.option(
    "--connector",
    default="cdcbox-outbox",
    show_default=True,
    help="CDC mode: never delete past what this connector confirmed reading.",
)
@click.option("--batch", type=int, default=5000, show_default=True)
@click.pass_context
@handle_errors
def outbox_purge(
    ctx: click.Context, older_than: str, relay: str, connector: str, batch: int
) -> None:
    cutoff = datetime.now(UTC).replace(tzinfo=None) - retention.parse_duration(older_than)
    if relay == "cdc":
        read_until = _connector_position(client(ctx), connector)
        if read_until < cutoff:
            click.echo(
                f"connector {connector} has read up to {read_until.isoformat()}Z; "
                "purging only rows before that",
                err=True,
            )
            cutoff = read_until
    with (
        _db(ctx) as conn,
        click.progressbar(
            length=1_000_000_000, label="deleting", show_percent=False, show_pos=True
        ) as bar,
    ):
        deleted = retention.purge_outbox(
            conn,
            cutoff,
            cast(RelayMode, relay),
            batch=batch,
            progress=bar.update,
        )
    click.echo(f"deleted {deleted} outbox rows created before {cutoff.isoformat()}Z")


def _connector_position(connect_client: ConnectClient, connector: str) -> datetime:
    """When the last event the connector committed an offset for was committed (UTC)."""
    found = connect_client.offsets(connector).get("offsets", [])
    ts = found[0]["offset"].get("ts_usec") if found else None
    if ts is None:
        raise UsageError(
            f"connector {connector!r} has no committed offsets yet: nothing is "
            "known to be read, so nothing may be purged in CDC mode"
        )
    return datetime.fromtimestamp(int(ts) / 1e6, UTC).replace(tzinfo=None)


@click.group("inbox")
def inbox_group() -> None:
    """Inbox statistics and retention."""


@inbox_group.command("stats")
@json_option
@click.pass_context
@handle_errors
def inbox_stats(ctx: click.Context, as_json: bool) -> None:
    with _db(ctx) as conn:
        rows = retention.inbox_stats(conn)
    if as_json:
        print_json([{"consumer": c, "status": s, "rows": n, "oldest": o} for c, s, n, o in rows])
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
@click.pass_context
@handle_errors
def inbox_purge(
    ctx: click.Context,
    older_than: str,
    topic_retention: str | None,
    retry_window: str,
    repair_window: str,
    force: bool,
    batch: int,
) -> None:
    """Delete processed inbox rows older than the retention, never below the safety floor."""
    topic_ret = (
        retention.parse_duration(topic_retention)
        if topic_retention
        else _topic_retention(settings(ctx).kafka())
    )
    floor = retention.InboxFloor(
        topic_ret, retention.parse_duration(retry_window), retention.parse_duration(repair_window)
    )
    retention.check_inbox_retention(retention.parse_duration(older_than), floor, force)
    with (
        _db(ctx) as conn,
        click.progressbar(
            length=1_000_000_000, label="deleting", show_percent=False, show_pos=True
        ) as bar,
    ):
        deleted = retention.purge_inbox(
            conn,
            retention.parse_duration(older_than),
            floor,
            force=force,
            batch=batch,
            progress=bar.update,
        )
    click.echo(f"deleted {deleted} inbox rows")


def _topic_retention(kafka: KafkaSettings) -> timedelta:
    return timedelta(milliseconds=topic_retention_ms(kafka))


# --- dead letters ---------------------------------------------------------------------
@click.group("dlq")
def dlq() -> None:
    """Dead-letter topics: list, show, replay."""


@dlq.command("list")
@click.argument("topic")
@json_option
@click.pass_context
@handle_errors
def dlq_list(ctx: click.Context, topic: str, as_json: bool) -> None:
    letters = dead_letters.read(settings(ctx).kafka(), topic)
    if as_json:
        print_json([d.summary() for d in letters])
    else:
        print_table(
            [
                (
                    d.partition,
                    d.offset,
                    d.event_id,
                    d.header("event_type"),
                    d.header("cdcbox.error.type"),
                    d.header("cdcbox.error.message")[:60],
                )
                for d in letters
            ],
            ["partition", "offset", "event_id", "event_type", "error", "message"],
        )


@dlq.command("show")
@click.argument("topic")
@click.option("--event-id", required=True)
@click.pass_context
@handle_errors
def dlq_show(ctx: click.Context, topic: str, event_id: str) -> None:
    letters = [d for d in dead_letters.read(settings(ctx).kafka(), topic) if d.event_id == event_id]
    if not letters:
        raise UsageError(f"no dead letter with event id {event_id} in {topic}")
    for d in letters:
        print_json(
            {
                **d.summary(),
                "headers": {k: v.decode(errors="replace") for k, v in d.headers},
                "value": (d.value or b"").decode(errors="replace"),
            }
        )


@dlq.command("replay")
@click.argument("topic")
@click.option("--event-id", "event_ids", multiple=True, help="Replay these (repeatable).")
@click.option("--all", "replay_all", is_flag=True, help="Replay every dead letter.")
@click.option(
    "--release/--no-release",
    default=True,
    show_default=True,
    help="Release the replayed events' parked aggregates first.",
)
@click.pass_context
@handle_errors
def dlq_replay(
    ctx: click.Context, topic: str, event_ids: tuple[str, ...], replay_all: bool, release: bool
) -> None:
    """Republish dead letters to their original topic, same key, value and event id."""
    if not event_ids and not replay_all:
        raise UsageError("name --event-id ... or --all")
    kafka = settings(ctx).kafka()
    letters = [d for d in dead_letters.read(kafka, topic) if replay_all or d.event_id in event_ids]
    if release:
        with _db(ctx) as conn:
            parking = Parking()
            for d in letters:
                with conn.transaction():
                    parking.release(
                        conn,
                        d.header("cdcbox.consumer"),
                        d.header("aggregate_type"),
                        (d.key or b"").decode(),
                    )
    with click.progressbar(length=len(letters), label="replaying") as bar:
        count = dead_letters.replay(kafka, letters, progress=bar.update)
    click.echo(f"replayed {count} dead letter(s) from {topic}")


# --- parked aggregates ------------------------------------------------------------------
@click.group("parked")
def parked() -> None:
    """Aggregates held back behind a dead-lettered event."""


@parked.command("list")
@json_option
@click.pass_context
@handle_errors
def parked_list(ctx: click.Context, as_json: bool) -> None:
    with _db(ctx) as conn, conn.transaction():
        rows = Parking().list(conn)
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
@handle_errors
def parked_release(
    ctx: click.Context, consumer: str, aggregate_type: str, aggregate_id: str
) -> None:
    with _db(ctx) as conn, conn.transaction():
        released = Parking().release(conn, consumer, aggregate_type, aggregate_id)
    if not released:
        raise UsageError(f"{aggregate_type}/{aggregate_id} is not parked for {consumer}")
    click.echo(f"released {aggregate_type}/{aggregate_id} for {consumer}")


# --- doctor ------------------------------------------------------------------------------
@click.command("doctor")
@click.argument("spec_path", required=False, type=click.Path(exists=True, path_type=Path))
@click.option("--topic", "topics", multiple=True, help="Topics that must exist (repeatable).")
@click.option("--max-retained-bytes", type=int, default=1 << 30, show_default=True)
@json_option
@click.pass_context
@handle_errors
def doctor(
    ctx: click.Context,
    spec_path: Path | None,
    topics: tuple[str, ...],
    max_retained_bytes: int,
    as_json: bool,
) -> None:
    """Check everything a deployment needs before the first event; exit 1 if anything fails."""
    s = settings(ctx)
    spec = load_specs(spec_path or resource_dir("connectors"))[0]
    conn = connect(s.dsn, autocommit=True) if s.dsn else None
    try:
        checks = run_checks(
            DoctorInputs(
                conn=conn,
                connect=ConnectClient(s.connect_url, auth=s.connect_auth)
                if s.connect_url
                else None,
                bootstrap_servers=s.bootstrap_servers,
                spec=spec,
                names=DbNames(),
                expected_debezium=StackVersions.load(
                    resource_dir("infra") / "versions.env"
                ).debezium,
                max_retained_bytes=max_retained_bytes,
            ),
            list(topics),
        )
    finally:
        if conn is not None:
            conn.close()
    if as_json:
        print_json([c.as_dict() for c in checks])
    else:
        print_table(
            [("ok" if c.ok else "FAIL", c.name, c.detail, "" if c.ok else c.fix) for c in checks],
            ["", "check", "detail", "fix"],
        )
    if not all(c.ok for c in checks):
        raise SystemExit(1)
