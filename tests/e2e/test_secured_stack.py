"""The pipeline through a secured stack (`cdc-ctl stack up --secure`), a stack of its own
on other ports: Kafka's only client listener is SASL_SSL with SCRAM-SHA-512 users,
PostgreSQL runs with ssl=on and the DSN verifies its certificate, Connect and Debezium
log in as their own user. An event goes from the outbox to a handler's commit through
all of it, and a client without the right credentials is refused."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from typing import Any

import psycopg
import pytest
import requests

from cdcbox.connect.client import ConnectClient
from cdcbox.consumer import Consumer, ConsumerConfig, Event, Handler, Outcome
from cdcbox.errors import CdcboxError
from cdcbox.kafka.client import Admin, KafkaSettings
from cdcbox.kafka.security import KafkaSecurity, Secret
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.tls import StackTls
from cdcbox.testing import read_topic
from tests.helpers import unique

pytestmark = pytest.mark.e2e


def kafka(config: StackConfig, security: KafkaSecurity) -> KafkaSettings:
    return KafkaSettings(config.bootstrap_servers, request_timeout_ms=5000, security=security)


def test_an_event_flows_through_sasl_ssl_and_tls_to_postgres(
    secured: tuple[StackConfig, Endpoints],
) -> None:
    config, endpoints = secured
    tls = StackTls.of(config.state_dir)
    connector = ConnectClient(endpoints.connect_url, auth=endpoints.connect_auth()).config(
        "cdcbox-outbox"
    )
    assert connector is not None and connector["database.sslmode"] == "require"
    assert tls.password("connect") not in str(connector)  # the worker holds it, not REST
    aggregate_type = unique("secured")
    with psycopg.connect(endpoints.dsn, passfile=endpoints.pgpassfile) as conn:
        row = conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        assert row.fetchone() == (True,)  # verify-full against the stack's CA
        conn.execute("CREATE TABLE IF NOT EXISTS secured_effect (event_id uuid PRIMARY KEY)")
        with conn.transaction():
            event_id = Outbox().append(
                conn, NewEvent(aggregate_type, "a1", "Created", {"over": "tls"})
            )
    security = tls.client("operator")
    (record,) = read_topic(kafka(config, security), f"outbox.event.{aggregate_type}")
    assert dict(record.headers)["id"] == str(event_id).encode()

    class Applies(Handler):
        consumer_name = unique("secured")
        aggregate_types = (aggregate_type,)
        event_types = frozenset({"Created"})

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            conn.execute("INSERT INTO secured_effect VALUES (%s)", (event.event_id,))

    consumer = Consumer(
        [Applies()],
        ConsumerConfig(
            bootstrap_servers=config.bootstrap_servers,
            dsn=f"{endpoints.dsn}&passfile={endpoints.pgpassfile}",
            group_id=Applies.consumer_name,
            kafka_security=security,
        ),
    )
    stats = consumer.run(max_records=1, idle_timeout_s=60)
    assert stats[Outcome.PROCESSED] == 1
    with psycopg.connect(endpoints.dsn, passfile=endpoints.pgpassfile) as conn:
        applied = conn.execute("SELECT 1 FROM secured_effect WHERE event_id = %s", (event_id,))
        assert applied.fetchone() == (1,)


def test_it_runs_beside_the_session_stack_each_with_its_registry(
    secured: tuple[StackConfig, Endpoints], stack: Endpoints
) -> None:
    _, endpoints = secured
    assert endpoints.registry_url and stack.registry_url
    assert endpoints.registry_url != stack.registry_url
    for url in (endpoints.registry_url, stack.registry_url):
        assert requests.get(f"{url}/subjects", timeout=10).status_code == 200


@pytest.mark.parametrize("who", ["plaintext", "wrong password", "no TLS trust"])
def test_a_client_without_the_right_credentials_is_refused(
    secured: tuple[StackConfig, Endpoints], who: str
) -> None:
    config, _ = secured
    tls = StackTls.of(config.state_dir)
    right = tls.client("operator")
    security = {
        "plaintext": KafkaSecurity(),
        "wrong password": dataclasses.replace(right, password=Secret("not-the-password")),
        "no TLS trust": dataclasses.replace(right, ca_file=None),
    }[who]
    # Refused at once, so the client gives up at its bootstrap deadline.
    with (
        pytest.raises(CdcboxError),
        Admin(kafka(config, security), bootstrap_timeout_ms=3000) as admin,
    ):
        admin.list_topics()
    with Admin(kafka(config, right)) as admin:  # the right one, for contrast
        assert admin.list_topics() is not None


def test_connects_rest_api_asks_for_basic_auth_and_cdc_ctl_passes_it(
    secured: tuple[StackConfig, Endpoints],
) -> None:
    """The worker enforces basic auth (Connect's BasicAuthSecurityRestExtension): no
    credentials or a wrong password get 401; `cdc-ctl` logs in with the user and the
    password file `stack env` names, and never prints the password."""
    _, endpoints = secured
    credentials = endpoints.connect_auth()
    assert credentials is not None
    user, password = credentials
    url = endpoints.connect_url + "/connectors"
    assert requests.get(url, timeout=10).status_code == 401
    assert requests.get(url, auth=(user, "not-the-password"), timeout=10).status_code == 401
    assert requests.get(url, auth=credentials, timeout=10).json() == ["cdcbox-outbox"]
    assert password not in endpoints.exports()

    env = {**os.environ, **endpoints.as_env()}
    env.pop("CDCBOX_CONNECT_PASSWORD", None)
    listed = subprocess.run(
        ["cdc-ctl", "connectors", "list"], env=env, capture_output=True, text=True, check=False
    )
    assert listed.returncode == 0, listed.stderr
    assert "cdcbox-outbox" in listed.stdout
    assert password not in listed.stdout + listed.stderr
    del env["CDCBOX_CONNECT_PASSWORD_FILE"]
    refused = subprocess.run(
        ["cdc-ctl", "connectors", "list"], env=env, capture_output=True, text=True, check=False
    )
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1 and "HTTP 401" in refused.stderr
