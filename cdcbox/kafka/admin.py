"""Kafka's admin client, with the answers reduced to plain Python data (built and
translated as every client of `cdcbox.kafka.client` is)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import kafka
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.structs import OffsetAndMetadata, TopicPartition

from cdcbox.kafka.base import Client, KafkaSettings


class Admin(Client):
    """KafkaAdminClient, with the answers reduced to plain Python data."""

    def __init__(self, settings: KafkaSettings, **options: Any) -> None:
        super().__init__(
            settings, lambda: kafka.KafkaAdminClient(**settings.options(), **options), "admin"
        )

    def list_topics(self) -> set[str]:
        return set(self._call("list topics", self._client.list_topics))

    def create_topics(
        self,
        topics: Iterable[str],
        configs: Mapping[str, dict[str, str]] | None = None,
        partitions: Mapping[str, int] | None = None,
    ) -> None:
        """Create `topics` (an existing one is left as it is); broker defaults where
        `configs` and `partitions` say nothing."""
        configs, partitions = configs or {}, partitions or {}
        self._call(
            "create topics",
            self._client.create_topics,
            [
                NewTopic(t, partitions.get(t, -1), -1, topic_configs=configs.get(t, {}))
                for t in topics
            ],
            raise_errors=False,
            wait_for_metadata=True,
        )

    def partition_counts(self, topics: list[str]) -> dict[str, int]:
        if not topics:
            return {}
        described = self._call("describe topics", self._client.describe_topics, topics)
        return {d["name"]: len(d["partitions"]) for d in described}

    def topic_configs(self, topics: list[str]) -> dict[str, dict[str, str]]:
        """Each topic's effective configuration (explicit settings and broker defaults)."""
        if not topics:
            return {}
        result = self._call(
            "describe configs",
            self._client.describe_configs,
            [ConfigResource(ConfigResourceType.TOPIC, t) for t in topics],
            config_filter="all",  # kafka-python's default returns only modified keys
        )
        return {
            topic: {
                key: str(entry["value"] if isinstance(entry, dict) else entry)
                for key, entry in configs.items()
            }
            for topic, configs in result.get("topic", {}).items()
        }

    def controller_id(self) -> int:
        return int(self._call("describe cluster", self._client.describe_cluster)["controller_id"])

    def list_groups(self) -> list[tuple[str, str]]:
        groups = self._call("list groups", self._client.list_groups)
        return [(g["group_id"], str(g.get("group_state", "?"))) for g in groups]

    def group_offsets(self, group: str) -> dict[TopicPartition, int]:
        offsets = self._call("group offsets", self._client.list_group_offsets, {group: None})
        return {tp: om.offset for tp, om in offsets.get(group, {}).items() if om.offset >= 0}

    def group_members(self, group: str) -> list[str]:
        description = self._call("describe group", self._client.describe_groups, [group])
        members = description.get(group, {}).get("members", []) or []
        return [str(m.get("member_id")) for m in members]

    def alter_group_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        self._call(
            "alter group offsets",
            self._client.alter_group_offsets,
            group,
            {tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()},
        )
