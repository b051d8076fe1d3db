"""Consumer groups' lag in records, on topics that carry transactions.

With Kafka Connect's exactly-once source support, each transaction ends in a commit
marker that takes an offset of its own. A consumer commits the offset after the last
record it applied, so a group that has applied everything stays one offset (the last
marker) behind the end of each partition. End minus committed counts markers; where that
gap is small, the records in it are counted instead, by a `read_committed` reader.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping
from typing import TypeVar

from kafka import TopicPartition

from cdcbox.kafka.client import Consumer

# Gaps up to this many offsets are read and counted; wider ones are reported as offsets
# (markers included: a handful among thousands of records).
COUNTED_GAP = 16
_READ_DEADLINE_S = 3.0
G = TypeVar("G", bound=Hashable)


def records_behind(
    reader: Consumer,
    committed: Mapping[G, Mapping[TopicPartition, int]],
    ends: Mapping[TopicPartition, int],
) -> dict[G, dict[TopicPartition, int]]:
    """Per group and partition: end minus committed offset, or, where that gap is at
    most COUNTED_GAP offsets, the records a read_committed reader finds in it. Each
    partition with such a gap is read once, from the lowest of those offsets, with
    `reader` (its assignment is replaced)."""
    behind = {
        group: {tp: max(0, ends[tp] - offset) for tp, offset in offsets.items() if tp in ends}
        for group, offsets in committed.items()
    }
    starts: dict[TopicPartition, int] = {}
    for group, gaps in behind.items():
        for tp, gap in gaps.items():
            if 0 < gap <= COUNTED_GAP:
                offset = committed[group][tp]
                starts[tp] = min(starts.get(tp, offset), offset)
    if not starts:
        return behind
    offsets = _record_offsets(reader, starts, ends)
    for group, gaps in behind.items():
        for tp in gaps:
            if tp in offsets and 0 < gaps[tp] <= COUNTED_GAP:
                gaps[tp] = sum(1 for o in offsets[tp] if o >= committed[group][tp])
    return behind


def _record_offsets(
    reader: Consumer, starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int]
) -> dict[TopicPartition, list[int]]:
    """The offsets of the records from each start to its end; a partition not read to
    its end in time keeps the offsets it still spans (as if each were a record)."""
    reader.assign(list(starts))
    for tp, offset in starts.items():
        reader.seek(tp, offset)
    found: dict[TopicPartition, list[int]] = {tp: [] for tp in starts}
    pending = set(starts)
    deadline = time.monotonic() + _READ_DEADLINE_S
    while pending and time.monotonic() < deadline:
        for tp, records in reader.poll(timeout_ms=100).items():
            found[tp].extend(r.offset for r in records if r.offset < ends[tp])
        pending = {tp for tp in pending if reader.position(tp) < ends[tp]}
    for tp in pending:
        found[tp].extend(range(reader.position(tp), ends[tp]))
    return found
