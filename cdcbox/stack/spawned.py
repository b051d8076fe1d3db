"""A stack process of ours that answers over HTTP: started, awaited and stopped by pid."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import requests

from cdcbox.errors import StackError
from cdcbox.stack import process
from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.tls import StackTls


class Spawned(process.PidTracked):
    """A process of ours tracked by its pid file, ready when `_ready` answers."""

    name: str
    log_file: Path
    url: str
    stop_timeout_s = 30

    def _ready(self) -> bool:
        raise NotImplementedError

    def _await(self, record: process.PidRecord, timeout_s: float) -> None:
        if not process.wait_until(lambda: self._ready() or not record.alive(), timeout_s):
            raise StackError(
                f"{self.name} did not answer at {self.url} within {timeout_s:.0f} s "
                f"(log: {self.log_file}):\n{process.tail(self.log_file)}"
            )
        if not record.alive():
            raise StackError(
                f"{self.name} exited during start-up (log: {self.log_file}):\n"
                f"{process.tail(self.log_file)}"
            )


class CdcCtlService(Spawned):
    """A long-running `cdc-ctl` command of the stack, started with the stack's own
    environment and its `/metrics` on `port`; ready when its `/healthz` answers."""

    command: tuple[str, ...]
    # On a --secure stack, the Kafka principal it logs in as (None: the operator's).
    kafka_user: str | None = None

    def __init__(self, config: StackConfig, port: int) -> None:
        self.config = config
        self.port = port
        self.url = f"http://{config.host}:{port}/metrics"
        self.pid_file = config.state_dir / self.name / f"{self.name}.pid"
        self.log_file = config.state_dir / "logs" / f"{self.name}.log"

    def start(self, endpoints: Endpoints) -> None:
        if self.running():
            return
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "cdcbox.cli.main", *self.command]
        argv += ["--metrics-host", self.config.host, "--metrics-port", str(self.port)]
        env = {**os.environ, **endpoints.as_env()}
        if self.config.secure and self.kafka_user:
            tls = StackTls.of(self.config.state_dir)
            env["CDCBOX_KAFKA_USERNAME"] = self.kafka_user
            env["CDCBOX_KAFKA_PASSWORD_FILE"] = str(tls.password_file(self.kafka_user))
        record = process.spawn(argv, log_file=self.log_file, pid_file=self.pid_file, env=env)
        self._await(record, 60)

    def _ready(self) -> bool:
        return answers(f"http://{self.config.host}:{self.port}/healthz")


def answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False
