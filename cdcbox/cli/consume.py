"""`cdc-ctl consume module:Class ...`: run handlers until SIGTERM/SIGINT.

Every field of `ConsumerConfig` (and of its retry and breaker policies) is a flag here
and an environment variable `CDCBOX_<FLAG>`; the defaults are the dataclasses' own.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import click

from cdcbox.cli.common import (
    Settings,
    logging_options,
    settings,
    stop_on_signals,
)
from cdcbox.cli.schemas import load_catalogue
from cdcbox.consumer import Consumer, ConsumerConfig, RetryPolicy
from cdcbox.consumer.breaker import BreakerPolicy
from cdcbox.consumer.config import GapPolicy, Unhandled
from cdcbox.consumer.dispatch import dispatch_table
from cdcbox.consumer.handler import BaseHandler
from cdcbox.errors import ConfigError
from cdcbox.fault_switches import ENV as FAULT_SWITCHES_ENV
from cdcbox.fault_switches import FaultSwitches
from cdcbox.telemetry.log_format import LogFormat
from cdcbox.telemetry.log_format import configure as configure_log

C, R, B = ConsumerConfig, RetryPolicy, BreakerPolicy


def load_handler(target: str) -> BaseHandler:
    """Instantiate `package.module:ClassName`, a `Handler` or `AsyncHandler`. Modules
    are found in the current directory too, as `python -m` would."""
    module_name, sep, class_name = target.partition(":")
    if not sep:
        raise ConfigError(
            f"{target!r}: expected module:Class, e.g. consumer.inventory:InventoryHandler"
        )
    if os.getcwd() not in sys.path:
        # A console script's sys.path starts at its own bin directory, not here.
        sys.path.insert(0, os.getcwd())
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"{target!r}: cannot import: {e}") from e
    if not (isinstance(cls, type) and issubclass(cls, BaseHandler)):
        raise ConfigError(f"{target!r} is not a cdcbox Handler or AsyncHandler subclass")
    return cls()


def _option(
    flag: str, default: Any, help_text: str, envvar: str | None = None, **kwargs: Any
) -> Callable[[Any], Any]:
    """A flag `--x-y` with environment variable CDCBOX_X_Y and the dataclass default."""
    envvar = envvar or "CDCBOX_" + flag.split("/")[0].lstrip("-").replace("-", "_").upper()
    if isinstance(default, bool) and "/" not in flag:
        kwargs["is_flag"] = True
    elif default is not None and "type" not in kwargs and not isinstance(default, bool):
        kwargs["type"] = type(default)
    return click.option(flag, default=default, envvar=envvar, help=help_text, **kwargs)


OPTIONS = [
    _option(
        "--group",
        None,
        "Kafka group id [first handler's consumer name].",
        envvar="CDCBOX_CONSUMER_GROUP",
        type=str,
    ),
    _option(
        "--move-to-group",
        C.move_to_group,
        "Rebind the consumer names to --group (they are refused in a second group).",
    ),
    # retries
    _option("--max-attempts", R.max_attempts, "Attempts before a record is dead-lettered."),
    _option("--initial-delay", R.initial_delay_s, "Seconds before the first retry."),
    _option("--max-delay", R.max_delay_s, "Longest wait between retries (seconds)."),
    _option("--backoff-multiplier", R.multiplier, "Growth of the delay per attempt."),
    # what to do with records
    _option(
        "--unhandled",
        C.unhandled,
        "An event type no handler takes: count it, or dead-letter it.",
        type=click.Choice(["skip", "dead-letter"]),
    ),
    _option(
        "--gap-policy",
        C.gap_policy,
        "A version gap (v3 after v1): apply it, or hold it until v2 is applied.",
        type=click.Choice(["apply", "hold"]),
    ),
    _option("--dlq-suffix", C.dlq_suffix, "Dead-letter topic = topic + this."),
    _option(
        "--batch/--per-record",
        C.batch_mode,
        "One transaction per poll batch (savepoint per record).",
    ),
    _option(
        "--durable-each-commit",
        C.durable_each_commit,
        "Every COMMIT waits for its WAL flush (default: one flush before each offset commit).",
    ),
    _option(
        "--emit-messages",
        C.emit_messages,
        "Handlers emit to the outbox without a table (a schema migrated --relay messages).",
    ),
    _option(
        "--park/--no-park",
        C.park_aggregates,
        "Dead-letter an aggregate's later events behind a dead-lettered one.",
    ),
    _option("--parked-refresh", C.parked_refresh_s, "Seconds between reloads of the parked set."),
    # the circuit breaker
    _option(
        "--breaker/--no-breaker",
        B.enabled,
        "Keep retrying instead of dead-lettering while many aggregates fail at once.",
    ),
    _option(
        "--breaker-aggregates",
        B.failing_aggregates,
        "Distinct failing aggregates that open the breaker.",
    ),
    _option("--breaker-window", B.window_s, "Seconds those failures must fall within."),
    # decoding
    _option(
        "--schemas",
        None,
        "Avro event catalogue for decoding Avro payloads [the shipped schemas/avro].",
        type=click.Path(exists=True, path_type=Path),
    ),
    _option(
        "--registry-url",
        None,
        "Schema registry (its Confluent-compatible API) for Avro in the Confluent wire "
        "format: read by id, and written by handlers that emit Avro.",
        type=str,
    ),
    # Kafka
    _option(
        "--auto-offset-reset",
        C.auto_offset_reset,
        "Where a group without committed offsets starts.",
        type=click.Choice(["earliest", "latest"]),
    ),
    _option(
        "--max-poll-records",
        C.max_poll_records,
        "Records per poll batch (the unit of commit and of graceful stop).",
    ),
    _option("--poll-timeout-ms", C.poll_timeout_ms, "Longest wait of one poll."),
    _option("--fetch-max-wait-ms", C.fetch_max_wait_ms, "Longest wait of the broker per fetch."),
    _option("--metadata-max-age-ms", C.metadata_max_age_ms, "Metadata refresh (new partitions)."),
    _option("--client-id", C.client_id, "Kafka client id."),
    _option(
        "--session-timeout-ms",
        C.session_timeout_ms,
        "A member silent this long leaves the group (its partitions fail over).",
    ),
    _option("--heartbeat-interval-ms", C.heartbeat_interval_ms, "Heartbeat period."),
    _option(
        "--max-poll-interval-ms",
        C.max_poll_interval_ms,
        "Longest gap between polls (one handler call or batch; retry waits keep polling).",
    ),
    _option(
        "--create-topics/--no-create-topics",
        C.create_missing_topics,
        "Create missing topics at start, so the subscription sees them at once.",
    ),
    # metrics
    _option(
        "--metrics-port",
        None,
        "Serve /metrics and /healthz on this port (none: no HTTP endpoint).",
        type=int,
    ),
    _option("--metrics-host", C.metrics_host, "Address the metrics endpoint binds."),
]


def consumer_config(s: Settings, default_group: str, o: dict[str, Any]) -> ConsumerConfig:
    """The `ConsumerConfig` the flags in `o` describe."""
    return ConsumerConfig(
        bootstrap_servers=s.require_bootstrap(),
        kafka_security=s.kafka_security,
        dsn=s.require_dsn(),
        group_id=o["group"] or default_group,
        move_to_group=o["move_to_group"],
        limits=s.limits,
        retry=RetryPolicy(
            max_attempts=o["max_attempts"],
            initial_delay_s=o["initial_delay"],
            max_delay_s=o["max_delay"],
            multiplier=o["backoff_multiplier"],
        ),
        unhandled=cast(Unhandled, o["unhandled"]),
        gap_policy=cast(GapPolicy, o["gap_policy"]),
        dlq_suffix=o["dlq_suffix"],
        batch_mode=o["batch"],
        durable_each_commit=o["durable_each_commit"],
        emit_messages=o["emit_messages"],
        park_aggregates=o["park"],
        parked_refresh_s=o["parked_refresh"],
        breaker=BreakerPolicy(
            failing_aggregates=o["breaker_aggregates"],
            window_s=o["breaker_window"],
            enabled=o["breaker"],
        ),
        schemas=load_catalogue(o["schemas"], o["registry_url"]),
        auto_offset_reset=o["auto_offset_reset"],
        max_poll_records=o["max_poll_records"],
        poll_timeout_ms=o["poll_timeout_ms"],
        fetch_max_wait_ms=o["fetch_max_wait_ms"],
        metadata_max_age_ms=o["metadata_max_age_ms"],
        client_id=o["client_id"],
        session_timeout_ms=o["session_timeout_ms"],
        heartbeat_interval_ms=o["heartbeat_interval_ms"],
        max_poll_interval_ms=o["max_poll_interval_ms"],
        create_missing_topics=o["create_topics"],
        metrics_port=o["metrics_port"],
        metrics_host=o["metrics_host"],
        fault_switches=FaultSwitches.parse(os.environ.get(FAULT_SWITCHES_ENV)),
    )


def _with_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(OPTIONS):
        fn = option(fn)
    return fn


@click.command("consume")
@click.argument("handlers", nargs=-1, required=True)
@_with_options
@logging_options
@click.pass_context
def consume(
    ctx: click.Context,
    /,
    handlers: tuple[str, ...],
    log_level: str,
    log_format: LogFormat,
    **options: Any,
) -> None:
    """Run HANDLERS (module:Class) in one consumer until SIGTERM or SIGINT."""
    configure_log(log_level.upper(), log_format)
    instances = [load_handler(h) for h in handlers]
    dispatch_table(instances)  # refuses a bad handler before anything else is read
    config = consumer_config(settings(ctx), instances[0].consumer_name, options)
    consumer = Consumer(instances, config, settings(ctx).names)

    stop_on_signals(consumer.stop)
    click.echo(f"consuming {', '.join(consumer.topics)} as group {config.group_id}", err=True)
    stats = consumer.run()
    click.echo(
        " ".join(
            f"{o.value}={n}"
            for o, n in sorted(stats.outcomes.items(), key=lambda item: item[0].value)
        )
        or "no records",
        err=True,
    )
