"""The getting-started path from a clean install of the wheel, as a new team takes it:
`pip install "cdcbox[binary,testing]"` into a fresh virtual environment (no checkout on
its path), then, with that install's own `cdc-ctl` and Python, against the stack: migrate,
append an order with the docs' producer, run the docs' handler with `cdc-ctl consume`,
watch the payment applied, and run the docs' sample handler test with pytest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql

from cdcbox.producer import NewEvent, Outbox
from cdcbox.stack.endpoints import Endpoints
from consumer.orders import SCHEMA
from tests.e2e.test_readme import block
from tests.helpers import eventually, unique

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    result = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{argv}: {result.stdout[-2000:]}{result.stderr[-2000:]}"
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with the wheel built from this checkout and its extras."""
    home = tmp_path_factory.mktemp("install")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(home / "dist"), str(ROOT)],
        home,
        env,
    )
    (wheel,) = (home / "dist").glob("*.whl")
    run([sys.executable, "-m", "venv", str(home / "venv")], home, env)
    pip = str(home / "venv/bin/pip")
    run([pip, "install", "-q", f"cdcbox[binary,testing] @ {wheel.as_uri()}"], home, env, 600)
    return home / "venv"


def test_the_getting_started_path_runs_from_a_clean_install(
    stack: Endpoints, installed: Path, tmp_path: Path
) -> None:
    project = tmp_path / "payments-service"
    project.mkdir()
    (project / "payments.py").write_text(block("class PaymentHandler(Handler):"))
    (project / "place_order.py").write_text(
        "import os\ndsn = os.environ['CDCBOX_DSN']\n" + block("outbox.append(conn, NewEvent(")
    )
    (project / "tests").mkdir()
    (project / "tests" / "test_payments.py").write_text(
        block("def test_a_payment_marks_its_order_paid")
    )
    schema = unique("getting_started")
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    dsn = f"{stack.dsn}?options={quote(f'-c search_path={schema},public')}"
    with psycopg.connect(dsn) as conn, conn.transaction():
        conn.execute(SCHEMA.read_text())
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        **stack.as_env(),
        "CDCBOX_DSN": dsn,
        "PYTHONPATH": str(project),  # the service's own modules, not the checkout
    }
    cdc_ctl, python = str(installed / "bin/cdc-ctl"), str(installed / "bin/python")

    assert "migrate" in run([cdc_ctl, "db", "migrate", "--help"], project, env)
    run([cdc_ctl, "db", "migrate", "--no-slot"], project, env)
    run([python, "place_order.py"], project, env)
    consume = subprocess.Popen(
        [cdc_ctl, "consume", "payments:PaymentHandler", "--group", unique("gs"), "--move-to-group"],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with psycopg.connect(dsn) as conn, conn.transaction():
            Outbox().append(conn, NewEvent("order", "o-42", "PaymentSucceeded", {"p": 1}))

        def paid() -> bool:
            with psycopg.connect(dsn) as conn:
                row = conn.execute("SELECT status FROM orders WHERE order_id = 'o-42'").fetchone()
            return row == ("PAID",)

        eventually(paid, timeout=120, what="the installed consumer to mark o-42 PAID")
    finally:
        consume.send_signal(signal.SIGTERM)
        _, stderr = consume.communicate(timeout=60)
    assert consume.returncode == 0, stderr[-2000:]
    # The sample test makes its own `orders` table: a schema of its own for it.
    sample_schema = unique("getting_started_test")
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(sample_schema)))
    sample_dsn = f"{stack.dsn}?options={quote(f'-c search_path={sample_schema},public')}"
    tested = run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        project,
        {**env, "CDCBOX_DSN": sample_dsn},
    )
    assert "1 passed" in tested
