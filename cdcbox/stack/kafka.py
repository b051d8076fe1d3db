"""Kafka for the native stack: combined broker/controller nodes in KRaft mode.

One node (the default) uses a standalone controller quorum and replication factor 1.
A cluster (`--brokers 3`) has a static quorum of all its nodes, replication factor 3
and min.insync.replicas 2 for every topic, internal ones included. Storage is formatted
once, with one cluster id shared by the nodes, and reused on later starts.
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path

from cdcbox.errors import CdcboxError, StackError
from cdcbox.kafka.client import Admin, KafkaSettings
from cdcbox.kafka.security import KafkaSecurity
from cdcbox.stack import process
from cdcbox.stack.config import StackConfig
from cdcbox.stack.jars import JvmLayout
from cdcbox.stack.secrets import write_private
from cdcbox.stack.tls import ADMIN, MECHANISM, USERS, StackTls


def replication(config: StackConfig) -> dict[str, str]:
    rf, isr = str(config.replication_factor), str(config.min_insync_replicas)
    return {
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": isr,
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": isr,
        "default.replication.factor": rf,
        "min.insync.replicas": isr,
        # Consumers in tests and the demo join one at a time; do not wait 3 s for more.
        "group.initial.rebalance.delay.ms": "0",
    }


def write_properties(path: Path, values: dict[str, str]) -> None:
    """A Java properties file, readable by its owner only (a secured stack's hold the
    JAAS passwords)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, "".join(f"{k}={v}\n" for k, v in values.items()))


def jvm_argv(
    layout: JvmLayout,
    infra_dir: Path,
    heap_mb: int,
    main: str,
    *args: str,
    java_agent: str | None = None,
    system_properties: Mapping[str, str] | None = None,
) -> list[str]:
    """`java_agent`: a `-javaagent:` argument (jar=options), e.g. the JMX exporter;
    `system_properties`: more -D settings."""
    return [
        layout.java,
        *([f"-javaagent:{java_agent}"] if java_agent else []),
        *(f"-D{k}={v}" for k, v in (system_properties or {}).items()),
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


class JvmComponent(process.PidTracked):
    """What the broker and the Connect worker share: a JVM started from the resolved jars,
    tracked by its pid file. Built without jars (layout None) it can still be stopped."""

    def __init__(self, layout: JvmLayout | None) -> None:
        self.layout = layout

    def _layout(self) -> JvmLayout:
        if self.layout is None:
            raise StackError("internal: starting a JVM component needs the resolved jars")
        return self.layout


def new_cluster_id() -> str:
    """A random KRaft cluster id, drawn as Kafka's `Uuid.randomUuid()` draws one: never
    starting with "-", which `kafka-storage format -t` would read as an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


class NativeKafka(JvmComponent):
    """One KRaft node (broker and controller) of the native stack, started and stopped by pid."""

    def __init__(self, config: StackConfig, layout: JvmLayout | None, node: int = 0) -> None:
        super().__init__(layout)
        self.config = config
        self.node = node
        suffix = f"-{node}" if node else ""
        self.name = f"kafka{suffix}"
        self.root = config.state_dir / self.name
        self.log_dir = self.root / "data"
        self.properties = self.root / "server.properties"
        self.log_file = config.state_dir / "logs" / f"{self.name}.log"
        self.pid_file = self.root / "kafka.pid"

    @property
    def bootstrap(self) -> str:
        """This node's listener (`StackConfig.bootstrap_servers` lists every node)."""
        return f"{self.config.host}:{self.config.kafka_port(self.node)}"

    def start(self) -> None:
        self.spawn()
        self.await_ready()

    def spawn(self) -> None:
        """Start the JVM without waiting: a cluster's nodes must all be starting before
        any of them can elect a controller."""
        if self.running():
            return
        config, host = self.config, self.config.host
        controller = f"{host}:{config.controller_port(self.node)}"
        if config.brokers == 1:
            quorum = {"controller.quorum.bootstrap.servers": controller}
        else:
            voters = ",".join(
                f"{n + 1}@{host}:{config.controller_port(n)}" for n in range(config.brokers)
            )
            quorum = {"controller.quorum.voters": voters}
        write_properties(
            self.properties,
            {
                "process.roles": "broker,controller",
                "node.id": str(self.node + 1),
                **quorum,
                **self._listeners(controller),
                "controller.listener.names": "CONTROLLER",
                "log.dirs": str(self.log_dir),
                "num.partitions": str(self.config.default_partitions),
                "auto.create.topics.enable": "true",
                "message.max.bytes": str(self.config.limits.broker_max_message_bytes),
                **replication(config),
            },
        )
        if not (self.log_dir / "meta.properties").exists():
            self._format()
        elif config.secure and not self._secure_marker.exists():
            raise StackError(
                f"{self.name} in {self.root} was formatted without --secure (it has no SCRAM "
                "users): use another --state-dir, or `cdc-ctl stack down --purge` it first"
            )
        process.spawn(
            jvm_argv(
                self._layout(),
                self.config.infra_dir,
                self.config.broker_heap_mb,
                "kafka.Kafka",
                str(self.properties),
            ),
            log_file=self.log_file,
            pid_file=self.pid_file,
        )

    @property
    def _tls(self) -> StackTls:
        return StackTls.of(self.config.state_dir)

    @property
    def _secure_marker(self) -> Path:
        return self.root / "formatted-secure"

    def _listeners(self, controller: str) -> dict[str, str]:
        """PLAINTEXT, or with --secure SASL_SSL (SCRAM) for clients and between brokers;
        the controller listener stays on loopback PLAINTEXT."""
        if not self.config.secure:
            return {
                "listeners": f"PLAINTEXT://{self.bootstrap},CONTROLLER://{controller}",
                "advertised.listeners": f"PLAINTEXT://{self.bootstrap}",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            }
        tls = self._tls
        return {
            "listeners": f"SASL_SSL://{self.bootstrap},CONTROLLER://{controller}",
            "advertised.listeners": f"SASL_SSL://{self.bootstrap}",
            "inter.broker.listener.name": "SASL_SSL",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
            # Nobody may do what they were not granted (cdcbox.stack.grants): the brokers'
            # `admin` is a super user, and so is ANONYMOUS, which is what a node is on the
            # controller listener (PLAINTEXT, on loopback only; SCRAM credentials live in
            # the metadata that listener serves, so it cannot authenticate with them).
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{ADMIN};User:ANONYMOUS",
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config": tls.jaas(ADMIN),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(tls.keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(tls.ca),
        }

    def await_ready(self) -> None:
        record = self.pid_record()
        if record is None:
            raise StackError(f"{self.name} was not started")
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
        # The SCRAM passwords go in an argument file (the tool's argparse4j reads `@file`
        # line by line), made 0600 and removed after: never on a command line `ps` shows.
        scram_args = self.root / "format-scram.args"
        scram_users = self._scram_users()
        if scram_users:
            write_private(scram_args, "".join(f"{arg}\n" for arg in scram_users))
        argv = jvm_argv(
            self._layout(),
            self.config.infra_dir,
            256,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self._cluster_id(),
            "-c",
            str(self.properties),
            *(["--standalone"] if self.config.brokers == 1 else []),
            *([f"@{scram_args}"] if scram_users else []),
        )
        try:
            result = subprocess.run(argv, capture_output=True, text=True, check=False)
        finally:
            scram_args.unlink(missing_ok=True)
        if result.returncode != 0:
            raise StackError(f"Kafka storage format failed:\n{result.stdout}{result.stderr}")
        if self.config.secure:
            self._secure_marker.write_text("")

    def _scram_users(self) -> list[str]:
        """KRaft stores SCRAM credentials in its metadata: they are added at format."""
        if not self.config.secure:
            return []
        tls = self._tls
        return [
            arg
            for user in USERS
            for arg in ("--add-scram", f"{MECHANISM}=[name={user},password={tls.password(user)}]")
        ]

    def _cluster_id(self) -> str:
        """One id for every node of this stack, made by the first node formatted."""
        path = self.config.state_dir / "kafka-cluster-id"
        # An id starting with "-" was never formatted (the tool refused it): draw again.
        if not path.exists() or path.read_text().startswith("-"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(new_cluster_id())
        return path.read_text().strip()

    def _answers(self) -> bool:
        """True once the broker serves metadata (the cluster has a controller)."""
        try:
            security = self._tls.client(ADMIN) if self.config.secure else KafkaSecurity()
            settings = KafkaSettings(self.bootstrap, request_timeout_ms=3000, security=security)
            with Admin(settings) as admin:
                return admin.controller_id() != -1
        except CdcboxError:
            return False
