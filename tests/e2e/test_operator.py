"""`cdc-ctl` operator commands against the real stack, including their refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from click.testing import CliRunner, Result
from psycopg import sql

from cdcbox import wire
from cdcbox.cli.main import cli
from cdcbox.connect.client import ConnectClient
from cdcbox.consumer import Outcome, RetryPolicy
from cdcbox.kafka.client import Consumer, KafkaSettings, TopicPartition
from cdcbox.kafka.topics import ensure_topics
from cdcbox.limits import EventLimits
from cdcbox.names import DbNames
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.relay import RelayConfig, RelayWorker
from cdcbox.resources import resource_dir
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.conftest import count_effects, effects, recording_handler
from tests.helpers import eventually, migrated_schema, unique

pytestmark = pytest.mark.e2e
OUTBOX = Outbox()


def ctl(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input)


def state(client: ConnectClient, name: str) -> str:
    status = client.status(name)
    return status["connector"]["state"] if status else "ABSENT"


def slot_active(dsn: str, slot: str) -> bool | None:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
        ).fetchone()
    return None if row is None else bool(row[0])


def test_connector_lifecycle_offsets_and_slot_drop(
    spec_file: Any, connect_client: ConnectClient, stack: Endpoints
) -> None:
    path, name = spec_file()
    slot = name.replace("-", "_")
    assert ctl("apply", str(path)).exit_code == 0
    eventually(lambda: slot_active(stack.dsn, slot), what="the slot in use")

    refused = ctl("slot", "drop", slot, "--yes")
    assert refused.exit_code == 2
    assert "is active" in refused.output
    assert slot_active(stack.dsn, slot) is True

    assert ctl("connectors", "pause", name).exit_code == 0
    eventually(lambda: state(connect_client, name) == "PAUSED", what="PAUSED")
    assert ctl("connectors", "resume", name).exit_code == 0
    eventually(lambda: state(connect_client, name) == "RUNNING", what="RUNNING again")
    listed = json.loads(ctl("connectors", "list", "--json").output)
    assert {"name": name, "state": "RUNNING", "tasks": "RUNNING"} in listed

    shown = json.loads(ctl("offsets", "show", name, "--json").output)
    assert shown["offsets"] == [] or shown["offsets"][0]["partition"] == {"server": name}
    human = ctl("offsets", "show", name).output
    assert (f"server={name}: " in human) if shown["offsets"] else "no stored offsets" in human
    lsn = int(eventually(lambda: _current_lsn(stack.dsn)))
    changed = ctl("offsets", "set", name, "--lsn", str(lsn), "--yes")
    assert changed.exit_code == 0, changed.output
    after = json.loads(changed.output.split("after:", 1)[1])
    assert after["offsets"][0]["offset"]["lsn"] == lsn
    eventually(lambda: state(connect_client, name) == "RUNNING", what="resumed after set")

    assert ctl("connectors", "stop", name).exit_code == 0
    eventually(lambda: state(connect_client, name) == "STOPPED", what="STOPPED")
    eventually(lambda: slot_active(stack.dsn, slot) is False, what="the slot released")
    # A stopped connector still owns its slot: dropping it would lose its position.
    still_named = ctl("slot", "drop", slot, "--yes")
    assert still_named.exit_code == 2
    assert f"connector {name} streams from it" in still_named.output
    assert "would delete connector" in ctl("connectors", "delete", name, "--dry-run").output
    assert connect_client.config(name) is not None  # a dry run changes nothing
    assert ctl("connectors", "delete", name, "--yes").exit_code == 0
    assert connect_client.config(name) is None
    # Gone for good: the slot may still hold outbox rows other tests wrote since the
    # connector's last confirmed position, which --force throws away.
    dropped = ctl("slot", "drop", slot, "--yes", "--force")
    assert dropped.exit_code == 0, dropped.output
    assert slot_active(stack.dsn, slot) is None


def _current_lsn(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0])


def test_slot_status_reports_retained_wal_and_fails_over_threshold() -> None:
    ok = ctl("slot", "status", "--json")
    assert ok.exit_code == 0
    slots = {s["name"]: s for s in json.loads(ok.output)}
    assert slots["cdcbox_outbox"]["plugin"] == "pgoutput"
    assert slots["cdcbox_outbox"]["active"] is True
    over = ctl("slot", "status", "--warn-bytes", "0")
    assert over.exit_code == 1
    assert "warning: slot cdcbox_outbox retains" in over.output


def test_group_lag_and_reset_refused_while_active(stack: Endpoints, run_consumer: Any) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        OUTBOX.append_many(
            conn, [NewEvent(aggregate_type, f"a{i}", "Created", {"i": i}) for i in range(6)]
        )
    handler = recording_handler(consumer, aggregate_type, {"Created"})
    topic = wire.topic_for(aggregate_type)
    with run_consumer([handler], group=consumer) as running:
        eventually(lambda: running.stats[Outcome.PROCESSED] == 6, what="6 processed")
        with Consumer(KafkaSettings(stack.bootstrap_servers), group_id=None) as reader:
            ids = reader.partitions_for_topic(topic)
            ends = reader.end_offsets([TopicPartition(topic, p) for p in ids])
        with_records = {(tp.topic, tp.partition) for tp, end in ends.items() if end > 0}

        def caught_up() -> dict[tuple[str, int], int] | None:
            # Committed offsets are not a record count: Connect's exactly-once
            # transactions end in markers that take offsets, and Debezium's polls may
            # split one database transaction into two of them.
            rows = json.loads(ctl("groups", "lag", consumer, "--json").output)
            committed = {(r["topic"], r["partition"]): r["committed"] for r in rows}
            done = set(committed) >= with_records and all(r["lag"] == 0 for r in rows)
            return committed if done else None

        committed = eventually(caught_up, what="lag 0 on every partition with records")
        refused = ctl("groups", "reset", consumer, "--to", "earliest")
        assert refused.exit_code == 2
        assert "active member" in refused.output
        dry = ctl("groups", "reset", consumer, "--to", "earliest", "--dry-run", "--json")
        assert dry.exit_code == 0
        assert {s["target"] for s in json.loads(dry.output)} == {0}
    lag = json.loads(ctl("groups", "lag", consumer, "--json").output)
    assert {(r["topic"], r["partition"]): r["committed"] for r in lag} == committed  # dry run
    groups_listed = dict(
        tuple(g.values()) for g in json.loads(ctl("groups", "list", "--json").output)
    )
    assert consumer in groups_listed

    reset = ctl("groups", "reset", consumer, "--to", "earliest", "--topic", topic, "--yes")
    assert reset.exit_code == 0, reset.output
    lag = json.loads(ctl("groups", "lag", consumer, "--json").output)
    assert sum(r["lag"] for r in lag) == 6
    with run_consumer([handler], group=consumer) as again:
        eventually(lambda: again.stats[Outcome.DUPLICATE] == 6, what="6 duplicates after reset")
    assert count_effects(stack.dsn, consumer) == 6
    bad = ctl("groups", "reset", consumer, "--to", "yesterday")
    assert bad.exit_code == 2
    assert "expected earliest, latest" in bad.output


def test_outbox_and_inbox_retention_keep_what_is_still_needed(
    spec_file: Any, connect_client: ConnectClient, stack: Endpoints
) -> None:
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        OUTBOX.append(conn, NewEvent("order", unique("pending"), "Created", {}))
    stats = json.loads(ctl("outbox", "stats", "--json").output)
    assert stats["by_status"]["PENDING"] >= 1
    # A connector that has read nothing cannot vouch for any row: CDC purge refuses.
    path, name = spec_file()
    assert ctl("apply", str(path)).exit_code == 0
    refused = ctl("outbox", "purge", "--older-than", "0s", "--connector", name)
    assert refused.exit_code == 2
    assert "no committed offsets" in refused.output
    # Once it has read (and committed an offset for) one row, then stopped, a row written
    # after that is unread by it: the purge takes the first and must keep the second.
    read_by_it, unread = unique("read"), unique("unread")
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        OUTBOX.append(conn, NewEvent("order", read_by_it, "Created", {}))
    eventually(lambda: connect_client.offsets(name).get("offsets"), what="an offset committed")
    assert ctl("connectors", "stop", name).exit_code == 0
    eventually(lambda: state(connect_client, name) == "STOPPED", what="STOPPED")
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        OUTBOX.append(conn, NewEvent("order", unread, "Created", {}))
    planned = ctl("outbox", "purge", "--older-than", "0s", "--connector", name, "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert "would delete" in planned.output
    asked = ctl("outbox", "purge", "--older-than", "0s", "--connector", name)
    assert asked.exit_code == 1  # no --yes and nobody to answer: aborted, nothing deleted
    purged = ctl("outbox", "purge", "--older-than", "0s", "--connector", name, "--yes")
    assert purged.exit_code == 0, purged.output
    assert f"connector {name} has read up to" in purged.output
    with psycopg.connect(stack.dsn) as conn:
        left: dict[Any, Any] = dict(
            conn.execute(
                "SELECT aggregate_id, count(*) FROM outbox_event WHERE aggregate_id IN (%s, %s) "
                "GROUP BY 1",
                (read_by_it, unread),
            ).fetchall()
        )
    assert left == {unread: 1}

    short = ctl("inbox", "purge", "--older-than", "1d")
    assert short.exit_code == 2
    assert "shorter than the safety floor" in short.output
    kept = ctl("inbox", "purge", "--older-than", "30d", "--yes", "--max-rate", "500")
    assert kept.exit_code == 0
    assert "deleted 0 inbox rows" in kept.output
    assert json.loads(ctl("inbox", "stats", "--json").output)


def test_dead_letters_listed_shown_and_replayed_into_an_exact_effect(
    stack: Endpoints, run_consumer: Any
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        ids = OUTBOX.append_many(
            conn,
            [
                NewEvent(aggregate_type, "x", "Created", {"v": 1}, aggregate_version=1),
                NewEvent(aggregate_type, "x", "Created", {"v": 2}, aggregate_version=2),
            ],
        )
    outage = {"on": True}
    handler = recording_handler(consumer, aggregate_type, {"Created"}, fail=lambda e: outage["on"])
    retry = RetryPolicy(max_attempts=2, initial_delay_s=0.01, max_delay_s=0.02)
    topic = wire.topic_for(aggregate_type) + ".dlq"
    with run_consumer([handler], group=consumer, retry=retry) as running:
        eventually(lambda: running.stats[Outcome.PARKED] == 1, what="v2 parked behind v1")
        listed = ctl("dlq", "list", topic, "--json")
        assert listed.exit_code == 0
        assert [d["event_id"] for d in json.loads(listed.output)] == [str(i) for i in ids]
        shown = json.loads(ctl("dlq", "show", topic, "--event-id", str(ids[0]), "--json").output)
        assert shown["error"] == "RuntimeError"
        assert shown["headers"]["cdcbox.consumer"] == consumer
        human = ctl("dlq", "show", topic, "--event-id", str(ids[0])).output
        assert "error: RuntimeError" in human and f"  cdcbox.consumer: {consumer}" in human
        parked = json.loads(ctl("parked", "list", "--json").output)
        assert any(p["consumer"] == consumer and p["aggregate_id"] == "x" for p in parked)

        outage["on"] = False
        assert "would replay 2" in ctl("dlq", "replay", topic, "--all", "--dry-run").output
        replayed = ctl("dlq", "replay", topic, "--all", "--yes")
        assert replayed.exit_code == 0, replayed.output
        assert "replayed 2 dead letter(s)" in replayed.output
        eventually(lambda: count_effects(stack.dsn, consumer) == 2, what="both applied")
    with psycopg.connect(stack.dsn) as conn:
        assert [r[2] for r in effects(conn, consumer)] == [1, 2]
    assert not any(
        p["consumer"] == consumer for p in json.loads(ctl("parked", "list", "--json").output)
    )
    nothing = ctl("dlq", "replay", topic)
    assert nothing.exit_code == 2


@pytest.mark.parametrize("batch_mode", [False, True], ids=["per-record", "batch"])
def test_a_replay_keeps_the_aggregate_parked_until_its_last_held_event_is_applied(
    stack: Endpoints, run_consumer: Any, batch_mode: bool
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")

    def write(version: int) -> Any:
        event = NewEvent(aggregate_type, "x", "Changed", {"v": version}, aggregate_version=version)
        with psycopg.connect(stack.dsn) as conn, conn.transaction():
            return OUTBOX.append(conn, event)

    def parked_here() -> bool:
        rows = json.loads(ctl("parked", "list", "--json").output)
        return any(p["consumer"] == consumer and p["aggregate_id"] == "x" for p in rows)

    def versions_applied() -> list[int]:
        with psycopg.connect(stack.dsn) as conn:
            return [r[2] for r in effects(conn, consumer)]

    outage = {"on": True}
    handler = recording_handler(consumer, aggregate_type, {"Changed"}, fail=lambda e: outage["on"])
    retry = RetryPolicy(max_attempts=2, initial_delay_s=0.01, max_delay_s=0.02)
    topic = wire.topic_for(aggregate_type) + ".dlq"
    v1, v2 = write(1), write(2)
    with run_consumer([handler], group=consumer, retry=retry, batch_mode=batch_mode) as running:
        eventually(lambda: running.stats[Outcome.PARKED] == 1, what="v2 parked behind v1")
        outage["on"] = False

        # Only the failing event: it is applied, and v2 still holds the aggregate.
        assert ctl("dlq", "replay", topic, "--event-id", str(v1)).exit_code == 0
        eventually(lambda: versions_applied() == [1], what="the replayed v1 applied")
        assert parked_here()
        v3 = write(3)  # live traffic while the aggregate is still held
        eventually(lambda: running.stats[Outcome.PARKED] == 2, what="live v3 held too")
        assert versions_applied() == [1]

    # v4 is written while no consumer runs, then v2 and v3 are replayed: the partition
    # now reads v4 (live) before the replayed copies. v4 is requeued behind them.
    write(4)
    replayed = ctl("dlq", "replay", topic, "--event-id", str(v2), "--event-id", str(v3))
    assert replayed.exit_code == 0, replayed.output
    with run_consumer([handler], group=consumer, retry=retry, batch_mode=batch_mode):
        eventually(lambda: versions_applied() == [1, 2, 3, 4], what="v2, v3, v4 in order")
        eventually(lambda: not parked_here(), what="the aggregate released")
        write(5)
        eventually(lambda: versions_applied() == [1, 2, 3, 4, 5], what="live v5 applied")


def test_doctor_passes_on_the_stack_and_names_a_wrong_timestamp_column(
    tmp_path: Path, stack: Endpoints
) -> None:
    topic = wire.topic_for(unique("doctor"))
    ensure_topics(KafkaSettings(stack.bootstrap_servers), [topic])
    ok = ctl("doctor", "--json", "--topic", topic)
    checks = {c["name"]: c for c in json.loads(ok.output)}
    assert ok.exit_code == 0, ok.output
    assert all(c["ok"] for c in checks.values())
    assert {
        "wal_level",
        "debezium role",
        "publication",
        "outbox columns",
        "debezium plugin",
        "slot retained WAL",
        "exactly-once source",
        f"topic {topic}",
    } <= set(checks)

    spec = yaml.safe_load((resource_dir("connectors") / "outbox-postgres.yaml").read_text())
    spec["config"]["transforms.outbox.table.field.event.timestamp"] = "sent_at"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(spec))
    failed = ctl("doctor", str(bad), "--topic", "outbox.event.no-such-topic")
    assert failed.exit_code == 1
    assert "sent_at is timestamp with time zone" in failed.output
    assert "missing" in failed.output


def test_diff_restart_and_offsets_reset(spec_file: Any, connect_client: ConnectClient) -> None:
    path, name = spec_file()
    assert ctl("apply", str(path)).exit_code == 0
    in_sync = ctl("diff", str(path))
    assert in_sync.exit_code == 0
    assert f"{name}: in sync" in in_sync.output
    changed = yaml.safe_load(path.read_text())
    changed["config"]["heartbeat.interval.ms"] = 20000
    path.write_text(yaml.safe_dump(changed))
    differs = ctl("diff", str(path))
    assert differs.exit_code == 1
    assert "~ heartbeat.interval.ms: 10000 -> 20000" in differs.output
    assert (connect_client.config(name) or {})[
        "heartbeat.interval.ms"
    ] == "10000"  # diff changes nothing

    restarted = ctl("connectors", "restart", name, "--include-tasks")
    assert restarted.exit_code == 0

    def all_running() -> bool:
        status = json.loads(ctl("connectors", "status", name, "--json").output)
        return status["connector"]["state"] == "RUNNING" and [
            t["state"] for t in status["tasks"]
        ] == ["RUNNING"]

    eventually(all_running, what="connector and task RUNNING after the restart")

    aborted = ctl("offsets", "reset", name, input="n\n")
    assert aborted.exit_code == 1  # declined at the prompt: nothing stopped
    assert "Aborted" in aborted.output
    assert state(connect_client, name) != "STOPPED"
    reset = ctl("offsets", "reset", name, "--yes")
    assert reset.exit_code == 0, reset.output
    assert json.loads(reset.output.split("after:", 1)[1]) == {"offsets": []}
    eventually(lambda: state(connect_client, name) == "RUNNING", what="resumed after reset")


def test_outbox_dead_rows_listed_and_retried(stack: Endpoints) -> None:
    raised = EventLimits(3_000_000)  # the outbox takes more than the relay's producer
    names = migrated_schema(stack.dsn, DbNames(schema=unique("dead")), limits=raised)
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        Outbox(names, limits=raised).append(
            conn, NewEvent(unique("order"), "big", "Changed", b'"' + b"x" * 2_000_000 + b'"')
        )
    relay = RelayWorker(
        RelayConfig(
            dsn=stack.dsn, bootstrap_servers=stack.bootstrap_servers, listen=False, max_attempts=1
        ),
        names=names,
    )
    relay.run_once()
    relay.close()
    listed = ctl("--schema", names.schema, "outbox", "dead", "list", "--json")
    assert listed.exit_code == 0
    (row,) = json.loads(listed.output)
    assert row["aggregate_id"] == "big"
    assert "MessageSizeTooLarge" in row["last_error"]
    retried = ctl("--schema", names.schema, "outbox", "dead", "retry", str(row["id"]))
    assert retried.exit_code == 0
    assert "retrying 1 row(s)" in retried.output
    again = ctl("--schema", names.schema, "outbox", "dead", "retry", str(row["id"]))
    assert again.exit_code == 1
    assert f"not DEAD: [{row['id']}]" in again.output
    with psycopg.connect(stack.dsn) as conn:
        status = conn.execute(
            sql.SQL("SELECT status, retry_count FROM {}").format(names.table("outbox"))
        ).fetchone()
    assert status == ("RETRY", 0)


def test_service_errors_a_user_causes_are_one_line_and_exit_2(stack: Endpoints) -> None:
    unknown = ctl("connectors", "status", unique("nosuch"))
    assert unknown.exit_code == 2
    assert unknown.stderr.startswith("error: no connector named ")
    assert len(unknown.stderr.strip().splitlines()) == 1
    # cdcbox's tables in a schema nobody migrated: a hint to migrate, not a traceback.
    unmigrated = ctl("--schema", unique("unmigrated"), "outbox", "stats")
    assert unmigrated.exit_code == 2
    assert "does not exist" in unmigrated.stderr
    assert "has `cdc-ctl db migrate` run?" in unmigrated.stderr
    assert len(unmigrated.stderr.strip().splitlines()) == 1
