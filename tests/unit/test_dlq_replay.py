"""Replaying dead letters (audit 26, case 3): one event dead-lettered by two consumers is
two letters, and a replay sends a copy to each; the same letter twice (a publish repeated
after a failed record) is sent once per consumer."""

from __future__ import annotations

import pytest

from cdcbox import wire
from cdcbox.kafka import dlq
from cdcbox.testing.harness import MemoryTopics

pytestmark = pytest.mark.unit


def letter(offset: int, event_id: str, consumer: str) -> dlq.DeadLetter:
    headers = [
        ("id", event_id.encode()),
        ("cdcbox.consumer", consumer.encode()),
        ("cdcbox.original.topic", b"outbox.event.Order"),
    ]
    return dlq.DeadLetter(0, offset, b"o1", b"{}", headers)


def test_a_replay_sends_each_consumers_letter_of_one_event() -> None:
    topics = MemoryTopics()
    letters = [letter(0, "e1", "billing"), letter(1, "e1", "shipping"), letter(2, "e1", "billing")]
    assert dlq.republish(topics, letters) == 2
    sent = topics.records["outbox.event.Order"]
    assert [dict(r.headers)[wire.HEADER_REPLAY_FOR] for r in sent] == [b"billing", b"shipping"]
