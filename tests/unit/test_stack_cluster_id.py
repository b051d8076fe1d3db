"""A new stack's KRaft cluster id must be one `kafka-storage format -t ID` accepts."""

from __future__ import annotations

import uuid

import pytest

from cdcbox.stack import kafka


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xf8 as the first byte encodes to "-" in URL-safe base64: kafka-storage's argparse
    # then reads the id as an option ("argument --cluster-id/-t: expected one argument"),
    # and `stack up` failed on one fresh state dir in 64. Kafka's own Uuid.randomUuid()
    # draws again in that case; so must we.
    drawn = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(int=7)])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(drawn))
    cluster_id = kafka.new_cluster_id()
    assert not cluster_id.startswith("-")
    assert cluster_id == "AAAAAAAAAAAAAAAAAAAABw"
