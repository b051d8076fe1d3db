"""Small pieces of the library that need no service."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cdcbox.consumer import Handler, RetryPolicy
from cdcbox.consumer.dispatch import dispatch_table
from cdcbox.errors import ConfigError, SchemaError, StackError, UsageError
from cdcbox.ids import uuid7
from cdcbox.limits import EventLimits
from cdcbox.names import DbNames
from cdcbox.ops.retention import InboxFloor, check_inbox_retention, parse_duration
from cdcbox.producer.outbox import NewEvent, event_row
from cdcbox.resources import resource_dir
from cdcbox.stack import runner
from cdcbox.stack.config import StackConfig, StackVersions
from cdcbox.stack.connect_worker import worker_properties
from cdcbox.stack.endpoints import Endpoints


def test_uuid7_is_version_7_and_time_ordered() -> None:
    ids = [uuid7() for _ in range(1000)]
    assert all(i.version == 7 and i.variant == uuid.RFC_4122 for i in ids)
    assert [i.bytes[:6] for i in ids] == sorted(i.bytes[:6] for i in ids)
    assert len(set(ids)) == 1000


def test_db_names_refuse_identifiers_that_need_quoting() -> None:
    with pytest.raises(ConfigError, match="outbox="):
        DbNames(outbox='outbox"; drop table x; --')
    assert DbNames(outbox="orders_outbox").outbox_qualified == "public.orders_outbox"


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (NewEvent("", "a", "T", {}), "aggregate_type is required"),
        (NewEvent("order", "", "T", {}), "aggregate_id is required"),
        (NewEvent("order", "a", "", {}), "event_type is required"),
        (NewEvent("or der", "a", "T", {}), "names the topic"),
        (NewEvent("order", "a", "T", {"when": object()}), "not JSON-serialisable"),
        (NewEvent("order", "a", "T", {"x": float("nan")}), "not JSON-serialisable"),
        (NewEvent("order", "a", "T", {}, aggregate_version=-1), "an integer from 0 to"),
        (NewEvent("order", "a", "T", {}, content_type="application/avro"), "needs bytes"),
        (NewEvent("t" * 201, "a", "T", {}), "names the topic"),
        (NewEvent("order", "k" * 1025, "T", {}), "aggregate_id is over its limit of 1024"),
        (NewEvent("order", "a", "T", {}, trace_id="t" * 513), "trace_id is over its limit"),
        (NewEvent("order", "a", "T", b"x" * 900_001), "over the outbox limit of 900000"),
    ],
)
def test_bad_events_are_refused_with_a_clear_reason(event: NewEvent, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        event_row(event)


def json_string(size: int) -> bytes:
    """A JSON document of exactly `size` bytes."""
    return b'"' + b"x" * (size - 2) + b'"'


def test_the_payload_limit_is_a_setting_and_kafka_limits_follow_it() -> None:
    limits = EventLimits(2_000_000)
    with pytest.raises(SchemaError, match="2000001 bytes, over the outbox limit of 2000000"):
        event_row(NewEvent("order", "a", "T", json_string(2_000_001)), limits=limits)
    assert event_row(NewEvent("order", "a", "T", json_string(2_000_000)), limits=limits).payload
    assert limits.producer_max_request_size >= limits.max_record_bytes > 2_000_000
    assert limits.broker_max_message_bytes > limits.max_record_bytes
    default = EventLimits()  # fits Kafka's own defaults: nothing to configure
    assert default.producer_max_request_size == 1_048_576
    assert default.broker_max_message_bytes == 1_048_588
    with pytest.raises(ConfigError, match="CDCBOX_MAX_PAYLOAD_BYTES"):
        EventLimits(0)


def test_json_payload_is_compact_utf8() -> None:
    row = event_row(NewEvent("order", "a", "T", {"name": "café", "n": [1, 2]}))
    assert row.payload == '{"name":"café","n":[1,2]}'.encode()


def test_retry_policy_backs_off_exponentially_within_bounds() -> None:
    policy = RetryPolicy(initial_delay_s=0.1, max_delay_s=1.0, multiplier=2.0)
    for attempt, ceiling in [(1, 0.1), (2, 0.2), (3, 0.4), (10, 1.0)]:
        delays = [policy.delay(attempt) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert max(delays) - min(delays) > 0  # jittered


def make_handler(name: Any, types: set[str], aggregates: tuple[str, ...] = ("order",)) -> Handler:
    cls = type(
        "H",
        (Handler,),
        {"consumer_name": name, "event_types": frozenset(types), "aggregate_types": aggregates},
    )
    return cls()  # type: ignore[no-any-return]


def test_dispatch_table_maps_event_types_to_their_handlers() -> None:
    a, b, c = make_handler("a", {"X"}), make_handler("b", {"Y", "Z"}), make_handler("c", {"X"})
    # Two handlers of one type: each applies it under its own consumer name.
    assert dispatch_table([a, b, c]) == {"X": (a, c), "Y": (b,), "Z": (b,)}


@pytest.mark.parametrize(
    ("handlers", "message"),
    [
        ([], "at least one handler"),
        ([make_handler(None, {"X"})], "consumer_name must be set"),
        ([make_handler("a", {"X"}), make_handler("a", {"Y"})], "used by two handlers"),
        ([make_handler("a", set())], "event_types is empty"),
        ([make_handler("a", {"X"}, aggregates=())], "neither aggregate_types nor topics"),
    ],
)
def test_dispatch_table_refuses_bad_handler_sets_at_start_up(
    handlers: list[Handler], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        dispatch_table(handlers)


def test_versions_file_pins_every_component() -> None:
    versions = StackVersions.load(resource_dir("infra") / "versions.env")
    assert versions.kafka.startswith("4.")
    assert versions.debezium.startswith("3.") and versions.debezium.endswith(".Final")


def test_versions_file_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "versions.env"
    bad.write_text("KAFKA_VERSION 4.3\n")
    with pytest.raises(ConfigError, match="versions.env:1"):
        StackVersions.load(bad)


def test_endpoints_export_shell_lines_and_round_trip_through_the_environment() -> None:
    endpoints = Endpoints(
        dsn="postgresql://postgres@127.0.0.1:1/db",
        pgpassfile="/x/pgpass",
        bootstrap_servers="127.0.0.1:2",
        connect_url="http://127.0.0.1:3",
        connect_db_host="127.0.0.1",
        connect_db_port="1",
        connect_db_name="db",
        connect_db_secrets="/x/d.properties",
        debezium_password_file="/x/d.properties",
    )
    exports = endpoints.exports()
    assert "export CDCBOX_DSN=postgresql://postgres@127.0.0.1:1/db\n" in exports
    assert "password" not in exports.replace("PASSWORD_FILE", "")
    env = dict(line.removeprefix("export ").split("=", 1) for line in exports.splitlines())
    assert Endpoints.from_env(env) == endpoints
    with pytest.raises(ConfigError, match="CDCBOX_CONNECT_URL"):
        Endpoints.from_env({k: v for k, v in env.items() if k != "CDCBOX_CONNECT_URL"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7d", timedelta(days=7)),
        ("12h", timedelta(hours=12)),
        ("90m", timedelta(minutes=90)),
        ("1w2d", timedelta(days=9)),
        ("0s", timedelta(0)),
    ],
)
def test_durations_parse(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "7", "7 days", "d7", "1x"])
def test_bad_durations_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="not a duration"):
        parse_duration(text)


def test_inbox_floor_is_the_seeds_sum_and_refuses_shorter_retention() -> None:
    floor = InboxFloor(timedelta(days=7), timedelta(hours=1), timedelta(days=3))
    assert floor.total == timedelta(days=10, hours=1)
    with pytest.raises(UsageError, match="safety floor"):
        check_inbox_retention(timedelta(days=10), floor, force=False)
    check_inbox_retention(timedelta(days=10), floor, force=True)
    check_inbox_retention(timedelta(days=11), floor, force=False)


def test_compose_connect_worker_matches_the_native_one() -> None:
    path = resource_dir("infra") / "connect-distributed.properties"
    shipped = dict(
        line.split("=", 1)
        for line in path.read_text().splitlines()
        if line and not line.startswith("#")
    )
    expected = worker_properties("kafka:19092", "0.0.0.0", 8083, "/opt/plugins")  # noqa: S104
    expected["rest.advertised.host.name"] = "connect"
    assert shipped == expected


def test_the_cluster_shape_is_refused_where_compose_cannot_give_it(tmp_path: Path) -> None:
    config = StackConfig(
        state_dir=tmp_path / "stack",
        cache_dir=tmp_path / "cache",
        infra_dir=resource_dir("infra"),
        brokers=3,
        connect_workers=2,
    )
    with pytest.raises(StackError, match="native only"):
        runner.up(config, "compose")
    assert not config.state_dir.exists()  # refused before anything was written
    with pytest.raises(ConfigError, match="--brokers must be 1 or 3"):
        StackConfig(state_dir=tmp_path, cache_dir=tmp_path, infra_dir=tmp_path, brokers=2)


def test_names_built_from_the_configured_ones_must_fit_postgresql() -> None:
    """Audit 26: the polling relay's NOTIFY channel is `{schema}_{outbox}`; over 63
    characters pg_notify refuses it, and every outbox INSERT would fail."""
    DbNames(schema="s" * 30, outbox="o" * 32)  # 63: fits
    with pytest.raises(ConfigError, match="NOTIFY channel"):
        DbNames(schema="s" * 31, outbox="o" * 32)
    with pytest.raises(ConfigError, match="outbox index"):
        DbNames(schema="s", outbox="o" * 52)
