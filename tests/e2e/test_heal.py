"""The pipeline heals itself (issue 51): a transaction a dead producer left open holds back
every read_committed reader of its partition, and one on Connect's offsets topic leaves
an exactly-once task RUNNING while it publishes nothing, until the broker times the
transaction out (10 minutes here). `doctor` names both, `connectors heal` and the
supervisor end them, on the real stack.

Each stall is shown first with nothing to heal it (the safeguard off): the records stay
invisible, the connector's topic stays short."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests
from click.testing import CliRunner
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from cdcbox import wire
from cdcbox.cli.main import cli
from cdcbox.kafka.client import Admin, KafkaSettings
from cdcbox.kafka.transactions import TransactionAdmin
from cdcbox.observe.pipeline_state import Sources, read_state
from cdcbox.ops.slots import SlotStatus
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.topics import read_topic
from tests.helpers import eventually, free_port, unique
from tests.supervision import abandoned_transaction, connect_offsets_topic, supervisor_running

pytestmark = pytest.mark.e2e

# An offsets-topic key of a connector that does not exist: the record is never applied.
NOBODYS_OFFSET_KEY = json.dumps(["cdcbox-heal-test", {"server": "nobody"}])


def one_partition_topic(stack: Endpoints, prefix: str) -> str:
    topic = wire.topic_for(unique(prefix))
    with Admin(KafkaSettings(stack.bootstrap_servers)) as admin:
        admin.create_topics([topic], partitions={topic: 1})
    return topic


def send_after_it(stack: Endpoints, topic: str, count: int) -> None:
    """`count` records on partition 0 of `topic`, outside any transaction."""
    later = KafkaProducer(bootstrap_servers=stack.bootstrap_servers, acks="all")
    for i in range(count):
        later.send(topic, key=b"k", value=str(i).encode(), partition=0)
    later.flush()
    later.close()


def committed_count(stack: Endpoints, topic: str, settle_ms: int) -> int:
    """Records a read_committed reader sees on partition 0 of `topic` in `settle_ms`."""
    reader = KafkaConsumer(
        bootstrap_servers=stack.bootstrap_servers,
        isolation_level="read_committed",
        enable_auto_commit=False,
    )
    try:
        tp = TopicPartition(topic, 0)
        reader.assign([tp])
        reader.seek_to_beginning(tp)
        return sum(len(r) for r in reader.poll(timeout_ms=settle_ms, max_records=10_000).values())
    finally:
        reader.close()


def append_events(dsn: str, aggregate_type: str, count: int, first: int = 0) -> None:
    with psycopg.connect(dsn) as conn, conn.transaction():
        for i in range(first, first + count):
            Outbox().append(
                conn,
                NewEvent(
                    aggregate_type=aggregate_type,
                    aggregate_id=f"a-{i}",
                    event_type="Held",
                    aggregate_version=1,
                    payload={"i": i},
                ),
            )


def slot_reading(stack: Endpoints, connector: str) -> SlotStatus:
    """The connector's slot as the exporter reads it (spec_file names it after it)."""
    (slot,) = [
        s for s in read_state(Sources(dsn=stack.dsn)).slots if s.name == connector.replace("-", "_")
    ]
    return slot


def test_an_abandoned_transaction_on_an_outbox_topic_is_named_and_ended(
    stack: Endpoints,
) -> None:
    topic = one_partition_topic(stack, "held")
    runner = CliRunner()
    with abandoned_transaction(stack, topic, "k") as txn_id:
        send_after_it(stack, topic, 20)
        # Safeguard off: nothing ends it, and no read_committed reader sees a later record.
        assert committed_count(stack, topic, settle_ms=3000) == 0

        # The exporter and top read it too.
        reading = read_state(Sources(kafka=KafkaSettings(stack.bootstrap_servers)))
        (held,) = [t for t in reading.transactions if t.owner == txn_id]
        assert (held.topic, held.partition, held.hanging) == (topic, 0, False)

        doctor = runner.invoke(cli, ["doctor", "--max-transaction-age", "1", "--stuck-after", "0"])
        assert doctor.exit_code == 1, doctor.output
        (line,) = [x for x in doctor.output.splitlines() if txn_id in x]
        assert line.startswith("FAIL  open transaction")
        assert f"holds {topic}-0 open from offset 0" in line

        # Its coordinator still knows it and will time it out: not ours to end unasked.
        untouched = runner.invoke(cli, ["connectors", "heal", "--stuck-after", "1", "--json"])
        assert untouched.exit_code == 0, untouched.output
        assert [a for a in json.loads(untouched.output) if a["target"] == txn_id] == []

        planned = runner.invoke(
            cli, ["connectors", "heal", "--abort-older-than", "1", "--dry-run", "--json"]
        )
        assert [a["action"] for a in json.loads(planned.output) if a["target"] == txn_id] == [
            "fence producer"
        ]
        assert committed_count(stack, topic, settle_ms=1000) == 0  # a dry run did nothing

        healed = runner.invoke(
            cli, ["connectors", "heal", "--abort-older-than", "1", "--stuck-after", "1", "--json"]
        )
        assert healed.exit_code == 0, healed.output
        (action,) = [a for a in json.loads(healed.output) if a["target"] == txn_id]
        assert action["outcome"].startswith("fenced")
        assert committed_count(stack, topic, settle_ms=3000) == 20
        after = runner.invoke(cli, ["doctor", "--max-transaction-age", "1", "--stuck-after", "0"])
        assert txn_id not in after.output


def test_the_abort_marker_frees_the_partition(
    stack: Endpoints,
) -> None:
    """What `heal` does to a hanging transaction, done to an abandoned one: the abort
    marker, with the coordinator epoch the partition last saw, frees the partition."""
    topic = one_partition_topic(stack, "abort")
    kafka = KafkaSettings(stack.bootstrap_servers)
    with abandoned_transaction(stack, topic, "k") as txn_id:
        send_after_it(stack, topic, 10)
        assert committed_count(stack, topic, settle_ms=2000) == 0
        with TransactionAdmin(kafka) as admin:
            (txn,) = admin.open_transactions([topic])
            assert txn.transactional_id == txn_id
            admin.abort(txn)
            assert admin.open_transactions([topic]) == []
        assert committed_count(stack, topic, settle_ms=3000) == 10


def test_a_task_held_by_a_transaction_on_connects_offsets_is_named_and_healed(
    stack: Endpoints, spec_file: Any
) -> None:
    path, name = spec_file()
    runner = CliRunner()
    applied = runner.invoke(cli, ["apply", str(path)])
    assert applied.exit_code == 0, applied.output
    aggregate_type = unique("stall")
    topic = f"{name}.{aggregate_type}"
    append_events(stack.dsn, aggregate_type, 3)
    read_topic(stack, topic, expect=3)

    with abandoned_transaction(stack, connect_offsets_topic(stack), NOBODYS_OFFSET_KEY):
        append_events(stack.dsn, aggregate_type, 5, first=3)
        before = slot_reading(stack, name)
        doctor = runner.invoke(
            cli, ["doctor", str(path), "--stuck-after", "15", "--max-transaction-age", "1"]
        )
        # What the exporter serves stood still meanwhile, with WAL after it.
        after = slot_reading(stack, name)
        assert after.confirmed_flush_lsn == before.confirmed_flush_lsn
        assert after.unconfirmed_bytes > 0
        assert doctor.exit_code == 1, doctor.output
        (stuck,) = [x for x in doctor.output.splitlines() if "connector progress" in x]
        assert stuck.startswith("FAIL") and f"{name}: tasks RUNNING, but slot" in stuck
        assert any(
            x.startswith("FAIL  open transaction") and "connect-offsets-0" in x
            for x in doctor.output.splitlines()
        )
        # Safeguard off: 15 s and more after the writes, the task RUNNING has published none.
        assert len(read_topic(stack, topic, expect=3, settle_ms=2000, committed_only=True)) == 3
        status = runner.invoke(cli, ["connectors", "status", name])
        assert "FAILED" not in status.output

        healed = runner.invoke(
            cli, ["connectors", "heal", "--abort-older-than", "5", "--stuck-after", "30"]
        )
        assert healed.exit_code == 0, healed.output
        assert "fence producer" in healed.output
        assert len(read_topic(stack, topic, expect=8, timeout=60, committed_only=True)) == 8


def metrics(port: int) -> str:
    return requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text


def test_the_supervisor_heals_a_stalled_task_and_counts_it(
    stack: Endpoints, spec_file: Any, tmp_path: Path
) -> None:
    path, name = spec_file()
    applied = CliRunner().invoke(cli, ["apply", str(path)])
    assert applied.exit_code == 0, applied.output
    aggregate_type = unique("sup")
    topic = f"{name}.{aggregate_type}"
    append_events(stack.dsn, aggregate_type, 2)
    read_topic(stack, topic, expect=2)
    port, log = free_port(), tmp_path / "supervisor.log"
    flags = ["--interval", "1", "--abort-older-than", "10", "--metrics-port", str(port)]
    held = connect_offsets_topic(stack)
    with (
        supervisor_running(stack, log, *flags),
        abandoned_transaction(stack, held, NOBODYS_OFFSET_KEY),
    ):
        append_events(stack.dsn, aggregate_type, 4, first=2)
        records = read_topic(stack, topic, expect=6, timeout=90, committed_only=True)
        assert len(records) == 6
        # The task may have published the first of them before it blocked: the
        # transaction is fenced once 10 s old either way.
        fenced = 'cdcbox_heal_actions_total{action="fence producer"} 1.0'
        eventually(
            lambda: fenced in metrics(port).splitlines(),
            timeout=60,
            what="the supervisor's fence counted",
        )
    (line,) = [x for x in log.read_text().splitlines() if "fence producer" in x]
    assert "connect-offsets-0 open" in line
    assert line.endswith("-> fenced: its coordinator aborted the transaction")
