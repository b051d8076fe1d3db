"""The `cdc-ctl` entry point: global options, then one sub-group per area."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cdcbox.cli.acls import acls
from cdcbox.cli.common import CdcGroup, Settings
from cdcbox.cli.connectors import apply_command, connectors_group, diff_command
from cdcbox.cli.consume import consume
from cdcbox.cli.db import db
from cdcbox.cli.dlq import dlq
from cdcbox.cli.doctor import doctor
from cdcbox.cli.groups import groups_group
from cdcbox.cli.heal import heal, supervise_command
from cdcbox.cli.inbox import inbox_group
from cdcbox.cli.kafka_options import kafka_security_options
from cdcbox.cli.observe import exporter, top
from cdcbox.cli.offsets import offsets
from cdcbox.cli.outbox import outbox
from cdcbox.cli.parked import parked
from cdcbox.cli.relay import relay
from cdcbox.cli.schemas import schemas
from cdcbox.cli.slot import slot
from cdcbox.cli.stack import stack
from cdcbox.kafka.security import Secret
from cdcbox.limits import DEFAULT_MAX_PAYLOAD_BYTES, EventLimits


@click.group(cls=CdcGroup, context_settings={"show_default": True})
@click.option(
    "--dsn",
    envvar="CDCBOX_DSN",
    help="PostgreSQL DSN (password via PGPASSFILE); `db migrate` and `relay run` also take "
    "a MariaDB one (mariadb://…).",
)
@click.option("--bootstrap-servers", envvar="CDCBOX_BOOTSTRAP_SERVERS", help="Kafka brokers.")
@click.option("--connect-url", envvar="CDCBOX_CONNECT_URL", help="Kafka Connect REST URL.")
@click.option("--connect-user", envvar="CDCBOX_CONNECT_USER", help="Connect basic-auth user.")
@click.option(
    "--connect-password",
    envvar="CDCBOX_CONNECT_PASSWORD",
    help="Connect basic-auth password (prefer the environment variable or a file).",
)
@click.option(
    "--connect-password-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    envvar="CDCBOX_CONNECT_PASSWORD_FILE",
    help="A file holding the Connect basic-auth password (`stack up --secure` makes one).",
)
@click.option(
    "--schema",
    default="public",
    show_default=True,
    envvar="CDCBOX_SCHEMA",
    help="PostgreSQL schema of cdcbox's tables (outbox, inbox, versions, parked).",
)
@click.option(
    "--max-payload-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_PAYLOAD_BYTES,
    envvar="CDCBOX_MAX_PAYLOAD_BYTES",
    help="Largest outbox payload: the table's CHECK (db migrate), the relay's producer "
    "and doctor's checks of Kafka's limits all follow it.",
)
@kafka_security_options
@click.version_option(package_name="cdcbox")
@click.pass_context
def cli(
    ctx: click.Context,
    /,
    dsn: str | None,
    bootstrap_servers: str | None,
    connect_url: str | None,
    connect_user: str | None,
    connect_password: str | None,
    connect_password_file: Path | None,
    schema: str,
    max_payload_bytes: int,
    **kafka_options: Any,
) -> None:
    """Operate the cdcbox outbox/inbox pipeline."""
    if connect_password is None and connect_password_file is not None:
        connect_password = Secret.from_file(connect_password_file, "--connect-password-file").value
    auth = (connect_user, connect_password or "") if connect_user else None
    ctx.obj = Settings(
        dsn=dsn,
        bootstrap_servers=bootstrap_servers,
        connect_url=connect_url,
        connect_auth=auth,
        schema=schema,
        limits=EventLimits(max_payload_bytes),
        kafka_options=kafka_options,
    )


connectors_group.add_command(heal)
connectors_group.add_command(supervise_command)

for command in (
    stack,
    db,
    apply_command,
    diff_command,
    connectors_group,
    consume,
    relay,
    outbox,
    offsets,
    groups_group,
    slot,
    inbox_group,
    dlq,
    parked,
    doctor,
    acls,
    schemas,
    top,
    exporter,
):
    cli.add_command(command)


def _show_envvars(command: click.Command) -> None:
    """`--help` names the environment variable of every option that has one."""
    for param in command.params:
        if isinstance(param, click.Option) and param.envvar:
            param.show_envvar = True
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _show_envvars(sub)


_show_envvars(cli)


def main() -> None:
    cli(prog_name="cdc-ctl")


if __name__ == "__main__":
    main()
