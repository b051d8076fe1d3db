"""`cdc-ctl consume` exposes every field of `ConsumerConfig` (and of its retry and breaker
policies) as a flag and an environment variable, and its defaults are the dataclasses'."""

from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from cdcbox.cli.common import Settings
from cdcbox.cli.consume import consume, consumer_config, load_handler
from cdcbox.cli.main import cli
from cdcbox.consumer import ConsumerConfig
from cdcbox.errors import ConfigError
from cdcbox.fault_switches import FaultSwitches
from cdcbox.kafka.security import KafkaSecurity
from cdcbox.limits import EventLimits
from cdcbox.resources import resource_dir

SETTINGS = Settings(dsn="dbname=x", bootstrap_servers="k:9092", connect_url=None, connect_auth=None)
# The root options --dsn, --bootstrap-servers, --max-payload-bytes and --kafka-*
# (tests/unit/test_kafka_security).
FROM_SETTINGS = {"bootstrap_servers", "dsn", "limits.max_payload_bytes"} | {
    f"kafka_security.{f.name}" for f in dataclasses.fields(KafkaSecurity)
}


def leaf_fields(cls: type, prefix: str = "") -> set[str]:
    """Dotted names of the fields, descending into nested policy dataclasses."""
    names: set[str] = set()
    for f in dataclasses.fields(cls):
        default = f.default_factory() if callable(f.default_factory) else f.default
        if dataclasses.is_dataclass(default) and not isinstance(default, type):
            names |= leaf_fields(type(default), f"{prefix}{f.name}.")
        else:
            names.add(prefix + f.name)
    return names


def parsed(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> ConsumerConfig:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    ctx = consume.make_context("consume", ["some.module:Handler"])
    return consumer_config(SETTINGS, "default-group", ctx.params)


def field_value(config: ConsumerConfig, dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def test_defaults_are_the_dataclass_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    config = parsed(monkeypatch, {})
    expected = ConsumerConfig(bootstrap_servers="k:9092", dsn="dbname=x", group_id="default-group")
    for name in leaf_fields(ConsumerConfig) - {"schemas"}:
        assert field_value(config, name) == field_value(expected, name), name


def test_every_field_is_a_flag_and_an_environment_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    catalogue = tmp_path / "avro"
    shutil.copytree(resource_dir("schemas") / "avro", catalogue)
    # field → (environment variable, value to set, what the field then holds)
    cases: dict[str, tuple[str, str, Any]] = {
        "group_id": ("CDCBOX_CONSUMER_GROUP", "g2", "g2"),
        "move_to_group": ("CDCBOX_MOVE_TO_GROUP", "true", True),
        "retry.max_attempts": ("CDCBOX_MAX_ATTEMPTS", "9", 9),
        "retry.initial_delay_s": ("CDCBOX_INITIAL_DELAY", "0.5", 0.5),
        "retry.max_delay_s": ("CDCBOX_MAX_DELAY", "3", 3.0),
        "retry.multiplier": ("CDCBOX_BACKOFF_MULTIPLIER", "3", 3.0),
        "dlq_suffix": ("CDCBOX_DLQ_SUFFIX", ".dead", ".dead"),
        "unhandled": ("CDCBOX_UNHANDLED", "dead-letter", "dead-letter"),
        "gap_policy": ("CDCBOX_GAP_POLICY", "hold", "hold"),
        "park_aggregates": ("CDCBOX_PARK", "false", False),
        "parked_refresh_s": ("CDCBOX_PARKED_REFRESH", "1.5", 1.5),
        "batch_mode": ("CDCBOX_BATCH", "true", True),
        "durable_each_commit": ("CDCBOX_DURABLE_EACH_COMMIT", "true", True),
        "emit_messages": ("CDCBOX_EMIT_MESSAGES", "true", True),
        "breaker.failing_aggregates": ("CDCBOX_BREAKER_AGGREGATES", "7", 7),
        "breaker.window_s": ("CDCBOX_BREAKER_WINDOW", "9", 9.0),
        "breaker.enabled": ("CDCBOX_BREAKER", "false", False),
        "metrics_port": ("CDCBOX_METRICS_PORT", "9100", 9100),
        "metrics_host": ("CDCBOX_METRICS_HOST", "0.0.0.0", "0.0.0.0"),  # noqa: S104
        "schemas": ("CDCBOX_SCHEMAS", str(catalogue), catalogue),
        "auto_offset_reset": ("CDCBOX_AUTO_OFFSET_RESET", "latest", "latest"),
        "fetch_max_wait_ms": ("CDCBOX_FETCH_MAX_WAIT_MS", "10", 10),
        "max_poll_records": ("CDCBOX_MAX_POLL_RECORDS", "50", 50),
        "poll_timeout_ms": ("CDCBOX_POLL_TIMEOUT_MS", "20", 20),
        "client_id": ("CDCBOX_CLIENT_ID", "me", "me"),
        "session_timeout_ms": ("CDCBOX_SESSION_TIMEOUT_MS", "7000", 7000),
        "heartbeat_interval_ms": ("CDCBOX_HEARTBEAT_INTERVAL_MS", "2000", 2000),
        "max_poll_interval_ms": ("CDCBOX_MAX_POLL_INTERVAL_MS", "60000", 60000),
        "create_missing_topics": ("CDCBOX_CREATE_TOPICS", "false", False),
        "metadata_max_age_ms": ("CDCBOX_METADATA_MAX_AGE_MS", "1000", 1000),
    }
    test_only = {f for f in leaf_fields(ConsumerConfig) if f.startswith("fault_switches.")}
    assert set(cases) == leaf_fields(ConsumerConfig) - FROM_SETTINGS - test_only
    for name, (envvar, raw, expected) in cases.items():
        with monkeypatch.context() as m:
            config = parsed(m, {envvar: raw})
        value = field_value(config, name)
        if name == "schemas":
            value = value.events["OrderCreated"].latest.path.parent
        assert value == expected, f"{envvar}={raw} did not set {name}"
    command = cli.commands["consume"]  # as `cdc-ctl consume --help` shows it
    help_text = command.get_help(command.make_context("consume", ["m:H"]))
    for envvar, _, _ in cases.values():
        assert envvar in " ".join(help_text.split()), f"--help does not name {envvar}"


def test_the_fault_suites_switches_come_only_from_their_variable_and_are_not_advertised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with monkeypatch.context() as m:
        assert parsed(m, {}).fault_switches == FaultSwitches()
    with monkeypatch.context() as m:
        switches = parsed(
            m, {"CDCBOX_FAULT_SWITCHES": "no-inbox-dedupe,kill-after-records=5"}
        ).fault_switches
    assert switches == FaultSwitches(no_inbox_dedupe=True, kill_after_records=5)
    with pytest.raises(ConfigError, match="unknown switch 'skip-checks'"):
        FaultSwitches.parse("skip-checks")
    command = cli.commands["consume"]
    assert "FAULT" not in command.get_help(command.make_context("consume", ["m:H"]))


def test_a_handler_module_in_the_current_directory_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = f"handlers_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(
        "from cdcbox.consumer import Handler\n"
        "class H(Handler):\n"
        "    consumer_name = 'here'\n"
        "    aggregate_types = ('order',)\n"
        "    event_types = frozenset({'Created'})\n"
        "    def handle(self, event, conn):\n"
        "        pass\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert load_handler(f"{module}:H").consumer_name == "here"


def test_the_outbox_limits_come_from_the_root_settings() -> None:
    """`cdc-ctl --max-payload-bytes` (CDCBOX_MAX_PAYLOAD_BYTES) sizes the dead letters."""
    ctx = consume.make_context("consume", ["some.module:Handler"])
    raised = dataclasses.replace(SETTINGS, limits=EventLimits(2_000_000))
    assert consumer_config(raised, "g", ctx.params).limits == EventLimits(2_000_000)
