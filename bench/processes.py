"""The benchmark's services, each in a process of its own as it runs in production: a
cdcbox consumer, polling relay workers, and a probe that times records into Kafka.

A process of its own does not share the benchmark's GIL, and its peak RSS (VmHWM) is
its own, so the memory each service needed at its rate can be reported.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import signal
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Consumer as RdKafkaConsumer
from confluent_kafka import TopicPartition as RdKafkaPartition

from bench.bare_relay import bare_listen_relay
from bench.handlers import EFFECT_DDL, Style, effect_handler
from cdcbox.consumer import Consumer, ConsumerConfig, Outcome
from cdcbox.consumer.metrics import ConsumerMetrics
from cdcbox.names import DbNames
from cdcbox.relay import RelayConfig, RelayWorker
from cdcbox.wire import HEADER_OCCURRED_AT

FORK = multiprocessing.get_context("fork")
_SAMPLE_S = 0.1
_PUBLISH_S = 0.02  # how often a consumer process tells its count: under a sample's time


def cpu_s() -> float:
    """CPU seconds this process has used (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def machine_busy_s() -> float:
    """CPU seconds every core of the machine has been busy since boot (/proc/stat)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def cycle_ms(metrics: ConsumerMetrics) -> dict[str, Any]:
    """The consumer's poll cycles (`cdcbox_consumer_poll_cycle_duration_seconds`): how
    many, and each part's mean, ms."""
    name = "cdcbox_consumer_poll_cycle_duration_seconds"
    cycles = metrics.registry.get_sample_value(f"{name}_count", {"part": "apply"}) or 0.0
    means = {}
    for part in ("poll", "apply", "durable", "offsets"):
        total = metrics.registry.get_sample_value(f"{name}_sum", {"part": part}) or 0.0
        count = metrics.registry.get_sample_value(f"{name}_count", {"part": part}) or 0.0
        means[part] = total / count * 1000 if count else None
    return {"cycles": int(cycles), "mean_ms": means}


def peak_rss_mb() -> float:
    """This process's peak resident set size (VmHWM), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _consumer_main(
    stop: Any,
    ended: Any,
    results: Any,
    assigned: Any,
    config: ConsumerConfig,
    aggregate_type: str,
    style: Style,
) -> None:
    consumer = Consumer([effect_handler(config.group_id, aggregate_type, style)], config)
    runner = threading.Thread(target=consumer.run, daemon=True)
    runner.start()
    started = time.monotonic()
    while not consumer.assigned() and time.monotonic() - started < 60:
        time.sleep(0.02)
    assigned.release()
    while not stop.wait(_PUBLISH_S):  # publish progress until the parent says stop
        ended.value = consumer.stats.total
    consumer.stop()
    runner.join(timeout=30)
    results.put(
        {
            "processed": consumer.stats[Outcome.PROCESSED],
            "ended": consumer.stats.total,
            "lag_ms": consumer.stats.lag_ms,
            "record_ms": consumer.stats.handler_ms,
            "rss_mb": peak_rss_mb(),
            "cpu_s": cpu_s(),
            "cycle": cycle_ms(consumer.stats.metrics),
        }
    )


def _merged(reports: list[dict[str, Any]], progress: list[tuple[float, int]]) -> dict[str, Any]:
    """The group's results from its processes' reports: counts and CPU summed, samples
    joined, the largest RSS, the poll cycles' means weighted by their counts."""
    cycles = sum(r["cycle"]["cycles"] for r in reports)
    means: dict[str, float | None] = {}
    for part in ("poll", "apply", "durable", "offsets"):
        weighted = [
            (r["cycle"]["mean_ms"][part], r["cycle"]["cycles"])
            for r in reports
            if r["cycle"]["mean_ms"][part] is not None
        ]
        counted = sum(n for _, n in weighted)
        means[part] = sum(m * n for m, n in weighted) / counted if counted else None
    return {
        "processed": sum(r["processed"] for r in reports),
        "ended": sum(r["ended"] for r in reports),
        "lag_ms": [ms for r in reports for ms in r["lag_ms"]],
        "record_ms": [ms for r in reports for ms in r["record_ms"]],
        "progress": progress,
        "rss_mb": max(r["rss_mb"] for r in reports),
        "cpu_s": sum(r["cpu_s"] for r in reports),
        "cycle": {"cycles": cycles, "mean_ms": means},
    }


class ConsumerProcess:
    """`cdc-ctl consume` in `processes` child processes of one group (each a process of
    its own, as instances of a service run), with the benchmark's effect handler written
    in `style`."""

    def __init__(
        self,
        dsn: str,
        bootstrap: str,
        aggregate_type: str,
        *,
        batch_mode: bool = True,
        group: str | None = None,
        style: Style = "plain",
        processes: int = 1,
    ) -> None:
        self.group = group or f"bench-{aggregate_type}-{uuid.uuid4().hex[:6]}"
        self._config = ConsumerConfig(
            bootstrap_servers=bootstrap, dsn=dsn, group_id=self.group, batch_mode=batch_mode
        )
        self._aggregate_type, self._style = aggregate_type, style
        self._stop, self._results = FORK.Event(), FORK.Queue()
        self._assigned = FORK.Semaphore(0)
        self._ended = [FORK.Value("q", 0) for _ in range(processes)]
        self._processes: list[Any] = []

    def start(self) -> ConsumerProcess:
        """Each process started and given partitions (the last to join may have taken
        some from the others: the group's rebalance ends before the first record)."""
        with psycopg.connect(self._config.dsn, autocommit=True) as conn:
            conn.execute(EFFECT_DDL)  # the table its handler writes to
        for ended in self._ended:
            process = FORK.Process(
                target=_consumer_main,
                args=(
                    self._stop,
                    ended,
                    self._results,
                    self._assigned,
                    self._config,
                    self._aggregate_type,
                    self._style,
                ),
            )
            process.start()
            self._processes.append(process)
            if not self._assigned.acquire(timeout=90):
                raise RuntimeError(f"consumer {self.group} was given no partitions in 90 s")
        return self

    @property
    def pids(self) -> list[int]:
        """The consumers' process ids (after `start`)."""
        return [int(p.pid) for p in self._processes]

    def finish(self, expected: int, timeout_s: float) -> dict[str, Any]:
        """Wait until `expected` events ended (any outcome, in all processes together),
        or `timeout_s`; then stop them, and their results merged."""
        progress: list[tuple[float, int]] = []
        deadline = time.monotonic() + timeout_s
        while True:  # sample the group's progress until they all ended
            ended = sum(int(v.value) for v in self._ended)
            progress.append((time.monotonic(), ended))  # system-wide clock
            if ended >= expected or time.monotonic() > deadline:
                break
            time.sleep(_SAMPLE_S)
        self._stop.set()
        reports = [self._results.get(timeout=90) for _ in self._processes]
        for process in self._processes:
            process.join(timeout=30)
        return _merged(reports, progress)


def _relay_main(results: Any, ready: Any, config: RelayConfig, schema: str) -> None:
    worker = RelayWorker(config, names=DbNames(schema=schema))
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    worker.warm_up()  # as a deployed relay is, long before the events measured
    ready.release()
    stats = worker.run()
    results.put({"sent": stats.sent, "rss_mb": peak_rss_mb(), "cpu_s": cpu_s()})


def _bare_main(results: Any, ready: Any, dsn: str, bootstrap: str, schema: str) -> None:
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    sent, steps = bare_listen_relay(
        dsn, bootstrap, DbNames(schema=schema), ready.release, stopping.is_set
    )
    results.put({"sent": sent, "rss_mb": peak_rss_mb(), "steps_ms": steps})


class RelayProcesses:
    """`cdc-ctl relay run` workers, each in a process of its own (`bare`: the bare loop
    woken by NOTIFY, `bench.bare_relay.bare_listen_relay`, instead)."""

    def __init__(
        self,
        dsn: str,
        bootstrap: str,
        schema: str,
        workers: int,
        listen: bool,
        ordered: bool = True,
        bare: bool = False,
    ):
        self._results = FORK.Queue()
        self._ready = FORK.Semaphore(0)

        def process(i: int) -> multiprocessing.process.BaseProcess:
            if bare:
                args: tuple[Any, ...] = (dsn, bootstrap, schema)
                return FORK.Process(target=_bare_main, args=(self._results, self._ready, *args))
            config = RelayConfig(
                dsn=dsn,
                bootstrap_servers=bootstrap,
                listen=listen,
                ordered=ordered,
                worker_id=f"bench-{i}",
            )
            return FORK.Process(
                target=_relay_main, args=(self._results, self._ready, config, schema)
            )

        self._processes = [process(i) for i in range(workers)]

    def __enter__(self) -> RelayProcesses:
        """Each worker started, its session and producer ready (`RelayWorker.warm_up`)."""
        for p in self._processes:
            p.start()
        for _ in self._processes:
            if not self._ready.acquire(timeout=60):
                self.__exit__()
                raise RuntimeError("a relay worker was not ready in 60 s")
        return self

    def stop(self) -> list[dict[str, Any]]:
        """SIGTERM to each pid: a worker finishes its batch, returns and reports."""
        for p in self._processes:
            p.terminate()
        reports = [self._results.get(timeout=60) for _ in self._processes]
        for p in self._processes:
            p.join(timeout=30)
        return reports

    def __exit__(self, *exc: object) -> None:
        for p in self._processes:
            if p.is_alive():
                p.terminate()
                p.join(timeout=30)


class KafkaProbe:
    """A bare consumer timing each record from its `occurred_at` header (commit side) to
    its arrival here: the relay's leg (Debezium or the polling relay), without the
    cdcbox consumer. It runs in a thread of the benchmark process, on confluent-kafka
    (librdkafka: fetching and decoding in C) and reading that one header, so that the
    instrument takes as little as it can of the cores the pipeline it times needs (its
    share is the benchmark's row of `bench.cores`)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        # read_committed, as every cdcbox consumer: with exactly-once source, a record
        # counts as arrived when its transaction committed.
        self._consumer = RdKafkaConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-probe-{uuid.uuid4().hex[:8]}",  # never joined: assign
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 10,
            }
        )
        partitions = self._consumer.list_topics(topic, timeout=30).topics[topic].partitions
        # Each partition's end now, before anything is written (a logical "end" would be
        # resolved only when fetching starts, after the first records perhaps).
        self._consumer.assign(
            [
                RdKafkaPartition(
                    topic,
                    p,
                    self._consumer.get_watermark_offsets(RdKafkaPartition(topic, p), timeout=30)[1],
                )
                for p in partitions
            ]
        )
        self.lag_ms: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> KafkaProbe:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            # Block for the first record only: `consume` would wait out its timeout for
            # a full batch, and that wait would be counted in every record's leg.
            first = self._consumer.poll(0.1)
            if first is None:
                continue
            now = time.time()
            messages = [first, *self._consumer.consume(num_messages=1000, timeout=0)]
            for message in messages:
                value = dict(message.headers() or ()).get(HEADER_OCCURRED_AT)
                if isinstance(value, bytes) and value:
                    occurred = datetime.fromisoformat(value.decode())
                    self.lag_ms.append((now - occurred.timestamp()) * 1000)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._consumer.close()
