"""`stack up --with-metrics`: Prometheus (Debian's package) scraping the stack, and the
pipeline exporter (`cdc-ctl exporter`) it scrapes; the Connect workers' JMX exporter
agent is started with the workers (cdcbox.stack.connect_worker).

Prometheus runs with infra/observability/prometheus.yml, the file the compose
`observability` profile mounts; this module only writes its target files
(targets/*.yml, file-based discovery) with the stack's loopback ports. Grafana is not
started: neither Debian nor PyPI provides it (the compose profile runs it).
"""

from __future__ import annotations

import shutil

import yaml

from cdcbox.stack import process
from cdcbox.stack.config import StackConfig
from cdcbox.stack.spawned import CdcCtlService, Spawned, answers
from cdcbox.stack.system import ensure_prometheus


class NativeExporter(CdcCtlService):
    """`cdc-ctl exporter` for this stack."""

    name = "exporter"
    command = ("exporter",)

    def __init__(self, config: StackConfig) -> None:
        super().__init__(config, config.ports.exporter)


class NativePrometheus(Spawned):
    """Debian's prometheus with the shared configuration, on the stack's loopback."""

    name = "prometheus"

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.root = config.state_dir / "prometheus"
        self.url = f"http://{config.host}:{config.ports.prometheus}"
        self.pid_file = self.root / "prometheus.pid"
        self.log_file = config.state_dir / "logs" / "prometheus.log"

    def start(self) -> None:
        if self.running():
            return
        binary = ensure_prometheus()
        self.write_configuration()
        record = process.spawn(
            [
                binary,
                f"--config.file={self.root / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.root / 'data'}",
                "--storage.tsdb.retention.time=2d",
                f"--web.listen-address={self.config.host}:{self.config.ports.prometheus}",
            ],
            log_file=self.log_file,
            pid_file=self.pid_file,
        )
        self._await(record, 60)

    def write_configuration(self) -> None:
        """The shared prometheus.yml and its alert rules, and target files naming this
        stack's ports."""
        targets = self.root / "targets"
        targets.mkdir(parents=True, exist_ok=True)
        observability = self.config.infra_dir / "observability"
        for name in ("prometheus.yml", "alerts.yml"):
            shutil.copyfile(observability / name, self.root / name)
        host, ports = self.config.host, self.config.ports
        workers = range(self.config.connect_workers)
        jobs = {
            "consumer": [f"{host}:{p}" for p in ports.consumer_metrics],
            "relay": [f"{host}:{p}" for p in ports.relay_metrics],
            "exporter": [f"{host}:{ports.exporter}"],
            "supervisor": [f"{host}:{ports.supervisor}"] if self.config.with_supervisor else [],
            "connect": [f"{host}:{ports.connect_metrics + w}" for w in workers],
        }
        for job, addresses in jobs.items():
            (targets / f"{job}.yml").write_text(yaml.safe_dump([{"targets": addresses}]))

    def _ready(self) -> bool:
        return answers(f"{self.url}/-/ready")
