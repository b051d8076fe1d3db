"""`cdc-ctl acls plan | apply`: each role its own Kafka principal, and the grants it
needs, derived from the connector specs (PATH, `connectors/` by default) and the consuming
services' handlers (`--consumer SERVICE=module:Class`, repeated)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from cdcbox.acls import cluster
from cdcbox.acls.derive import fleet_from
from cdcbox.acls.plan import ConnectRole, Fleet, plan
from cdcbox.acls.users import ensure_users
from cdcbox.cli.common import Settings, confirm, print_json
from cdcbox.cli.common import settings as settings_of
from cdcbox.cli.consume import load_handler
from cdcbox.connect import connectors as specs
from cdcbox.connect.connectors import ConnectorSpec
from cdcbox.consumer.handler import BaseHandler
from cdcbox.errors import ConfigError
from cdcbox.resources import resource_dir
from cdcbox.stack.connect_worker import GROUP
from cdcbox.stack.tls import MECHANISM

spec_path = click.argument("path", required=False, type=click.Path(exists=True, path_type=Path))
consumer_option = click.option(
    "--consumer",
    "consumers",
    multiple=True,
    metavar="SERVICE=module:Class",
    help="A consuming service and one of its handlers (repeat for more of either); its "
    "group is the service's name.",
)
group_option = click.option(
    "--connect-group",
    default=GROUP,
    show_default=True,
    help="Connect's worker group.id (its storage topics are <group>-configs, -offsets, -status).",
)


@click.group("acls")
def acls() -> None:
    """Kafka ACLs by role, derived from connector specs and handlers."""


@acls.command("plan")
@spec_path
@consumer_option
@group_option
@click.option("--json", "as_json", is_flag=True, help="Principals and grants as JSON.")
@click.pass_context
def plan_command(
    ctx: click.Context,
    path: Path | None,
    consumers: tuple[str, ...],
    connect_group: str,
    as_json: bool,
) -> None:
    """Print the grants each principal needs (nothing is sent to Kafka)."""
    fleet = fleet_of(load_specs(settings_of(ctx), path), consumers, connect_group)
    grants = plan(fleet)
    if as_json:
        print_json({"principals": fleet.principals(), "grants": [g.as_dict() for g in grants]})
        return
    for grant in grants:
        click.echo(str(grant))


@acls.command("apply")
@spec_path
@consumer_option
@group_option
@click.option("--dry-run", is_flag=True, help="Say what would change; change nothing.")
@click.option("--yes", is_flag=True, help="Remove grants without asking.")
@click.option(
    "--users-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Create each planned principal's SCRAM user that does not exist yet, its password "
    "in DIR/kafka-<user>.password (mode 0600; `stack env`'s CDCBOX_KAFKA_USERS_DIR).",
)
@click.pass_context
def apply_command(
    ctx: click.Context,
    path: Path | None,
    consumers: tuple[str, ...],
    connect_group: str,
    dry_run: bool,
    yes: bool,
    users_dir: Path | None,
) -> None:
    """Make the cluster hold exactly the plan, as a principal that may change ACLs (the
    stack's `admin`): add what is missing, remove what cdcbox granted and the plan no longer
    holds; a grant cdcbox did not create is reported and kept."""
    s = settings_of(ctx)
    fleet = fleet_of(load_specs(s, path), consumers, connect_group)
    planned = plan(fleet)
    found = cluster.current(s.kafka(), planned)
    if not dry_run:
        if found.removable:
            confirm(yes, f"remove {len(found.removable)} grants cdcbox made earlier?")
        found = cluster.apply(s.kafka(), planned)
    if users_dir is not None:
        _users(s, fleet, users_dir, dry_run)
    _report(found, dry_run)


def _report(found: cluster.Reconciliation, dry_run: bool) -> None:
    for sign, grants in (("+", found.missing), ("-", found.removable)):
        for grant in grants:
            click.echo(f"{sign} {grant}")
    for grant in found.foreign:
        click.echo(f"= {grant} (not granted by cdcbox: kept)")
    verb = "would add" if dry_run else "added"
    gone = "would remove" if dry_run else "removed"
    click.echo(
        f"{verb} {len(found.missing)}, {gone} {len(found.removable)}, "
        f"kept {len(found.foreign)} not granted by cdcbox"
    )


def _users(s: Settings, fleet: Fleet, directory: Path, dry_run: bool) -> None:
    wanted = [p.removeprefix("User:") for p in fleet.principals()]
    for made in ensure_users(s.kafka(), wanted, directory, MECHANISM, dry_run):
        if made.password_file is None:
            click.echo(f"would create SCRAM user {made.user}")
        else:
            click.echo(f"created SCRAM user {made.user} (password in {made.password_file})")


def load_specs(s: Settings, path: Path | None) -> list[ConnectorSpec]:
    """The specs at `path` (`connectors/` by default), as every command loads them."""
    return specs.load_specs(path or resource_dir("connectors"), names=s.names)


def fleet_of(
    loaded: Sequence[ConnectorSpec], consumers: Sequence[str], connect_group: str
) -> Fleet:
    """The roles of the `loaded` specs and of the `--consumer SERVICE=module:Class`
    entries."""
    handlers: dict[str, list[BaseHandler]] = {}
    for entry in consumers:
        service, sep, target = entry.partition("=")
        if not sep or not service:
            raise ConfigError(f"--consumer {entry!r}: expected SERVICE=module:Class")
        handlers.setdefault(service, []).append(load_handler(target))
    connect = ConnectRole(
        group=connect_group,
        storage_topics=tuple(f"{connect_group}-{t}" for t in ("configs", "offsets", "status")),
    )
    return fleet_from(loaded, handlers, connect)
