"""Dead letters of producers that are not cdcbox replay with no handler code (audit 33,
case 4): a letter carries the inbox key and the aggregate key its consumer decoded, so a
custom id header, ids that are not UUIDs, an aggregate type read from the topic and a
JSON-quoted key all replay, release their park and apply in order."""

from __future__ import annotations

from collections import Counter
from typing import Any

import psycopg
import pytest

from cdcbox.consumer import Event, Handler, Outcome, WireFormat
from cdcbox.kafka import dlq
from cdcbox.names import DbNames
from cdcbox.testing import Harness
from cdcbox.testing.harness import Record
from tests.helpers import a_record, parked_count, unique

pytestmark = pytest.mark.integration


def letters_of(records: list[Record]) -> list[dlq.DeadLetter]:
    return [
        dlq.DeadLetter(r.partition, r.offset, r.key, r.value, [(k, v or b"") for k, v in r.headers])
        for r in records
    ]


def test_foreign_dead_letters_replay_release_their_park_and_apply_in_order(
    database: str, cdcbox_schema: DbNames, db: psycopg.Connection[Any]
) -> None:
    aggregate = unique("Customer")
    topic = f"outbox.event.{aggregate}"

    class Mover(Handler):
        consumer_name = unique("movers")
        aggregate_types = (aggregate,)
        event_types = frozenset({"Moved"})
        wire_format = WireFormat(event_id="msgId")

        def __init__(self) -> None:
            self.failing = True
            self.applied: list[str] = []

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            if self.failing:
                raise RuntimeError("the handler's bug")
            self.applied.append(event.id_text)

    def moved(n: int) -> Record:
        # A key through JsonConverter ("c-1" quoted), ids that are not UUIDs, no
        # aggregate type header (it is the topic's), no content type.
        return a_record(
            key=b'"c-1"',
            value=b'{"n": %d}' % n,
            headers=[("msgId", f"move-{n}".encode()), ("eventType", b"Moved")],
            topic=topic,
            offset=n,
        )

    handler = Mover()
    with Harness(database, [handler], names=cdcbox_schema) as harness:
        ended = harness.send(moved(1), moved(2))
        assert ended == Counter({Outcome.DEAD_LETTERED: 1, Outcome.PARKED: 1})
        handler.failing = False  # the bug is fixed; the operator replays everything
        letters = letters_of(harness.dead_letters(topic))
        assert [d.event_id for d in letters] == ["move-1", "move-2"]
        before = len(harness.topics.records.get(topic, []))
        with db.transaction():
            replayed = dlq.replay_with(harness.topics, letters, parked_in=db, names=cdcbox_schema)
        assert replayed == 2
        copies = harness.topics.records[topic][before:]
        harness.send(
            *(Record(c.topic, 0, 100 + i, c.key, c.value, c.headers) for i, c in enumerate(copies))
        )
        assert handler.applied == ["move-1", "move-2"]
        assert parked_count(db, cdcbox_schema, handler.consumer_name) == 0
