"""scripts/bench: every benchmark in one run on one machine, side by side, saved as JSON
(bench/results/), plotted (PNG beside it) and judged against the targets
(`bench/targets.py`); `python -m bench.report FILE --docs` puts it in docs/performance.md.

`--quick` takes about 12 minutes, the full run about an hour (it fills tables with tens
of millions of rows); `--smoke` (tiny sizes) is run
by the test suite so the benchmarks cannot rot."""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench import (
    catch_up,
    consumer_cost,
    drain,
    e2e,
    exactly_once,
    growth,
    loadgen,
    outbox_modes,
    producer,
    record_cost,
    relay_tail,
)
from bench.report import section
from bench.results_files import ONLY
from cdcbox.resources import resource_dir
from cdcbox.stack.config import StackVersions

RESULTS = Path(__file__).resolve().parent / "results"
PRODUCER_CLIENTS = 8  # pgbench clients of the producer's append runs


@dataclass(frozen=True)
class Sizes:
    seconds: int
    cdc_rates: tuple[int, ...]
    polling_rates: tuple[int, ...]
    records: int
    drain_small: int
    drain_large: int
    drain_large_measured: int
    naive_rows: int
    catch_up_rate: int
    catch_up_steady_s: int
    catch_up_backlog: int
    rounds: int  # of the interleaved consumer and producer runs
    producer_seconds: int  # each producer case, each round
    inbox_sizes: tuple[int, ...]  # history rows the growth runs put in an inbox
    outbox_rows: int  # and in an outbox
    growth_records: int  # records each growth consumer run reads
    eos_backlog: int = 20_000  # events of each exactly-once sustained-rate leg
    eos_rate: int = 1000  # the exactly-once legs' offered rate, events/s
    relay_rate: int = 300  # the polling relay's tail is measured at this rate, events/s
    relay_backlog: int = 20_000  # rows of each relay drain


SIZES = {
    "smoke": Sizes(
        2,
        (200,),
        (200,),
        500,
        300,
        3000,
        300,
        100,
        100,
        2,
        2000,
        2,
        1,
        (20_000, 40_000),
        20_000,
        200,
        eos_backlog=500,
        eos_rate=200,
        relay_backlog=500,
    ),
    "quick": Sizes(
        8,
        (1000, 2000, 3000),
        (500,),
        10_000,
        3000,
        300_000,
        30_000,
        1000,
        1000,
        6,
        100_000,
        3,
        4,
        (1_000_000, 3_000_000),
        1_000_000,
        3000,
        eos_backlog=5000,
        relay_backlog=5000,
    ),
    "full": Sizes(
        30,
        (500, 1000, 2000, 3000, 3500, 4000, 5000),
        (500, 1000, 2000),
        40_000,
        3000,
        1_000_000,
        100_000,
        2000,
        1000,
        20,
        100_000,
        5,
        6,
        (10_000_000, 30_000_000),
        10_000_000,
        5000,
    ),
}


def machine() -> dict[str, Any]:
    versions = StackVersions.load(resource_dir("infra") / "versions.env")
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    mem_kb = int(next(line.split()[1] for line in meminfo if line.startswith("MemTotal")))
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next(
        (line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")),
        platform.processor(),
    )
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kb / 2**20, 1),
        "cpu": cpu,
        "python": platform.python_version(),
        "kafka": versions.kafka,
        "debezium": versions.debezium,
        "postgres": versions.postgres_major,
        "kernel": platform.release(),
    }


def load_generator(dsn: str, pgbench: Path, seconds: int) -> dict[str, Any]:
    """What pgbench can offer unthrottled (10 events per transaction, 4 clients), into an
    outbox outside the connector's publication: the writer's ceiling, not Debezium's."""
    names = e2e.own_schema(dsn, "bench_load", "cdc")
    try:
        offered = loadgen.offer(dsn, pgbench, names.schema, "benchload", None, seconds, 10)
        return offered.as_dict()
    finally:
        e2e.drop_schema(dsn, names)


def plot(results: dict[str, Any], samples: dict[str, list[float]], path: Path) -> None:
    fig, (cdf, bars) = plt.subplots(1, 2, figsize=(13, 4.8))
    for label, run in samples.items():
        ordered = sorted(run)
        if ordered:
            cdf.plot(ordered, [i / len(ordered) for i in range(1, len(ordered) + 1)], label=label)
    cdf.set_xscale("log")
    cdf.set_xlabel("commit → handler committed (ms)")
    cdf.set_ylabel("fraction of events")
    cdf.set_title("End-to-end latency (legend: offered → delivered events/s)")
    cdf.grid(True, which="both", alpha=0.3)
    cdf.legend(fontsize=8)
    cost = results["consumer_cost"]["records_per_s"]
    medians = [v["median"] for v in cost.values()]
    bars.bar(
        [k.replace("_", "\n") for k in cost],
        medians,
        yerr=[
            [m - v["min"] for m, v in zip(medians, cost.values(), strict=True)],
            [v["max"] - m for m, v in zip(medians, cost.values(), strict=True)],
        ],
        capsize=4,
    )
    bars.set_ylabel("records/s (median, min to max)")
    bars.tick_params(axis="x", labelsize=7)
    bars.set_title(f"Consumer cost ({results['consumer_cost']['records']:,} records)")
    m = results["machine"]
    fig.suptitle(f"cdcbox on {m['cores']} cores, {m['memory_gib']} GiB (whole stack on it)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def warm_up(dsn: str, bootstrap: str, pgbench: Path, z: Sizes) -> dict[str, Any]:
    """A freshly started connector and JVMs pay for class loading and JIT on their first
    events: a short run before the rate ladder, measured against no target."""
    run = e2e.cdc_at_rate(dsn, bootstrap, pgbench, 500, max(z.seconds // 2, 2))
    run.pop("lag_samples_ms")
    return run


def e2e_ladder(
    dsn: str,
    bootstrap: str,
    pgbench: Path,
    z: Sizes,
    samples: dict[str, list[float]] | None = None,
) -> dict[str, dict[int, dict[str, Any]]]:
    """End to end at each offered rate: CDC (and at its top rate in each of
    `e2e.TOP_RATE_VARIANTS`), the polling relay woken by NOTIFY, and once without NOTIFY;
    each run's latency samples go to `samples` (for the plot)."""
    runs: dict[str, dict[int, dict[str, Any]]] = {"cdc": {}, "polling_notify": {}}
    for rate in z.cdc_rates:
        runs["cdc"][rate] = e2e.cdc_at_rate(dsn, bootstrap, pgbench, rate, z.seconds)
    top = max(z.cdc_rates)
    for name, style, consumers in e2e.TOP_RATE_VARIANTS:
        runs[name] = {
            top: e2e.cdc_at_rate(
                dsn, bootstrap, pgbench, top, z.seconds, style=style, consumers=consumers
            )
        }
    for rate in z.polling_rates:
        runs["polling_notify"][rate] = e2e.polling_at_rate(
            dsn, bootstrap, pgbench, rate, z.seconds, listen=True
        )
    runs["polling_no_notify"] = {
        z.polling_rates[0]: e2e.polling_at_rate(
            dsn, bootstrap, pgbench, z.polling_rates[0], z.seconds, listen=False
        )
    }
    for relay, by_rate in runs.items():
        for run in by_rate.values():
            lag = run.pop("lag_samples_ms")
            if lag and samples is not None:
                label = f"{relay} {run['offered_per_s']:,.0f} → {run['delivered_per_s']:,.0f}/s"
                samples[label] = lag
    return runs


def _e2e_alone(dsn: str, bootstrap: str, pgbench: Path, z: Sizes) -> dict[str, Any]:
    """`--only e2e`: the ladder after its warm-up (not kept: a whole run keeps it)."""
    warm_up(dsn, bootstrap, pgbench, z)
    return e2e_ladder(dsn, bootstrap, pgbench, z)


Section = Callable[[str, str, Path, Sizes], dict[str, Any]]
# The sections `--only` may run alone; a whole run runs them too.
SECTIONS: dict[str, Section] = {
    "e2e": _e2e_alone,
    "consumer_cost": lambda dsn, bootstrap, pgbench, z: consumer_cost.consumer_cost(
        dsn, bootstrap, z.records, z.rounds
    ),
    "exactly_once": lambda dsn, bootstrap, pgbench, z: exactly_once.exactly_once_cost(
        dsn, bootstrap, pgbench, z.eos_backlog, z.eos_rate, z.seconds, z.rounds
    ),
    "relay": lambda dsn, bootstrap, pgbench, z: relay_tail.relay_tail(
        dsn, bootstrap, pgbench, z.relay_rate, z.seconds, z.relay_backlog, z.rounds
    ),
    "outbox_modes": lambda dsn, bootstrap, pgbench, z: outbox_modes.outbox_modes(
        dsn,
        bootstrap,
        pgbench,
        PRODUCER_CLIENTS,
        z.producer_seconds,
        z.eos_backlog,
        z.eos_rate,
        z.seconds,
        z.rounds,
    ),
}


def only_section(
    name: str,
    results: dict[str, Any],
    dsn: str,
    bootstrap: str,
    pgbench: Path,
    z: Sizes,
    out: Path,
) -> None:
    """`--only NAME`: that section alone, saved as <time>-<size>-only-<name>.json."""
    results[name] = SECTIONS[name](dsn, bootstrap, pgbench, z)
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = out / f"{stamp}-{results['size']}{ONLY}{name}.json"
    path.write_text(json.dumps(results, indent=1, default=str))
    print(f"results: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="Reduced sizes, under 6 minutes.")
    parser.add_argument("--smoke", action="store_true", help="Tiny sizes, to keep it from rotting.")
    parser.add_argument("--out", type=Path, default=RESULTS, help="Where JSON and PNG go.")
    parser.add_argument(
        "--only",
        choices=sorted(SECTIONS),
        help="Run this one section; the docs show it beside the newest whole run.",
    )
    args = parser.parse_args()
    dsn, bootstrap = os.environ["CDCBOX_DSN"], os.environ["CDCBOX_BOOTSTRAP_SERVERS"]
    size = "smoke" if args.smoke else "quick" if args.quick else "full"
    z = SIZES[size]
    pgbench = Path(f"/usr/lib/postgresql/{machine()['postgres']}/bin/pgbench")
    results: dict[str, Any] = {
        "machine": machine(),
        "size": size,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if args.only:
        only_section(args.only, results, dsn, bootstrap, pgbench, z, args.out)
        return
    results["producer"] = producer.run(
        dsn, pgbench, clients=PRODUCER_CLIENTS, seconds=z.producer_seconds, rounds=z.rounds
    )
    results["load_generator"] = load_generator(dsn, pgbench, max(z.seconds // 2, 2))
    # Early in a whole run, on a stack not yet filled by the runs below, as always.
    results["consumer_cost"] = SECTIONS["consumer_cost"](dsn, bootstrap, pgbench, z)
    results["record_cost"] = record_cost.record_cost(dsn, bootstrap, min(z.records, 10_000))
    samples: dict[str, list[float]] = {}
    results["warm_up"] = warm_up(dsn, bootstrap, pgbench, z)
    results["e2e"] = e2e_ladder(dsn, bootstrap, pgbench, z, samples)
    for name, section_run in SECTIONS.items():
        if name not in results:
            results[name] = section_run(dsn, bootstrap, pgbench, z)
    results["drain"] = drain.drain_rates(
        dsn, bootstrap, z.drain_small, z.drain_large, z.drain_large_measured, z.naive_rows
    )
    results["catch_up"] = catch_up.catch_up(
        dsn, bootstrap, pgbench, z.catch_up_rate, z.catch_up_steady_s, z.catch_up_backlog
    )
    results["inbox_growth"] = growth.inbox_growth(
        dsn, bootstrap, z.inbox_sizes, z.growth_records, z.rounds, purged=z.inbox_sizes[0]
    )
    results["outbox_growth"] = growth.outbox_growth(
        dsn,
        pgbench,
        z.outbox_rows,
        clients=PRODUCER_CLIENTS,
        seconds=z.producer_seconds,
        rounds=z.rounds,
    )
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{size}.json"
    out.write_text(json.dumps(results, indent=1, default=str))
    plot(results, samples, out.with_suffix(".png"))
    print(section(out.resolve()))
    print(f"\nresults: {out}\nplot:    {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
