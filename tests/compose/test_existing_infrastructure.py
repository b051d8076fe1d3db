"""infra/docker-compose.existing.yml, cdcbox's containers on infrastructure a team
already runs: here a native stack (`cdc-ctl stack up --mode native`) stands in for it.
The one-shot `migrate` migrates its database and applies the shipped connector to its
Connect; the exporter and the example consumers run against it."""

from __future__ import annotations

import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from cdcbox.avro import Catalogue
from cdcbox.connect.client import ConnectClient
from cdcbox.producer.outbox import Outbox
from cdcbox.resources import resource_dir
from cdcbox.stack import runner
from cdcbox.stack.compose import ComposeStack
from cdcbox.stack.config import Ports, StackConfig
from cdcbox.stack.endpoints import Endpoints
from consumer.orders import OrderLine, create_schema, place_order
from tests.helpers import eventually

pytestmark = pytest.mark.compose

HERE = Path(__file__).resolve().parent
EXPORTER_PORT = 29207
SUPERVISOR_PORT = 29206
PROJECT = "cdcbox-existing"


def host_dsn(endpoints: Endpoints) -> str:
    """The stack's DSN with its own password file (the session's PGPASSFILE is the
    compose stack's)."""
    return make_conninfo(endpoints.dsn, passfile=endpoints.pgpassfile)


@pytest.fixture
def native_stack(compose_stack: ComposeStack) -> Iterator[Endpoints]:
    """A native stack on ports of its own, its database holding the examples' tables
    (what a team's own migrations would create)."""
    config = StackConfig(
        state_dir=compose_stack.config.state_dir.with_name("compose-suite-native"),
        cache_dir=compose_stack.config.cache_dir,
        infra_dir=compose_stack.config.infra_dir,
        ports=Ports(postgres=26432, kafka=29292, controller=29293, connect=28183),
        with_registry=False,  # the compose stack's registry has the port; none is needed
        with_supervisor=False,  # its port is the default stack's
    )
    endpoints = runner.up(config, "native")
    try:
        with psycopg.connect(host_dsn(endpoints)) as conn:
            create_schema(conn)
        yield endpoints
    finally:
        runner.down(config, purge=True)


def test_the_existing_infrastructure_file_deploys_onto_a_running_stack(
    native_stack: Endpoints, compose_stack: ComposeStack, tmp_path: Path
) -> None:
    env_file = tmp_path / "existing.env"
    env_file.write_text(
        "".join(
            f"{name}={value}\n"
            for name, value in {
                **native_stack.as_env(),
                "CDCBOX_PGPASS": native_stack.pgpassfile,
                "CDCBOX_EXPORTER_PORT": str(EXPORTER_PORT),
                "CDCBOX_SUPERVISOR_PORT": str(SUPERVISOR_PORT),
                # The native stack's secret files are this user's, mode 0600.
                "CDCBOX_USER": f"{os.getuid()}:{os.getgid()}",
            }.items()
            if name != "PGPASSFILE"
        )
    )
    infra = compose_stack.config.infra_dir
    compose = [
        "docker", "compose", "-p", PROJECT, "--env-file", str(env_file),
        "-f", str(infra / "docker-compose.existing.yml"),
        "-f", str(HERE / "existing-host-network.yml"),
        "--profile", "examples",
    ]  # fmt: skip
    # Compose lets the shell's variables win over the env file: none of the suite's own.
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("CDCBOX_", "PGPASS"))},
        "CDCBOX_BUILD_BASE": compose_stack.environment()["CDCBOX_BUILD_BASE"],
    }
    up = subprocess.run(
        [*compose, "up", "--build", "--wait"], env=environment, capture_output=True, text=True
    )
    try:
        logs = subprocess.run([*compose, "logs", "migrate"], env=environment, capture_output=True)
        assert up.returncode == 0, logs.stdout.decode()[-3000:] + up.stderr[-2000:]
        status = ConnectClient(native_stack.connect_url).status("cdcbox-outbox")
        assert status is not None and status["connector"]["state"] == "RUNNING", status
        with urllib.request.urlopen(f"http://127.0.0.1:{EXPORTER_PORT}/metrics") as r:
            assert b"cdcbox_" in r.read()
        with urllib.request.urlopen(f"http://127.0.0.1:{SUPERVISOR_PORT}/metrics") as r:
            assert b"cdcbox_heal_rounds_total" in r.read()
        order_id = f"existing-{os.getpid()}"
        with psycopg.connect(host_dsn(native_stack)) as conn, conn.transaction():
            outbox = Outbox(schemas=Catalogue.load(resource_dir("schemas") / "avro"))
            place_order(conn, outbox, order_id, "customer-1", [OrderLine("sku-1", 1, 100)])

        def points() -> int:
            with psycopg.connect(host_dsn(native_stack)) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM points_pending WHERE order_id = %s", (order_id,)
                ).fetchone()
            return row[0] if row else 0

        eventually(lambda: points() == 1, timeout=120, what="the order applied by `points`")
    finally:
        subprocess.run([*compose, "down", "--volumes"], env=environment, capture_output=True)
