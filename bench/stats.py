"""Percentiles of latency samples (nearest rank), and the spread of repeated measurements:
a rate or a ratio is reported as median with min and max, never as one run's figure."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any


def percentiles(samples: list[float]) -> dict[str, float | None]:
    if not samples:
        return {"p50": None, "p95": None, "p99": None, "max": None, "samples": 0}
    s = sorted(samples)

    def pick(q: float) -> float:
        return s[min(len(s) - 1, int(q * len(s)))]

    return {
        "p50": pick(0.50),
        "p95": pick(0.95),
        "p99": pick(0.99),
        "max": s[-1],
        "samples": len(s),
    }


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Median, min and max of repeated measurements, with the values themselves."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "values": list(values),
    }


def interleaved(
    runs: dict[str, Callable[[], dict[str, Any]]], rounds: int
) -> dict[str, list[dict[str, Any]]]:
    """Each of `runs` once per round, in the same order, `rounds` times (A B C A B C …):
    a ratio of two of them is then taken round by round, between runs minutes apart at
    most, so a machine that slows down or speeds up between rounds moves both sides."""
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            results[name].append(run())
    return results


def ratio_spread(
    results: dict[str, list[dict[str, Any]]], numerator: str, denominator: str, key: str
) -> dict[str, Any]:
    """`numerator`'s `key` over `denominator`'s, round by round."""
    pairs = zip(results[numerator], results[denominator], strict=True)
    return spread([a[key] / b[key] for a, b in pairs])
