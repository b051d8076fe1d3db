"""The polling relay refuses a database it cannot serve (issue 42): one migrated for CDC,
whose connector already publishes the outbox (the relay would publish every event a
second time), and `--listen` where no NOTIFY trigger wakes it (it would poll in silence).
`doctor` says how relays of a database are woken. Against real PostgreSQL; the relay
never reaches Kafka."""

from __future__ import annotations

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from cdcbox.cli.main import cli
from cdcbox.errors import UsageError
from cdcbox.names import DbNames
from cdcbox.ops.doctor import relay_wakeup_check
from cdcbox.producer import NewEvent, Outbox
from cdcbox.relay import RelayConfig, RelayWorker
from tests.helpers import free_port, migrated_schema, unique

pytestmark = pytest.mark.integration


def relay(database: str, names: DbNames, listen: bool) -> RelayWorker:
    nowhere = f"127.0.0.1:{free_port()}"
    config = RelayConfig(dsn=database, bootstrap_servers=nowhere, listen=listen)
    return RelayWorker(config, names=names)


def test_a_database_migrated_for_cdc_is_refused_before_any_row_is_claimed(
    database: str,
) -> None:
    names = migrated_schema(database, DbNames(schema=unique("cdc")), mode="cdc")
    with psycopg.connect(database) as conn, conn.transaction():
        Outbox(names).append(conn, NewEvent("order", "o1", "Placed", {}))
    worker = relay(database, names, listen=False)
    try:
        with pytest.raises(UsageError, match="cdc-ctl db migrate --relay polling"):
            worker.run_once()
    finally:
        worker.close()
    with psycopg.connect(database) as conn:
        statuses = conn.execute(
            sql.SQL("SELECT status, locked_by FROM {}").format(names.table("outbox"))
        ).fetchall()
    assert statuses == [("PENDING", None)]  # nothing claimed


def test_relay_run_on_a_cdc_database_is_one_line_and_exit_2(database: str) -> None:
    names = migrated_schema(database, DbNames(schema=unique("cdc")), mode="cdc")
    result = CliRunner().invoke(
        cli,
        ["--dsn", database, "--bootstrap-servers", f"127.0.0.1:{free_port()}",
         "--schema", names.schema, "relay", "run", "--no-listen"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "migrated for CDC" in line and "cdc-ctl db migrate --relay polling" in line


def test_listen_without_a_notify_trigger_is_refused_and_no_listen_polls(database: str) -> None:
    names = migrated_schema(database, DbNames(schema=unique("quiet")))
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP TRIGGER {} ON {}").format(
                sql.Identifier(f"{names.outbox}_notify"), names.table("outbox")
            )
        )
    listening = relay(database, names, listen=True)
    try:
        with pytest.raises(UsageError, match="--no-listen"):
            listening.run_once()
    finally:
        listening.close()
    polling = relay(database, names, listen=False)
    try:
        assert polling.run_once() == 0  # the explicit choice of polling: it runs
    finally:
        polling.close()


def test_doctor_says_how_relays_are_woken(database: str) -> None:
    cdc = migrated_schema(database, DbNames(schema=unique("cdc")), mode="cdc")
    polling = migrated_schema(database, DbNames(schema=unique("poll")))
    with psycopg.connect(database, autocommit=True) as conn:
        on_cdc, on_polling = relay_wakeup_check(conn, cdc), relay_wakeup_check(conn, polling)
        conn.execute(
            sql.SQL("DROP TRIGGER {} ON {}").format(
                sql.Identifier(f"{polling.outbox}_notify"), polling.table("outbox")
            )
        )
        without_trigger = relay_wakeup_check(conn, polling)
    assert on_cdc.ok and "the connector publishes" in on_cdc.detail
    assert on_polling.ok and "NOTIFY" in on_polling.detail
    assert not without_trigger.ok and "--no-listen" in without_trigger.fix
