"""Topics the library needs: creating the consumer's topics before it subscribes, and the
retention an inbox must outlive."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from cdcbox import wire
from cdcbox.errors import CdcboxError
from cdcbox.kafka.client import Admin, KafkaSettings
from cdcbox.limits import DEAD_LETTER_ALLOWANCE, KAFKA_DEFAULT_MAX_MESSAGE_BYTES, EventLimits

log = logging.getLogger("cdcbox.kafka")

KAFKA_DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000  # log.retention.hours=168


def largest_records(settings: KafkaSettings, topics: Iterable[str]) -> dict[str, int]:
    """The largest record each existing topic of `topics` takes (`max.message.bytes`,
    its own or the broker's)."""
    with Admin(settings) as admin:
        existing = sorted(set(topics) & admin.list_topics())
        configs = admin.topic_configs(existing)
    return {
        topic: int(config.get("max.message.bytes") or KAFKA_DEFAULT_MAX_MESSAGE_BYTES)
        for topic, config in configs.items()
    }


def ensure_dead_letter_topics(
    settings: KafkaSettings, largest: dict[str, int], suffix: str = wire.DLQ_SUFFIX
) -> list[str]:
    """Create the dead-letter topic of each topic in `largest` that has none, with its
    source's partition count and a `max.message.bytes` that takes the source's largest
    record with a dead letter's headers (a broker-created one would have the broker's
    default, and refuse it). Returns the topics created."""
    wanted = {topic + suffix: topic for topic in largest}
    with Admin(settings) as admin:
        missing = sorted(set(wanted) - admin.list_topics())
        if not missing:
            return []
        partitions = admin.partition_counts([wanted[t] for t in missing])
        admin.create_topics(
            missing,
            configs={
                t: {"max.message.bytes": str(largest[wanted[t]] + DEAD_LETTER_ALLOWANCE)}
                for t in missing
            },
            partitions={t: partitions[wanted[t]] for t in missing if wanted[t] in partitions},
        )
    return missing


def prepare_dead_letters(
    settings: KafkaSettings,
    topics: Iterable[str],
    limits: EventLimits,
    suffix: str = wire.DLQ_SUFFIX,
    create: bool = True,
) -> int:
    """The `max.request.size` a dead-letter producer of `topics` needs: the largest
    record one of them takes (or the outbox's limit), with a letter's headers. With
    `create`, missing dead-letter topics are created to take it too. Where the topics'
    configs cannot be read (a principal not allowed to), the outbox's limit, and a
    warning."""
    try:
        largest = largest_records(settings, topics)
        if create:
            ensure_dead_letter_topics(settings, largest, suffix)
    except CdcboxError as e:
        log.warning(
            "cannot read the topics' record size limits (%s); assuming %d",
            e,
            limits.max_record_bytes,
        )
        largest = {}
    return limits.dead_letter_max_request_size(max(largest.values(), default=0))


def ensure_topics(settings: KafkaSettings, topics: Iterable[str]) -> list[str]:
    """Create the topics that do not exist yet (broker-default partitions); return them.

    A consumer may start before the relay published anything; subscribing to a topic that
    does not exist yet leaves it blind until its next metadata refresh.
    """
    wanted = set(topics)
    with Admin(settings) as admin:
        missing = sorted(wanted - admin.list_topics())
        if missing:
            admin.create_topics(missing)
    return missing


@dataclass(frozen=True)
class TopicRetention:
    """The longest time the outbox and dead-letter topics keep an event, and the topic
    that keeps it longest; `duration` None means forever (retention.ms=-1, or compacted)."""

    topic: str | None
    duration: timedelta | None
    reason: str

    @property
    def forever(self) -> bool:
        return self.duration is None


def _retention_of(topic: str, config: dict[str, str]) -> TopicRetention:
    if "compact" in config.get("cleanup.policy", "delete"):
        return TopicRetention(topic, None, f"{topic} is compacted (cleanup.policy=compact)")
    if "retention.ms" not in config:
        default = timedelta(milliseconds=KAFKA_DEFAULT_RETENTION_MS)
        return TopicRetention(topic, default, f"{topic}: retention.ms not reported, 7d assumed")
    ms = int(config["retention.ms"])
    if ms < 0:
        return TopicRetention(topic, None, f"{topic} keeps records forever (retention.ms=-1)")
    return TopicRetention(topic, timedelta(milliseconds=ms), f"{topic} retention.ms={ms}")


def topic_retention(
    settings: KafkaSettings, prefix: str = "outbox.event.", also: Iterable[str] = ()
) -> TopicRetention:
    """What an inbox must outlive: the longest effective retention (topic settings and
    broker defaults) of the topics starting with `prefix` and of the topics `also` names,
    each with its dead-letter topic, from which a replay republishes. Kafka's default (7
    days) when no such topic exists yet."""
    extra = {t for topic in also for t in (topic, topic + wire.DLQ_SUFFIX)}
    with Admin(settings) as admin:
        topics = sorted(t for t in admin.list_topics() if t.startswith(prefix) or t in extra)
        configs = admin.topic_configs(topics)
    found = [_retention_of(topic, config) for topic, config in sorted(configs.items())]
    forever = [r for r in found if r.forever]
    if forever:
        return forever[0]
    if not found:
        default = timedelta(milliseconds=KAFKA_DEFAULT_RETENTION_MS)
        return TopicRetention(None, default, "no outbox topics yet: Kafka's default")
    return max(found, key=lambda r: r.duration or timedelta.max)


def colliding_topics(topics: Iterable[str]) -> list[list[str]]:
    """Groups of topic names Kafka takes for one (it reads '.' and '_' alike when it checks
    a new name), each sorted; a topic of a group can exist only if the others do not."""
    groups: dict[str, list[str]] = {}
    for topic in topics:
        groups.setdefault(topic.replace(".", "_"), []).append(topic)
    return sorted(sorted(group) for group in groups.values() if len(group) > 1)
