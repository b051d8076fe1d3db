"""One Kafka ACL as cdcbox plans it: always ALLOW, from any host.

A `Grant` names its resource as Kafka's Admin API does (a resource type, a name and a
pattern: LITERAL, or PREFIXED for every name starting with it). Deny rules are never
planned: a principal holds nothing it was not granted, so there is nothing to deny."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Resource = Literal["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"]
Pattern = Literal["LITERAL", "PREFIXED"]
Operation = Literal[
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "CLUSTER_ACTION",
    "IDEMPOTENT_WRITE",
]
# The one name Kafka gives the cluster resource.
CLUSTER = "kafka-cluster"


@dataclass(frozen=True, order=True)
class Grant:
    """`principal` may do `operation` on the resource; ordered for stable output."""

    principal: str
    resource: Resource
    name: str
    operation: Operation
    pattern: Pattern = "LITERAL"

    def __post_init__(self) -> None:
        if not self.principal.startswith("User:"):
            raise ValueError(f"principal {self.principal!r} must be User:<name>")

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "permission": "ALLOW", "host": "*"}

    @property
    def what(self) -> str:
        """The operation and the resource (a prefix ends in `*`)."""
        prefixed = "*" if self.pattern == "PREFIXED" else ""
        return f"{self.operation} {self.resource}:{self.name}{prefixed}"

    def __str__(self) -> str:
        return f"{self.principal} {self.what}"


def user(name: str) -> str:
    """The principal a SCRAM user logs in as."""
    return f"User:{name}"


def each(
    principal: str,
    resource: Resource,
    names: tuple[str, ...] | list[str] | set[str],
    operations: tuple[Operation, ...],
    pattern: Pattern = "LITERAL",
) -> list[Grant]:
    """Every operation on every one of `names`."""
    return [Grant(principal, resource, n, op, pattern) for n in names for op in operations]
