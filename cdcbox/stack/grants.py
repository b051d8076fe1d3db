"""A --secure stack's ACLs at start: its brokers run Kafka's StandardAuthorizer, so
nobody but the super users (the brokers' `admin`) may do anything they were not granted.
`stack up` grants each of its roles (`cdcbox.acls.plan`) what it needs for the shipped
connector specs, whatever connectors they turn out to be: Connect any connector of its
worker group publishing any outbox topic. `cdc-ctl acls apply` with a deployment's
specs and handlers narrows that, and adds each service's own principal; a later start
changes nothing."""

from __future__ import annotations

from cdcbox.acls import cluster
from cdcbox.acls.plan import ConnectRole, Fleet, plan
from cdcbox.kafka.base import KafkaSettings
from cdcbox.stack.config import StackConfig
from cdcbox.stack.connect_worker import GROUP
from cdcbox.stack.tls import ADMIN, StackTls

# Connect's roles before any connector spec is known: every connector of its group.
STACK_FLEET = Fleet(
    connect=ConnectRole(
        group=GROUP,
        storage_topics=(f"{GROUP}-configs", f"{GROUP}-offsets", f"{GROUP}-status"),
        connectors=None,
        publishes=None,
    )
)


def admin_settings(config: StackConfig) -> KafkaSettings:
    """The bootstrap admin, the one principal that may change ACLs."""
    return KafkaSettings(
        config.bootstrap_servers, security=StackTls.of(config.state_dir).client(ADMIN)
    )


def grant_roles(config: StackConfig) -> cluster.Reconciliation | None:
    """Grant the stack's roles at its first start (None afterwards: the ACLs live in the
    cluster's metadata, and `acls apply` may have narrowed or widened them since, which a
    restart must neither undo nor take back)."""
    settings = admin_settings(config)
    if cluster.read_ledger(settings):
        return None
    return cluster.apply(settings, plan(STACK_FLEET), remove=False)
