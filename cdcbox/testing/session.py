"""The services one test session runs against, started only as far as its tests need.

Order of preference: a stack named by `CDCBOX_*` environment variables (`cdc-ctl stack
env`), docker compose (through pytest-docker) when a Docker engine answers, else the
native stack, started here under the project's `.cdcbox/pytest-stack` and stopped at
the end. Whatever is used is migrated, and the shipped connector applied, once.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import psycopg

from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import apply, load_specs
from cdcbox.errors import CdcboxError
from cdcbox.migrate import migrate
from cdcbox.resources import resource_dir
from cdcbox.stack import runner
from cdcbox.stack.compose import ComposeStack, docker_engine_answers
from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import ENV_NAMES, MARIADB_ENV, Endpoints
from cdcbox.stack.mariadb import NativeMariaDB
from cdcbox.stack.secrets import StackSecrets, read_password_properties


def external_stack() -> Endpoints | None:
    """The stack the `CDCBOX_*` variables name, when all of them are set."""
    if all(os.environ.get(name) for name in ENV_NAMES.values()):
        return Endpoints.from_env(dict(os.environ))
    return None


class SessionStack:
    """PostgreSQL alone (`database`) or the whole stack (`everything`), each started at
    most once; `stop` stops what was started here and nothing else."""

    def __init__(self, root: Path) -> None:
        self.config = StackConfig(
            state_dir=root / ".cdcbox" / "pytest-stack",
            cache_dir=Path(os.environ.get("CDCBOX_CACHE_DIR", Path.home() / ".cache" / "cdcbox")),
            infra_dir=resource_dir("infra"),
            # CDCBOX_STACK_WITH_METRICS=1: a native stack started here has Prometheus too.
            with_metrics=os.environ.get("CDCBOX_STACK_WITH_METRICS") == "1",
            # No supervisor: tests see the pipeline as it is, faults included; the tests
            # of healing start one of their own.
            with_supervisor=False,
        )
        self.started_native = False
        self._external = external_stack()
        self._endpoints: Endpoints | None = None
        self._dsn: str | None = None
        self._mariadb_dsn: str | None = None
        self._started_mariadb: NativeMariaDB | None = None
        self._compose = contextlib.ExitStack()

    def database(self) -> str:
        """A migrated PostgreSQL (public schema), starting nothing else if it can."""
        if self._dsn is None:
            if self._external is not None or docker_engine_answers():
                return self.everything().dsn
            self._dsn, pgpassfile = runner.postgres_up(self.config)
            self.started_native = True
            os.environ["PGPASSFILE"] = pgpassfile
            secrets = StackSecrets(self.config.state_dir / "secrets")
            _migrate(self._dsn, secrets.debezium_properties)
        return self._dsn

    def mariadb(self) -> str:
        """A migrated MariaDB database (`CDCBOX_MARIADB_DSN`, or the native stack's
        MariaDB, started here beside whatever else runs, and stopped at the end)."""
        if self._mariadb_dsn is None:
            dsn = os.environ.get(MARIADB_ENV)
            if not dsn:
                server = NativeMariaDB(self.config)
                if not server.running():
                    server.start()
                    self._started_mariadb = server
                dsn = server.dsn()
            from cdcbox.mariadb import connect, migrate  # the `mariadb` extra

            conn = connect(dsn)
            try:
                migrate(conn)
            finally:
                conn.close()
            self._mariadb_dsn = dsn
        return self._mariadb_dsn

    def everything(self) -> Endpoints:
        """The whole stack, migrated, with the shipped connector RUNNING."""
        if self._endpoints is None:
            endpoints = self._external
            if endpoints is None and docker_engine_answers():
                endpoints = self._compose_up()
            elif endpoints is None:
                endpoints = runner.up(self.config, "native")
                self.started_native = True
            os.environ.update(endpoints.as_env())
            _migrate(endpoints.dsn, Path(endpoints.debezium_password_file))
            for spec in load_specs(resource_dir("connectors"), env=dict(os.environ)):
                apply(ConnectClient(endpoints.connect_url, auth=endpoints.connect_auth()), spec)
            self._endpoints, self._dsn = endpoints, endpoints.dsn
        return self._endpoints

    def _compose_up(self) -> Endpoints:
        """pytest-docker runs infra/docker-compose.yml; we wait until Connect lists
        Debezium. `stop` runs `down -v`."""
        from pytest_docker.plugin import get_docker_services

        compose = ComposeStack(self.config, StackSecrets(self.config.state_dir / "secrets"))
        compose.secrets.ensure(self.config.host, self.config.ports.postgres)
        os.environ.update(compose.environment())
        services = self._compose.enter_context(
            get_docker_services(
                f"docker compose --env-file {resource_dir('infra') / 'versions.env'}",
                str(resource_dir("infra") / "docker-compose.yml"),
                "cdcbox-pytest",
                ["up --build -d"],
                ["down -v"],
            )
        )
        endpoints = compose.endpoints()
        services.wait_until_responsive(
            check=lambda: _lists_debezium(endpoints.connect_url), timeout=300.0, pause=1.0
        )
        return endpoints

    def stop(self) -> None:
        self._compose.close()
        if self.started_native:
            runner.down(self.config)
        if self._started_mariadb is not None:
            self._started_mariadb.stop()


def _migrate(dsn: str, debezium_password_file: Path) -> None:
    with psycopg.connect(dsn) as conn:
        migrate(conn, debezium_password=read_password_properties(debezium_password_file))


def _lists_debezium(url: str) -> bool:
    try:
        return any("PostgresConnector" in p["class"] for p in ConnectClient(url).plugins())
    except CdcboxError:
        return False
