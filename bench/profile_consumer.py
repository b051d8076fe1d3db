"""Where a batch-mode record's time goes: one cdcbox consumer (batch mode, the plain
`handle()` of bench.handlers) over a pre-filled topic, in this process, under
pyinstrument's sampling profiler; its call tree written to bench/results.

    eval "$(cdc-ctl stack env)"
    python -m bench.profile_consumer [--records 20000] [--per-record]

A profile, not a benchmark: the sampler slows the run, so its rate is not comparable to
`scripts/bench`'s; the shares of the total are what it tells.
"""

from __future__ import annotations

import argparse
import datetime
import os
import uuid
from pathlib import Path

import psycopg
from pyinstrument import Profiler

from bench.consumer_cost import cdcbox_run, prefill
from bench.handlers import EFFECT_DDL

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--per-record", action="store_true", help="per-record mode instead")
    args = parser.parse_args()
    dsn, bootstrap = os.environ["CDCBOX_DSN"], os.environ["CDCBOX_BOOTSTRAP_SERVERS"]
    with psycopg.connect(dsn) as conn:
        conn.execute(EFFECT_DDL)
    topic = f"outbox.event.profile{uuid.uuid4().hex[:6]}"
    prefill(bootstrap, topic, args.records)
    profiler = Profiler(interval=0.0005)
    profiler.start()
    result = cdcbox_run(dsn, bootstrap, topic, args.records, not args.per_record, "plain")
    profiler.stop()
    mode = "per-record" if args.per_record else "batch"
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS / f"{stamp}-profile-consumer-{mode}.txt"
    header = (
        f"# python -m bench.profile_consumer --records {args.records}"
        f"{' --per-record' if args.per_record else ''}: {mode}, plain handle(), "
        f"{result['records_per_s']:.0f} records/s under the profiler\n"
    )
    path.write_text(header + profiler.output_text(unicode=False, color=False))
    print(path)


if __name__ == "__main__":
    main()
