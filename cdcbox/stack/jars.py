"""Resolve the stack's JVM jars with Maven from infra/pom.xml, once per version set.

The result is cached under the cache directory keyed by the pinned versions, and marked
complete only after Maven succeeded, so a second `stack up` downloads nothing and an
interrupted one is redone rather than trusted.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cdcbox.errors import StackError
from cdcbox.stack.config import StackConfig, StackVersions
from cdcbox.stack.system import ensure_java_and_maven

_MARKER = ".complete"
log = logging.getLogger("cdcbox.stack")


@dataclass(frozen=True)
class JvmLayout:
    """The resolved Java runtime, Kafka's classpath and Connect's plugin path."""

    java: str
    kafka_classpath: str
    plugin_path: Path
    jmx_agent: Path | None = None  # resolved only for a stack with metrics


def _maven_copy(
    mvn: str, pom: Path, profile: str, versions: StackVersions, target: Path, extra: list[str]
) -> None:
    if (target / _MARKER).exists():
        log.info("  %s jars: cached in %s", profile, target)
        return
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    argv = [
        mvn,
        "-B",
        "-Dstyle.color=never",
        "-f",
        str(pom),
        "-P",
        profile,
        f"-Dkafka.version={versions.kafka}",
        f"-Ddebezium.version={versions.debezium}",
        f"-Dlog4j.version={versions.log4j}",
        f"-Dslf4j.version={versions.slf4j}",
        f"-Djmx.exporter.version={versions.jmx_exporter}",
        f"-Dconnect.basic.auth.version={versions.connect_basic_auth}",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging}",
        *extra,
    ]
    returncode, tail = run_maven(argv, profile)
    if returncode != 0:
        raise StackError(f"Maven could not resolve the {profile} jars ({' '.join(argv)}):\n{tail}")
    jars = list(staging.glob("*.jar"))
    megabytes = sum(j.stat().st_size for j in jars) / 1_048_576
    log.info("  %s jars: %d resolved, %.1f MB", profile, len(jars), megabytes)
    (staging / _MARKER).write_text("")
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging.rename(target)


def run_maven(argv: list[str], profile: str) -> tuple[int, str]:
    """Run Maven, summarising its output: every 25 downloaded files are one log line
    instead of Maven's hundreds. Returns the exit code and the output's tail."""
    tail: collections.deque[str] = collections.deque(maxlen=60)
    downloaded = 0
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as maven:
        assert maven.stdout is not None
        for line in maven.stdout:
            tail.append(line)
            if line.startswith("[INFO] Downloaded from "):
                downloaded += 1
                if downloaded % 25 == 0:
                    log.info("  %s jars: %d files downloaded so far", profile, downloaded)
    if downloaded:
        log.info("  %s jars: %d files downloaded", profile, downloaded)
    return maven.returncode, "".join(tail)


def resolve_jars(config: StackConfig) -> JvmLayout:
    java, mvn = ensure_java_and_maven()
    versions = config.versions
    pom = config.infra_dir / "pom.xml"
    # Keyed by the pom's content too: a dependency added to it is resolved, not missed.
    pom_key = hashlib.sha256(pom.read_bytes()).hexdigest()[:8]
    kafka_dir = config.cache_dir / f"kafka-{versions.kafka}-log4j-{versions.log4j}-{pom_key}"
    plugins = config.cache_dir / f"debezium-{versions.debezium}-plugins-{pom_key}"
    _maven_copy(mvn, pom, "kafka", versions, kafka_dir, [])
    # Connect provides its own API, clients and logging to plugins; copies of them in the
    # plugin directory would shadow the worker's classes.
    _maven_copy(
        mvn,
        pom,
        "debezium",
        versions,
        plugins / "debezium-connector-postgres",
        ["-DexcludeGroupIds=org.apache.kafka,org.slf4j"],
    )
    (plugins / _MARKER).write_text("")
    agent = None
    if config.with_metrics:
        agent_dir = config.cache_dir / f"jmx-exporter-{versions.jmx_exporter}"
        _maven_copy(mvn, pom, "metrics", versions, agent_dir, ["-DexcludeTransitive=true"])
        agent = agent_dir / f"jmx_prometheus_javaagent-{versions.jmx_exporter}.jar"
        if not agent.is_file():
            raise StackError(f"Maven resolved the JMX exporter, but {agent} is missing")
    return JvmLayout(java, f"{kafka_dir}/*", plugins, agent)
