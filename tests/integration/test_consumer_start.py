"""What a consumer refuses at start-up, before it reads a record: checked against real
PostgreSQL, with no Kafka behind the configured address (it is never reached)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from cdcbox.consumer import Consumer, ConsumerConfig, Event, Handler
from cdcbox.errors import ConfigError
from cdcbox.postgres.group_binding import GroupBinding
from tests.helpers import unique

pytestmark = pytest.mark.integration


def _handler(name: str) -> Handler:
    class Named(Handler):
        consumer_name = name
        aggregate_types = ("order",)
        event_types = frozenset({"Created"})

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            raise AssertionError("never reached")

    return Named()


def _consumer(database: str, name: str, group: str) -> Consumer:
    config = ConsumerConfig(bootstrap_servers="127.0.0.1:1", dsn=database, group_id=group)
    return Consumer([_handler(name)], config)


def test_a_consumer_name_is_refused_in_a_second_group_unless_moved(database: str) -> None:
    name = unique("c")
    with psycopg.connect(database) as conn:
        GroupBinding().bind(conn, [name], "group-a")  # what a first run in group-a records

    second = _consumer(database, name, "group-b")
    with pytest.raises(ConfigError, match=f"consumer name '{name}' runs in group 'group-a'"):
        second.run(max_records=0)
    second.close()

    with psycopg.connect(database) as conn:
        GroupBinding().bind(conn, [name], "group-b", move=True)
        row = conn.execute(
            "SELECT group_id FROM consumer_group_binding WHERE consumer_name = %s", (name,)
        ).fetchone()
    assert row == ("group-b",)
