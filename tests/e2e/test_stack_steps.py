"""`cdc-ctl stack up` says what it is doing: each step on stderr as it begins and ends,
with its time. Run against the session's running native stack, where `up` is idempotent
(every component is found running), so the test adds no start-up of its own."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cdcbox.cli.main import cli
from cdcbox.stack import runner
from cdcbox.stack.config import StackConfig
from cdcbox.stack.supervisor import NativeSupervisor

pytestmark = pytest.mark.e2e


def test_stack_up_reports_each_step_with_its_time(native_stack: StackConfig) -> None:
    ports = native_stack.ports
    up = [
            sys.executable,
            "-m",
            "cdcbox.cli.main",
            "stack",
            "up",
            "--mode",
            "native",
            "--state-dir",
            str(native_stack.state_dir),
            "--cache-dir",
            str(native_stack.cache_dir),
            "--pg-port",
            str(ports.postgres),
            "--kafka-port",
            str(ports.kafka),
            "--controller-port",
            str(ports.controller),
            "--connect-port",
            str(ports.connect),
        ]  # fmt: skip
    result = subprocess.run(up, capture_output=True, text=True, timeout=300, check=False)
    supervisor = NativeSupervisor(native_stack)
    try:
        assert result.returncode == 0, result.stderr[-2000:]
        # The supervisor is started by default, and `stack status` lists it.
        listed = {c.name: c for c in runner.status(native_stack)}
        assert listed["supervisor"].running, listed
        assert supervisor.pid_record() is not None
    finally:  # the rest of the session sees the pipeline unhealed, as it started
        supervisor.stop()
        again = subprocess.run([*up, "--no-supervisor"], capture_output=True, timeout=300)
        assert again.returncode == 0, again.stderr[-2000:]
        assert "supervisor" not in {c.name for c in runner.status(native_stack)}
    steps = [line for line in result.stderr.splitlines() if line.startswith("stack: ")]
    components = (
        "PostgreSQL",
        "Apicurio Registry",
        "jars",
        "Kafka 4",
        "Kafka Connect connect ",
        "supervisor (`connectors supervise`)",
    )
    for component in components:
        begun = [s for s in steps if component in s and s.endswith("...")]
        ended = [s for s in steps if component in s and ": done in " in s]
        assert begun and ended, f"{component}: {steps}"
    # Maven's part, summarised: the session's stack resolved the jars, so they are cached.
    assert any(s.startswith("stack:   kafka jars: cached in ") for s in steps), steps
    assert "CDCBOX_DSN" in result.stdout  # the exports still go to stdout
    assert f"CDCBOX_REGISTRY_URL=http://127.0.0.1:{ports.registry}/apis/" in result.stdout
    if native_stack.with_metrics:  # kept by an `up` without --with-metrics, and named
        assert "CDCBOX_PROMETHEUS_URL=" in result.stdout


def test_stack_status_names_the_registry_with_its_port_and_health(
    native_stack: StackConfig,
) -> None:
    result = CliRunner().invoke(
        cli, ["stack", "status", "--json", "--state-dir", str(native_stack.state_dir)]
    )
    assert result.exit_code == 0, result.output
    by_name = {c["name"]: c for c in json.loads(result.output)}
    registry = by_name["registry"]
    assert registry["running"] is True
    url = f"http://127.0.0.1:{native_stack.ports.registry}/apis/ccompat/v7"
    assert registry["detail"].startswith(f"{url} ready, pid ")
    assert list(by_name)[:2] == ["postgres", "registry"]
