"""The stack's schema registry: Apicurio Registry (its Quarkus app, from Maven) with its
Confluent-compatible API at `/apis/ccompat/v7`, on loopback.

Its storage is an H2 database in a file of the stack's state directory, so schemas and
their ids survive a restart of the registry as topics survive the broker's: an id in a
record on a topic must resolve as long as the record is kept. (A production registry
stores them in PostgreSQL or Kafka: `apicurio.storage.sql.kind`, Apicurio's docs.)
"""

from __future__ import annotations

import logging
import shutil
import tarfile
from pathlib import Path

from cdcbox.errors import StackError
from cdcbox.stack import process
from cdcbox.stack.config import StackConfig
from cdcbox.stack.jars import run_maven
from cdcbox.stack.spawned import Spawned, answers
from cdcbox.stack.system import ensure_java_and_maven, find_java

CCOMPAT_PATH = "/apis/ccompat/v7"
# Apicurio 3 is built for Java 21 (class files of major 65).
MIN_JAVA = 21
JAVA_HOME_ENV = "CDCBOX_REGISTRY_JAVA_HOME"
_MARKER = ".complete"
log = logging.getLogger("cdcbox.stack")


def resolve_app(config: StackConfig) -> Path:
    """The unpacked Apicurio app of the pinned version (its `quarkus-run.jar`), from
    Maven's `apicurio-registry-app:<version>:tar.gz:all`, once per machine."""
    version = config.versions.apicurio
    target = config.cache_dir / f"apicurio-registry-{version}"
    if (target / _MARKER).exists():
        return target
    _, mvn = ensure_java_and_maven()
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    argv = [
        mvn,
        "-B",
        "-Dstyle.color=never",
        "dependency:copy",
        f"-Dartifact=io.apicurio:apicurio-registry-app:{version}:tar.gz:all",
        f"-DoutputDirectory={staging}",
    ]
    returncode, tail = run_maven(argv, "registry")
    archives = list(staging.glob("*.tar.gz"))
    if returncode != 0 or len(archives) != 1:
        raise StackError(f"Maven could not fetch Apicurio Registry {version}:\n{tail}")
    with tarfile.open(archives[0]) as archive:
        if hasattr(tarfile, "data_filter"):  # 3.11.4+: refuse links and paths out of it
            archive.extractall(staging, filter="data")
        else:
            archive.extractall(staging)  # noqa: S202  # Maven's checksummed artifact
    archives[0].unlink()
    if not (staging / "quarkus-run.jar").is_file():
        raise StackError(f"Apicurio Registry {version}'s archive holds no quarkus-run.jar")
    (staging / _MARKER).write_text("")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


class NativeRegistry(Spawned):
    """Apicurio Registry on the stack's loopback, its data under the state directory."""

    name = "registry"

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.root = config.state_dir / "registry"
        self.url = f"http://{config.host}:{config.ports.registry}{CCOMPAT_PATH}"
        self.pid_file = self.root / "registry.pid"
        self.log_file = config.state_dir / "logs" / "registry.log"

    def start(self) -> None:
        if self.running():
            return
        app = resolve_app(self.config)
        java = find_java(MIN_JAVA, JAVA_HOME_ENV)
        host, ports = self.config.host, self.config.ports
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        settings = {
            "quarkus.http.host": host,
            "quarkus.http.port": ports.registry,
            "quarkus.management.host": host,
            "quarkus.management.port": ports.registry_management,
            "apicurio.datasource.url": f"jdbc:h2:file:{self.root / 'data' / 'registry'}",
            # The app's default pool keeps 20 connections open; a dev stack needs few.
            "apicurio.datasource.jdbc.initial-size": 2,
            "apicurio.datasource.jdbc.min-size": 2,
            "apicurio.datasource.jdbc.max-size": 10,
        }
        argv = [java, "-Xms64m", "-Xmx384m", *(f"-D{k}={v}" for k, v in settings.items())]
        argv += ["-jar", str(app / "quarkus-run.jar")]
        record = process.spawn(argv, log_file=self.log_file, pid_file=self.pid_file, cwd=self.root)
        self._await(record, 120)

    def ready(self) -> bool:
        """Quarkus's readiness check passes and the API answers."""
        management = f"http://{self.config.host}:{self.config.ports.registry_management}"
        return answers(f"{management}/health/ready") and answers(f"{self.url}/subjects")

    def _ready(self) -> bool:
        return self.ready()
