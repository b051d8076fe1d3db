"""The performance targets, each judged against one results file: the measured value, the
target, their ratio and the verdict. A value measured several times (a spread: median,
min, max) is met only when its whole spread is on the right side of the limit, missed
only when all of it is on the wrong side, and otherwise said to cross the limit. A
target a run did not measure (a rate pgbench did not reach, a size not run) is reported
as not measured, never met."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.e2e import TOP_RATE_VARIANTS

Results = dict[str, Any]
TIMES = "\u00d7"  # the unit of a ratio


def _get(results: Results, *path: Any) -> Any:
    value: Any = results
    for key in path:
        if not isinstance(value, dict) or str(key) not in value:
            return None
        value = value[str(key)]
    return value


Measured = float | dict[str, Any]  # one value, or a spread (bench.stats.spread)
MET, MISSED, CROSSES, NOT_MEASURED = "met", "missed", "spread crosses it", "not measured"


def median(value: Measured) -> float:
    return float(value["median"]) if isinstance(value, dict) else value


@dataclass(frozen=True)
class Target:
    area: str
    what: str
    unit: str
    at_least: bool  # True: measured >= limit; False: measured <= limit
    limit: float
    measure: Callable[[Results], Measured | None]

    def judge(self, results: Results) -> tuple[Measured | None, str]:
        value = self.measure(results)
        if value is None:
            return None, NOT_MEASURED
        low, high = (value["min"], value["max"]) if isinstance(value, dict) else (value, value)
        good = [v >= self.limit if self.at_least else v <= self.limit for v in (low, high)]
        return value, MET if all(good) else MISSED if not any(good) else CROSSES


def _cost(key: str) -> Callable[[Results], Measured | None]:
    return lambda r: _get(r, "consumer_cost", "records_per_s", key)


def _ratio(section: str, key: str) -> Callable[[Results], Measured | None]:
    return lambda r: _get(r, section, "ratios", key)


def _e2e(relay: str, rate: int, *path: str) -> Callable[[Results], float | None]:
    return lambda r: _get(r, "e2e", relay, rate, *path)


def _sustained(r: Results, relays: tuple[str, ...] = ("cdc",)) -> float | None:
    """The highest rate delivered by a CDC run (of `relays`: the ladder's, or also the
    top rate's variants) that pgbench reached and whose events were all applied within
    2 s of the writers stopping (no growing backlog)."""
    runs = [run for relay in relays for run in (_get(r, "e2e", relay) or {}).values()]
    sustained = [
        float(run["delivered_per_s"])
        for run in runs
        if run.get("reached")
        and run.get("drain_after_writes_s") is not None
        and run["drain_after_writes_s"] <= 2
    ]
    return max(sustained) if sustained else None


def _max_rss(*paths: tuple[str, ...]) -> Callable[[Results], float | None]:
    def measure(r: Results) -> float | None:
        values = [v for p in paths if (v := _get(r, *p)) is not None]
        return max(values) if values else None

    return measure


def _largest_inbox(*path: str) -> Callable[[Results], Measured | None]:
    """At the largest inbox the run filled."""

    def measure(r: Results) -> Measured | None:
        sizes = _get(r, "inbox_growth", "sizes") or {}
        if not sizes:
            return None
        return _get(sizes[max(sizes, key=int)], *path)  # type: ignore[no-any-return]

    return measure


def _paced(section: str, rate: int) -> Callable[[Results], Measured | None]:
    """The writers beside a purge paced to `rate`, against them alone."""

    def measure(r: Results) -> Measured | None:
        for paced in _get(r, section, "paced_purges") or []:
            if paced["max_rate"] == rate:
                return _get(paced, "beside / alone")  # type: ignore[no-any-return]
        return None

    return measure


def _relay(quantile: str) -> Callable[[Results], Measured | None]:
    """The polling relay's commit-to-broker latency at 300/s (bench.relay_tail)."""
    return lambda r: _get(r, "relay", "tail_ms", quantile)


TARGETS = [
    Target("polling relay", "p99 at 300/s, commit → broker", "ms", False, 10, _relay("p99")),
    Target("polling relay", "max at 300/s, commit → broker", "ms", False, 50, _relay("max")),
    Target(
        "polling relay",
        "backlog drain, ordered",
        "rows/s",
        True,
        8000,
        lambda r: _get(r, "relay", "drain_rows_per_s", "drain ordered"),
    ),
    Target(
        "exactly-once",
        "CDC sustained rate, exactly-once on / off",
        TIMES,
        True,
        0.9,
        _ratio("exactly_once", "sustained on / off"),
    ),
    Target(
        "outbox without a table",
        "append: floor / messages (tps, business row alone over with the message)",
        TIMES,
        False,
        1.05,
        _ratio("outbox_modes", "append: floor / messages"),
    ),
    Target(
        "outbox without a table",
        "CDC sustained rate, messages / table",
        TIMES,
        True,
        1.0,
        _ratio("outbox_modes", "sustained: messages / table"),
    ),
    Target("consumer", "per record: records/s", "rec/s", True, 2000, _cost("cdcbox_per_record")),
    Target(
        "consumer",
        "per record, `pipelined` handler: records/s",
        "rec/s",
        True,
        2000,
        _cost("cdcbox_per_record_pipelined"),
    ),
    Target(
        "consumer",
        "per record / bare + write",
        TIMES,
        True,
        0.25,
        _ratio("consumer_cost", "per_record / bare_business_write"),
    ),
    Target(
        "consumer",
        "per record: p99 per record",
        "ms",
        False,
        3,
        lambda r: _get(r, "consumer_cost", "record_ms", "cdcbox_per_record", "p99"),
    ),
    Target(
        "consumer", "batch, plain `handle()`: records/s", "rec/s", True, 6000, _cost("cdcbox_batch")
    ),
    Target(
        "consumer",
        "batch, plain `handle()` / bare + write",
        TIMES,
        True,
        0.6,
        _ratio("consumer_cost", "batch / bare_business_write"),
    ),
    Target(
        "consumer",
        "batch, `handle_batch` override / bare + write",
        TIMES,
        True,
        0.8,
        _ratio("consumer_cost", "batch_handle_batch / bare_business_write"),
    ),
    Target(
        "load generator",
        "offered events/s (pgbench, unthrottled)",
        "ev/s",
        True,
        10_000,
        lambda r: _get(r, "load_generator", "offered_per_s"),
    ),
    Target("CDC end to end", "sustained, no growing backlog", "ev/s", True, 3000, _sustained),
    Target(
        "CDC end to end",
        "sustained, exactly-once on, any handler style or group size measured (issue 55)",
        "ev/s",
        True,
        5000,
        lambda r: _sustained(r, ("cdc", *(name for name, _, _ in TOP_RATE_VARIANTS))),
    ),
    Target(
        "CDC end to end",
        "p99 at 1,000 ev/s",
        "ms",
        False,
        250,
        _e2e("cdc", 1000, "latency_ms", "p99"),
    ),
    Target(
        "CDC end to end",
        "p99 at 2,000 ev/s",
        "ms",
        False,
        500,
        _e2e("cdc", 2000, "latency_ms", "p99"),
    ),
    Target(
        "producer",
        "one-row transaction: floor tps / with-outbox tps",
        TIMES,
        False,
        1.15,
        _ratio("producer", "one_row: floor / outbox"),
    ),
    Target(
        "producer",
        "order transaction: throughput lost to the append",
        "share",
        False,
        0.15,
        _ratio("producer", "order: outbox cost"),
    ),
    Target(
        "polling relay",
        "p50 at 500 ev/s, NOTIFY",
        "ms",
        False,
        20,
        _e2e("polling_notify", 500, "latency_ms", "p50"),
    ),
    Target(
        "polling relay",
        "p99 at 500 ev/s, NOTIFY",
        "ms",
        False,
        150,
        _e2e("polling_notify", 500, "latency_ms", "p99"),
    ),
    Target(
        "polling relay",
        "drain, 2 workers",
        "rows/s",
        True,
        5000,
        lambda r: _get(r, "drain", "small", "rows_per_s"),
    ),
    Target(
        "polling relay",
        "drain with a large backlog / with a small one",
        TIMES,
        True,
        0.8,
        _ratio("drain", "large / small"),
    ),
    Target(
        "catch-up",
        "drain rate / steady rate",
        TIMES,
        True,
        5,
        lambda r: _get(r, "catch_up", "drain_vs_steady"),
    ),
    Target(
        "tables grow",
        "per record, largest inbox / empty inbox",
        TIMES,
        True,
        0.8,
        _largest_inbox("ratios", "per_record / empty"),
    ),
    Target(
        "tables grow",
        "batch, largest inbox / empty inbox",
        TIMES,
        True,
        0.8,
        _largest_inbox("ratios", "batch / empty"),
    ),
    Target(
        "tables grow",
        "exporter reading, empty inbox time / largest inbox time",
        TIMES,
        True,
        0.8,
        _largest_inbox("ratios", "exporter reading, empty / this inbox"),
    ),
    Target(
        "tables grow",
        "append, large outbox / empty outbox",
        TIMES,
        True,
        0.8,
        lambda r: _get(r, "outbox_growth", "ratios", "append, full / empty"),
    ),
    Target(
        "tables grow",
        "append while an unpaced `outbox purge` runs / before",
        TIMES,
        True,
        0.8,
        lambda r: _get(r, "outbox_growth", "purge", "during / baseline"),
    ),
    Target(
        "tables grow",
        "batch consumer while an unpaced `inbox purge` runs / before",
        TIMES,
        True,
        0.8,
        lambda r: _get(r, "inbox_growth", "purge", "during / baseline"),
    ),
    Target(
        "tables grow",
        "append beside `outbox purge --max-rate 10000` / alone",
        TIMES,
        True,
        0.8,
        _paced("outbox_growth", 10_000),
    ),
    Target(
        "tables grow",
        "batch consumer beside `inbox purge --max-rate 20000` / alone",
        TIMES,
        True,
        0.8,
        _paced("inbox_growth", 20_000),
    ),
    Target(
        "memory",
        "consumer peak RSS",
        "MB",
        False,
        150,
        _max_rss(
            ("consumer_cost", "rss_mb", "cdcbox_batch"),
            ("consumer_cost", "rss_mb", "cdcbox_batch_handle_batch"),
            ("consumer_cost", "rss_mb", "cdcbox_per_record"),
        ),
    ),
    Target(
        "memory",
        "relay peak RSS",
        "MB",
        False,
        150,
        _max_rss(("drain", "small", "relay_rss_mb"), ("drain", "large", "relay_rss_mb")),
    ),
]


def judged(results: Results) -> list[tuple[Target, Measured | None, str]]:
    return [(t, *t.judge(results)) for t in TARGETS]
