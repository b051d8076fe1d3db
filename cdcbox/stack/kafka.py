"""Kafka for the native stack: one combined broker/controller node in KRaft mode.

On a single node every internal topic's replication factor must be 1; the storage is
formatted once (standalone controller quorum) and reused on later starts.
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path

from cdcbox.errors import CdcboxError, StackError
from cdcbox.kafka_client import Admin, KafkaSettings
from cdcbox.stack import process
from cdcbox.stack.config import StackConfig
from cdcbox.stack.jars import JvmLayout

_SINGLE_NODE = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    # Consumers in tests and the demo join one at a time; do not wait 3 s for more.
    "group.initial.rebalance.delay.ms": "0",
}


def write_properties(path: Path, values: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))


def jvm_argv(layout: JvmLayout, infra_dir: Path, heap_mb: int, main: str, *args: str) -> list[str]:
    return [
        layout.java,
        f"-Xms{heap_mb // 2}m",
        f"-Xmx{heap_mb}m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={infra_dir / 'log4j2.properties'}",
        "-cp",
        layout.kafka_classpath,
        main,
        *args,
    ]


class JvmComponent:
    """What the broker and the Connect worker share: a JVM started from the resolved jars,
    tracked by its pid file. Built without jars (layout None) it can still be stopped."""

    pid_file: Path

    def __init__(self, layout: JvmLayout | None) -> None:
        self.layout = layout

    def stop(self) -> None:
        record = self.pid_record()
        if record is not None:
            process.stop(record, timeout_s=60)
            self.pid_file.unlink(missing_ok=True)

    def running(self) -> bool:
        record = self.pid_record()
        return record is not None and record.alive()

    def pid_record(self) -> process.PidRecord | None:
        return process.read_pid(self.pid_file)

    def _layout(self) -> JvmLayout:
        if self.layout is None:
            raise StackError("internal: starting a JVM component needs the resolved jars")
        return self.layout


class NativeKafka(JvmComponent):
    name = "kafka"

    def __init__(self, config: StackConfig, layout: JvmLayout | None) -> None:
        super().__init__(layout)
        self.config = config
        self.root = config.state_dir / "kafka"
        self.log_dir = self.root / "data"
        self.properties = self.root / "server.properties"
        self.log_file = config.state_dir / "logs" / "kafka.log"
        self.pid_file = self.root / "kafka.pid"

    @property
    def bootstrap(self) -> str:
        return f"{self.config.host}:{self.config.ports.kafka}"

    def start(self) -> None:
        if self.running():
            return
        host, ports = self.config.host, self.config.ports
        write_properties(
            self.properties,
            {
                "process.roles": "broker,controller",
                "node.id": "1",
                "controller.quorum.bootstrap.servers": f"{host}:{ports.controller}",
                "listeners": f"PLAINTEXT://{host}:{ports.kafka},CONTROLLER://{host}:{ports.controller}",
                "advertised.listeners": f"PLAINTEXT://{host}:{ports.kafka}",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "log.dirs": str(self.log_dir),
                "num.partitions": str(self.config.default_partitions),
                "auto.create.topics.enable": "true",
                "message.max.bytes": str(self.config.limits.broker_max_message_bytes),
                **_SINGLE_NODE,
            },
        )
        if not (self.log_dir / "meta.properties").exists():
            self._format()
        record = process.spawn(
            jvm_argv(
                self._layout(),
                self.config.infra_dir,
                self.config.kafka_heap_mb,
                "kafka.Kafka",
                str(self.properties),
            ),
            log_file=self.log_file,
            pid_file=self.pid_file,
        )
        if not process.wait_until(
            lambda: self._answers() or not record.alive(),
            self.config.ready_timeout_s,
            interval_s=0.5,
        ):
            raise StackError(f"Kafka did not answer on {self.bootstrap} (log: {self.log_file})")
        if not record.alive():
            raise StackError(
                f"Kafka exited during start-up (log: {self.log_file}):\n"
                f"{process.tail(self.log_file)}"
            )

    def _format(self) -> None:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        argv = jvm_argv(
            self._layout(),
            self.config.infra_dir,
            256,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(self.properties),
            "--standalone",
        )
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise StackError(f"Kafka storage format failed:\n{result.stdout}{result.stderr}")

    def _answers(self) -> bool:
        """True once the broker serves metadata (the cluster has a controller)."""
        try:
            with Admin(KafkaSettings(self.bootstrap, request_timeout_ms=3000)) as admin:
                return admin.controller_id() != -1
        except CdcboxError:
            return False
