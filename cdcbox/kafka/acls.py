"""Kafka's ACLs and SCRAM users through the admin API, as plain tuples: the one place
kafka-python's ACL types are used (`cdcbox.acls` plans and diffs with its own)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.admin._users import UserScramCredentialUpsertion
from kafka.errors import NoError

from cdcbox.errors import KafkaRequestError
from cdcbox.kafka.admin import Admin

# (principal, resource type, resource name, pattern type, operation): names as Kafka's
# enums spell them, every ACL here an ALLOW from any host.
AclRow = tuple[str, str, str, str, str]


class AclAdmin(Admin):
    """The admin client's ACL and SCRAM calls; a refusal is a `KafkaRequestError` naming
    kafka-python's error (SecurityDisabledError where the brokers run no authorizer)."""

    def list_allowed(self) -> set[AclRow]:
        """Every ALLOW ACL of the cluster, from any host."""
        everything = ACLFilter(
            principal=None,
            host="*",
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=ResourcePatternFilter(
                ResourceType.ANY, None, ACLResourcePatternType.ANY
            ),
        )
        acls, _ = self._call("describe ACLs", self._client.describe_acls, everything)
        return {_row(acl) for acl in acls}

    def create(self, rows: Iterable[AclRow]) -> None:
        acls = [_acl(row) for row in rows]
        if acls:
            result = self._call("create ACLs", self._client.create_acls, acls)
            if result["failed"]:
                _refused("create ACLs", result["failed"][0])

    def delete(self, rows: Iterable[AclRow]) -> None:
        filters = [_acl(row) for row in rows]
        if filters:
            for _filter, _matched, error in self._call(
                "delete ACLs", self._client.delete_acls, filters
            ):
                if error is not NoError:
                    _refused("delete ACLs", error)

    def upsert_scram_user(self, user: str, password: str, mechanism: str) -> None:
        """Create `user`, or change its password (KRaft keeps SCRAM credentials in its
        metadata). The password goes to the broker salted, and never into an error."""
        answers = self._call(
            "alter SCRAM credentials",
            self._client.alter_user_scram_credentials,
            [UserScramCredentialUpsertion(user, mechanism, password)],
        )
        if answers.get(user):
            raise KafkaRequestError(f"SCRAM user {user}: {answers[user]}", kind="ScramRefused")

    def scram_users(self) -> set[str]:
        described = self._call(
            "describe SCRAM credentials", self._client.describe_user_scram_credentials
        )
        return {user for user, info in described.items() if not info["error"]}


def _refused(what: str, error: Any) -> None:
    kind = error.__name__ if isinstance(error, type) else type(error).__name__
    raise KafkaRequestError(f"{what}: {kind}", kind=kind)


def _row(acl: ACL) -> AclRow:
    pattern = acl.resource_pattern
    return (
        acl.principal,
        ResourceType(pattern.resource_type).name,
        pattern.resource_name,
        ACLResourcePatternType(pattern.pattern_type).name,
        ACLOperation(acl.operation).name,
    )


def _acl(row: AclRow) -> ACL:
    principal, resource, name, pattern, operation = row
    return ACL(
        principal=principal,
        host="*",
        operation=ACLOperation[operation],
        permission_type=ACLPermissionType.ALLOW,
        resource_pattern=ResourcePattern(
            ResourceType[resource], name, ACLResourcePatternType[pattern]
        ),
    )
