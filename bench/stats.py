"""Percentiles of latency samples (nearest rank)."""

from __future__ import annotations


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
