"""Prometheus scraping the pipeline (`cdc-ctl stack up --with-metrics`): a consumer's own
metrics, Debezium's through the JMX exporter agent in Connect, and the pipeline
exporter's; and the Grafana dashboard's queries, run against that Prometheus."""

from __future__ import annotations

import json
import os
import re
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests
from psycopg.conninfo import conninfo_to_dict

from cdcbox import wire
from cdcbox.connect.client import ConnectClient
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.resources import resource_dir
from cdcbox.stack.config import Ports
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.conftest import count_effects, recording_handler
from tests.helpers import eventually, unavailable, unique

pytestmark = pytest.mark.e2e
DASHBOARD = resource_dir("infra") / "observability" / "grafana" / "dashboards" / "cdcbox.json"
EVENTS = 5


@pytest.fixture
def prometheus(stack: Endpoints) -> str:
    if not stack.prometheus_url:
        unavailable("the stack runs no Prometheus: start it with `cdc-ctl stack up --with-metrics`")
    return stack.prometheus_url


def query(prometheus: str, expr: str) -> list[dict[str, Any]]:
    """The instant vector `expr` evaluates to; a PromQL error fails the test."""
    response = requests.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=10)
    body = response.json()
    assert body["status"] == "success", f"{expr}: {body.get('error')}"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def value(prometheus: str, expr: str) -> float | None:
    """The sum of `expr`'s samples, None while it has none."""
    result = query(prometheus, expr)
    return sum(float(r["value"][1]) for r in result) if result else None


def test_prometheus_scrapes_a_consumer_debezium_and_the_exporter(
    stack: Endpoints, prometheus: str, run_consumer: Any, connect_client: ConnectClient
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    # The stack's connector's series only: other connectors (the demo fleet's) come
    # and go, and their series with them.
    server = (connect_client.config("cdcbox-outbox") or {})["topic.prefix"]
    seen = f'debezium_postgres_totalnumberofeventsseen{{context="streaming",server="{server}"}}'
    eventually(lambda: value(prometheus, seen) is not None, timeout=30, what="Debezium scraped")
    before = value(prometheus, seen) or 0.0
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        Outbox().append_many(
            conn,
            [NewEvent(aggregate_type, f"a{i}", "Created", {"i": i}) for i in range(EVENTS)],
        )
    handler = recording_handler(consumer, aggregate_type, {"Created"})
    port = Ports().consumer_metrics[0]  # one of the ports the stack's Prometheus scrapes
    with run_consumer([handler], group=consumer, metrics_port=port):
        eventually(lambda: count_effects(stack.dsn, consumer) == EVENTS, what="events applied")
        processed = f'cdcbox_consumer_records_total{{consumer="{consumer}",outcome="processed"}}'
        eventually(
            lambda: value(prometheus, processed) == EVENTS,
            timeout=30,
            what="the consumer's processed count in Prometheus",
        )
        # The dashboard's consumer panels, as written, find this consumer's series: its
        # processed rate and handler latency (it saw no duplicate, so that one is empty).
        shown = panel_queries("Processed and duplicates skipped /s")[:1]
        for expr in shown + panel_queries("Handler latency"):
            eventually(
                partial(shows, prometheus, expr, consumer),
                timeout=30,
                what=f"{consumer} in the dashboard's {expr}",
            )
    eventually(
        lambda: (value(prometheus, seen) or 0.0) >= before + EVENTS,
        timeout=30,
        what="Debezium's events-seen count grown by the events written",
    )
    inbox = f'cdcbox_inbox_finished_last_minute{{consumer="{consumer}",status="PROCESSED"}}'
    lag = f'cdcbox_consumer_group_lag{{group="{consumer}"}}'
    eventually(lambda: value(prometheus, inbox) == EVENTS, timeout=30, what="the exporter's inbox")
    eventually(lambda: value(prometheus, lag) == 0, timeout=30, what="the exporter's group lag")
    running = 'cdcbox_connector_running{connector="cdcbox-outbox",task="0"}'
    assert value(prometheus, running) == 1
    assert value(prometheus, 'cdcbox_slot_retained_wal_bytes{slot="cdcbox_outbox"}') is not None


def consumers_in(prometheus: str, expr: str) -> set[str]:
    return {r["metric"].get("consumer", "") for r in query(prometheus, all_values(expr))}


def shows(prometheus: str, expr: str, consumer: str) -> bool:
    return consumer in consumers_in(prometheus, expr)


def all_values(expr: str) -> str:
    """A dashboard query with its variables set to All, as Grafana sends it."""
    return expr.replace("$consumer", ".*").replace("$group", ".*")


def panel_queries(title: str) -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    (panel,) = [p for p in dashboard["panels"] if p["title"] == title]
    return [t["expr"] for t in panel["targets"]]


def test_every_dashboard_query_runs_and_the_stacks_panels_have_data(prometheus: str) -> None:
    """Each panel's PromQL is valid against the real Prometheus; the panels of what this
    stack runs (CDC, the exporter, consumers) return series. The polling relay's panels
    may be empty: no relay with a scraped metrics port need be running."""
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = {all_values(t["expr"]) for p in dashboard["panels"] for t in p["targets"]}
    assert len(expressions) >= 20
    empty = {expr for expr in expressions if not query(prometheus, expr)}
    must_have_data = [
        "rate(cdcbox_outbox_appended_total[1m])",
        "cdcbox_slot_retained_wal_bytes",
        "cdcbox_connector_running",
        'sum by (group) (cdcbox_consumer_group_lag{group=~".*"})',
        "cdcbox_source_up",
        'debezium_postgres_millisecondsbehindsource{context="streaming"}',
        "sum by (connector) (rate(kafka_connect_source_task_source_record_write[1m]))",
    ]
    assert not empty & set(must_have_data), f"no data for {sorted(empty & set(must_have_data))}"


def top_once(stack: Endpoints, *filters: str) -> str:
    result = subprocess.run(
        ["cdc-ctl", "top", "--once", "--interval", "0.5", *filters],
        env={**os.environ, **stack.as_env()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("│").split("│")]


def frame_skeleton(text: str) -> list[str]:
    """A frame's table titles and column headers: what a frame always shows."""
    return [
        " ".join(line.split())
        for line in text.splitlines()
        if line.strip()
        and (line[0].isalpha() or line.startswith("┃"))
        and not line.startswith("cdcbox top —")
    ]


def test_top_shows_the_pipeline_as_it_is_and_the_readme_frame_is_one_of_its_frames(
    stack: Endpoints, run_consumer: Any
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        Outbox().append_many(
            conn, [NewEvent(aggregate_type, f"a{i}", "Created", {}) for i in range(EVENTS)]
        )
    handler = recording_handler(consumer, aggregate_type, {"Created"})
    with run_consumer([handler], group=consumer):
        eventually(lambda: count_effects(stack.dsn, consumer) == EVENTS, what="events applied")
    # The stack's database read as a service, as the docs' frame of the fleet is.
    database = str(conninfo_to_dict(stack.dsn)["dbname"])
    text = top_once(stack, "--consumer", consumer, "--group", consumer, "--service", database)
    topic = wire.topic_for(aggregate_type)
    (inbox_row,) = [
        cells(line) for line in text.splitlines() if f"│ {consumer} " in line and topic not in line
    ]
    assert inbox_row[:3] == [database, consumer, str(EVENTS)]  # service, consumer, processed
    assert "cdcbox-outbox" in text and "0:RUNNING" in text
    assert "cdcbox_outbox" in text
    lags = [cells(line) for line in text.splitlines() if topic in line]
    assert lags and all(row[0] == consumer and row[3] == "0" for row in lags)
    readme = (Path(__file__).resolve().parents[2] / "docs/operate/cdc-ctl.md").read_text()
    (shown,) = re.findall(r"```text\n(cdcbox top — .*?)```", readme, flags=re.S)
    assert frame_skeleton(shown) == frame_skeleton(text)
