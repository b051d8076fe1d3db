"""The outbox without a table against the table outbox (issue 35), interleaved round by
round on the stack's PostgreSQL, Connect and broker:

- **the append**: pgbench tps of one business row alone (the floor), with the table
  outbox's INSERT and with the emitting function's call (the statements cdcbox's
  producer sends), each transaction pipelined as in `bench.producer`;
- **WAL bytes per event**: the WAL each case writes over a fixed number of transactions,
  less the floor's;
- **CDC**: a connector of each mode on an outbox of its own schema (the shipped specs,
  exactly-once on as shipped): the sustained rate (a backlog committed ahead of Debezium
  in 1,000-event transactions, timed until a read_committed reader holds all of it) and
  the percentiles at a fixed offered rate (`bench.e2e`).

Nothing is purged: the message mode writes no rows, and the table outbox's rows are left
to `outbox purge`, whose cost `bench.growth` measures."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench import drain, e2e, loadgen, producer
from bench.exactly_once import committed_records, drop_slot_when_released
from bench.pgbench import pgbench_env
from bench.stats import interleaved, ratio_spread, spread
from cdcbox import wire
from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import apply, render
from cdcbox.connect.services import Service
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.topics import ensure_topics
from cdcbox.migrate import RelayMode
from cdcbox.names import DbNames
from cdcbox.resources import resource_dir

SPECS: dict[str, str] = {
    "table": "outbox-postgres.yaml",
    "messages": "messages/outbox-messages.yaml",
}
MODES: dict[str, RelayMode] = {"table": "cdc", "messages": "messages"}
_PER_TRANSACTION = 1000
_WAL_TRANSACTIONS = 2000


def message_call(schema: str) -> str:
    """One event through the emitting function, as `Outbox(messages=True).append`."""
    body = loadgen.message_body_sql("benchorder", ":aid::text", "1")
    return (
        f"SELECT {schema}.outbox_event_emit(ARRAY['benchorder'], ARRAY[{body}]) "
        "FROM (SELECT 1 AS g) AS one;"
    )


def raw_message(prefix: str) -> str:
    """The same message by `pg_logical_emit_message` alone: no slot check, no topic-key
    claim, no stamp (what the mode costs without cdcbox's function)."""
    body = loadgen.message_body_sql("benchorder", ":aid::text", "1")
    return f"SELECT pg_logical_emit_message(true, '{prefix}', {body}) FROM (SELECT 1 AS g) AS one;"


def append_cases(table_schema: str, messages_schema: str) -> dict[str, str]:
    return {
        "one_row": producer.pipelined(producer.ONE_ROW),
        "one_row+outbox": producer.pipelined(
            producer.ONE_ROW, producer.outbox_insert(table_schema)
        ),
        "one_row+message": producer.pipelined(producer.ONE_ROW, message_call(messages_schema)),
        "one_row+raw message": producer.pipelined(producer.ONE_ROW, raw_message("benchraw")),
    }


def wal_bytes(dsn: str, pgbench: Path, script: Path) -> float:
    """WAL bytes per transaction of `script`, over `_WAL_TRANSACTIONS` of them."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        (start,) = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone() or ("0/0",)
        command = [str(pgbench), "-n", "-c", "1", "-t", str(_WAL_TRANSACTIONS), "-M", "prepared"]
        subprocess.run(
            [*command, "-f", str(script)], env=pgbench_env(dsn), capture_output=True, check=True
        )
        row = conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", (start,)
        ).fetchone()
    return float(row[0] if row else 0) / _WAL_TRANSACTIONS


def wal_run(dsn: str, pgbench: Path, script: Path) -> dict[str, Any]:
    return {"bytes": wal_bytes(dsn, pgbench, script)}


@dataclasses.dataclass(frozen=True)
class Leg:
    """One mode: its schema and the service its connector was applied for."""

    mode: str
    service: Service

    @property
    def names(self) -> DbNames:
        return self.service.names


@contextmanager
def _leg(dsn: str, mode: str, client: ConnectClient) -> Iterator[Leg]:
    """A schema migrated for `mode`, its slot, and a connector of the shipped spec."""
    label = f"om_{mode[:3]}_{uuid.uuid4().hex[:6]}"
    service = Service(f"bench_{label}", schema=label)
    e2e.service_schema(dsn, service, MODES[mode], service.slot)
    spec = render(resource_dir("connectors") / SPECS[mode], {**os.environ, **service.variables()})
    try:
        apply(client, spec, progress=lambda line: print(f"bench {mode}: {line}"))
        yield Leg(mode, service)
    finally:
        client.delete(spec.name)
        drop_slot_when_released(dsn, service.slot)
        e2e.drop_schema(dsn, service.names)


def fill_messages(dsn: str, names: DbNames, aggregate_type: str, events: int) -> None:
    """`events` events over 2,000 aggregates emitted in 1,000-event transactions."""
    body = loadgen.message_body_sql(aggregate_type, "(g %% 2000)::text", "(g / 2000 + 1)")
    emit = sql.SQL(
        "SELECT {}(array_fill(%s::text, ARRAY[%s::int - %s::int + 1]), "
        "ARRAY(SELECT " + body.replace("{", "{{").replace("}", "}}") + " "
        "FROM generate_series(%s::int, %s::int) g ORDER BY g))"
    ).format(names.emit_function)
    with psycopg.connect(dsn) as conn:
        for first in range(1, events + 1, _PER_TRANSACTION):
            last = min(first + _PER_TRANSACTION - 1, events)
            conn.execute(emit, (aggregate_type, last, first, first, last))
            conn.commit()


def sustained_rate(dsn: str, bootstrap: str, leg: Leg, backlog: int) -> dict[str, Any]:
    aggregate_type = f"benchom{uuid.uuid4().hex[:6]}"
    topic = wire.topic_for(aggregate_type)
    ensure_topics(KafkaSettings(bootstrap), [topic])
    started = time.monotonic()
    if leg.mode == "messages":
        fill_messages(dsn, leg.names, aggregate_type, backlog)
    else:
        drain.fill(dsn, leg.names, aggregate_type, backlog, per_transaction=_PER_TRANSACTION)
    done = committed_records(bootstrap, topic, backlog, timeout_s=600)
    return {"backlog": backlog, "events_per_s": backlog / (done - started)}


def _cdc(
    dsn: str, bootstrap: str, pgbench: Path, leg: Leg, backlog: int, rate: int, seconds: int
) -> Callable[[], dict[str, Any]]:
    def run() -> dict[str, Any]:
        aggregate_type = f"benchomr{uuid.uuid4().hex[:6]}"
        at_rate = e2e.measure(
            dsn,
            bootstrap,
            pgbench,
            leg.names.schema,
            aggregate_type,
            rate,
            seconds,
            messages=leg.mode == "messages",
        )
        at_rate.pop("lag_samples_ms")
        return {"sustained": sustained_rate(dsn, bootstrap, leg, backlog), "at_rate": at_rate}

    return run


def outbox_modes(
    dsn: str,
    bootstrap: str,
    pgbench: Path,
    clients: int,
    append_seconds: int,
    backlog: int,
    rate: int,
    seconds: int,
    rounds: int,
) -> dict[str, Any]:
    """Every measurement of the module docstring, `rounds` times interleaved."""
    client = ConnectClient(os.environ["CDCBOX_CONNECT_URL"])
    with (
        _leg(dsn, "table", client) as table,
        _leg(dsn, "messages", client) as messages,
        tempfile.TemporaryDirectory() as tmp,
    ):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(producer.SETUP)
        scripts = {}
        for i, (name, text) in enumerate(
            append_cases(table.names.schema, messages.names.schema).items()
        ):
            scripts[name] = Path(tmp) / f"case{i}.sql"
            scripts[name].write_text(text)
        runs = interleaved(
            {
                **{
                    f"append {name}": partial(
                        producer.pgbench_tps, pgbench, dsn, path, clients, append_seconds
                    )
                    for name, path in scripts.items()
                },
                **{
                    f"wal {name}": partial(wal_run, dsn, pgbench, path)
                    for name, path in scripts.items()
                },
                "cdc table": _cdc(dsn, bootstrap, pgbench, table, backlog, rate, seconds),
                "cdc messages": _cdc(dsn, bootstrap, pgbench, messages, backlog, rate, seconds),
            },
            rounds,
        )
    return summary(runs, rate, backlog)


def summary(runs: dict[str, list[dict[str, Any]]], rate: int, backlog: int) -> dict[str, Any]:
    """Per case its spread, and the ratios the targets read, round by round."""
    flat: dict[str, list[dict[str, Any]]] = {
        "floor": [{"tps": r["tps"]} for r in runs["append one_row"]],
        "table": [{"tps": r["tps"]} for r in runs["append one_row+outbox"]],
        "messages": [{"tps": r["tps"]} for r in runs["append one_row+message"]],
        "raw message": [{"tps": r["tps"]} for r in runs["append one_row+raw message"]],
    }
    for mode in ("table", "messages"):
        for row, cdc in zip(flat[mode], runs[f"cdc {mode}"], strict=True):
            row["sustained_per_s"] = cdc["sustained"]["events_per_s"]
    floor_wal = [r["bytes"] for r in runs["wal one_row"]]
    wal_per_event = {
        mode: spread([r["bytes"] - f for r, f in zip(runs[f"wal {case}"], floor_wal, strict=True)])
        for mode, case in (
            ("table", "one_row+outbox"),
            ("messages", "one_row+message"),
            ("raw message", "one_row+raw message"),
        )
    }
    percentiles = {
        mode: {
            q: spread([r["at_rate"]["relay_leg_ms"][q] for r in runs[f"cdc {mode}"]])
            for q in ("p50", "p99")
        }
        for mode in ("table", "messages")
        if all(r["at_rate"]["relay_leg_ms"] for r in runs[f"cdc {mode}"])
    }
    return {
        "rate": rate,
        "backlog": backlog,
        "runs": runs,
        "append_tps": {mode: spread([r["tps"] for r in rows]) for mode, rows in flat.items()},
        "wal_bytes_per_event": wal_per_event,
        "relay_leg_ms": percentiles,
        "sustained_per_s": {
            mode: spread([r["sustained_per_s"] for r in flat[mode]])
            for mode in ("table", "messages")
        },
        "ratios": {
            "append: floor / messages": ratio_spread(flat, "floor", "messages", "tps"),
            "append: floor / table": ratio_spread(flat, "floor", "table", "tps"),
            "append: floor / raw message": ratio_spread(flat, "floor", "raw message", "tps"),
            "sustained: messages / table": ratio_spread(
                flat, "messages", "table", "sustained_per_s"
            ),
        },
    }
