"""scripts/bench: every benchmark in one run on one machine, printed as tables, saved as
JSON (bench/results/) and plotted (PNG beside it). `--quick` keeps it under 5 minutes."""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench import pipeline, producer
from cdcbox.resources import resource_dir
from cdcbox.stack.config import StackVersions

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    versions = StackVersions.load(resource_dir("infra") / "versions.env")
    mem_kb = int(
        next(
            line.split()[1]
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        )
    )
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
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


def table(title: str, rows: list[tuple[Any, ...]], headers: tuple[str, ...]) -> None:
    cells = [tuple(map(str, headers))] + [
        tuple(f"{c:,.1f}" if isinstance(c, float) else str(c) for c in r) for r in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    print(f"\n## {title}")
    for r in cells:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))


def plot(results: dict[str, Any], path: Path) -> None:
    fig, (cdf, bars) = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, run in results["latency_cdf"].items():
        samples = sorted(run)
        if samples:
            cdf.plot(samples, [i / len(samples) for i in range(1, len(samples) + 1)], label=label)
    cdf.set_xscale("log")
    cdf.set_xlabel("commit → handler latency (ms)")
    cdf.set_ylabel("fraction of events")
    cdf.set_title("End-to-end latency at 1,000 events/s")
    cdf.grid(True, which="both", alpha=0.3)
    cdf.legend()
    cost = results["consumer_cost"]["records_per_s"]
    bars.bar(list(cost), list(cost.values()), color=["#999", "#777", "#4a90d9", "#1f5fa8"])
    bars.set_ylabel("records/s")
    bars.set_title(f"Consumer cost ({results['consumer_cost']['records']:,} records)")
    bars.tick_params(axis="x", rotation=15)
    fig.suptitle(
        f"cdcbox on {results['machine']['cores']} cores, "
        f"{results['machine']['memory_gib']} GiB (whole stack on the machine)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="Reduced sizes, under 5 minutes.")
    parser.add_argument("--smoke", action="store_true", help="Tiny sizes, to keep it from rotting.")
    parser.add_argument("--out", type=Path, default=RESULTS, help="Where JSON and PNG go.")
    args = parser.parse_args()
    dsn, bootstrap = os.environ["CDCBOX_DSN"], os.environ["CDCBOX_BOOTSTRAP_SERVERS"]
    size = "smoke" if args.smoke else "quick" if args.quick else "full"
    seconds = {"smoke": 2, "quick": 8, "full": 30}[size]
    rates = {"smoke": [200], "quick": [500, 1000, 2000], "full": [500, 1000, 2000, 5000]}[size]
    records = {"smoke": 2000, "quick": 20_000, "full": 200_000}[size]
    pgbench = Path(f"/usr/lib/postgresql/{machine()['postgres']}/bin/pgbench")
    results: dict[str, Any] = {
        "machine": machine(),
        "size": size,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }

    results["producer"] = producer.run(dsn, pgbench, clients=8, seconds=max(seconds // 2, 2))
    p = results["producer"]
    table(
        "Producer overhead (pgbench, 8 clients, pipelined, synchronous_commit on, "
        "wal_level=logical, an outbox outside the connector's publication)",
        [(k, v["tps"]) for k, v in p["tps"].items()],
        ("case", "tps"),
    )
    table("Producer ratios", [(k, v) for k, v in p["ratios"].items()], ("ratio", "value"))

    results["consumer_cost"] = pipeline.consumer_cost(dsn, bootstrap, records)
    c = results["consumer_cost"]
    table(
        f"Consumer cost ({records:,} pre-filled records)",
        list(c["records_per_s"].items()),
        ("consumer", "records/s"),
    )
    table("Consumer ratios", list(c["ratios"].items()), ("ratio", "value"))
    table(
        "Consumer p99 per record (ms)", list(c["p99_ms_per_record"].items()), ("consumer", "p99 ms")
    )

    cdc = {r: pipeline.cdc_at_rate(dsn, bootstrap, r, seconds) for r in rates}
    poll = {r: pipeline.polling_at_rate(dsn, bootstrap, r, seconds, listen=True) for r in rates}
    poll_nolisten = pipeline.polling_at_rate(
        dsn, bootstrap, 500 if size != "smoke" else 200, seconds, listen=False
    )
    rows = []
    for label, runs in (("cdc", cdc), ("polling+notify", poll)):
        for rate, run in runs.items():
            lat = run["latency_ms"]
            rows.append(
                (
                    label,
                    rate,
                    run["offered_per_s"],
                    run["throughput_per_s"],
                    lat["p50"],
                    lat["p95"],
                    lat["p99"],
                    lat["max"],
                    run["backlog_after_s"],
                )
            )
    lat = poll_nolisten["latency_ms"]
    rows.append(
        (
            "polling, no notify",
            500,
            poll_nolisten["offered_per_s"],
            poll_nolisten["throughput_per_s"],
            lat["p50"],
            lat["p95"],
            lat["p99"],
            lat["max"],
            poll_nolisten["backlog_after_s"],
        )
    )
    table(
        f"End to end ({seconds}s per rate; consumer in batch mode with a one-row write)",
        rows,
        (
            "relay",
            "rate",
            "offered/s",
            "delivered/s",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "max ms",
            "drain s",
        ),
    )
    results["e2e"] = {
        "cdc": {r: {k: v for k, v in run.items() if k != "lag_ms"} for r, run in cdc.items()},
        "polling_notify": {
            r: {k: v for k, v in run.items() if k != "lag_ms"} for r, run in poll.items()
        },
        "polling_no_notify": {k: v for k, v in poll_nolisten.items() if k != "lag_ms"},
    }
    ref = 1000 if 1000 in rates else rates[0]
    results["latency_cdf"] = {
        f"CDC @ {ref}/s": cdc[ref]["lag_ms"],
        f"polling relay + NOTIFY @ {ref}/s": poll[ref]["lag_ms"],
    }

    results["drain"] = pipeline.drain_rates(
        dsn, bootstrap, {"smoke": 300, "quick": 3000, "full": 20_000}[size]
    )
    results["catch_up"] = pipeline.catch_up(dsn, bootstrap, rates[0], seconds * 3)
    cu = results["catch_up"]
    table(
        "Catch-up (consumer stopped for a third of a steady CDC run)",
        [(k, v if v is not None else "n/a") for k, v in cu.items()],
        ("measure", "value"),
    )
    d = results["drain"]
    table(
        "Polling relay drain (backlog)",
        [(k, v) for k, v in d["rows_per_s"].items()] + [("ratio cdcbox / naive", d["ratio"])],
        ("relay", "rows/s"),
    )

    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.out / f"{stamp}-{size}.json"
    out.write_text(
        json.dumps({k: v for k, v in results.items() if k != "latency_cdf"}, indent=2, default=str)
    )
    png = out.with_suffix(".png")
    plot(results, png)
    print(f"\nresults: {out}\nplot:    {png}")


if __name__ == "__main__":
    main()
