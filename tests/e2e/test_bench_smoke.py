"""scripts/bench at tiny sizes, so the benchmarks cannot rot. Numbers are not asserted:
speed is measured by scripts/bench, never by tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import cores
from bench.e2e import TOP_RATE_VARIANTS
from cdcbox.stack.endpoints import Endpoints

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_bench_smoke_run_writes_results_and_a_plot(stack: Endpoints, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench.run", "--smoke", "--out", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, **stack.as_env()},
        capture_output=True,
        text=True,
        timeout=580,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (json_path,) = tmp_path.glob("*-smoke.json")
    results = json.loads(json_path.read_text())
    assert {
        "machine",
        "producer",
        "load_generator",
        "consumer_cost",
        "e2e",
        "drain",
        "catch_up",
        "inbox_growth",
        "outbox_growth",
        "exactly_once",
        "relay",
    } <= set(results)
    assert results["machine"]["cores"] >= 1
    batch = results["consumer_cost"]["records_per_s"]["cdcbox_batch"]
    assert len(batch["values"]) == results["consumer_cost"]["rounds"] >= 2  # interleaved
    assert batch["min"] <= batch["median"] <= batch["max"]
    assert set(results["inbox_growth"]["sizes"]) == {"20000", "40000"}
    assert results["inbox_growth"]["purge"]["rows"] == 20_000  # the older half
    assert results["outbox_growth"]["purge"]["rows"] == 20_000
    for growth in ("inbox_growth", "outbox_growth"):
        for paced in results[growth]["paced_purges"]:
            assert len(paced["beside / alone"]["values"]) == paced["rounds"] >= 2  # interleaved
            assert all(rows > 0 for rows in paced["rows"])  # each round purged beside them
    cdc = results["e2e"]["cdc"]["200"]
    assert cdc["processed"] == cdc["events"] > 0
    for variant, _, _ in TOP_RATE_VARIANTS:
        run = results["e2e"][variant]["200"]
        assert run["processed"] == run["events"] > 0, variant
    # Who held the cores while pgbench wrote: the consumer and PostgreSQL among them.
    assert {cores.CONSUMER, cores.BENCHMARK} <= set(cdc["cores_by_role"])
    assert results["catch_up"]["backlog_at_restart"] > 0
    eos = results["exactly_once"]
    assert {side: len(runs) for side, runs in eos["rounds"].items()} == {
        "on": 2,
        "on, interval": 2,
        "off": 2,
    }
    for runs in eos["rounds"].values():
        assert all(run["at_rate"]["processed"] == run["at_rate"]["events"] > 0 for run in runs)
    # The benchmark's own worker runs without exactly-once: apply said it lowered the spec.
    assert "bench off: exactly-once: the Connect workers run without" in result.stdout
    assert "bench on: exactly-once" not in result.stdout
    relay = results["relay"]
    assert all(run["published"] == run["events"] > 0 for run in relay["runs"]["tail"])
    assert all(rate["min"] > 0 for rate in relay["drain_rows_per_s"].values())
    assert json_path.with_suffix(".png").stat().st_size > 10_000
    assert "| area | target |" in result.stdout  # the judged targets, as the README shows
