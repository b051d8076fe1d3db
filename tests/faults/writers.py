"""Concurrent producers for the fault scenarios: several threads append events in their
own transactions over many aggregates, at a steady rate, through whatever breaks.

Each aggregate belongs to one thread, so its events are written in sequence `n` (the
payload, and the aggregate version when versioned). Some transactions are rolled back
on purpose: those events must never be delivered. A commit that raised may or may not
have committed; its `n` is not reused, and the outbox read-back decides.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from cdcbox.errors import SlotUnavailable
from cdcbox.names import DbNames
from cdcbox.producer.outbox import NewEvent, Outbox
from tests.faults.messages import emit_unguarded, record_business
from tests.helpers import eventually


class Writers:
    def __init__(
        self,
        dsn: str,
        aggregate_type: str,
        *,
        threads: int = 3,
        aggregates_per_thread: int = 15,
        rate_per_s: float = 150.0,
        versioned: bool = True,
        rollback_every: int = 13,
        unhandled_every: int = 0,
        names: DbNames = DbNames(),
        messages: bool = False,
        guarded: bool = True,
    ) -> None:
        """`messages`: the outbox without a table (a business row records each event's
        commit); `guarded` False: its messages emitted without the slot check."""
        self.dsn = dsn
        self.names = names
        self.messages = messages
        self.guarded = guarded
        self.aggregate_type = aggregate_type
        self.versioned = versioned
        self.rollback_every = rollback_every
        # Every k-th event (0: none) is of a type the ledger's handlers do not take.
        self.unhandled_every = unhandled_every
        self.aggregates_per_thread = aggregates_per_thread
        self.interval_s = threads / rate_per_s  # each transaction writes one event
        self.rolled_back: set[uuid.UUID] = set()
        self.attempted = 0
        self.errors = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._running = threading.Event()  # cleared by `paused`
        self._running.set()
        self._in_flight = 0
        self._threads = [
            threading.Thread(target=self._run, args=(t,), name=f"writer-{t}", daemon=True)
            for t in range(threads)
        ]

    def __enter__(self) -> Writers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No writer starts a transaction inside the block, and none is in one when it
        begins: a writer's synchronous COMMIT would flush everyone's WAL."""
        with self._lock:
            self._running.clear()
        try:
            eventually(lambda: self._in_flight == 0, timeout=30, what="writers idle")
            yield
        finally:
            self._running.set()

    def stop(self) -> None:
        self._stop.set()
        self._running.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _run(self, t: int) -> None:
        outbox = Outbox(self.names, messages=self.messages)
        next_n = [1] * self.aggregates_per_thread
        conn: psycopg.Connection[Any] | None = None
        i = 0
        deadline = time.monotonic()
        while not self._stop.is_set():
            deadline += self.interval_s
            self._stop.wait(max(0.0, deadline - time.monotonic()))
            with self._lock:  # checked and counted at once, so `paused` cannot miss one
                going = self._running.is_set()
                if going:
                    self._in_flight += 1
            if not going:
                self._running.wait()
                deadline = time.monotonic()
                continue
            a = i % self.aggregates_per_thread
            i += 1
            event_id = uuid.uuid4()
            n = next_n[a]
            unhandled = self.unhandled_every and i % self.unhandled_every == 0
            event = NewEvent(
                self.aggregate_type,
                f"w{t}-a{a}",
                UNHANDLED_TYPE if unhandled else "Changed",
                {"n": n},
                aggregate_version=n if self.versioned else None,
                event_id=event_id,
            )
            roll_back = i % self.rollback_every == 0
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.dsn, connect_timeout=2)
                with conn.transaction():
                    if self.messages:
                        record_business(conn, self.names, event, n)
                    if self.guarded:
                        outbox.append(conn, event)
                    else:
                        emit_unguarded(conn, self.names, event)
                    if roll_back:
                        raise _RollBack
                next_n[a] = n + 1
            except _RollBack:
                with self._lock:
                    self.rolled_back.add(event_id)
            except (psycopg.Error, SlotUnavailable):
                next_n[a] = n + 1  # it may have committed: never reuse its n
                with self._lock:
                    self.errors += 1
                if conn is not None:
                    conn.close()
                conn = None
                deadline = time.monotonic() + 0.2  # back off while the database is away
            with self._lock:
                self.attempted += 1
                self._in_flight -= 1
        if conn is not None:
            conn.close()


# An event type no ledger handler takes: it consumes its version and has no effect.
UNHANDLED_TYPE = "Noted"


class _RollBack(Exception):
    """Raised inside a writer's transaction to roll it back on purpose."""
