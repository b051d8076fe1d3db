"""One Strimzi (`kafka.strimzi.io/v1`, Strimzi 1.2) or Kubernetes resource each, as a plain
mapping ready for YAML. Nothing here reads the environment or a file."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from cdcbox.acls.grants import Grant

API = "kafka.strimzi.io/v1"
CLUSTER_LABEL = "strimzi.io/cluster"
# Strimzi's own config provider for Kubernetes Secrets, built into its Connect images.
SECRETS_PROVIDER = "io.strimzi.kafka.KubernetesSecretConfigProvider"
# A `${file:PATH:KEY}` placeholder of a rendered spec (Connect's FileConfigProvider).
FILE_PLACEHOLDER = re.compile(r"\$\{file:([^:}]+):([^}]+)\}")

Resource = dict[str, Any]


def secret_name(path: str) -> str:
    """The Kubernetes Secret a `${file:PATH:…}` placeholder's file becomes: its stem,
    lower-case, after `cdcbox-` (`…/debezium.properties` → `cdcbox-debezium`)."""
    stem = path.rsplit("/", 1)[-1].split(".", 1)[0]
    return "cdcbox-" + re.sub(r"[^a-z0-9-]+", "-", stem.lower()).strip("-")


def with_secrets(config: Mapping[str, str], namespace: str) -> dict[str, str]:
    """`config` with each `${file:PATH:KEY}` turned into Strimzi's `${secrets:NS/NAME:KEY}`:
    the secret stays in a Secret, never inline."""
    return {
        key: FILE_PLACEHOLDER.sub(
            lambda m: f"${{secrets:{namespace}/{secret_name(m.group(1))}:{m.group(2)}}}", value
        )
        for key, value in config.items()
    }


def secrets_of(config: Mapping[str, str]) -> dict[str, set[str]]:
    """The Secrets `config`'s placeholders name, with the keys read from each."""
    found: dict[str, set[str]] = {}
    for value in config.values():
        for path, key in FILE_PLACEHOLDER.findall(value):
            found.setdefault(secret_name(path), set()).add(key)
    return found


def kafka_connector(name: str, connect: str, config: Mapping[str, str]) -> Resource:
    """A `KafkaConnector`: `config` as `apply` sends it, its class and tasks.max lifted
    into the fields Strimzi names them by."""
    rest = {k: v for k, v in config.items() if k not in ("connector.class", "tasks.max", "name")}
    return {
        "apiVersion": API,
        "kind": "KafkaConnector",
        "metadata": {"name": name, "labels": {CLUSTER_LABEL: connect}},
        "spec": {
            "class": config["connector.class"],
            "tasksMax": int(config.get("tasks.max", "1")),
            "config": rest,
        },
    }


def kafka_connect(
    name: str,
    kafka_cluster: str,
    worker: Mapping[str, str],
    debezium_version: str,
    image: str,
    metrics_config_map: str,
) -> Resource:
    """A `KafkaConnect` of one worker group: `worker` (the settings cdcbox's native worker
    runs with, less what Strimzi sets itself), Strimzi's Secret config provider, SCRAM as
    the `connect` user over TLS, connectors as resources only, and the pinned Debezium
    PostgreSQL connector built into `image`."""
    group = worker["group.id"]
    return {
        "apiVersion": API,
        "kind": "KafkaConnect",
        "metadata": {
            "name": name,
            # Connectors are KafkaConnector resources: one made over REST is removed again.
            "annotations": {"strimzi.io/use-connector-resources": "true"},
        },
        "spec": {
            "replicas": 1,
            "bootstrapServers": f"{kafka_cluster}-kafka-bootstrap:9093",
            "groupId": group,
            "configStorageTopic": worker["config.storage.topic"],
            "offsetStorageTopic": worker["offset.storage.topic"],
            "statusStorageTopic": worker["status.storage.topic"],
            "tls": {
                "trustedCertificates": [
                    {"secretName": f"{kafka_cluster}-cluster-ca-cert", "pattern": "*.crt"}
                ]
            },
            "authentication": {
                "type": "scram-sha-512",
                "username": "connect",
                "passwordSecret": {"secretName": "connect", "password": "password"},
            },
            "config": {
                **{k: v for k, v in worker.items() if k in WORKER_KEYS},
                "config.storage.replication.factor": -1,
                "offset.storage.replication.factor": -1,
                "status.storage.replication.factor": -1,
                "config.providers": "secrets",
                "config.providers.secrets.class": SECRETS_PROVIDER,
            },
            "metricsConfig": {
                "type": "jmxPrometheusExporter",
                "valueFrom": {
                    "configMapKeyRef": {"name": metrics_config_map, "key": "jmx-exporter.yml"}
                },
            },
            "build": {
                "output": {"type": "docker", "image": image},
                "plugins": [
                    {
                        "name": "debezium-postgres",
                        "artifacts": [
                            {
                                "type": "maven",
                                "group": "io.debezium",
                                "artifact": "debezium-connector-postgres",
                                "version": debezium_version,
                            }
                        ],
                    }
                ],
            },
        },
    }


# The worker settings of `cdcbox.stack.connect_worker.worker_properties` a KafkaConnect's
# `config` may carry (Strimzi sets the listeners, plugin path, storage topics, group and
# security itself, and refuses them there).
WORKER_KEYS = (
    "key.converter",
    "value.converter",
    "offset.flush.interval.ms",
    "offset.storage.partitions",
    "status.storage.partitions",
    "connector.client.config.override.policy",
    "exactly.once.source.support",
    "task.shutdown.graceful.timeout.ms",
    "scheduled.rebalance.max.delay.ms",
    "producer.max.request.size",
)


def kafka_topic(
    name: str, kafka_cluster: str, config: Mapping[str, str], partitions: int | None = None
) -> Resource:
    """A `KafkaTopic` (the broker's default partitions and replicas unless given)."""
    spec: dict[str, Any] = {"topicName": name, "config": dict(config)}
    if partitions is not None:
        spec["partitions"] = partitions
    return {
        "apiVersion": API,
        "kind": "KafkaTopic",
        "metadata": {"name": resource_name(name), "labels": {CLUSTER_LABEL: kafka_cluster}},
        "spec": spec,
    }


def kafka_user(user: str, kafka_cluster: str, grants: Sequence[Grant]) -> Resource:
    """A `KafkaUser` with a SCRAM-SHA-512 password (the User Operator puts it in a Secret
    named after the user) and `grants` as its ACLs, one rule per resource."""
    rules: dict[tuple[str, str, str], list[str]] = {}
    for grant in grants:
        key = (grant.resource, grant.name, grant.pattern)
        rules.setdefault(key, []).append(OPERATIONS[grant.operation])
    return {
        "apiVersion": API,
        "kind": "KafkaUser",
        "metadata": {"name": user, "labels": {CLUSTER_LABEL: kafka_cluster}},
        "spec": {
            "authentication": {"type": "scram-sha-512"},
            "authorization": {
                "type": "simple",
                "acls": [
                    {
                        "resource": _acl_resource(resource, name, pattern),
                        "operations": sorted(operations),
                        "host": "*",
                    }
                    for (resource, name, pattern), operations in sorted(rules.items())
                ],
            },
        },
    }


def _acl_resource(resource: str, name: str, pattern: str) -> dict[str, str]:
    if resource == "CLUSTER":
        return {"type": "cluster"}
    return {
        "type": RESOURCE_TYPES[resource],
        "name": name,
        "patternType": "prefix" if pattern == "PREFIXED" else "literal",
    }


OPERATIONS = {
    "READ": "Read",
    "WRITE": "Write",
    "CREATE": "Create",
    "DELETE": "Delete",
    "ALTER": "Alter",
    "DESCRIBE": "Describe",
    "DESCRIBE_CONFIGS": "DescribeConfigs",
    "ALTER_CONFIGS": "AlterConfigs",
    "CLUSTER_ACTION": "ClusterAction",
    "IDEMPOTENT_WRITE": "IdempotentWrite",
}
RESOURCE_TYPES = {
    "TOPIC": "topic",
    "GROUP": "group",
    "CLUSTER": "cluster",
    "TRANSACTIONAL_ID": "transactionalId",
}


def config_map(name: str, data: Mapping[str, str]) -> Resource:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": dict(data)}


def secret_reader(connect: str, namespace: str, secrets: Sequence[str]) -> list[Resource]:
    """The Role and RoleBinding that let the Connect pods' service account
    (`<connect>-connect`) read `secrets` through Strimzi's config provider."""
    role = f"{connect}-secrets"
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": role, "namespace": namespace},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["secrets"],
                    "resourceNames": sorted(secrets),
                    "verbs": ["get"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": role, "namespace": namespace},
            "subjects": [
                {"kind": "ServiceAccount", "name": f"{connect}-connect", "namespace": namespace}
            ],
            "roleRef": {"kind": "Role", "name": role, "apiGroup": "rbac.authorization.k8s.io"},
        },
    ]


def resource_name(name: str) -> str:
    """A Kubernetes object name for a Kafka name (lower-case, `.` and `_` as `-`)."""
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:253]
