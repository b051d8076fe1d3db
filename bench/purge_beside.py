"""A purge measured while the writers run: once unpaced, and paced (`--max-rate`) against
the writers alone, interleaved round by round (`bench.growth` uses both for the inbox
and the outbox)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import psycopg

from bench.stats import interleaved, ratio_spread, spread
from cdcbox.ops.pacing import Pace

Progress = Callable[[int, int], None]
Purge = Callable[..., Any]  # (conn, progress, pace=None) -> what the library call returns


class Stopped(Exception):
    """Ends a paced purge between two batches (each batch is its own transaction, so
    nothing is left half done)."""


@dataclass
class PaceUntil(Pace):
    """A `Pace` that, once `over` is set, ends the purge after its wait: the purge's rate
    is then taken at the point where the pace holds it, not just after a batch."""

    over: threading.Event = field(default_factory=threading.Event)

    def done(self, units: int) -> None:
        super().done(units)
        if self.over.is_set():
            raise Stopped


def purge_while(
    purge: Purge,
    dsn: str,
    measure: Callable[[], dict[str, Any]],
    over: threading.Event | None = None,
) -> dict[str, Any]:
    """Start `purge(conn, progress)` in a thread, run `measure()` meanwhile, then set
    `over`; the purge's duration, rows, and how much of the measurement it overlapped."""
    done: dict[str, Any] = {"rows": 0}
    over = over or threading.Event()

    def progress(deleted: int, _total: int) -> None:
        done["rows"] = deleted

    def run() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            started = time.perf_counter()
            with contextlib.suppress(Stopped):
                purge(conn, progress)
            done["s"] = time.perf_counter() - started

    thread = threading.Thread(target=run)
    started = time.perf_counter()
    thread.start()
    during = measure()
    over.set()
    measured_s = time.perf_counter() - started
    thread.join()
    return {
        "rows": done["rows"],
        "seconds": done["s"],
        "rows_per_s": done["rows"] / done["s"] if done["s"] else None,
        "during": during,
        "overlap": min(done["s"], measured_s) / measured_s,
    }


def paced_purge(
    fill: Callable[[int], None],
    purge: Purge,
    rate: int,
    dsn: str,
    measure: Callable[[], dict[str, Any]],
    key: str,
    rounds: int,
    window_s: float,
) -> dict[str, Any]:
    """The writers (`measure()`, reporting `key`) alone and beside a purge held to
    `rate` rows a second, interleaved round by round. Each round first adds enough old rows
    for `window_s` of purging; the purge stops when the measurement ends."""

    def beside() -> dict[str, Any]:
        fill(int(rate * window_s))
        over = threading.Event()
        paced = partial(purge, pace=PaceUntil(rate, over=over))
        outcome = purge_while(paced, dsn, measure, over)
        return {**outcome["during"], "purge": outcome}

    runs = interleaved({"alone": measure, "beside": beside}, rounds)
    purges = [r["purge"] for r in runs["beside"]]
    return {
        "max_rate": rate,
        "rounds": rounds,
        "rows": [p["rows"] for p in purges],
        "rows_per_s": spread([p["rows_per_s"] for p in purges]),
        "overlap": spread([p["overlap"] for p in purges]),
        "alone": spread([r[key] for r in runs["alone"]]),
        "beside": spread([r[key] for r in runs["beside"]]),
        "beside / alone": ratio_spread(runs, "beside", "alone", key),
    }
