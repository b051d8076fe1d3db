"""A refused login is a configuration error, not an outage to wait out (issue 52, item 2):
every long-running command given a wrong password exits within seconds with one line,
the driver's own words intact and the password nowhere. Before, `relay run` on MariaDB
logged "went away … retrying" every second for ever, and the log's redaction turned the
driver's "(using password: YES)" into "(using password: '***'"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from cdcbox.stack.endpoints import Endpoints
from tests.helpers import unique

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
WRONG = "Wr0ng-pass-" + unique("x")


@pytest.fixture(scope="module")
def postgres_dsn(stack: Endpoints) -> str:
    """A login role of the stack's PostgreSQL, addressed with a wrong password."""
    role = unique("login").replace("-", "_")
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'the-right-one'")
    host = urlsplit(stack.dsn)
    return f"postgresql://{role}:{WRONG}@{host.hostname}:{host.port}{host.path}"


@pytest.fixture(scope="module")
def mariadb_wrong_dsn(mariadb_dsn: str) -> str:
    where = urlsplit(mariadb_dsn)
    return f"mariadb://cdcbox:{WRONG}@{where.hostname}:{where.port}{where.path}"


def run(stack: Endpoints, dsn: str, *command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **stack.as_env(), "CDCBOX_DSN": dsn}
    env.pop("PGPASSFILE", None)
    return subprocess.run(
        [sys.executable, "-m", "cdcbox.cli.main", *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,  # the bug: these ran for ever
    )


def error_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines that say what went wrong: one, and no traceback or retry beside it."""
    assert "Traceback" not in done.stderr
    assert "retrying" not in done.stderr
    return [x for x in done.stderr.splitlines() if "error" in x.lower()]


COMMANDS = {
    "relay run": ("relay", "run", "--no-listen"),
    "consume": ("consume", "tests.faults.handlers:EffectHandler", "--group", "wrong-password"),
    "exporter": ("exporter", "--metrics-port", "0"),
    "connectors supervise": ("connectors", "supervise"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_postgres_wrong_password_exits_with_one_line(
    stack: Endpoints, postgres_dsn: str, command: str
) -> None:
    done = run(stack, postgres_dsn, *COMMANDS[command])
    assert done.returncode == 2, done.stderr
    (line,) = error_lines(done)
    assert "refused the login" in line
    assert "password authentication failed for user" in line
    assert WRONG not in done.stderr + done.stdout


@pytest.mark.parametrize("command", ["relay run", "consume"])
def test_mariadb_wrong_password_exits_with_one_line(
    stack: Endpoints, mariadb_wrong_dsn: str, command: str
) -> None:
    done = run(stack, mariadb_wrong_dsn, *COMMANDS[command])
    assert done.returncode == 2, done.stderr
    (line,) = error_lines(done)
    assert "refused the login" in line
    assert "Access denied for user 'cdcbox'" in line
    assert "(using password: YES)" in line  # the driver's words, not taken for a secret
    assert WRONG not in done.stderr + done.stdout
