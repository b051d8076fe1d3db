"""The fault ledger: what was committed, delivered and applied while something broke.

The source of truth is the outbox rows read back at the end: a commit that raised is
ambiguous, and the read-back decides. Effects land in a business table with no unique
constraint (`fault_effect`), so an event applied twice is visible as two rows.
Every scenario appends its ledger to `CDCBOX_LEDGER_FILE` (JSON lines); `scripts/test`
prints them as a table (`python -m tests.faults.ledger FILE`). `--docs` also writes
that table into docs/faults.md between its ledger markers; the file it came from is kept
under tests/faults/results/ and the page names it.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psycopg
from kafka import KafkaConsumer, TopicPartition
from psycopg import sql

from cdcbox import wire
from cdcbox.names import DbNames
from tests.faults.effects import effect_rows, max_stall_s
from tests.faults.messages import committed_business
from tests.faults.writers import UNHANDLED_TYPE

COLUMNS = (
    "scenario",
    "committed",
    "delivered",
    "duplicates",
    "applied",
    "double_effects",
    "lost",
    "order_violations",
    "rolled_back_seen",
    "max_stall_s",
)


@dataclass(frozen=True)
class Ledger:
    scenario: str
    committed: int  # outbox rows read back
    delivered: int  # records on the topic, duplicates included (read_committed)
    duplicates: int  # delivered beyond one copy per event: the topic's duplicates
    applied: int  # distinct events with an effect
    double_effects: int  # effect rows beyond one per event
    lost: int  # committed events without an effect
    order_violations: int  # aggregates whose first effects are not in write order
    rolled_back_seen: int  # rolled-back events delivered or applied
    max_stall_s: float = 0.0  # longest time with no new effect while events were written
    safeguard_off: str = ""

    @property
    def exact(self) -> bool:
        """Nothing lost, nothing applied twice, order held, no rollback leaked."""
        return not (
            self.lost or self.double_effects or self.order_violations or self.rolled_back_seen
        )

    def record(self) -> None:
        path = os.environ.get("CDCBOX_LEDGER_FILE")
        if path:
            with Path(path).open("a") as out:
                out.write(json.dumps(asdict(self)) + "\n")


def committed_events(
    dsn: str, aggregate_type: str, names: DbNames = DbNames(), messages: bool = False
) -> dict[uuid.UUID, tuple[str, int]]:
    """event id -> (aggregate id, write sequence n) of every committed outbox row whose
    event an effect must follow (not the writers' `UNHANDLED_TYPE`); with `messages`,
    of every committed business row (the outbox without a table keeps no rows)."""
    if messages:
        return committed_business(dsn, aggregate_type, names, UNHANDLED_TYPE)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT event_id, aggregate_id, payload FROM {} "
                "WHERE aggregate_type = %s AND event_type <> %s"
            ).format(names.table("outbox")),
            (aggregate_type, UNHANDLED_TYPE),
        ).fetchall()
    return {r[0]: (r[1], int(json.loads(r[2])["n"])) for r in rows}


def _committed_batches(
    bootstrap_servers: str, topic: str
) -> Iterator[tuple[TopicPartition, list[Any]]]:
    """`topic` read from the beginning to its end offsets (so a missing record cannot
    make it wait), as a transactional reader sees it: records of aborted transactions (a
    Connect worker killed mid-transaction) are not deliveries. A topic not created yet
    yields nothing."""
    reader = KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    try:
        partitions = [TopicPartition(topic, p) for p in reader.partitions_for_topic(topic) or ()]
        if not partitions:
            return
        reader.assign(partitions)
        reader.seek_to_beginning()
        end = reader.end_offsets(partitions)
        while any(reader.position(tp) < end[tp] for tp in partitions):
            yield from reader.poll(timeout_ms=500, max_records=5000).items()
    finally:
        reader.close()


def delivered_ids(bootstrap_servers: str, topic: str) -> list[str]:
    """The `id` header of every record on `topic` (an extra copy is counted)."""
    return [
        dict(r.headers)[wire.HEADER_EVENT_ID].decode()
        for _, records in _committed_batches(bootstrap_servers, topic)
        for r in records
    ]


def past_last_records(bootstrap_servers: str, topic: str) -> dict[TopicPartition, int]:
    """Per partition with records: the offset after its last record, what a consumer
    done with the topic has committed (a transaction's commit marker may follow it)."""
    return {
        tp: records[-1].offset + 1 for tp, records in _committed_batches(bootstrap_servers, topic)
    }


def topic_size(bootstrap_servers: str, topic: str) -> int:
    """The sum of `topic`'s partitions' end offsets: its records so far and, where
    transactions wrote them, their commit markers too (a measure of progress; count
    records with `delivered_ids`)."""
    reader = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=None)
    try:
        partitions = [TopicPartition(topic, p) for p in reader.partitions_for_topic(topic) or ()]
        return sum(reader.end_offsets(partitions).values())
    finally:
        reader.close()


def order_violations(effects: list[tuple[uuid.UUID, str, int]]) -> int:
    """Aggregates whose events' first effects are not in increasing write sequence."""
    seen: set[uuid.UUID] = set()
    per_aggregate: dict[str, list[int]] = defaultdict(list)
    for event_id, aggregate_id, n in effects:
        if event_id not in seen:
            seen.add(event_id)
            per_aggregate[aggregate_id].append(n)
    return sum(1 for ns in per_aggregate.values() if ns != sorted(set(ns)))


def compute(
    scenario: str,
    *,
    dsn: str,
    bootstrap_servers: str,
    aggregate_type: str,
    consumer: str,
    rolled_back: set[uuid.UUID],
    safeguard_off: str = "",
    names: DbNames = DbNames(),
    messages: bool = False,
    effects_dsn: str = "",
) -> Ledger:
    """The ledger of one scenario: committed rows read back from `dsn`, effects from
    `effects_dsn` (the consumers' database: `dsn` when empty)."""
    committed = committed_events(dsn, aggregate_type, names, messages)
    delivered = delivered_ids(bootstrap_servers, wire.topic_for(aggregate_type))
    effects_dsn = effects_dsn or dsn
    effects = effect_rows(effects_dsn, consumer)
    applied = {e[0] for e in effects}
    leaked = {str(i) for i in rolled_back} & set(delivered) | (rolled_back & applied)
    return _tally(
        scenario,
        set(committed),
        delivered,
        effects,
        len(leaked),
        effects_dsn,
        consumer,
        safeguard_off,
    )


def _tally(
    scenario: str,
    committed: set[uuid.UUID],
    delivered: list[str],
    effects: list[tuple[uuid.UUID, str, int]],
    leaked: int,
    dsn: str,
    consumer: str,
    safeguard_off: str,
) -> Ledger:
    """The ledger of one scenario's counts, recorded to the results file."""
    applied = {e[0] for e in effects}
    ledger = Ledger(
        scenario=scenario,
        committed=len(committed),
        delivered=len(delivered),
        duplicates=len(delivered) - len(set(delivered)),
        applied=len(applied),
        double_effects=len(effects) - len(applied),
        lost=len(committed - applied),
        order_violations=order_violations(effects),
        rolled_back_seen=leaked,
        max_stall_s=max_stall_s(dsn, consumer),
        safeguard_off=safeguard_off,
    )
    ledger.record()
    return ledger


def compute_chain(
    scenario: str,
    *,
    dsn: str,
    bootstrap_servers: str,
    first_type: str,
    second_type: str,
    consumer: str,
    rolled_back: set[uuid.UUID],
    safeguard_off: str = "",
) -> Ledger:
    """The second hop, counted per first-hop event (its cause): every committed event of
    `first_type` must lead to exactly one effect of `consumer`, through one answer of
    `second_type` emitted by the first hop's handler. An answer emitted twice (with its
    own event id each time, so no inbox downstream can tell) shows as a double effect."""
    causes = committed_events(dsn, first_type)
    with psycopg.connect(dsn) as conn:
        answers: dict[uuid.UUID, uuid.UUID] = dict(
            conn.execute(
                "SELECT event_id, causation_id::uuid FROM outbox_event WHERE aggregate_type = %s",
                (second_type,),
            ).fetchall()
        )
    delivered = [
        str(answers.get(uuid.UUID(answer_id), answer_id))
        for answer_id in delivered_ids(bootstrap_servers, wire.topic_for(second_type))
    ]
    effects = [(answers[e], a, n) for e, a, n in effect_rows(dsn, consumer) if e in answers]
    leaked = len(rolled_back & set(answers.values()))
    return _tally(scenario, set(causes), delivered, effects, leaked, dsn, consumer, safeguard_off)


def table(rows: list[dict[str, Any]]) -> str:
    """The ledger as a Markdown table, one row per scenario run."""
    # Duplicates are counted on the topic, by a read_committed reader (delivered_ids).
    head = [{"duplicates": "topic duplicates"}.get(c, c) for c in COLUMNS] + ["exact"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        off = row.get("safeguard_off")
        name = row["scenario"] + (f" (safeguard off: {off})" if off else "")
        cells = [name, *(str(row[c]) for c in COLUMNS[1:])]
        exact = Ledger(**row).exact
        cells.append("yes" if exact else "NO")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# The documentation page that shows the committed ledger (mkdocs builds it; see mkdocs.yml).
PAGE = Path(__file__).resolve().parents[2] / "docs" / "faults.md"
BEGIN, END = "<!-- fault-ledger:begin -->", "<!-- fault-ledger:end -->"


def page_section(source: Path) -> str:
    """What docs/faults.md holds between its markers for the results file `source`."""
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    relative = source.resolve().relative_to(PAGE.parents[1])
    return f"{BEGIN}\nFrom `{relative}`:\n\n{table(rows)}\n{END}"


def write_page(source: Path) -> None:
    text = PAGE.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    PAGE.write_text(text[:start] + page_section(source) + text[end:])


if __name__ == "__main__":
    source = Path(sys.argv[-1])
    if "--docs" in sys.argv:
        write_page(source)
    elif source.exists() and source.stat().st_size:
        print(table([json.loads(line) for line in source.read_text().splitlines()]))
