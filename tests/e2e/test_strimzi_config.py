"""The `KafkaConnector` `cdc-ctl apply --emit strimzi` writes holds the config `apply`
sends to a real Connect worker for the same spec (its secret a Secret reference instead of
the worker's file), and that config, posted to the native stack's worker, runs and
publishes: the content is proven, not only the shape (`tests/unit/test_strimzi.py`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from cdcbox.cli.main import cli
from cdcbox.connect.client import ConnectClient
from cdcbox.kafka.client import KafkaSettings
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.stack.endpoints import Endpoints
from cdcbox.testing import read_topic
from tests.helpers import unique

pytestmark = pytest.mark.e2e

SECRET = re.compile(r"\$\{secrets:[^/]+/cdcbox-debezium:([^}]+)\}")


def test_the_emitted_connector_is_what_apply_sends_and_it_runs(
    stack: Endpoints,
    connect_client: ConnectClient,
    spec_file: Callable[..., tuple[Path, str]],
) -> None:
    path, name = spec_file()
    emitted = CliRunner().invoke(cli, ["apply", str(path), "--emit", "strimzi", "--json"])
    assert emitted.exit_code == 0, emitted.output
    (connector,) = [r for r in json.loads(emitted.output) if r["kind"] == "KafkaConnector"]
    applied = CliRunner().invoke(cli, ["apply", str(path)])
    assert applied.exit_code == 0, applied.output
    sent = connect_client.config(name)
    assert sent is not None
    # The worker's file of secrets, as the stack's environment names it.
    back = _as_posted(connector, stack.connect_db_secrets)
    assert back == {k: v for k, v in sent.items() if k != "name"}

    connect_client.delete(name)
    connect_client.put_config(name, back)
    connect_client.wait_until(name, "RUNNING", 120)
    aggregate = unique("k8s")
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        event_id = Outbox().append(conn, NewEvent(aggregate, "a1", "Emitted", {"from": "k8s"}))
    (record,) = read_topic(KafkaSettings(stack.bootstrap_servers), f"{name}.{aggregate}")
    assert dict(record.headers)["id"] == str(event_id).encode()


def _as_posted(connector: dict[str, Any], secrets_file: str) -> dict[str, str]:
    """The config a KafkaConnector describes, with its Secret references turned back into
    the native worker's file placeholders."""
    spec = connector["spec"]
    config = {
        **spec["config"],
        "connector.class": spec["class"],
        "tasks.max": str(spec["tasksMax"]),
    }
    return {
        key: SECRET.sub(lambda m: f"${{file:{secrets_file}:{m.group(1)}}}", str(value))
        for key, value in config.items()
    }
