"""The compose file's `observability` profile: Debian's Prometheus in its container,
with the native stack's configuration and alert rules, scraping the example consumers,
the pipeline exporter and Connect's JMX exporter over the project's network."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from cdcbox.stack.compose import ComposeStack
from cdcbox.stack.endpoints import Endpoints
from tests.compose.conftest import PROMETHEUS_PORT
from tests.helpers import eventually

pytestmark = pytest.mark.compose


def api(path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/{path}") as r:
        return json.load(r)["data"]


def test_prometheus_scrapes_every_target_of_the_compose_stack(
    containers: Endpoints, compose_stack: ComposeStack
) -> None:
    up = compose_stack.run_compose(
        "--profile", "observability", "up", "--detach", "--wait", "exporter", "prometheus"
    )
    assert up.returncode == 0, up.stderr[-3000:]
    try:

        def health() -> dict[str, str]:
            return {t["scrapeUrl"]: t["health"] for t in api("targets")["activeTargets"]}

        eventually(
            lambda: set(health().values()) == {"up"},
            timeout=120,
            what="every target of the observability profile scraped",
        )
        jobs = {t["labels"]["job"] for t in api("targets")["activeTargets"]}
        assert jobs == {"cdcbox-consumer", "cdcbox-exporter", "cdcbox-supervisor", "kafka-connect"}
        # six services, the exporter, the supervisor, one worker
        assert len(health()) == 6 + 1 + 1 + 1

        def rounds() -> float:
            result = api("query?query=cdcbox_heal_rounds_total")["result"]
            return float(result[0]["value"][1]) if result else 0.0

        eventually(lambda: rounds() > 0, timeout=60, what="the supervisor's rounds scraped")
        groups = api("rules")["groups"]
        assert groups and all(group["rules"] for group in groups), "alerts.yml loaded"
    finally:
        compose_stack.run_compose("--profile", "observability", "rm", "--stop", "--force",
                                  "exporter", "prometheus")  # fmt: skip
