"""MariaDB DSNs: what they hold, and that no message repeats a password."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from cdcbox.cli.main import cli
from cdcbox.dsn import database_kind
from cdcbox.errors import ConfigError
from cdcbox.mariadb import MariaDbDsn


def test_a_dsn_with_an_option_file() -> None:
    dsn = MariaDbDsn.parse("mariadb://cdcbox@db.internal/orders?option_file=/run/secrets/my.cnf")
    assert dsn == MariaDbDsn("cdcbox", "db.internal", 3306, "orders", None, "/run/secrets/my.cnf")
    assert dsn.describe() == "cdcbox@db.internal:3306/orders"


def test_a_password_in_the_dsn_is_read_and_never_described() -> None:
    dsn = MariaDbDsn.parse("mysql://app:s%40cret@127.0.0.1:53306/orders")
    assert (dsn.password, dsn.port) == ("s@cret", 53306)
    assert "cret" not in dsn.describe()


@pytest.mark.parametrize(
    ("dsn", "message"),
    [
        ("mariadb://app:hunter2@host/", "expected mariadb://user@host"),
        ("mariadb://app:hunter2@host/db?sslmode=require", r"unknown option\(s\) sslmode"),
        ("mariadb://app:hunter2@host:port/db", "Port could not be cast"),
    ],
)
def test_a_bad_dsn_is_refused_without_its_password(dsn: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        MariaDbDsn.parse(dsn)
    assert "hunter2" not in str(info.value)


def test_the_scheme_chooses_the_database() -> None:
    assert database_kind("mariadb://a@h/d") == database_kind("MySQL://a@h/d") == "MariaDB"
    assert database_kind("postgresql://a@h/d") == database_kind("dbname=x") == "PostgreSQL"


def test_migrate_refuses_what_mariadb_lacks_in_one_line() -> None:
    dsn = "mariadb://app:hunter2@127.0.0.1:1/orders"
    for args, message in (
        (["db", "migrate", "--relay", "cdc"], "polling relay only"),
        (["db", "migrate", "--relay", "messages"], "polling relay only"),
    ):
        result = CliRunner().invoke(cli, ["--dsn", dsn, *args])
        assert result.exit_code == 2, result.output
        assert message in result.output and "hunter2" not in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_a_postgresql_command_given_a_mariadb_dsn_says_so() -> None:
    result = CliRunner().invoke(cli, ["--dsn", "mariadb://app:hunter2@h/d", "outbox", "stats"])
    assert result.exit_code == 2
    assert "a MariaDB DSN where PostgreSQL is needed" in result.output
    assert "hunter2" not in result.output


def test_a_mariadb_dsn_without_the_driver_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pymysql", None)  # what an install without it sees
    result = CliRunner().invoke(
        cli, ["--dsn", "mariadb://app:hunter2@127.0.0.1:1/orders", "db", "migrate"]
    )
    assert result.exit_code == 2, result.output
    assert "pip install 'cdcbox[mariadb]'" in result.output
    assert len(result.output.strip().splitlines()) == 1 and "hunter2" not in result.output
