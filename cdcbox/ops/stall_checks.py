"""`doctor`'s checks for a pipeline that reports RUNNING and publishes nothing: a
transaction that holds readers back, and a task whose slot stands still."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from cdcbox.connect.client import ConnectClient, tasks_by_id
from cdcbox.connect.connectors import ConnectorSpec
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.transactions import TransactionAdmin
from cdcbox.ops.check import Check
from cdcbox.ops.heal import watched_topics
from cdcbox.ops.progress import stalled_for

HEAL = "`cdc-ctl connectors heal` (see the runbook: the pipeline heals itself)"


def transaction_checks(kafka: KafkaSettings, max_age_s: float) -> list[Check]:
    """One failed check per transaction that nothing but an abort will end, or that has
    been open longer than `max_age_s` (each holds back every read_committed reader of
    its partition: cdcbox's consumers, and Connect's reads of its offsets topic)."""
    with TransactionAdmin(kafka) as admin:
        found = admin.open_transactions(watched_topics(admin.list_topics()))
    now_ms = int(time.time() * 1000)
    failed = [
        Check(
            "open transaction",
            False,
            f"{txn.describe(now_ms)}: " + (txn.hanging(now_ms) or "readers of it wait"),
            f"{HEAL}; --abort-older-than {max_age_s:.0f} ends one whose producer is gone"
            if txn.hanging(now_ms) is None
            else HEAL,
        )
        for txn in found
        if txn.hanging(now_ms) is not None or txn.age_s(now_ms) > max_age_s
    ]
    return failed or [
        Check(
            "open transactions",
            True,
            f"{len(found)} open, none older than {max_age_s:.0f} s, none hanging",
        )
    ]


def progress_check(
    conn: psycopg.Connection[Any], client: ConnectClient, spec: ConnectorSpec, wait_s: float
) -> Check:
    """Whether `spec`'s connector, when all its tasks are RUNNING, moves its slot: a slot
    with WAL after it is watched up to `wait_s` (the specs' heartbeat moves a healthy
    connector's slot every 10 s, idle or not)."""
    slot = spec.config.get("slot.name", "")
    tasks = tasks_by_id(client.status(spec.name) or {})
    if not tasks or any(t["state"] != "RUNNING" for t in tasks):
        states = ",".join(t["state"] for t in tasks) or "no tasks"
        return Check("connector progress", True, f"{spec.name}: not watched ({states})")
    still, position = stalled_for(conn, slot, wait_s)
    if position is None:
        return Check("connector progress", True, f"{spec.name}: slot {slot} not created yet")
    return Check(
        "connector progress",
        still == 0.0,
        f"{spec.name}: slot {slot} moves" + (f" ({position.confirmed})" if not still else "")
        if not still
        else f"{spec.name}: tasks RUNNING, but slot {slot} stood at {position.confirmed} for "
        f"{still:.0f} s with {position.behind_bytes} bytes of WAL after it",
        HEAL,
    )
