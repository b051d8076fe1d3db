"""Getting a connector stuck on one record moving again without losing that record.

A record Kafka refuses for good (over `max.request.size`, a topic name it rejects, a
topic the connector may not write) fails the Debezium task, and a restart fails again on
the same record. `quarantine` finds that record exactly, by reading what the slot holds
past the connector's committed offset (`wal_peek`), and then:

1. publishes the records before it that the connector read but never committed (so the
   skip cannot lose them: at worst a consumer sees a duplicate, which its inbox drops);
2. keeps the stuck event in the quarantine table (whole) and on the quarantine topic (its
   headers, the error, and the payload when Kafka takes it);
3. points the connector's offset at exactly that record, so streaming resumes after it;
4. resumes the connector and reports what it did.
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import routed_topic
from cdcbox.connect.wal_peek import WalInsert, lsn_text, peek_inserts
from cdcbox.errors import UsageError
from cdcbox.kafka.client import KafkaSettings, Producer
from cdcbox.limits import EventLimits
from cdcbox.names import DbNames
from cdcbox.postgres.relay_store import RelayStore
from cdcbox.relay.records import KafkaRecord, to_record
from cdcbox.seam.relay import OutboxRow

DEFAULT_TOPIC = "outbox.quarantine"
HEADER_ERROR = "cdcbox.quarantine.error"
HEADER_CONNECTOR = "cdcbox.quarantine.connector"
HEADER_PAYLOAD = "cdcbox.quarantine.payload"
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


@dataclass(frozen=True)
class Stuck:
    """The record a failed task stopped on, and what the connector read before it."""

    connector: str
    error: str
    row: OutboxRow
    at: WalInsert
    before: list[OutboxRow]
    topic_of: dict[str, str]  # aggregate type -> the connector's topic for it
    names: DbNames  # the captured outbox's schema, where the quarantine table is

    def record(self, row: OutboxRow) -> KafkaRecord:
        return dataclasses.replace(to_record(row), topic=self.topic_of[row.aggregate_type])


@dataclass(frozen=True)
class Report:
    """What a quarantine did: the event moved past, where it was kept, what was republished."""

    connector: str
    event_id: str
    aggregate: str
    error: str
    lsn: str
    republished: int
    payload_on_topic: bool
    topic: str
    table: str

    def describe(self) -> str:
        where = "with its payload" if self.payload_on_topic else "without its payload (too big)"
        return (
            f"{self.connector}: quarantined event {self.event_id} ({self.aggregate}) at LSN "
            f"{self.lsn}: {self.error}. Kept whole in {self.table}, and {where} on "
            f"{self.topic}; "
            f"republished {self.republished} record(s) read before it; resumed after it."
        )


def failure(status: dict[str, Any]) -> str:
    """The exception a failed task stopped with (its trace's innermost named cause)."""
    failed = [t for t in status.get("tasks", []) if t.get("state") == "FAILED"]
    if not failed:
        raise UsageError(
            f"connector {status.get('name')!r} has no FAILED task: nothing to quarantine"
        )
    causes = re.findall(r"([\w.]+(?:Exception|Error): [^\n]*)", failed[0].get("trace", ""))
    return str(causes[-1] if causes else failed[0].get("trace", "").splitlines()[0])


def _is_culprit(record: KafkaRecord, error: str) -> bool:
    """Whether Kafka refuses `record` with `error`."""
    if "RecordTooLarge" in error:
        limit = re.search(r"larger than (\d+)", error)
        allowed = int(limit.group(1)) if limit else EventLimits().producer_max_request_size
        headers = sum(len(k) + len(v) for k, v in record.headers)
        return len(record.key) + len(record.value) + headers > allowed
    if "InvalidTopic" in error:
        return not _TOPIC.fullmatch(record.topic)
    # Authorisation, unknown topic: the trace names the topic, whole (not as a part of a
    # longer name: outbox.event.Order is not outbox.event.OrderLine).
    return re.search(rf"(?<![\w.-]){re.escape(record.topic)}(?![\w.-])", error) is not None


def find_stuck(
    client: ConnectClient, conn: psycopg.Connection[Any], name: str, names: DbNames, error: str
) -> Stuck:
    """With the connector STOPPED: the record its task failed on with `error`."""
    config = client.config(name) or {}
    schema, _, table = config.get("table.include.list", names.outbox_qualified).partition(".")
    names = dataclasses.replace(names, schema=schema, outbox=table)
    inserts = peek_inserts(
        conn, config.get("slot.name", ""), config.get("publication.name", ""), (schema, table)
    )
    pending = _after_offset(client.offsets(name).get("offsets", []), inserts)
    rows = _rows(conn, names, [i.row_id for i in pending])
    topic_of = {r.aggregate_type: routed_topic(config, r.aggregate_type) for r in rows.values()}
    for position, insert in enumerate(pending):
        row = rows[insert.row_id]
        candidate = Stuck(name, error, row, insert, [], topic_of, names)
        if _is_culprit(candidate.record(row), error):
            before = [rows[i.row_id] for i in pending[:position]]
            return dataclasses.replace(candidate, before=before)
    raise UsageError(
        f"{name}: none of the {len(pending)} record(s) past its offset matches {error!r}; "
        "nothing was changed (see `cdc-ctl connectors status NAME`)"
    )


def _after_offset(offsets: list[dict[str, Any]], inserts: list[WalInsert]) -> list[WalInsert]:
    """The inserts the connector has not committed: after (lsn_commit, lsn_proc)."""
    if not offsets:
        return inserts
    offset = offsets[0]["offset"]
    done = (int(offset.get("lsn_commit") or 0), int(offset.get("lsn_proc") or 0))
    return [i for i in inserts if (i.commit_lsn, i.lsn) > done]


def _rows(conn: psycopg.Connection[Any], names: DbNames, ids: list[int]) -> dict[int, OutboxRow]:
    with conn.transaction():
        found = RelayStore(names).rows_by_id(conn, ids)
    missing = set(ids) - set(found)
    if missing:
        raise UsageError(
            f"outbox rows {sorted(missing)[:5]} the slot still holds are gone from "
            f"{names.outbox_qualified}: cannot quarantine without them"
        )
    return found


def plan(client: ConnectClient, name: str, topic: str = DEFAULT_TOPIC) -> str:
    """What `quarantine` would do, read from the connector's status alone: nothing is
    stopped or changed (finding the exact record needs the connector stopped)."""
    status = client.status(name)
    if status is None:
        raise UsageError(f"no connector named {name!r}")
    return (
        f"would stop {name!r}, find the record its task failed on ({failure(status)}), "
        f"keep it in the quarantine table and on {topic}, and resume {name!r} right after it"
    )


def quarantine(
    client: ConnectClient,
    conn: psycopg.Connection[Any],
    kafka: KafkaSettings,
    name: str,
    names: DbNames = DbNames(),
    topic: str = DEFAULT_TOPIC,
    limits: EventLimits = EventLimits(),
) -> Report:
    """Stop `name`, find its stuck record, keep it, move the connector past exactly it,
    resume. Nothing changes when the record cannot be found (the connector is resumed
    as it was)."""
    status = client.status(name)
    if status is None:
        raise UsageError(f"no connector named {name!r}")
    error = failure(status)  # read before the stop, which removes the tasks
    client.stop(name)
    client.wait_until(name, "STOPPED", 60)
    try:
        _await_slot_released(conn, (client.config(name) or {}).get("slot.name", ""))
        stuck = find_stuck(client, conn, name, names, error)
        payload_on_topic = len(stuck.row.payload) <= limits.max_payload_bytes
        size = limits.dead_letter_max_request_size(len(stuck.row.payload))
        with Producer(kafka, enable_idempotence=True, max_request_size=size) as producer:
            for row in stuck.before:
                r = stuck.record(row)
                producer.send(r.topic, key=r.key, value=r.value, headers=r.headers).get(30)
            _keep(conn, stuck)
            r = stuck.record(stuck.row)
            headers = [
                *r.headers,
                (HEADER_ERROR, stuck.error.encode()),
                (HEADER_CONNECTOR, name.encode()),
                (HEADER_PAYLOAD, (b"included" if payload_on_topic else b"omitted: too big")),
            ]
            value = r.value if payload_on_topic else b""
            producer.send(topic, key=r.key, value=value, headers=headers).get(30)
        client.alter_offsets(name, _offsets_after(client, name, stuck.at))
    finally:
        client.resume(name)  # new tasks, from the offset now past the stuck record
    return Report(
        connector=name,
        event_id=str(stuck.row.event_id),
        aggregate=f"{stuck.row.aggregate_type}/{stuck.row.aggregate_id}",
        error=stuck.error,
        lsn=lsn_text(stuck.at.lsn),
        republished=len(stuck.before),
        payload_on_topic=payload_on_topic,
        topic=topic,
        table=f"{stuck.names.schema}.{stuck.names.quarantine}",
    )


def _await_slot_released(conn: psycopg.Connection[Any], slot: str, timeout_s: float = 60) -> None:
    """Until no walsender holds `slot` (the stopped task's may linger): its WAL can only
    be peeked then. Raises, naming the slot, when one still does after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        with conn.transaction():
            row = conn.execute(
                "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            ).fetchone()
        if row is None or not row[0]:
            return
        if time.monotonic() > deadline:
            raise UsageError(
                f"replication slot {slot!r} is still in use {timeout_s:.0f}s after the "
                "connector stopped; see pg_stat_replication for who holds it"
            )
        time.sleep(0.2)


def _keep(conn: psycopg.Connection[Any], stuck: Stuck) -> None:
    """The stuck event, whole, in the quarantine table (idempotent by event id)."""
    row = stuck.row
    with conn.transaction():
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (event_id, outbox_id, aggregate_type, aggregate_id, "
                "aggregate_version, event_type, payload, content_type, trace_id, causation_id, "
                "occurred_at, connector, lsn, error) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, "
                "%s, %s, %s, %s, %s::pg_lsn, %s) ON CONFLICT (event_id) DO NOTHING"
            ).format(stuck.names.table("quarantine")),
            (
                row.event_id, row.id, row.aggregate_type, row.aggregate_id,
                row.aggregate_version, row.event_type, row.payload, row.content_type,
                row.trace_id, row.causation_id, row.occurred_at, stuck.connector,
                lsn_text(stuck.at.lsn), stuck.error,
            ),
        )  # fmt: skip


def _offsets_after(client: ConnectClient, name: str, at: WalInsert) -> dict[str, Any]:
    """Debezium resumes after `lsn_proc` within the transaction committed at
    `lsn_commit`: exactly after the stuck record."""
    current = client.offsets(name).get("offsets", [])
    config = client.config(name) or {}
    partition = current[0]["partition"] if current else {"server": config.get("topic.prefix")}
    offset = {
        "lsn": at.lsn,
        "lsn_proc": at.lsn,
        "lsn_commit": at.commit_lsn,
        "txId": at.xid,
        "messageType": "INSERT",
    }
    return {"offsets": [{"partition": partition, "offset": offset}]}
