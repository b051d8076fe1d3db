"""The supervisor beside the stack's Connect workers: `cdc-ctl connectors supervise`,
started by `stack up` unless `--no-supervisor`, stopped by `stack down` by its pid.

It heals what leaves the pipeline RUNNING while it publishes nothing (cdcbox.ops.heal):
it restarts FAILED or stuck tasks and ends transactions that hold readers back; it never
kills a process. Its counters are on its own `/metrics` (`ports.supervisor`).
"""

from __future__ import annotations

import os
import sys

from cdcbox.stack import process
from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.spawned import Spawned, answers


class NativeSupervisor(Spawned):
    """`cdc-ctl connectors supervise` for this stack, with the stack's own environment."""

    name = "supervisor"

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.port = config.ports.supervisor
        self.url = f"http://{config.host}:{self.port}/metrics"
        self.pid_file = config.state_dir / "supervisor" / "supervisor.pid"
        self.log_file = config.state_dir / "logs" / "supervisor.log"

    def start(self, endpoints: Endpoints) -> None:
        if self.running():
            return
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "cdcbox.cli.main", "connectors", "supervise"]
        argv += ["--metrics-host", self.config.host, "--metrics-port", str(self.port)]
        env = {**os.environ, **endpoints.as_env()}
        record = process.spawn(argv, log_file=self.log_file, pid_file=self.pid_file, env=env)
        self._await(record, 60)

    def _ready(self) -> bool:
        return answers(f"http://{self.config.host}:{self.port}/healthz")
