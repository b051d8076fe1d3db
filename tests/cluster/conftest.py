"""A second native stack in the production shape for tests/cluster: three KRaft nodes
(RF 3, min.insync.replicas 2) and two Connect workers in one group, on ports of its own
beside the session's single-node stack. Started by the first cluster test, stopped by
pid at the end of the session."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import apply, load_specs
from cdcbox.migrate import migrate
from cdcbox.resources import resource_dir
from cdcbox.stack import runner
from cdcbox.stack.config import Ports, StackConfig
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.secrets import read_password_properties
from cdcbox.testing.session import SessionStack
from tests.conftest import ROOT

CLUSTER = StackConfig(
    state_dir=ROOT / ".cdcbox" / "pytest-cluster",
    cache_dir=SessionStack(ROOT).config.cache_dir,
    infra_dir=resource_dir("infra"),
    ports=Ports(postgres=56432, kafka=60092, controller=60093, connect=59083),
    brokers=3,
    connect_workers=2,
    # The session stack's registry serves it too (the cluster tests use none).
    with_registry=False,
    with_supervisor=False,  # its port is the default stack's
)


@pytest.fixture(scope="session")
def cluster() -> Iterator[tuple[StackConfig, Endpoints]]:
    try:  # `down` also when `up` fails midway: what it started must not outlive the tests
        started = runner.up(CLUSTER, "native")
        # This process's PGPASSFILE is the session stack's: name the cluster's in its DSN.
        endpoints = dataclasses.replace(
            started, dsn=make_conninfo(started.dsn, passfile=started.pgpassfile)
        )
        debezium_password = read_password_properties(Path(endpoints.debezium_password_file))
        with psycopg.connect(endpoints.dsn) as conn:
            migrate(conn, debezium_password=debezium_password)
        env = {**os.environ, **endpoints.as_env()}
        for spec in load_specs(resource_dir("connectors"), env=env):
            apply(ConnectClient(endpoints.connect_url, auth=endpoints.connect_auth()), spec)
        yield CLUSTER, endpoints
    finally:
        runner.down(CLUSTER)
