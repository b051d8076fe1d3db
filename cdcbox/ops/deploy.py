"""Applying connector specs with the database checks that keep a connector from running
while it publishes nothing: each spec is checked against its own service's database.

Guarantee: a connector whose table is outside its publication, or whose slot belongs to
another database, is refused before Connect hears of it (`refuse_unpublishable`).
"""

from __future__ import annotations

from collections.abc import Callable

from psycopg.conninfo import make_conninfo

from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import ApplyResult, ConnectorSpec, apply
from cdcbox.db import connect
from cdcbox.names import DbNames
from cdcbox.ops.doctor import refuse_unpublishable


def spec_database(spec: ConnectorSpec, dsn: str, names: DbNames) -> tuple[str, DbNames]:
    """The DSN and names of the database `spec`'s connector reads: its service's, else
    the operator's DSN turned to the connector's `database.dbname` (the DSN may name
    another database of the server), with `names` as given."""
    if spec.service is not None:
        return spec.service.dsn(dsn), spec.service.names
    database = spec.config.get("database.dbname")
    return (make_conninfo(dsn, dbname=database) if database else dsn), names


def apply_checked(
    client: ConnectClient,
    spec: ConnectorSpec,
    dsn: str | None,
    names: DbNames,
    timeout_s: float = 120,
    progress: Callable[[str], None] | None = None,
) -> ApplyResult:
    """`apply`, after the checks against the spec's database (none without a DSN);
    `progress` also hears the checks' warnings."""
    say = progress or (lambda _message: None)
    if dsn:
        service_dsn, service_names = spec_database(spec, dsn, names)
        with connect(service_dsn, autocommit=True) as conn:
            for warning in refuse_unpublishable(conn, spec.config, service_names):
                say(f"warning: {warning}")
    return apply(client, spec, timeout_s=timeout_s, progress=say)
