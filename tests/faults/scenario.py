"""One fault scenario: consumer processes and concurrent writers stream events through the
whole CDC pipeline while a fault is injected; then the pipeline settles and the ledger is
counted from the outbox read-back."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cdcbox.names import DbNames
from cdcbox.stack.endpoints import Endpoints
from tests.faults import ledger
from tests.faults.effects import applied_ids, create_effects
from tests.faults.messages import MessagesOutbox
from tests.faults.writers import Writers
from tests.helpers import eventually, migrated_schema, unique

ROOT = Path(__file__).resolve().parents[2]
CONSUME = (
    sys.executable, "-m", "cdcbox.cli.main", "consume",
    "--max-poll-records", "100", "--session-timeout-ms", "6000",
    "--heartbeat-interval-ms", "2000",
)  # fmt: skip
LEDGER_HANDLER = "tests.faults.handlers:LedgerHandler"


@dataclass
class Processes:
    """cdcbox processes of one kind, started and stopped by pid, each with its log."""

    stack: Endpoints
    log_dir: Path
    name: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    fault_switches: str = ""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, count: int = 1, kill_after_records: int | None = None) -> None:
        """Start `count` processes; with `kill_after_records`, each SIGKILLs itself after
        that many records committed in the database, before their offsets."""
        switches = [self.fault_switches] if self.fault_switches else []
        if kill_after_records is not None:
            switches.append(f"kill-after-records={kill_after_records}")
        env = {
            **os.environ,
            **self.stack.as_env(),
            **self.env,
            "CDCBOX_FAULT_SWITCHES": ",".join(switches),
        }
        for _ in range(count):
            log = self.log_dir / f"{self.name}-{len(self.procs)}.log"
            argv = [a.replace("{i}", str(len(self.procs))) for a in self.argv]
            with log.open("ab") as out:
                self.procs.append(
                    subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=out)
                )

    def running(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.procs if p.poll() is None]

    def kill_one(self, sig: signal.Signals = signal.SIGKILL) -> subprocess.Popen[bytes]:
        proc = self.running()[0]
        proc.send_signal(sig)
        if sig == signal.SIGKILL:
            proc.wait(timeout=30)
        return proc

    def stop_one(self) -> None:
        """SIGTERM the newest running process (it leaves the group cleanly) and wait."""
        proc = self.running()[-1]
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)

    def stop(self) -> None:
        """SIGTERM each (finish the batch, commit, exit), SIGKILL what does not exit."""
        for proc in self.running():
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)

    def logs(self) -> str:
        return "\n".join(
            p.read_text()[-2000:] for p in sorted(self.log_dir.glob(f"{self.name}-*.log"))
        )


def consumer_group(
    stack: Endpoints,
    log_dir: Path,
    aggregate_type: str,
    consumer: str,
    flags: tuple[str, ...] = (),
    fault_switches: str = "",
    handler: str = LEDGER_HANDLER,
) -> Processes:
    """`cdc-ctl consume` processes of one consumer name (and group) with `handler`."""
    return Processes(
        stack,
        log_dir,
        consumer,
        (*CONSUME, handler, "--group", consumer, *flags),
        {"FAULT_CONSUMER": consumer, "FAULT_AGGREGATE_TYPE": aggregate_type},
        fault_switches,
    )


def relay_workers(
    stack: Endpoints, log_dir: Path, names: DbNames, fault_switches: str = ""
) -> Processes:
    """`cdc-ctl relay run` workers over the outbox of `names`, with a 3 s lease."""
    argv = (
        sys.executable, "-m", "cdcbox.cli.main", "--schema", names.schema, "relay", "run",
        "--lease", "3", "--batch-size", "50", "--poll-interval", "0.2",
        "--worker-id", f"{names.schema}-{{i}}",
    )  # fmt: skip
    return Processes(stack, log_dir, f"relay-{names.schema}", argv, {}, fault_switches)


@dataclass
class Scenario:
    """Writers over `aggregates` aggregates, `consumers` consumer processes, one fault."""

    name: str
    stack: Endpoints
    tmp_path: Path
    consumers: int = 2
    flags: tuple[str, ...] = ()
    versioned: bool = True
    rate_per_s: float = 150.0
    fault_switches: str = ""
    safeguard_off: str = ""
    settle_timeout_s: float = 180.0
    # > 0: the polling relay instead of Debezium, that many workers, on a schema of its own.
    relays: int = 0
    relay_fault_switches: str = ""
    handler: str = LEDGER_HANDLER
    # Every k-th event of a type the handler does not take (0: none).
    unhandled_every: int = 0
    # The outbox without a table (its schema, slot and connector) instead of the table;
    # `unguarded`: its writers emit without the slot check (a safeguard-off row).
    messages: MessagesOutbox | None = None
    unguarded: bool = False
    aggregate_type: str = field(default_factory=lambda: unique("ledger"))
    # The consumers' database (their inbox and `fault_effect`): "" for the stack's.
    consumer_dsn: str = ""

    def __post_init__(self) -> None:
        self.effects_dsn = self.consumer_dsn or self.stack.dsn
        create_effects(self.effects_dsn)
        self.consumer = unique("ledger")
        self.group = consumer_group(
            self.stack,
            self.tmp_path,
            self.aggregate_type,
            self.consumer,
            self.flags,
            self.fault_switches,
            self.handler,
        )
        if self.consumer_dsn:
            self.group.env["CDCBOX_DSN"] = self.consumer_dsn
        self.names = self.messages.names if self.messages else DbNames()
        if self.relays:
            self.names = migrated_schema(
                self.stack.dsn, DbNames(schema=unique("relay")), mode="polling"
            )
        self.relay = relay_workers(self.stack, self.tmp_path, self.names, self.relay_fault_switches)

    def run(
        self,
        fault: Callable[[Scenario], None],
        *,
        before: int = 600,
        after: int = 600,
    ) -> ledger.Ledger:
        """Stream `before` transactions, inject `fault`, stream `after` more, stop
        writing, settle, count."""
        self.start_processes()
        try:
            with Writers(
                self.stack.dsn,
                self.aggregate_type,
                versioned=self.versioned,
                rate_per_s=self.rate_per_s,
                unhandled_every=self.unhandled_every,
                names=self.names,
                messages=self.messages is not None,
                guarded=not self.unguarded,
            ) as writers:
                self.writers = writers
                eventually(
                    lambda: self.applied() > 0, timeout=120, what="the first effects applied"
                )
                self.stream_on(before)
                fault(self)
                self.stream_on(after)
            self.settle()
        finally:
            self.stop_processes()
        return self.count()

    def start_processes(self) -> None:
        self.group.start(self.consumers)
        self.relay.start(self.relays)

    def stop_processes(self) -> None:
        self.relay.stop()
        self.group.stop()

    @property
    def ledger_name(self) -> str:
        return self.name

    def count(self) -> ledger.Ledger:
        return ledger.compute(
            self.ledger_name,
            dsn=self.stack.dsn,
            bootstrap_servers=self.stack.bootstrap_servers,
            aggregate_type=self.aggregate_type,
            consumer=self.consumer,
            rolled_back=self.writers.rolled_back,
            safeguard_off=self.safeguard_off,
            names=self.names,
            messages=self.messages is not None,
            effects_dsn=self.effects_dsn,
        )

    def stream_on(self, events: int) -> None:
        """Wait until the writers have attempted `events` more transactions (150/s: a
        fault held for 450 of them lasts about 3 s of writing)."""
        target = self.writers.attempted + events
        eventually(
            lambda: self.writers.attempted >= target,
            timeout=events / self.rate_per_s * 4 + 30,
            interval=0.05,
            what=f"{events} more transactions written",
        )

    def applied(self) -> int:
        return len(applied_ids(self.effects_dsn, self.consumer))

    def settle(self) -> None:
        """Wait until every committed event has an effect, or the deadline passes (the
        ledger then shows what was lost)."""
        committed = set(
            ledger.committed_events(
                self.stack.dsn, self.aggregate_type, self.names, self.messages is not None
            )
        )
        groups = [self.group, *([self.relay] if self.relays else [])]
        self.poll_until(lambda: committed <= applied_ids(self.effects_dsn, self.consumer), groups)

    def poll_until(self, settled: Callable[[], bool], groups: list[Processes]) -> None:
        """Poll `settled` until it holds or the settle deadline passes (the ledger then
        shows what is missing), starting a process in any of `groups` a test hook left
        without one."""

        def probe() -> bool:
            if settled():
                return True
            for group in groups:
                if not group.running():
                    group.start(1)
            return False

        with contextlib.suppress(AssertionError):  # the deadline passed: counted as is
            eventually(probe, timeout=self.settle_timeout_s, interval=0.5, what="settled")


@dataclass
class TwoHopScenario(Scenario):
    """A chain of two services over the WAL twice: the writers' events (orders) are
    applied by `group` (inventory), whose handler answers each from its outbox in the
    same transaction; the answers reach Kafka through the same connector and are applied
    by `second` (orders again). Faults hit the first hop's consumers and Connect; the
    ledger is counted at both hops (`chain`: per first-hop event)."""

    second_consumers: int = 1
    handler: str = "tests.faults.handlers:AnsweringHandler"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.answer_type = self.aggregate_type + "-answer"
        self.group.env["FAULT_ANSWER_TYPE"] = self.answer_type
        self.second_consumer = unique("hop2")
        self.second = consumer_group(
            self.stack, self.tmp_path, self.answer_type, self.second_consumer
        )
        self.chain: ledger.Ledger | None = None

    @property
    def ledger_name(self) -> str:
        return f"{self.name}: hop 1"

    def start_processes(self) -> None:
        super().start_processes()
        self.second.start(self.second_consumers)

    def stop_processes(self) -> None:
        self.second.stop()
        super().stop_processes()

    def settle(self) -> None:
        """Both hops: every committed event applied, then every answer applied."""
        super().settle()

        def answered() -> bool:
            answers = set(ledger.committed_events(self.stack.dsn, self.answer_type))
            hop_one = applied_ids(self.stack.dsn, self.consumer)
            applied = applied_ids(self.stack.dsn, self.second_consumer)
            return len(answers) >= len(hop_one) and answers <= applied

        self.poll_until(answered, [self.second])

    def count(self) -> ledger.Ledger:
        first = super().count()
        self.chain = ledger.compute_chain(
            f"{self.name}: hop 2, per hop-1 event",
            dsn=self.stack.dsn,
            bootstrap_servers=self.stack.bootstrap_servers,
            first_type=self.aggregate_type,
            second_type=self.answer_type,
            consumer=self.second_consumer,
            rolled_back=self.writers.rolled_back,
            safeguard_off=self.safeguard_off,
        )
        return first


def assert_exact(result: ledger.Ledger, scenario: Scenario) -> None:
    assert result.exact, f"{result}\n{scenario.group.logs()}\n{scenario.relay.logs()}"
    assert result.committed > 0 and result.delivered >= result.committed


def assert_exact_on_the_topic(result: ledger.Ledger, scenario: Scenario) -> None:
    """`assert_exact`, and no copy on the topic for a read_committed reader: Kafka
    Connect's exactly-once source support (on in every stack cdcbox starts)."""
    assert_exact(result, scenario)
    assert result.duplicates == 0, f"copies on the topic: {result}"
