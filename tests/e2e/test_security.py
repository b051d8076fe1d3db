"""Security that is tested: the Debezium role's least privilege, no secret in any output,
and names from users refused or quoted wherever they reach SQL, REST or Kafka."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
import requests
from click.testing import CliRunner, Result
from psycopg import sql

from cdcbox.cli.main import cli
from cdcbox.migrate import migrate
from cdcbox.names import DbNames
from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.postgres import NativePostgres
from cdcbox.stack.secrets import StackSecrets
from tests.helpers import dsn_as, unique

pytestmark = pytest.mark.e2e
CONNECTOR = "cdcbox-outbox"


def ctl(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def secret(path: Path) -> str:
    text = path.read_text().strip()
    return text.split("=", 1)[1] if text.startswith("password=") else text


def debezium_dsn(stack: Endpoints) -> str:
    password = secret(Path(stack.debezium_password_file))
    return psycopg.conninfo.make_conninfo(stack.dsn, user="cdcbox_debezium", password=password)


def test_the_debezium_role_reads_the_outbox_and_nothing_else(stack: Endpoints) -> None:
    table = unique("business")
    with psycopg.connect(stack.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE TABLE {} (id int)").format(sql.Identifier(table)))
    forbidden: list[sql.SQL | sql.Composed] = [
        sql.SQL("SELECT * FROM {}").format(sql.Identifier(table)),
        sql.SQL("INSERT INTO {} VALUES (1)").format(sql.Identifier(table)),
        sql.SQL("SELECT * FROM inbox_event"),
        sql.SQL("SELECT * FROM consumer_aggregate_version"),
        sql.SQL("DELETE FROM outbox_event"),
        sql.SQL("INSERT INTO outbox_event (event_id) VALUES (gen_random_uuid())"),
        sql.SQL("CREATE TABLE {} (id int)").format(sql.Identifier(unique("planted"))),
    ]
    with psycopg.connect(debezium_dsn(stack), autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM outbox_event").fetchone() is not None
        for statement in forbidden:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


READ_COMMANDS = [
    ("stack", "status"),
    ("stack", "env"),
    ("db", "sql"),
    ("connectors", "list"),
    ("connectors", "status", CONNECTOR),
    ("connectors", "status", CONNECTOR, "--json"),
    ("diff",),
    ("doctor",),
    ("doctor", "--json"),
    ("offsets", "show", CONNECTOR),
    ("slot", "status", "--json"),
    ("outbox", "stats"),
    ("outbox", "dead", "list", "--json"),
    ("inbox", "stats"),
    ("groups", "list"),
    ("parked", "list"),
]


def test_no_password_in_any_read_command_log_or_connector_config(
    stack: Endpoints, native_stack: StackConfig
) -> None:
    secrets_dir = Path(stack.debezium_password_file).parent
    passwords = [secret(secrets_dir / "debezium.properties")]
    passwords += [secret(p) for p in secrets_dir.glob("*.password")]
    assert all(len(p) >= 16 for p in passwords)  # real generated secrets, not blanks
    outputs = {" ".join(args): ctl(*args).output for args in READ_COMMANDS}
    for args, output in outputs.items():
        assert output.strip(), f"`cdc-ctl {args}` printed nothing"
    logs = {str(p): p.read_text(errors="replace") for p in native_stack.state_dir.rglob("*.log")}
    assert logs, "no stack logs found"
    config = requests.get(f"{stack.connect_url}/connectors/{CONNECTOR}/config", timeout=10)
    tasks = requests.get(f"{stack.connect_url}/connectors/{CONNECTOR}/tasks", timeout=10)
    texts = {**outputs, **logs, "GET config": config.text, "GET tasks": tasks.text}
    for where, text in texts.items():
        for password in passwords:
            assert password not in text, f"a password appears in {where}"
    assert "${file:" in json.loads(config.text)["database.password"]


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (("--schema", 'public"; DROP TABLE inbox_event; --', "inbox", "stats"), "schema"),
        (("--schema", "Public", "outbox", "stats"), "schema"),
        (("connectors", "status", "../connector-plugins"), "connector name"),
        (("slot", "drop", "x'); SELECT pg_drop_replication_slot('cdcbox_outbox'); --"), "slot"),
        (("dlq", "list", "outbox.event.x; DROP"), "outbox.event.x; DROP"),
        (("groups", "lag", "g' OR '1'='1"), "g' OR '1'='1"),
        (("parked", "release", "c'; DELETE FROM inbox_event; --", "order", "a"), "is not parked"),
    ],
)
def test_names_from_users_are_refused_or_quoted(
    stack: Endpoints, args: tuple[str, ...], names: str
) -> None:
    with psycopg.connect(stack.dsn) as conn:
        before = conn.execute("SELECT count(*) FROM inbox_event").fetchone()
    result = ctl(*args)
    assert result.exit_code != 0 or names in result.output, result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) <= 3, result.output
    assert names.lower() in result.output.lower(), result.output
    with psycopg.connect(stack.dsn) as conn:  # nothing was executed as SQL
        assert conn.execute("SELECT count(*) FROM inbox_event").fetchone() == before
        assert conn.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'cdcbox_outbox'"
        ).fetchone() == (1,)


def test_a_role_password_set_by_migrate_never_reaches_the_server_log(
    stack: Endpoints, native_stack: StackConfig
) -> None:
    """Audit 26, case 14: with log_statement=ddl PostgreSQL logs every ALTER ROLE; migrate
    sends the password as a SCRAM verifier computed on the client, so the log holds
    the statement but never the password, and the role logs in with it."""
    names = DbNames(schema=unique("pw"), debezium_role=unique("dbz"), publication=unique("pub"))
    password = unique("secret")
    log = NativePostgres(native_stack, StackSecrets(native_stack.state_dir / "secrets")).log_file
    logged_before = log.stat().st_size
    try:
        with psycopg.connect(stack.dsn) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(names.schema)))
            conn.execute("SET log_statement = 'ddl'")
            migrate(conn, names, debezium_password=password)
        with psycopg.connect(dsn_as(stack.dsn, names.debezium_role, password)) as conn:
            assert conn.execute("SELECT current_user").fetchone() == (names.debezium_role,)
        logged = log.read_bytes()[logged_before:]
        assert b"ALTER ROLE" in logged  # the statement itself was logged
        assert password.encode() not in logged
    finally:
        with psycopg.connect(stack.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(names.schema)))
            conn.execute(
                sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(names.publication))
            )
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(names.debezium_role)))
