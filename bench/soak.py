"""The stall soak (issue 51): each fault many times on one native stack, with and without
the supervisor, counting the runs after which committed events were still not on the
topic 120 s after the fault: stalls a person would have to find.

    python -m bench.soak [--runs 20] [--fault NAME ...] [--supervisor on|off|both] [--burn N]

Run on a stack `cdc-ctl stack up --no-supervisor` started (CDCBOX_* variables and
CDCBOX_STACK_DIR name it), not in CI. Per run: writers append single-event transactions
(~200/s) on an aggregate type of the run's own; the fault lands mid-stream; the writers
go on 3 s after the component is back, then stop. Recorded per run: stalled (not every
committed event on the topic, for a read_committed reader, 120 s after the fault),
seconds until every event was there, lost (missing at the deadline), topic duplicates.
A stall left at the deadline is healed before the next run (`connectors heal
--abort-older-than 1`, then the worker restarted if that was not enough), and counted.

Settings are interleaved: each round runs every fault once per supervisor setting, so a
soak cut short still compares like with like. `--burn N` keeps N processes spinning on the
CPU throughout, the load of a CI run beside the stack (the stalls were seen only under
load).

Faults: connect-kill-big (Connect SIGKILLed inside a 20,000-row transaction),
connect-kill (mid-stream), broker-stop (broker SIGSTOPped 10 s), broker-kill.
Results: bench/results/soak-<time>.jsonl, one line per run, and a summary on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from bench.soak_page import summary, write_page
from cdcbox import wire
from cdcbox.connect.client import ConnectClient
from cdcbox.kafka.client import Consumer, KafkaSettings, TopicPartition
from cdcbox.ops.heal import Healer, HealPolicy
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.resources import resource_dir
from cdcbox.stack.config import Ports, StackConfig
from cdcbox.stack.connect_worker import NativeConnect
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.jars import resolve_jars
from cdcbox.stack.kafka import NativeKafka

RESULTS = Path(__file__).parent / "results"
DEADLINE_S = 120.0
BIG = 20_000
FAULTS = ("connect-kill-big", "connect-kill", "broker-stop", "broker-kill")


@dataclass(frozen=True)
class Run:
    """One run's outcome."""

    fault: str
    supervisor: bool
    committed: int
    delivered: int  # distinct events on the topic at the end
    duplicates: int  # records beyond the distinct events
    stalled: bool  # not all there DEADLINE_S after the fault
    caught_up_s: float | None  # seconds after the fault until all were there
    healed_by_hand: bool


class Writers:
    """Single-event transactions on `aggregate_type` until stopped; the ids committed."""

    def __init__(self, dsn: str, aggregate_type: str, rate_per_s: float = 200.0) -> None:
        self.dsn, self.aggregate_type, self.rate_per_s = dsn, aggregate_type, rate_per_s
        self.committed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Writers:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        outbox, n = Outbox(), 0
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.dsn) as conn:
                    while not self._stop.wait(1 / self.rate_per_s):
                        with conn.transaction():
                            (event_id,) = outbox.append_many(
                                conn,
                                [NewEvent(self.aggregate_type, f"a-{n % 50}", "Changed", {"n": n})],
                            )
                        self.committed.append(str(event_id))
                        n += 1
            except psycopg.OperationalError:
                self._stop.wait(0.5)  # the database is away: write on when it is back


def topic_ids(kafka: KafkaSettings, topic: str) -> list[str]:
    """Every event id on `topic` as a read_committed reader sees it now."""
    with Consumer(kafka, group_id=None) as reader:
        partitions = [TopicPartition(topic, p) for p in reader.partitions_for_topic(topic)]
        if not partitions:
            return []
        reader.assign(partitions)
        reader.seek_to_beginning(*partitions)
        ends = reader.end_offsets(partitions)
        ids: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(
            reader.position(tp) < ends[tp] for tp in partitions
        ):
            for records in reader.poll(timeout_ms=500).values():
                ids += [dict(r.headers)[wire.HEADER_EVENT_ID].decode() for r in records]
    return ids


class Soak:
    """The stack's parts, by pid, and how to break and mend them."""

    def __init__(self, endpoints: Endpoints, config: StackConfig) -> None:
        self.endpoints, self.config = endpoints, config
        self.kafka_settings = KafkaSettings(endpoints.bootstrap_servers)
        layout = resolve_jars(config)
        self.kafka = NativeKafka(config, layout)
        self.connect = NativeConnect(config, layout, self.kafka.bootstrap)
        self.client = ConnectClient(endpoints.connect_url)

    def _pid(self, part: NativeKafka | NativeConnect) -> int:
        record = part.pid_record()
        if record is None or not record.alive():
            raise RuntimeError(f"{part.name} is not running")
        return record.pid

    def _kill_and_start(self, part: NativeKafka | NativeConnect) -> None:
        pid = self._pid(part)
        os.kill(pid, signal.SIGKILL)
        while part.pid_record() is not None and part.running():
            time.sleep(0.1)
        part.start()

    def fault(self, name: str, aggregate_type: str, committed: list[str]) -> None:
        if name == "connect-kill-big":
            topic = wire.topic_for(aggregate_type)
            before = len(topic_ids(self.kafka_settings, topic))
            with psycopg.connect(self.endpoints.dsn) as conn, conn.transaction():
                ids = Outbox().append_many(
                    conn,
                    [
                        NewEvent(aggregate_type, f"big-{i % 100}", "Changed", {"i": i})
                        for i in range(BIG)
                    ],
                )
            committed += [str(i) for i in ids]
            deadline = time.monotonic() + 60
            while len(topic_ids(self.kafka_settings, topic)) - before < 500:
                if time.monotonic() > deadline:
                    raise RuntimeError("the big transaction did not start publishing in 60 s")
                time.sleep(0.05)
            self._kill_and_start(self.connect)
        elif name == "connect-kill":
            self._kill_and_start(self.connect)
        elif name == "broker-kill":
            self._kill_and_start(self.kafka)
        elif name == "broker-stop":
            pid = self._pid(self.kafka)
            os.kill(pid, signal.SIGSTOP)
            time.sleep(10)  # the fault itself: ten seconds of a frozen broker
            os.kill(pid, signal.SIGCONT)
        else:
            raise ValueError(f"unknown fault {name!r} (one of {', '.join(FAULTS)})")

    def restart_worker(self) -> None:
        self._kill_and_start(self.connect)

    def mend(self) -> None:
        """What a person would do about a stall: heal, then restart the worker."""
        Healer(
            self.client,
            self.kafka_settings,
            self.endpoints.dsn,
            HealPolicy(abort_older_than_s=1, stuck_after_s=5),
        ).round(watch_now=True)


def all_there(soak: Soak, topic: str, committed: set[str]) -> bool:
    return committed <= set(topic_ids(soak.kafka_settings, topic))


def eventually_there(soak: Soak, topic: str, committed: set[str], within_s: float) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if all_there(soak, topic, committed):
            return True
        time.sleep(2)
    return False


def one_run(soak: Soak, fault: str, supervised: bool) -> Run:
    aggregate_type = f"soak{uuid.uuid4().hex[:10]}"
    topic = wire.topic_for(aggregate_type)
    with Writers(soak.endpoints.dsn, aggregate_type) as writers:
        time.sleep(3)
        soak.fault(fault, aggregate_type, writers.committed)
        fault_at = time.monotonic()
        time.sleep(3)
    committed = set(writers.committed)
    caught_up: float | None = None
    while time.monotonic() - fault_at < DEADLINE_S:
        if all_there(soak, topic, committed):
            caught_up = time.monotonic() - fault_at
            break
        time.sleep(2)
    healed_by_hand = caught_up is None
    if healed_by_hand:
        soak.mend()
        end = time.monotonic() + 180
        while time.monotonic() < end and not committed <= set(
            topic_ids(soak.kafka_settings, topic)
        ):
            time.sleep(2)
    ids = topic_ids(soak.kafka_settings, topic)
    return Run(
        fault=fault,
        supervisor=supervised,
        committed=len(committed),
        delivered=len(set(ids) & committed),
        duplicates=len(ids) - len(set(ids)),
        stalled=caught_up is None,
        caught_up_s=None if caught_up is None else round(caught_up, 1),
        healed_by_hand=healed_by_hand,
    )


@contextlib.contextmanager
def supervisor(endpoints: Endpoints, on: bool, log: Path) -> Iterator[list[str]]:
    """The stack's supervisor (`connectors supervise`, its defaults) while `on`; the list
    yielded holds, after the block, the actions it logged meanwhile."""
    actions: list[str] = []
    if not on:
        yield actions
        return
    start = log.stat().st_size if log.exists() else 0
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cdcbox.cli.main", "connectors", "supervise"],
            env={**os.environ, **endpoints.as_env()},
            stderr=out,
        )
    try:
        yield actions
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        with log.open("rb") as written:
            written.seek(start)
            lines = written.read().decode(errors="replace").splitlines()
        actions += [line for line in lines if "WARNING cdcbox.supervisor" in line]


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def burning(processes: int) -> Iterator[None]:
    """`processes` busy loops on the CPU while inside: a loaded machine."""
    burners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(processes)]
    for burner in burners:
        burner.start()
    try:
        yield
    finally:
        for burner in burners:
            burner.terminate()
            burner.join(timeout=10)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--fault", action="append", choices=FAULTS)
    parser.add_argument("--supervisor", choices=("on", "off", "both"), default="both")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--burn", type=int, default=0, help="Busy processes beside the stack.")
    parser.add_argument(
        "--docs", type=Path, default=None, help="Only write FILE's table to docs/faults.md."
    )
    args = parser.parse_args(argv)
    if args.docs is not None:
        write_page(args.docs.resolve())
        return
    endpoints = Endpoints.from_env(dict(os.environ))
    kafka_port = int(endpoints.bootstrap_servers.rsplit(":", 1)[1])
    config = StackConfig(
        state_dir=Path(os.environ["CDCBOX_STACK_DIR"]).resolve(),
        cache_dir=Path(os.environ.get("CDCBOX_CACHE_DIR", Path.home() / ".cache" / "cdcbox")),
        infra_dir=resource_dir("infra"),
        # The ports the stack was started on (`stack up`'s defaults: controller = Kafka + 1),
        # so a component restarted here comes back where it was.
        ports=Ports(
            postgres=int(endpoints.connect_db_port),
            kafka=kafka_port,
            controller=int(os.environ.get("CDCBOX_CONTROLLER_PORT", kafka_port + 1)),
            connect=int(endpoints.connect_url.rsplit(":", 1)[1]),
        ),
    )
    soak = Soak(endpoints, config)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or RESULTS / f"soak-{stamp}.jsonl"
    modes = {"on": [True], "off": [False], "both": [False, True]}[args.supervisor]
    runs: list[dict[str, Any]] = []
    with burning(args.burn):
        for _ in range(args.runs):  # interleaved: each fault and setting once per round
            for fault in args.fault or FAULTS:
                for supervised in modes:
                    log = out.with_suffix(".supervisor.log")
                    with supervisor(endpoints, supervised, log) as actions:
                        run = asdict(one_run(soak, fault, supervised))
                    run |= {"heal_actions": len(actions), "burn": args.burn}
                    runs.append(run)
                    with out.open("a") as f:
                        f.write(json.dumps(run) + "\n")
                    print(json.dumps(run), flush=True)
    print("\n".join(summary(runs)))


if __name__ == "__main__":
    main()
