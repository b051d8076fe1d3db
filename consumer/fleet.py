"""The order example as a fleet: every service on a database of its own, as in
production. Orders and inventory produce (an outbox, a slot, a connector each:
`connectors/fleet/`); the others only consume (`--only inbox`: no REPLICATION role,
publication or slot). Points runs on MariaDB when the stack has one (`stack up
--with-mariadb`, CDCBOX_MARIADB_DSN): the same handler, its inbox in MariaDB.

    orders ──OrderCreated──► inventory, marketing, points, notifications, search
    orders ◄─StockReserved / StockRejected── inventory      (the way back)
    orders ──PaymentSucceeded──► orders (a payment for a cancelled order: reconciliation)

`prepare` does what a team's deploy does, with the calls `cdc-ctl db migrate --service`,
`cdc-ctl --dsn … db migrate --only inbox` and `cdc-ctl apply connectors/fleet/` make.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import ConnectorSpec, load_specs
from cdcbox.consumer import Handler
from cdcbox.db import connect
from cdcbox.mariadb import connect as connect_mariadb
from cdcbox.mariadb import migrate as migrate_mariadb
from cdcbox.mariadb.session import open_session
from cdcbox.migrate import migrate
from cdcbox.names import DbNames
from cdcbox.ops.deploy import apply_checked
from cdcbox.ops.message_checks import reads_messages
from cdcbox.resources import resource_dir
from cdcbox.stack.secrets import read_password_properties
from consumer.inventory import InventoryHandler
from consumer.marketing import CouponHandler
from consumer.notifications import NotificationHandler
from consumer.orders import OrderStatusHandler, PaymentHandler, create_schema
from consumer.points import MARIADB_TABLES, PointsHandler
from consumer.search_index import SearchIndexHandler


@dataclass(frozen=True)
class FleetService:
    """One service: its database (named as the service), its handlers, and whether it
    produces (then `connectors/fleet/<name>.yaml` declares its connector)."""

    name: str
    handlers: tuple[type[Handler], ...]
    produces: bool = False
    # Its handlers run on MariaDB as they are (their `conn` a `Session`, their SQL
    # plain): given a MariaDB server, the service's database is there.
    portable: bool = False

    def dsn(self, admin_dsn: str, mariadb_dsn: str | None = None) -> str:
        """Its database: on the PostgreSQL server of `admin_dsn`, or, for a portable
        service when `mariadb_dsn` names a MariaDB server, on that one."""
        if self.on_mariadb(mariadb_dsn):
            assert mariadb_dsn is not None
            parts = urlsplit(mariadb_dsn)
            return urlunsplit(parts._replace(path="/" + self.name))
        return make_conninfo(admin_dsn, dbname=self.name)

    def on_mariadb(self, mariadb_dsn: str | None) -> bool:
        return self.portable and bool(mariadb_dsn)


FLEET = (
    FleetService("orders", (OrderStatusHandler, PaymentHandler), produces=True),
    FleetService("inventory", (InventoryHandler,), produces=True),
    FleetService("marketing", (CouponHandler,)),
    FleetService("points", (PointsHandler,), portable=True),
    FleetService("notifications", (NotificationHandler,)),
    FleetService("search", (SearchIndexHandler,)),
)
ORDERS, INVENTORY = FLEET[0], FLEET[1]


def fleet_specs() -> list[ConnectorSpec]:
    return load_specs(resource_dir("connectors") / "fleet")


def producing_specs(specs: list[ConnectorSpec] | None = None) -> dict[str, ConnectorSpec]:
    """The connector spec of each producing service, by the fleet service it serves
    (`specs`: service specs declaring those names; the shipped `connectors/fleet/`)."""
    return {spec.service.name: spec for spec in specs or fleet_specs() if spec.service}


def service_names(service: FleetService, specs: dict[str, ConnectorSpec]) -> DbNames:
    """Where `service` keeps cdcbox's tables: its spec's schema, else public."""
    spec = specs.get(service.name)
    return spec.service.names if spec and spec.service else DbNames()


def emits_messages(service: FleetService, specs: dict[str, ConnectorSpec]) -> bool:
    """Whether `service`'s connector reads the outbox without a table."""
    spec = specs.get(service.name)
    return spec is not None and reads_messages(spec.config)


def prepare(
    admin_dsn: str,
    connect_client: ConnectClient,
    debezium_password: str | None = None,
    progress: Callable[[str], None] = print,
    specs: dict[str, ConnectorSpec] | None = None,
    mariadb_dsn: str | None = None,
) -> None:
    """Each service's database (created if missing), its business tables and what it
    needs of cdcbox (the outbox mode its spec reads), then the producing services'
    connectors. Idempotent."""
    specs = specs or producing_specs()
    for service in FLEET:
        if service.on_mariadb(mariadb_dsn):
            _prepare_on_mariadb(service.dsn(admin_dsn, mariadb_dsn))
            progress(f"{service.name}: migrated on MariaDB")
            continue
        _create_database(admin_dsn, service.name)
        with connect(service.dsn(admin_dsn)) as conn:
            create_schema(conn)
            declared = specs[service.name].service if service.produces else None
            if declared is not None and declared.schema != "public":
                conn.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                        sql.Identifier(declared.schema)
                    )
                )
                conn.commit()
            applied = migrate(
                conn,
                names=declared.names if declared else DbNames(),
                mode="messages" if emits_messages(service, specs) else "cdc",
                debezium_password=debezium_password if declared else None,
                slot=declared.slot if declared else None,
                parts=("inbox", "outbox") if declared else ("inbox",),
            )
        progress(f"{service.name}: migrated {', '.join(applied) or '(up to date)'}")
    for spec in specs.values():
        apply_checked(connect_client, spec, admin_dsn, DbNames())
        progress(f"{spec.label}: RUNNING")


def _prepare_on_mariadb(dsn: str) -> None:
    """A portable consume-only service on MariaDB (its database made by `stack up`): its
    business table, and cdcbox's consumer tables (`db migrate --only inbox` does this)."""
    session = open_session(dsn)
    try:
        session.execute(MARIADB_TABLES)
    finally:
        session.close()
    conn = connect_mariadb(dsn)
    try:
        migrate_mariadb(conn, parts=("inbox",))
    finally:
        conn.close()


def _create_database(admin_dsn: str, name: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        if conn.execute("SELECT FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def debezium_password_from_env() -> str | None:
    """The Debezium role's password, from the file `cdc-ctl stack env` names."""
    path = os.environ.get("CDCBOX_DEBEZIUM_PASSWORD_FILE")
    return read_password_properties(Path(path)) if path else None


def main() -> None:
    """`python -m consumer.fleet`: prepare the fleet on the stack the environment names
    (CDCBOX_DSN, CDCBOX_CONNECT_URL, CDCBOX_DEBEZIUM_PASSWORD_FILE, and
    CDCBOX_MARIADB_DSN when the stack runs MariaDB)."""
    prepare(
        os.environ["CDCBOX_DSN"],
        ConnectClient(os.environ["CDCBOX_CONNECT_URL"]),
        debezium_password_from_env(),
        mariadb_dsn=os.environ.get("CDCBOX_MARIADB_DSN"),
    )


if __name__ == "__main__":
    main()
