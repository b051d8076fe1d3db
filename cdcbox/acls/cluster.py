"""Make a cluster hold the planned grants: add what is missing, remove what cdcbox once
granted and the plan no longer holds, and never remove a grant cdcbox did not create.

What cdcbox created is recorded in a compacted ledger topic (`LEDGER`), one record per
grant it added (a tombstone once it removed it), written by the admin that applies:
so a grant an operator made by hand, even to a planned principal, is reported
(`Reconciliation.foreign`) and left in place."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import cast

from cdcbox.acls.grants import Grant, Operation, Pattern, Resource
from cdcbox.kafka.acls import AclAdmin, AclRow
from cdcbox.kafka.base import KafkaSettings
from cdcbox.kafka.client import Admin, Consumer, Producer, TopicPartition

LEDGER = "_cdcbox-acls"


@dataclass(frozen=True)
class Reconciliation:
    """How a cluster's grants stand against a plan."""

    missing: list[Grant] = field(default_factory=list)  # planned, not held
    removable: list[Grant] = field(default_factory=list)  # cdcbox's, no longer planned
    foreign: list[Grant] = field(default_factory=list)  # unplanned, not cdcbox's: kept

    @property
    def matches(self) -> bool:
        return not (self.missing or self.removable)


def reconcile(
    planned: Iterable[Grant], held: Iterable[Grant], created: Iterable[Grant]
) -> Reconciliation:
    """Pure: `held` against `planned`. An unplanned grant counts if cdcbox `created` it
    or it belongs to a planned principal (another principal's grants are not ours)."""
    planned, held, created = set(planned), set(held), set(created)
    principals = {g.principal for g in planned}
    extra = {g for g in held - planned if g in created or g.principal in principals}
    return Reconciliation(
        missing=sorted(planned - held),
        removable=sorted(extra & created),
        foreign=sorted(extra - created),
    )


def current(settings: KafkaSettings, planned: Sequence[Grant]) -> Reconciliation:
    """The cluster's grants against `planned`, read as `settings`' principal (one that
    may describe ACLs: the bootstrap admin)."""
    with AclAdmin(settings) as admin:
        held = {grant_of(row) for row in admin.list_allowed()}
    return reconcile(planned, held, read_ledger(settings))


def apply(settings: KafkaSettings, planned: Sequence[Grant], remove: bool = True) -> Reconciliation:
    """Add the missing grants and (unless not `remove`) remove the removable ones,
    recording both in the ledger before the cluster changes (a grant recorded but never
    made is only retried). Idempotent: a second call finds nothing to do. Returns what it
    found. Without `remove` a partial plan adds what it holds and takes nothing back (the
    stack's own roles at every start: a deployment's `acls apply` granted the rest)."""
    found = current(settings, planned)
    removing = found.removable if remove else []
    if not (found.missing or removing):
        return found
    with AclAdmin(settings) as admin:
        admin.create_topics([LEDGER], configs={LEDGER: {"cleanup.policy": "compact"}})
        _record(settings, added=found.missing, removed=[])
        admin.create([row_of(g) for g in found.missing])
        admin.delete([row_of(g) for g in removing])
    _record(settings, added=[], removed=removing)
    return found


def read_ledger(settings: KafkaSettings) -> set[Grant]:
    """The grants cdcbox created and has not removed (none before the first apply)."""
    with Admin(settings) as admin:
        # Asked first: a consumer's metadata request for a missing topic may create it
        # (with the broker's defaults, not compacted).
        if LEDGER not in admin.list_topics():
            return set()
    consumer = Consumer(settings, group_id=None)
    try:
        partition = TopicPartition(LEDGER, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        end = consumer.end_offsets([partition])[partition]
        created: dict[str, bool] = {}
        while consumer.position(partition) < end:
            for records in consumer.poll(timeout_ms=1000).values():
                for record in records:
                    created[record.key.decode()] = record.value is not None
        return {grant_of(tuple(json.loads(key))) for key, alive in created.items() if alive}
    finally:
        consumer.close()


def _record(settings: KafkaSettings, added: Sequence[Grant], removed: Sequence[Grant]) -> None:
    if not (added or removed):
        return
    producer = Producer(settings)
    try:
        sent = [
            producer.send(LEDGER, key=json.dumps(row_of(grant)).encode(), value=value, headers=[])
            for grant, value in [*((g, b"created") for g in added), *((g, None) for g in removed)]
        ]
        producer.flush(timeout=30)
        for future in sent:
            future.get(timeout=30)
    finally:
        producer.close()


def row_of(grant: Grant) -> AclRow:
    return (grant.principal, grant.resource, grant.name, grant.pattern, grant.operation)


def grant_of(row: Sequence[str]) -> Grant:
    principal, resource, name, pattern, operation = row
    return Grant(
        principal,
        cast(Resource, resource),
        name,
        cast(Operation, operation),
        cast(Pattern, pattern),
    )
