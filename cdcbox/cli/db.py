"""`cdc-ctl db`: database migrations."""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import click

from cdcbox.cli.common import settings
from cdcbox.connect.connectors import render
from cdcbox.connect.services import Service
from cdcbox.databases import database_for
from cdcbox.errors import UsageError
from cdcbox.migrate import PARTS, RELAY_MODES, Part, RelayMode, render_sql
from cdcbox.ops.message_checks import reads_messages
from cdcbox.seam.database import Migration
from cdcbox.stack.secrets import read_password_properties

only_option = click.option(
    "--only",
    type=click.Choice(PARTS),
    default=None,
    help="inbox: what a consuming service needs (no role, publication or slot; an "
    "ordinary role and wal_level=replica do); outbox: what a producing one needs "
    "[default: both].",
)


def _parts(only: str | None) -> tuple[Part, ...]:
    return PARTS if only is None else (cast(Part, only),)


@click.group("db")
def db() -> None:
    """Database objects: outbox, inbox, version tables, Debezium role, publication."""


@db.command("migrate")
@click.option(
    "--relay",
    type=click.Choice(RELAY_MODES),
    default=None,
    help="polling also creates the relay's claim indexes; messages: the outbox without a "
    "table (events as logical decoding messages, its slot required) [default: what "
    "--service's spec reads, else cdc].",
)
@click.option(
    "--debezium-password-file",
    type=click.Path(exists=True, path_type=Path),
    envvar="CDCBOX_DEBEZIUM_PASSWORD_FILE",
    help="Properties file with password=... to set on the Debezium role.",
)
@click.option(
    "--slot",
    default="cdcbox_outbox",
    show_default=True,
    envvar="CDCBOX_SLOT_NAME",
    help="The connector's replication slot, created now (cdc, messages) so that no event "
    "written before the first `cdc-ctl apply` is lost.",
)
@click.option("--no-slot", is_flag=True, help="Leave the slot to the connector's first start.")
@click.option(
    "--service",
    "service_spec",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A service spec (connectors/): migrate its database and schema and create its "
    "slot, as its connector will read them (overrides --schema and --slot).",
)
@only_option
@click.option(
    "--grant-to",
    metavar="ROLE",
    help="The service's own role (it must exist): cdcbox's tables of its schema and their "
    "sequences, nothing else; a schema other than public is closed to PUBLIC.",
)
@click.pass_context
def migrate_command(
    ctx: click.Context,
    relay: str | None,
    debezium_password_file: Path | None,
    slot: str,
    no_slot: bool,
    service_spec: Path | None,
    only: str | None,
    grant_to: str | None,
) -> None:
    """Apply pending migrations (idempotent; safe to run concurrently)."""
    parts = _parts(only)
    producing = "outbox" in parts
    password = read_password_properties(debezium_password_file) if debezium_password_file else None
    s = settings(ctx)
    dsn, names = s.require_dsn(), s.names
    if service_spec is not None:
        spec = render(service_spec, os.environ)
        service = service_of(service_spec, spec.service)
        dsn, names, slot = service.dsn(dsn), service.names, service.slot
        relay = relay or ("messages" if reads_messages(spec.config) else None)
    slotted = not no_slot and relay != "polling" and producing
    migrated = database_for(dsn).migrate(
        Migration(
            names=names,
            relay=cast(RelayMode | None, relay),
            parts=parts,
            debezium_password=password if producing else None,
            slot=slot if slotted else None,
            limits=s.limits,
            grant_to=grant_to,
        )
    )
    if migrated.created_schema:
        click.echo(f"created schema {names.schema}")
    applied = migrated.applied
    click.echo(f"applied {', '.join(applied)}" if applied else "database is up to date")


def service_of(path: Path, service: Service | None) -> Service:
    """The service the spec at `path` declares, or `UsageError` naming the file."""
    if service is None:
        raise UsageError(f"{path} declares no service (a `service:` spec of connectors/)")
    return service


@db.command("sql")
@click.option("--relay", type=click.Choice(RELAY_MODES), default="cdc", show_default=True)
@click.option(
    "--slot",
    default="cdcbox_outbox",
    show_default=True,
    envvar="CDCBOX_SLOT_NAME",
    help="The slot the messages mode's function is guarded by (create it yourself).",
)
@only_option
@click.pass_context
def sql_command(ctx: click.Context, relay: str, slot: str, only: str | None) -> None:
    """Print the migrations as one SQL script, for your own migration tool (Alembic,
    Flyway); it records the versions, so `db migrate` later finds them applied."""
    s = settings(ctx)
    script = render_sql(cast(RelayMode, relay), s.names, s.limits, _parts(only), slot)
    click.echo(script, nl=False)
