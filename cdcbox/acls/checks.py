"""`cdc-ctl doctor`'s ACL lines: a planned principal that lacks a grant its role needs,
and one that holds more than its role (one line each, naming the principal, the
resource and the operation)."""

from __future__ import annotations

from collections.abc import Sequence

from cdcbox.acls import cluster
from cdcbox.acls.grants import Grant
from cdcbox.errors import KafkaRequestError
from cdcbox.kafka.base import KafkaSettings
from cdcbox.ops.check import Check

NAME = "kafka ACLs"


def acl_checks(settings: KafkaSettings, planned: Sequence[Grant]) -> list[Check]:
    """The cluster's grants against `planned`, read as `settings`' principal (Describe
    on the cluster, Read on the ledger: the operator may). Brokers without an authorizer
    grant everyone everything: that is one failed line."""
    try:
        found = cluster.current(settings, planned)
    except KafkaRequestError as e:
        if e.kind != "SecurityDisabledError":
            raise
        return [
            Check(
                NAME,
                False,
                "the brokers run no authorizer: every principal may do anything",
                "set authorizer.class.name (KRaft: StandardAuthorizer), then cdc-ctl acls apply",
            )
        ]
    return judged(found, planned)


def judged(found: cluster.Reconciliation, planned: Sequence[Grant]) -> list[Check]:
    """Pure: one failed line per grant missing or held beyond the plan by a planned
    principal (a principal the plan does not name is not judged here)."""
    principals = {g.principal for g in planned}
    lacks = [
        Check(
            f"{NAME}: {g.principal} lacks",
            False,
            g.what,
            "cdc-ctl acls apply (as the bootstrap admin)",
        )
        for g in found.missing
    ]
    extra = [
        Check(
            f"{NAME}: {g.principal} holds more",
            False,
            g.what,
            "cdc-ctl acls apply removes cdcbox's own; remove a hand-made one with "
            "kafka-acls --remove, or plan it",
        )
        for g in (*found.removable, *found.foreign)
        if g.principal in principals
    ]
    if lacks or extra:
        return lacks + extra
    return [Check(NAME, True, f"{len(planned)} grants of {len(principals)} principals, as planned")]
