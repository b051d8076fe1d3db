"""The inbox purge floor from the effective retention Kafka reports, dead-letter topics
included. Topics here use a prefix of their own, so the outbox topics' floor (which other
tests purge against) is not changed by them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import psycopg
import pytest
from click.testing import CliRunner
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from cdcbox import wire
from cdcbox.cli.main import cli
from cdcbox.errors import UsageError
from cdcbox.kafka.client import Admin, KafkaSettings, TopicPartition
from cdcbox.kafka.topics import topic_retention
from cdcbox.names import DbNames
from cdcbox.ops.retention import InboxFloor, check_inbox_retention
from cdcbox.postgres.group_binding import GroupBinding
from cdcbox.stack.endpoints import Endpoints
from tests.helpers import migrated_schema, unique

pytestmark = pytest.mark.e2e
DAY_MS = 24 * 3600 * 1000


@pytest.fixture
def create_topics(stack: Endpoints) -> Callable[..., str]:
    """Create topics under a fresh prefix with the given configs; returns the prefix."""

    def create(**configs: dict[str, str]) -> str:
        prefix = unique("retention") + "."
        admin = KafkaAdminClient(bootstrap_servers=stack.bootstrap_servers)
        try:
            admin.create_topics(
                [NewTopic(prefix + name, 1, 1, topic_configs=c) for name, c in configs.items()]
            )
        finally:
            admin.close()
        return prefix

    return create


def test_a_dead_letter_topic_that_keeps_longer_sets_the_floor(
    stack: Endpoints, create_topics: Callable[..., str]
) -> None:
    prefix = create_topics(
        order={"retention.ms": str(DAY_MS)},
        **{"order" + wire.DLQ_SUFFIX: {"retention.ms": str(30 * DAY_MS)}},
    )
    found = topic_retention(KafkaSettings(stack.bootstrap_servers), prefix=prefix)
    assert found.topic == prefix + "order" + wire.DLQ_SUFFIX
    assert found.duration == timedelta(days=30)


@pytest.mark.parametrize(
    "config",
    [{"retention.ms": "-1"}, {"cleanup.policy": "compact"}],
    ids=["infinite", "compacted"],
)
def test_a_topic_that_keeps_events_forever_refuses_every_unforced_purge(
    stack: Endpoints, create_topics: Callable[..., str], config: dict[str, str]
) -> None:
    prefix = create_topics(order={"retention.ms": str(DAY_MS)}, payment=config)
    found = topic_retention(KafkaSettings(stack.bootstrap_servers), prefix=prefix)
    assert found.forever and found.topic == prefix + "payment"
    forever = InboxFloor(found.duration, timedelta(hours=1), timedelta(days=3), found.reason)
    with pytest.raises(UsageError, match="no inbox row is ever safe to purge"):
        check_inbox_retention(timedelta(days=3650), forever, force=False)
    check_inbox_retention(timedelta(days=3650), forever, force=True)


def test_the_broker_default_retention_is_read_for_a_topic_that_sets_none(
    stack: Endpoints, create_topics: Callable[..., str]
) -> None:
    prefix = create_topics(order={})
    found = topic_retention(KafkaSettings(stack.bootstrap_servers), prefix=prefix)
    # The broker default, as the effective config reports it (not only modified keys).
    assert found.reason == f"{prefix}order retention.ms={7 * DAY_MS}"


def test_the_floor_covers_the_topics_the_inboxs_consumers_read_and_their_dead_letters(
    stack: Endpoints, create_topics: Callable[..., str]
) -> None:
    """Audit 33, case 5: a consumer of this inbox reads a topic outside `outbox.event.*`
    (a foreign producer's, or one named explicitly) whose dead-letter topic keeps events
    30 days. The old floor read only `outbox.event.*` (7 days) and let a 15-day purge
    delete inbox rows Kafka could still redeliver."""
    prefix = create_topics(
        billing={"retention.ms": str(DAY_MS)},
        **{"billing" + wire.DLQ_SUFFIX: {"retention.ms": str(30 * DAY_MS)}},
    )
    names = migrated_schema(stack.dsn, DbNames(schema=unique("floor")))
    consumer, group = unique("billing"), unique("billing-group")
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        GroupBinding(names).bind(conn, [consumer], group)
    kafka = KafkaSettings(stack.bootstrap_servers)
    with Admin(kafka) as admin:  # the group has consumed the topic
        admin.alter_group_offsets(group, {TopicPartition(prefix + "billing", 0): 0})
    purge = CliRunner().invoke(
        cli, ["--schema", names.schema, "inbox", "purge", "--older-than", "15d", "--dry-run"]
    )
    assert purge.exit_code == 2, purge.output
    assert "safety floor 33 days, 1:00:00" in purge.output, purge.output
    assert f"{prefix}billing{wire.DLQ_SUFFIX}" in purge.output
