"""Cost as the tables grow: the same measurements against cdcbox's tables filled with
history and against empty ones, interleaved round by round (`bench.stats.interleaved`),
each reported as a ratio to the empty case (median, min, max).

- The consumer (per record and batch, plain `handle()`) with an inbox of each size: its
  inbox claims insert into the large table's indexes.
- The exporter's reading of that database (`read_database`, what each scrape runs), and
  beside it the whole-inbox count it ran before migration 0012, once per size.
- The append (pgbench, the one-row transaction with its outbox row) with an outbox of
  `outbox_rows` rows, in CDC mode, before any purge.
- `outbox purge` and `inbox purge` (the library calls `cdc-ctl` makes) over `purged`
  rows, timed, with the append (for the outbox) or a batch-mode consumer (for the inbox)
  measured while each runs, once, unpaced; then the same writers alone and beside a purge
  paced (`--max-rate`) to each of `PACED_ROWS_PER_S`, interleaved round by round.

History rows look like real ones: time-ordered (UUIDv7-like) ids, several consumer
names, PROCESSED, finished days ago.
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench.consumer_cost import cdcbox_run, in_child, prefill
from bench.e2e import drop_schema, own_schema
from bench.handlers import EFFECT_DDL
from bench.producer import ONE_ROW, SETUP, outbox_insert, pgbench_tps, pipelined
from bench.purge_beside import Progress, paced_purge, purge_while
from bench.stats import interleaved, ratio_spread, spread
from cdcbox import wire
from cdcbox.names import DbNames
from cdcbox.observe.pipeline_state import read_database
from cdcbox.ops.pacing import Pace
from cdcbox.ops.retention import InboxFloor, purge_inbox, purge_outbox
from cdcbox.postgres.inbox import Inbox

CHUNK = 1_000_000  # rows per filling statement
# A time-ordered id from row number g and an instant ts, as the producer's UUIDv7.
HISTORY_ID = (
    "(lpad(to_hex((extract(epoch FROM {ts}) * 1000)::bigint), 12, '0') || '7' "
    "|| substr(md5(g::text), 1, 19))::uuid"
)

HISTORY_FLOOR = InboxFloor(timedelta(days=7), timedelta(hours=1), timedelta(days=1))
# The paced purges' `--max-rate`, per table: the rate the docs recommend first, then a
# faster one. An outbox row costs the writers more to delete than an inbox row: it is
# wider, and the connector's logical decoding reads every deletion.
PACED_ROWS_PER_S = {"outbox": (10_000, 20_000), "inbox": (20_000,)}


def fill_inbox(
    dsn: str, names: DbNames, first: int, rows: int, days_ago: int, vacuum: bool = True
) -> None:
    """Rows `first`.. of history, PROCESSED `days_ago` days ago by four consumer names."""
    ts = f"now() - interval '{days_ago} days'"
    statement = sql.SQL(
        "INSERT INTO {inbox} (event_id, consumer_name, event_type, aggregate_type, "
        "aggregate_id, aggregate_version, status, received_at, processed_at, source_topic, "
        "source_partition, source_offset) SELECT " + HISTORY_ID.format(ts=ts) + ", "
        "'history-' || (g %% 4), 'Bench', 'history', 'a' || (g %% 100000), g / 100000 + 1, "
        "'PROCESSED', " + ts + ", " + ts + ", 'outbox.event.history', g %% 3, g "
        "FROM generate_series(%s::bigint, %s::bigint) AS g"
    ).format(inbox=names.table("inbox"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        for start in range(first, first + rows, CHUNK):
            conn.execute(statement, (start, min(start + CHUNK, first + rows) - 1))
        if vacuum:
            conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(names.table("inbox")))


def fill_outbox(dsn: str, names: DbNames, rows: int, days_ago: int, vacuum: bool = True) -> None:
    """`rows` published events of history (CDC mode keeps them until a purge)."""
    ts = f"(now() AT TIME ZONE 'UTC') - interval '{days_ago} days'"
    statement = sql.SQL(
        "INSERT INTO {outbox} (event_id, aggregate_type, aggregate_id, aggregate_version, "
        "event_type, payload, content_type, trace_id, created_at, occurred_at) SELECT "
        + HISTORY_ID.format(ts=ts)
        + ", 'history', 'a' || (g %% 100000), g / 100000 + 1, 'Bench', "
        "convert_to('{{\"n\":' || g || '}}', 'UTF8'), 'application/json', '', " + ts + ", "
        "to_char(" + ts + ', \'YYYY-MM-DD"T"HH24:MI:SS.US"Z"\') '
        "FROM generate_series(%s::bigint, %s::bigint) AS g"
    ).format(outbox=names.table("outbox"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        for start in range(1, rows + 1, CHUNK):
            conn.execute(statement, (start, min(start + CHUNK, rows + 1) - 1))
        if vacuum:
            conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(names.table("outbox")))


def _scrapes_s(dsn: str, empty: DbNames, full: DbNames, readings: int = 21) -> dict[str, Any]:
    """What one exporter scrape reads from each database, the two read in turn on warm
    connections (a reading is a few milliseconds: alternating them reading by reading
    keeps the machine's moment from deciding the ratio); the median of each."""
    times: dict[str, list[float]] = {"scrape empty": [], "scrape": []}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for names in (empty, full):
            read_database(conn, names, "")  # warm: catalogue caches, first plans
        for _ in range(readings):
            for label, names in (("scrape empty", empty), ("scrape", full)):
                started = time.perf_counter()
                read_database(conn, names, "")
                times[label].append(time.perf_counter() - started)
    return {label: statistics.median(values) for label, values in times.items()}


def _whole_inbox_count_s(dsn: str, names: DbNames) -> float:
    """The exporter's inbox reading before migration 0012: every row counted."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        started = time.perf_counter()
        conn.execute(
            sql.SQL("SELECT consumer_name, status, count(*) FROM {} GROUP BY 1, 2").format(
                names.table("inbox")
            )
        ).fetchall()
        return time.perf_counter() - started


def inbox_growth(
    dsn: str, bootstrap: str, sizes: tuple[int, ...], records: int, rounds: int, purged: int
) -> dict[str, Any]:
    """The consumer and the exporter at each inbox size against an empty inbox; then an
    inbox purge of the first `purged` rows with a batch consumer running."""
    empty, full = own_schema(dsn, "bench_inbox_empty", "cdc"), own_schema(dsn, "bench_inbox", "cdc")
    topic = wire.topic_for(f"benchgrowth{uuid.uuid4().hex[:6]}")
    prefill(bootstrap, topic, records)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(EFFECT_DDL)

    def consumer(names: DbNames, batch: bool) -> Any:
        return partial(in_child, cdcbox_run, dsn, bootstrap, topic, records, batch, "plain", names)

    result: dict[str, Any] = {"records": records, "rounds": rounds, "sizes": {}}
    filled = 0
    try:
        for size in sizes:
            # The first `purged` rows are older than the rest: the purge takes them only.
            fill_inbox(dsn, full, filled + 1, size - filled, 20 if filled < purged else 10)
            filled = size
            runs = interleaved(
                {
                    "per_record empty": consumer(empty, False),
                    "per_record": consumer(full, False),
                    "batch empty": consumer(empty, True),
                    "batch": consumer(full, True),
                    "scrapes": partial(_scrapes_s, dsn, empty, full),
                },
                rounds,
            )
            result["sizes"][str(size)] = {
                "records_per_s": {
                    k: spread([r["records_per_s"] for r in runs[k]])
                    for k in ("per_record empty", "per_record", "batch empty", "batch")
                },
                "scrape_s": {
                    k: spread([r[k] for r in runs["scrapes"]]) for k in ("scrape empty", "scrape")
                },
                "whole_inbox_count_s": _whole_inbox_count_s(dsn, full),
                "ratios": {
                    "per_record / empty": ratio_spread(
                        runs, "per_record", "per_record empty", "records_per_s"
                    ),
                    "batch / empty": ratio_spread(runs, "batch", "batch empty", "records_per_s"),
                    "exporter reading, empty / this inbox": spread(
                        [r["scrape empty"] / r["scrape"] for r in runs["scrapes"]]
                    ),
                },
            }
        batch_consumer = partial(
            in_child, cdcbox_run, dsn, bootstrap, topic, records, True, "plain", full
        )
        result.update(_inbox_purges(dsn, full, batch_consumer, records, rounds, filled + 1))
    finally:
        drop_schema(dsn, empty)
        drop_schema(dsn, full)
    return result


def _inbox_purges(
    dsn: str,
    full: DbNames,
    batch_consumer: Callable[[], dict[str, Any]],
    records: int,
    rounds: int,
    first_free: int,
) -> dict[str, Any]:
    """The unpaced inbox purge of the history older than 15 days with a batch consumer
    running, then that consumer alone and beside paced purges of rows added from
    `first_free` on."""
    baseline = batch_consumer()

    def purge(conn: Any, progress: Progress, pace: Pace | None = None) -> int:
        return purge_inbox(
            conn, timedelta(days=15), HISTORY_FLOOR, inbox=Inbox(full), progress=progress, pace=pace
        )

    unpaced = purge_while(purge, dsn, batch_consumer)
    unpaced["baseline_records_per_s"] = baseline["records_per_s"]
    unpaced["during / baseline"] = unpaced["during"]["records_per_s"] / baseline["records_per_s"]
    firsts = itertools.count(first_free, 10**8)
    paced = [
        paced_purge(
            lambda rows: fill_inbox(dsn, full, next(firsts), rows, 20, vacuum=False),
            purge,
            rate,
            dsn,
            batch_consumer,
            "records_per_s",
            rounds,
            # The purge must outlast the consumer's run, start-up included.
            window_s=3 + 2 * records / baseline["records_per_s"],
        )
        for rate in PACED_ROWS_PER_S["inbox"]
    ]
    return {"purge": unpaced, "paced_purges": paced}


def outbox_growth(
    dsn: str, pgbench: Path, rows: int, clients: int, seconds: int, rounds: int
) -> dict[str, Any]:
    """The append into an outbox of `rows` rows against an empty one; then a CDC-mode
    outbox purge of all of them with the append running."""
    empty, full = (
        own_schema(dsn, "bench_outbox_empty", "cdc"),
        own_schema(dsn, "bench_outbox", "cdc"),
    )
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(SETUP)
        fill_outbox(dsn, full, rows, days_ago=20)
        with tempfile.TemporaryDirectory() as tmp:
            scripts = {}
            for label, names in (("empty", empty), ("full", full)):
                scripts[label] = Path(tmp) / f"{label}.sql"
                scripts[label].write_text(pipelined(ONE_ROW, outbox_insert(names.schema)))
            runs = interleaved(
                {
                    label: partial(pgbench_tps, pgbench, dsn, path, clients, seconds)
                    for label, path in scripts.items()
                },
                rounds,
            )
            append = partial(pgbench_tps, pgbench, dsn, scripts["full"], clients, seconds)

            def purge(conn: Any, progress: Progress, pace: Pace | None = None) -> Any:
                return purge_outbox(
                    conn,
                    timedelta(days=15),
                    read_until=datetime.now(UTC).replace(tzinfo=None),
                    names=full,
                    connector_config={
                        "table.include.list": full.outbox_qualified,
                        "publication.name": full.publication,
                    },
                    progress=progress,
                    pace=pace,
                )

            unpaced = purge_while(purge, dsn, append)
            paced = [
                paced_purge(
                    lambda n: fill_outbox(dsn, full, n, days_ago=20, vacuum=False),
                    purge,
                    rate,
                    dsn,
                    append,
                    "tps",
                    rounds,
                    window_s=seconds + 2,
                )
                for rate in PACED_ROWS_PER_S["outbox"]
            ]
        baseline = statistics.median(r["tps"] for r in runs["full"])
        return {
            "rows": rows,
            "rounds": rounds,
            "tps": {k: spread([r["tps"] for r in v]) for k, v in runs.items()},
            "ratios": {"append, full / empty": ratio_spread(runs, "full", "empty", "tps")},
            "purge": {**unpaced, "during / baseline": unpaced["during"]["tps"] / baseline},
            "paced_purges": paced,
        }
    finally:
        drop_schema(dsn, empty)
        drop_schema(dsn, full)
