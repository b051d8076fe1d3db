"""Kafka Connect for the native stack: a distributed-mode worker with Debezium plugged in.

Distributed mode (not standalone) so connectors are managed over REST exactly as in
production; its internal topics have no defaults and want replication factor 3, so all
are named and set to 1. Offsets flush every second, not every 60 s, to shrink the window
of duplicates after a crash (the inbox absorbs the rest).
"""

from __future__ import annotations

import requests

from cdcbox.connect.connectors import DEBEZIUM_POSTGRES_CLASS
from cdcbox.errors import StackError
from cdcbox.limits import EventLimits
from cdcbox.stack import process
from cdcbox.stack.config import ExactlyOnce, StackConfig
from cdcbox.stack.jars import JvmLayout
from cdcbox.stack.kafka import JvmComponent, jvm_argv, write_properties
from cdcbox.stack.rest_auth import ConnectRestAuth
from cdcbox.stack.tls import StackTls

GROUP = "cdcbox-connect"


def worker_properties(
    bootstrap: str,
    rest_host: str,
    rest_port: int,
    plugin_path: str,
    limits: EventLimits = EventLimits(),
    replication_factor: int = 1,
    exactly_once: ExactlyOnce = "enabled",
    group: str = GROUP,
) -> dict[str, str]:
    """The Connect worker config shared by the native runner (compose sets the same);
    `group` names the worker group and its three internal topics."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "config.storage.topic": f"{group}-configs",
        "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "config.storage.replication.factor": str(replication_factor),
        "offset.storage.replication.factor": str(replication_factor),
        "status.storage.replication.factor": str(replication_factor),
        "offset.storage.partitions": "1",
        "status.storage.partitions": "1",
        "offset.flush.interval.ms": "1000",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "listeners": f"http://{rest_host}:{rest_port}",
        "rest.advertised.host.name": rest_host,
        "rest.advertised.port": str(rest_port),
        "plugin.path": plugin_path,
        "plugin.discovery": "hybrid_warn",
        # Secrets reach connectors as ${file:PATH:KEY} placeholders resolved on the worker.
        "config.providers": "file",
        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
        "connector.client.config.override.policy": "All",
        "task.shutdown.graceful.timeout.ms": "10000",
        # A worker that died gives its connectors and tasks back after 15 s, not after
        # the 5 minutes Connect waits by default for it to come back.
        "scheduled.rebalance.max.delay.ms": "15000",
        # Source tasks' producers take the largest record an outbox row may become.
        "producer.max.request.size": str(limits.producer_max_request_size),
        # Exactly-once source (KIP-618): a task's records and its source offsets commit in
        # one Kafka transaction, so a worker's crash puts no duplicate on the topics for
        # read_committed readers (cdcbox.connect.exactly_once).
        # `preparing` is the middle step of turning it on in a running cluster.
        "exactly.once.source.support": exactly_once,
    }


class NativeConnect(JvmComponent):
    """Worker `worker` of the Connect group `group` (all its workers share its topics):
    the stack runs one; a benchmark may start another beside it."""

    def __init__(
        self,
        config: StackConfig,
        layout: JvmLayout | None,
        bootstrap: str,
        worker: int = 0,
        group: str = GROUP,
    ) -> None:
        super().__init__(layout)
        self.config = config
        self.bootstrap = bootstrap
        self.group = group
        self.port = config.ports.connect + worker
        self.metrics_port = config.ports.connect_metrics + worker
        self.name = f"connect-{worker}" if worker else "connect"
        self.root = config.state_dir / self.name
        self.properties = self.root / "connect-distributed.properties"
        self.log_file = config.state_dir / "logs" / f"{self.name}.log"
        self.pid_file = self.root / "connect.pid"

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    def start(self) -> None:
        if self.running():
            return
        write_properties(
            self.properties,
            {
                **worker_properties(
                    self.bootstrap,
                    self.config.host,
                    self.port,
                    str(self._layout().plugin_path),
                    self.config.limits,
                    self.config.replication_factor,
                    self.config.exactly_once,
                    self.group,
                ),
                **self._security(),
            },
        )
        record = process.spawn(
            jvm_argv(
                self._layout(),
                self.config.infra_dir,
                self.config.worker_heap_mb,
                "org.apache.kafka.connect.cli.ConnectDistributed",
                str(self.properties),
                java_agent=self._metrics_agent(),
                system_properties=self._system_properties(),
            ),
            log_file=self.log_file,
            pid_file=self.pid_file,
        )
        if not process.wait_until(
            lambda: self.lists_debezium() or not record.alive(),
            self.config.ready_timeout_s,
            interval_s=0.5,
        ):
            raise StackError(
                f"Kafka Connect at {self.url} did not list {DEBEZIUM_POSTGRES_CLASS} "
                f"(log: {self.log_file}):\n{process.tail(self.log_file)}"
            )
        if not record.alive():
            raise StackError(
                f"Kafka Connect exited during start-up (log: {self.log_file}):\n"
                f"{process.tail(self.log_file)}"
            )

    def _metrics_agent(self) -> str | None:
        """With --with-metrics: the JMX exporter, serving the worker's and Debezium's
        MBeans on `metrics_port` by the rules both stacks share."""
        agent = self._layout().jmx_agent
        if not self.config.with_metrics or agent is None:
            return None
        rules = self.config.infra_dir / "observability" / "jmx-exporter.yml"
        return f"{agent}={self.config.host}:{self.metrics_port}:{rules}"

    def _rest_auth(self) -> ConnectRestAuth:
        return ConnectRestAuth.of(self.config.state_dir)

    def _system_properties(self) -> dict[str, str]:
        """With --secure: the JAAS file of the REST API's basic auth."""
        return self._rest_auth().system_properties() if self.config.secure else {}

    def _security(self) -> dict[str, str]:
        """With --secure: the worker, its connectors' producers, the consumers of its
        internal topics and its admin client all log in as `connect` over SASL_SSL, and
        the REST API asks for basic auth."""
        if not self.config.secure:
            return {}
        self._rest_auth().ensure()
        client = StackTls.of(self.config.state_dir).java_client_properties("connect")
        return {
            **{
                f"{prefix}{key}": value
                for prefix in ("", "producer.", "consumer.", "admin.")
                for key, value in client.items()
            },
            **self._rest_auth().worker_properties(),
        }

    def lists_debezium(self) -> bool:
        try:
            auth = self._rest_auth().credentials() if self.config.secure else None
            response = requests.get(f"{self.url}/connector-plugins", timeout=2, auth=auth)
        except requests.RequestException:
            return False
        if response.status_code != 200:
            return False
        return any(p.get("class") == DEBEZIUM_POSTGRES_CLASS for p in response.json())
