"""`cdc-ctl apply|diff` and `cdc-ctl connectors ...`: declarative connectors on Connect."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import click

from cdcbox.cli.acls import consumer_option, group_option
from cdcbox.cli.common import (
    confirm,
    dry_run_option,
    json_option,
    print_json,
    print_table,
    yes_option,
)
from cdcbox.cli.common import settings as settings_of
from cdcbox.cli.strimzi import emit_options, emit_strimzi
from cdcbox.connect import connectors as specs
from cdcbox.connect.offsets import delete_forgetting_offsets
from cdcbox.errors import UsageError
from cdcbox.ops import quarantine
from cdcbox.ops.deploy import apply_checked, refuse_colliding_topics, spec_topics
from cdcbox.resources import resource_dir

spec_path = click.argument("path", required=False, type=click.Path(exists=True, path_type=Path))


def _path(path: Path | None) -> Path:
    return path if path is not None else resource_dir("connectors")


@click.command("apply")
@spec_path
@click.option("--timeout", default=120.0, show_default=True, help="Seconds to wait for RUNNING.")
@emit_options
@consumer_option
@group_option
@json_option
@click.pass_context
def apply_command(
    ctx: click.Context,
    path: Path | None,
    timeout: float,
    emit: str | None,
    out: Path | None,
    kafka_cluster: str,
    namespace: str,
    image: str | None,
    consumers: tuple[str, ...],
    connect_group: str,
    as_json: bool,
) -> None:
    """Validate, diff and upsert connector specs, then wait until they run; or, with
    --emit strimzi, write them as Strimzi resources (--consumer adds each consuming
    service's KafkaUser and dead-letter topics)."""
    s = settings_of(ctx)
    loaded = specs.load_specs(_path(path), names=s.names)
    if emit is not None:
        placement = (kafka_cluster, namespace, image)
        emit_strimzi(s, loaded, consumers, connect_group, placement, out, as_json)
        return
    connect_client = s.connect_client()
    if s.dsn and s.bootstrap_servers:
        refuse_colliding_topics(s.kafka(), spec_topics(loaded, s.dsn, s.names))
    for spec in loaded:
        result = apply_checked(
            connect_client, spec, s.dsn, s.names, timeout_s=timeout, progress=_progress(spec.label)
        )
        if not result.changed:
            click.echo(f"{spec.label}: unchanged ({result.state})")
            continue
        for line in result.diff.lines():
            click.echo(f"  {line}")
        click.echo(f"{spec.label}: applied ({result.state})")


def _progress(name: str) -> Callable[[str], None]:
    """What `apply` is doing for connector `name`, on stderr, with the time so far."""
    started = time.monotonic()

    def say(message: str) -> None:
        click.echo(f"{name}: {message} ({time.monotonic() - started:.1f}s)", err=True)

    return say


@click.command("diff")
@spec_path
@json_option
@click.pass_context
def diff_command(ctx: click.Context, path: Path | None, as_json: bool) -> None:
    """Show how the specs differ from the live connector configs; exit 1 if they do.
    Secrets are shown as their placeholders, or masked."""
    s = settings_of(ctx)
    connect = s.connect_client()
    found = [
        (spec, specs.diff(connect.config(spec.name), spec.config))
        for spec in specs.load_specs(_path(path), names=s.names)
    ]
    if as_json:
        print_json([_diff_json(spec, change) for spec, change in found])
    for spec, change in [] if as_json else found:
        click.echo(f"{spec.label}: {'in sync' if change.empty else 'differs'}")
        for line in change.lines():
            click.echo(f"  {line}")
    if not all(change.empty for _, change in found):
        raise SystemExit(1)


def _diff_json(spec: specs.ConnectorSpec, change: specs.ConfigDiff) -> dict[str, object]:
    return {
        "connector": spec.name,
        "service": spec.service.name if spec.service else None,
        "in_sync": change.empty,
        "exists": change.exists,
        "added": specs.redact(change.added),
        "removed": specs.redact(change.removed),
        "changed": {
            key: [specs.redact({key: old})[key], specs.redact({key: new})[key]]
            for key, (old, new) in change.changed.items()
        },
    }


@click.group("connectors")
def connectors_group() -> None:
    """Inspect and control connectors on the Kafka Connect cluster."""


@connectors_group.command("list")
@json_option
@click.pass_context
def list_command(ctx: click.Context, as_json: bool) -> None:
    connect = settings_of(ctx).connect_client()
    rows = []
    for name in connect.connectors():
        status = connect.status(name) or {}
        tasks = status.get("tasks", [])
        rows.append(
            {
                "name": name,
                "state": status.get("connector", {}).get("state", "?"),
                "tasks": ",".join(t["state"] for t in tasks),
            }
        )
    if as_json:
        print_json(rows)
    else:
        print_table([(r["name"], r["state"], r["tasks"]) for r in rows], ["name", "state", "tasks"])


@connectors_group.command("status")
@click.argument("name")
@json_option
@click.pass_context
def status_command(ctx: click.Context, name: str, as_json: bool) -> None:
    """Connector and task states, worker, and the failed task's trace."""
    status = settings_of(ctx).connect_client().status(name)
    if status is None:
        raise UsageError(f"no connector named {name!r} (see `cdc-ctl connectors list`)")
    if as_json:
        print_json(status)
        return
    rows = [("connector", status["connector"]["state"], status["connector"]["worker_id"])]
    rows += [(f"task {t['id']}", t["state"], t["worker_id"]) for t in status.get("tasks", [])]
    print_table(rows, ["part", "state", "worker"])
    for t in status.get("tasks", []):
        if t.get("trace"):
            click.echo(f"\ntask {t['id']} trace:\n{t['trace']}")


def _simple(name: str, help_text: str, action: str) -> None:
    @connectors_group.command(name, help=help_text)
    @click.argument("connector")
    @click.pass_context
    def command(ctx: click.Context, connector: str) -> None:
        getattr(settings_of(ctx).connect_client(), action)(connector)
        click.echo(f"{connector}: {name} requested")


_simple("pause", "Pause a connector (tasks stay assigned).", "pause")
_simple("resume", "Resume a paused or stopped connector.", "resume")
_simple("stop", "Stop a connector (STOPPED: tasks shut down, config kept).", "stop")


@connectors_group.command("delete")
@click.argument("connector")
@click.option(
    "--forget-offsets",
    is_flag=True,
    help="Also delete its offsets, so a connector created again under this name starts "
    "from its slot (needed once the slot is dropped and made anew).",
)
@yes_option
@dry_run_option
@click.pass_context
def delete_command(
    ctx: click.Context, connector: str, forget_offsets: bool, yes: bool, dry_run: bool
) -> None:
    """Delete a connector. Its slot stays (`cdc-ctl slot drop`), and Connect keeps its
    offsets unless --forget-offsets. Asks first, unless --yes."""
    client = settings_of(ctx).connect_client()
    what = f"delete connector {connector}" + (" and its offsets" if forget_offsets else "")
    if client.config(connector) is None:
        raise UsageError(f"no connector {connector!r} on this Connect cluster")
    if dry_run:
        click.echo(f"would {what}")
        return
    confirm(yes, f"{what}?")
    if forget_offsets:
        delete_forgetting_offsets(client, connector)
    else:
        client.delete(connector)
    click.echo(f"{connector}: delete requested")


@connectors_group.command("restart")
@click.argument("connector")
@click.option("--failed-only", is_flag=True, help="Restart only what FAILED.")
@click.option("--include-tasks", is_flag=True, help="Restart the tasks too.")
@click.pass_context
def restart(ctx: click.Context, connector: str, failed_only: bool, include_tasks: bool) -> None:
    settings_of(ctx).connect_client().restart(
        connector, include_tasks=include_tasks, only_failed=failed_only
    )
    click.echo(f"{connector}: restart requested")


@connectors_group.command("quarantine")
@click.argument("connector")
@click.option(
    "--topic",
    default=quarantine.DEFAULT_TOPIC,
    show_default=True,
    help="Where the stuck event is published, with the error, beside the quarantine table.",
)
@yes_option
@dry_run_option
@click.pass_context
def quarantine_command(
    ctx: click.Context, connector: str, topic: str, yes: bool, dry_run: bool
) -> None:
    """Get a connector whose task FAILED on one record moving again, keeping that record:
    it is found from what the slot holds past the connector's offset, kept in the
    quarantine table and topic, and the connector resumes right after it."""
    if dry_run:
        click.echo(quarantine.plan(settings_of(ctx).connect_client(), connector, topic))
        return
    if not yes:
        click.confirm(
            f"{connector!r} is stopped meanwhile and resumes past the record it failed on. Go on?",
            abort=True,
        )
    s = settings_of(ctx)
    with s.database() as conn:
        report = quarantine.quarantine(
            s.connect_client(), conn, s.kafka(), connector, s.names, topic, s.limits
        )
    click.echo(report.describe())
