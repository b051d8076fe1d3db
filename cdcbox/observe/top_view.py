"""`cdc-ctl top`'s frame: a `PipelineState` (and the one before it, for rates) drawn as
rich tables — outbox, slots, connectors, open Kafka transactions (when there are any),
consumers, consumer-group lag."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from datetime import datetime

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from cdcbox.observe.pipeline_state import RECENT_S, PipelineState
from cdcbox.ops.progress import ProgressWatch, SlotPosition

# The lag table shows the partitions furthest behind first, at most this many.
MAX_LAG_ROWS = 12


# A slot still this long with WAL after it is marked: the specs' heartbeat moves a
# healthy connector's slot every 10 s, idle or not.
STILL_MARK_S = 30.0


class SlotClock:
    """Since when each slot has stood still with WAL after it, across `top`'s frames."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._watch = ProgressWatch(clock)

    def observe(self, state: PipelineState) -> dict[str, float]:
        return {
            s.name: self._watch.observe(
                SlotPosition(s.name, s.confirmed_flush_lsn or "", s.unconfirmed_bytes)
            )
            for s in state.slots
        }


def frame(
    current: PipelineState,
    previous: PipelineState | None = None,
    still: Mapping[str, float] | None = None,
) -> RenderableType:
    """One frame; rates are per second between `previous` and `current` ("-" without);
    `still`: seconds each slot has stood still with WAL after it (`SlotClock`)."""
    seconds = current.taken_at - previous.taken_at if previous is not None else 0.0
    parts: list[RenderableType] = [
        Text(
            f"cdcbox top — {datetime.fromtimestamp(current.taken_at):%Y-%m-%d %H:%M:%S}",
            style="bold",
        )
    ]
    for source, why in sorted(current.errors.items()):
        parts.append(Text(f"{source}: not read ({why})", style="red"))
    parts += [
        _outbox(current, previous, seconds),
        _slots(current, still or {}),
        _connectors(current),
        *([_transactions(current)] if current.transactions else []),
        _consumers(current, previous, seconds),
        _lags(current),
    ]
    return Group(*parts)


def _rate(now: int, before: int | None, seconds: float) -> str:
    if before is None or seconds <= 0:
        return "-"
    return f"{max(0, now - before) / seconds:,.1f}"


def _count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def _outbox(current: PipelineState, previous: PipelineState | None, seconds: float) -> Table:
    """One row per outbox read, led by its service when services are named."""
    table = Table(title="outbox", title_justify="left", expand=False)
    named = any(o.service for o in current.outboxes)
    if named:
        table.add_column("service")
    columns = ("last id", "appended/s", "pending (polling)", "dead", "oldest pending", "emit")
    for column in columns:
        table.add_column(column, justify="right")
    if not current.outboxes:
        table.add_row(*["-"] * (len(columns) + named))
    before = {o.service: o.last_id for o in previous.outboxes} if previous else {}
    for o in current.outboxes:
        oldest = "-" if o.oldest_pending_s is None else f"{o.oldest_pending_s:,.1f} s"
        table.add_row(
            *([o.service] if named else []),
            f"{o.last_id:,}",
            _rate(o.last_id, before.get(o.service), seconds),
            _count(o.pending),
            _count(o.dead),
            oldest,
            _emit(o.emit_ready),
        )
    return table


def _emit(ready: bool | None) -> str | Text:
    """The outbox without a table: whether its producers can emit; "-" for a table."""
    if ready is None:
        return "-"
    return "ready" if ready else Text("REFUSING (slot)", style="bold red")


def _slots(current: PipelineState, still: Mapping[str, float]) -> Table:
    """Each slot; one that has stood still `STILL_MARK_S` or longer with WAL after it is
    marked (its connector publishes nothing: runbook 8)."""
    table = Table(title="replication slots", title_justify="left")
    table.add_column("slot")
    table.add_column("database")
    table.add_column("active")
    table.add_column("WAL retained", justify="right")
    table.add_column("unconfirmed", justify="right")
    table.add_column("confirmed")
    table.add_column("wal_status")
    for slot in current.slots:
        seconds = still.get(slot.name, 0.0)
        confirmed = slot.confirmed_flush_lsn or "-"
        table.add_row(
            slot.name,
            slot.database or "-",
            "yes" if slot.active else Text("no", style="yellow"),
            f"{slot.retained_bytes / 1_048_576:,.1f} MiB",
            f"{slot.unconfirmed_bytes:,} B",
            Text(f"{confirmed} still {seconds:.0f} s", style="bold red")
            if seconds >= STILL_MARK_S
            else confirmed,
            slot.wal_status or "-",
        )
    return table


def _transactions(current: PipelineState) -> Table:
    """Kafka transactions open on a partition, oldest first (runbook 8)."""
    table = Table(title="open Kafka transactions", title_justify="left")
    table.add_column("partition")
    table.add_column("owner")
    table.add_column("open", justify="right")
    table.add_column("")
    for t in sorted(current.transactions, key=lambda t: -t.age_s):
        table.add_row(
            f"{t.topic}-{t.partition}",
            t.owner,
            f"{t.age_s:,.0f} s",
            Text("HANGING", style="bold red") if t.hanging else "",
        )
    return table


def _connectors(current: PipelineState) -> Table:
    table = Table(title="connectors", title_justify="left")
    table.add_column("connector")
    table.add_column("state")
    table.add_column("tasks")
    for c in current.connectors:
        style = "green" if c.state == "RUNNING" else "red"
        tasks = ", ".join(f"{i}:{s}" for i, s in enumerate(c.tasks)) or "none"
        table.add_row(c.name, Text(c.state, style=style), tasks)
    return table


def _consumers(current: PipelineState, previous: PipelineState | None, seconds: float) -> Table:
    table = Table(title=f"consumers (inbox; last {RECENT_S} s)", title_justify="left")
    named = any(row.service for row in current.inbox)
    if named:
        table.add_column("service")
    table.add_column("consumer")
    for column in ("processed", "processed/s", "skipped", "dead-lettered", "dead-lettered/s"):
        table.add_column(column, justify="right")
    now, before = _by_consumer(current), _by_consumer(previous) if previous else {}
    for (service, consumer), counts in sorted(now.items()):
        was = before.get((service, consumer))
        table.add_row(
            *([service] if named else []),
            consumer,
            f"{counts['PROCESSED']:,}",
            f"{counts['PROCESSED'] / RECENT_S:,.1f}",
            f"{counts['SKIPPED']:,}",
            f"{counts['FAILED']:,}",  # held now, however long ago
            _rate(counts["FAILED"], was["FAILED"] if was else None, seconds),
        )
    return table


def _by_consumer(state: PipelineState) -> dict[tuple[str, str], defaultdict[str, int]]:
    counts: dict[tuple[str, str], defaultdict[str, int]] = {}
    for row in state.inbox:
        counts.setdefault((row.service, row.consumer), defaultdict(int))[row.status] = row.rows
    return counts


def _lags(current: PipelineState) -> RenderableType:
    shown = sorted(current.lags, key=lambda p: (-p.lag, p.group, p.topic, p.partition))
    table = Table(title="consumer-group lag", title_justify="left")
    table.add_column("group")
    table.add_column("topic")
    table.add_column("partition", justify="right")
    table.add_column("lag", justify="right")
    for p in shown[:MAX_LAG_ROWS]:
        table.add_row(p.group, p.topic, str(p.partition), f"{p.lag:,}")
    if len(shown) <= MAX_LAG_ROWS:
        return table
    note = f"(the {MAX_LAG_ROWS} furthest behind of {len(shown)} partitions)"
    return Group(table, Text(note, style="dim"))
