"""A port already taken is bad input, not a crash (issue 52, item 3): every command that
binds one exits with one line naming the address and the flag. Before, `consume
--metrics-port N` exited with socketserver's traceback (`OSError: [Errno 98]`)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdcbox.stack.endpoints import Endpoints

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]

COMMANDS = {
    "consume": ["consume", "tests.faults.handlers:EffectHandler", "--group", "taken-port"],
    "relay run": ["relay", "run"],
    "exporter": ["exporter"],
    "connectors supervise": ["connectors", "supervise"],
}


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_taken_metrics_port_is_one_line(stack: Endpoints, taken_port: int, command: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cdcbox.cli.main", *COMMANDS[command], "--metrics-port",
         str(taken_port)],
        cwd=ROOT,
        env={**os.environ, **stack.as_env()},
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert "Traceback" not in done.stderr
    assert done.returncode == 2, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert f"127.0.0.1:{taken_port}" in line
    assert "--metrics-port" in line
