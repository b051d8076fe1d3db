"""Healing a pipeline that reports RUNNING and publishes nothing.

What is repaired, in this order, each as one `HealAction`:

1. a connector or task that FAILED: restarted through Connect's REST API;
2. a Kafka transaction that nothing but an abort will end (its coordinator lost it, or
   it outlived its own timeout): the abort marker written on its partition; and, only
   when the policy names an age, one open that long whose producer has written nothing
   for that long: its transactional id fenced, so its coordinator aborts it on every
   partition at once (aborting one partition of a transaction whose producer may still
   commit could drop that partition's records and keep their source offset);
3. a task RUNNING whose replication slot has stood still, with WAL after it, for longer
   than the policy allows: the task restarted.

What is never done here: killing a process. A worker cdcbox does not run is only
spoken to through its REST API and the brokers' admin API.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from psycopg.conninfo import make_conninfo

from cdcbox.connect.client import ConnectClient, tasks_by_id
from cdcbox.connect.connectors import DEBEZIUM_POSTGRES_CLASS
from cdcbox.db import check_login, connect
from cdcbox.errors import CdcboxError, ServiceUnavailable
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.transactions import OpenTransaction, TransactionAdmin
from cdcbox.ops.progress import ProgressWatch, slot_position, stalled_for

__all__ = ["HealAction", "HealPolicy", "Healer", "watched_topics"]


@dataclass(frozen=True)
class HealPolicy:
    """When to act. `abort_older_than_s` None: only transactions nothing else will end
    are aborted; `stuck_after_s`: how long a RUNNING task's slot may stand still."""

    abort_older_than_s: float | None = None
    stuck_after_s: float = 60.0
    restart_timeout_s: float = 60.0


@dataclass(frozen=True)
class HealAction:
    """One repair: what (`kind`), on what, and why."""

    kind: str  # "restart task", "restart connector", "abort transaction", "fence producer"
    target: str
    reason: str
    connector: str | None = None
    task: int | None = None
    transaction: OpenTransaction | None = None

    def line(self) -> str:
        return f"{self.kind} {self.target}: {self.reason}"


class RestartBackoff:
    """When a target may be restarted again: at once the first time, then after
    `first_s`, doubling up to `max_s` (a task that FAILS on every start, on a poison
    record, is not restarted every round; `connectors quarantine` is its remedy)."""

    def __init__(
        self, clock: Callable[[], float], first_s: float = 30.0, max_s: float = 600.0
    ) -> None:
        self._clock = clock
        self.first_s, self.max_s = first_s, max_s
        self._next: dict[str, tuple[float, float]] = {}  # target -> (not before, interval)

    def allows(self, target: str) -> bool:
        entry = self._next.get(target)
        return entry is None or self._clock() >= entry[0]

    def restarted(self, target: str) -> None:
        _, interval = self._next.get(target, (0.0, self.first_s / 2))
        interval = min(interval * 2, self.max_s)
        self._next[target] = (self._clock() + interval, interval)


def watched_topics(topics: Iterable[str]) -> list[str]:
    """Every topic whose open transactions hold back readers cdcbox cares about: all but
    Kafka's internal ones (`__consumer_offsets`, `__transaction_state`)."""
    return sorted(t for t in topics if not t.startswith("__"))


class Healer:
    """Finds and applies `HealAction`s; keeps, across rounds, since when each
    connector's slot has stood still (a supervisor calls `round` in a loop)."""

    def __init__(
        self,
        connect_client: ConnectClient,
        kafka: KafkaSettings,
        dsn: str | None,
        policy: HealPolicy,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.connect = connect_client
        self.kafka = kafka
        self.dsn = dsn
        self.policy = policy
        self.watch = ProgressWatch(clock)
        self.backoff = RestartBackoff(clock)

    def check_login(self) -> None:
        """Log in to the DSN's database once: a refused login (`LoginRefused`) is raised,
        for the supervisor to exit on; one that does not answer is for later rounds."""
        if self.dsn is not None:
            check_login(self.dsn)

    # --- finding ---------------------------------------------------------------------
    def failed(self) -> list[HealAction]:
        """Connectors and tasks in state FAILED."""
        actions = []
        for name in self.connect.connectors():
            status = self.connect.status(name) or {}
            if status.get("connector", {}).get("state") == "FAILED":
                actions.append(HealAction("restart connector", name, "FAILED", connector=name))
            for task in tasks_by_id(status):
                if task["state"] == "FAILED":
                    actions.append(
                        HealAction(
                            "restart task",
                            f"{name}-{task['id']}",
                            "FAILED",
                            connector=name,
                            task=int(task["id"]),
                        )
                    )
        return actions

    def transactions(self) -> list[HealAction]:
        """Transactions to end: those nothing else will end, and (with an age in the
        policy) those open and idle that long, one fence per transactional id."""
        with TransactionAdmin(self.kafka) as admin:
            found = admin.open_transactions(watched_topics(admin.list_topics()))
        now_ms = int(time.time() * 1000)
        actions: list[HealAction] = []
        fenced: set[str] = set()
        age = self.policy.abort_older_than_s
        for txn in found:
            reason = txn.hanging(now_ms)
            if reason is not None:
                actions.append(HealAction("abort transaction", txn.where, reason, transaction=txn))
            elif (
                age is not None
                and txn.transactional_id is not None
                and txn.transactional_id not in fenced
                and txn.age_s(now_ms) >= age
                and txn.idle_s(now_ms) >= age
            ):
                fenced.add(txn.transactional_id)
                actions.append(
                    HealAction(
                        "fence producer",
                        txn.transactional_id,
                        txn.describe(now_ms),
                        transaction=txn,
                    )
                )
        return actions

    def stuck(self, watch_now: bool = False) -> list[HealAction]:
        """RUNNING PostgreSQL connectors whose slot has stood still with WAL after it
        for `stuck_after_s`: measured across rounds, or (`watch_now`) by watching each
        slot up to that long now. Nothing without a DSN."""
        if self.dsn is None:
            return []
        actions = []
        for name, slot, database in self._running_slots():
            try:
                with connect(make_conninfo(self.dsn, dbname=database), autocommit=True) as conn:
                    if watch_now:
                        still, position = stalled_for(conn, slot, self.policy.stuck_after_s)
                    else:
                        position = slot_position(conn, slot)
                        still = self.watch.observe(position) if position else 0.0
            except ServiceUnavailable:
                continue  # a database this DSN cannot reach: not ours to judge
            if position is not None and still >= self.policy.stuck_after_s:
                actions.append(
                    HealAction(
                        "restart task",
                        f"{name}-0",
                        f"RUNNING, but slot {slot} stood at {position.confirmed} for "
                        f"{still:.0f} s with {position.behind_bytes} bytes of WAL after it",
                        connector=name,
                        task=0,
                    )
                )
        return actions

    def _running_slots(self) -> list[tuple[str, str, str]]:
        found = []
        for name in self.connect.connectors():
            config = self.connect.config(name) or {}
            status = self.connect.status(name) or {}
            tasks = tasks_by_id(status)
            if (
                config.get("connector.class") == DEBEZIUM_POSTGRES_CLASS
                and tasks
                and all(t["state"] == "RUNNING" for t in tasks)
                and config.get("slot.name")
                and config.get("database.dbname")
            ):
                found.append((name, config["slot.name"], config["database.dbname"]))
        return found

    # --- applying ----------------------------------------------------------------------
    def apply(self, action: HealAction) -> str:
        """Carry `action` out; returns what came of it (one line)."""
        if action.kind == "abort transaction":
            assert action.transaction is not None
            with TransactionAdmin(self.kafka) as admin:
                admin.abort(action.transaction)
            return "aborted"
        if action.kind == "fence producer":
            with TransactionAdmin(self.kafka) as admin:
                admin.fence(action.target)
            return "fenced: its coordinator aborted the transaction"
        assert action.connector is not None
        if action.kind == "restart connector":
            self.connect.restart(action.connector, include_tasks=True, only_failed=True)
        else:
            assert action.task is not None
            self.connect.restart_task(action.connector, action.task)
        return self._await_running(action.connector)

    def _await_running(self, connector: str) -> str:
        try:
            self.connect.wait_until(connector, "RUNNING", timeout_s=self.policy.restart_timeout_s)
        except CdcboxError as e:
            return f"did not take: {str(e).splitlines()[0]}"
        return "RUNNING"

    def round(self, dry_run: bool = False, watch_now: bool = False) -> list[tuple[HealAction, str]]:
        """One pass: failed parts and transactions first (a task held by an open
        transaction moves again once it ends, and a restart would block on it), then
        stuck tasks; a restart the backoff does not allow yet waits for a later round.
        Returns each action with its outcome ("planned" on a dry run)."""
        done: list[tuple[HealAction, str]] = []
        for action in self.failed() + self.transactions():
            self._carry_out(action, dry_run, done)
        for action in self.stuck(watch_now):
            self._carry_out(action, dry_run, done)
        return done

    def _carry_out(
        self, action: HealAction, dry_run: bool, done: list[tuple[HealAction, str]]
    ) -> None:
        restart = action.kind.startswith("restart")
        if restart and not self.backoff.allows(action.target):
            return
        done.append((action, "planned" if dry_run else self.apply(action)))
        if restart and not dry_run:
            self.backoff.restarted(action.target)


def describe(outcomes: list[tuple[HealAction, str]]) -> list[dict[str, Any]]:
    """The outcomes as JSON rows."""
    return [
        {"action": a.kind, "target": a.target, "reason": a.reason, "outcome": outcome}
        for a, outcome in outcomes
    ]
