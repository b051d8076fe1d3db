"""`cdc-ctl consume module:Class ...`: run handlers until SIGTERM/SIGINT."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import cast

import click

from cdcbox.avro import Catalogue
from cdcbox.cli.common import configure_logging, handle_errors, settings, stop_on_signals
from cdcbox.cli.schemas import default_schemas_dir
from cdcbox.consumer import Consumer, ConsumerConfig, Handler, RetryPolicy
from cdcbox.consumer.config import GapPolicy, Unhandled
from cdcbox.errors import ConfigError


def load_handler(target: str) -> Handler:
    """Instantiate `package.module:ClassName`; the class must subclass Handler."""
    module_name, sep, class_name = target.partition(":")
    if not sep:
        raise ConfigError(
            f"{target!r}: expected module:Class, e.g. consumer.inventory:InventoryHandler"
        )
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"{target!r}: cannot import: {e}") from e
    if not (isinstance(cls, type) and issubclass(cls, Handler)):
        raise ConfigError(f"{target!r} is not a cdcbox.consumer.Handler subclass")
    return cls()


@click.command("consume")
@click.argument("handlers", nargs=-1, required=True)
@click.option(
    "--group",
    envvar="CDCBOX_CONSUMER_GROUP",
    help="Kafka group id [first handler's consumer name].",
)
@click.option(
    "--max-attempts",
    type=int,
    default=RetryPolicy.max_attempts,
    show_default=True,
    envvar="CDCBOX_MAX_ATTEMPTS",
)
@click.option(
    "--initial-delay",
    type=float,
    default=RetryPolicy.initial_delay_s,
    show_default=True,
    envvar="CDCBOX_INITIAL_DELAY",
)
@click.option(
    "--max-delay",
    type=float,
    default=RetryPolicy.max_delay_s,
    show_default=True,
    envvar="CDCBOX_MAX_DELAY",
)
@click.option(
    "--unhandled",
    type=click.Choice(["skip", "dead-letter"]),
    default="skip",
    show_default=True,
    envvar="CDCBOX_UNHANDLED",
)
@click.option(
    "--gap-policy",
    type=click.Choice(["apply", "hold"]),
    default="apply",
    show_default=True,
    envvar="CDCBOX_GAP_POLICY",
)
@click.option("--dlq-suffix", default=".dlq", show_default=True, envvar="CDCBOX_DLQ_SUFFIX")
@click.option(
    "--batch/--per-record",
    default=False,
    show_default=True,
    envvar="CDCBOX_BATCH",
    help="One transaction per poll batch (savepoint per record).",
)
@click.option(
    "--park/--no-park",
    default=True,
    show_default=True,
    envvar="CDCBOX_PARK",
    help="Dead-letter an aggregate's later events behind a dead-lettered one.",
)
@click.option(
    "--schemas",
    "schemas_dir",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    envvar="CDCBOX_SCHEMAS",
    help="Avro event catalogue for decoding Avro payloads [the shipped schemas/avro].",
)
@click.option(
    "--max-poll-records",
    type=int,
    default=ConsumerConfig.max_poll_records,
    show_default=True,
    envvar="CDCBOX_MAX_POLL_RECORDS",
    help="Records per poll batch (the unit of commit and of graceful stop).",
)
@click.option(
    "--metrics-port",
    type=int,
    default=None,
    envvar="CDCBOX_METRICS_PORT",
    help="Serve /metrics and /healthz on 127.0.0.1:PORT.",
)
@click.pass_context
@handle_errors
def consume(
    ctx: click.Context,
    handlers: tuple[str, ...],
    group: str | None,
    max_attempts: int,
    initial_delay: float,
    max_delay: float,
    unhandled: str,
    gap_policy: str,
    dlq_suffix: str,
    batch: bool,
    park: bool,
    schemas_dir: Path | None,
    max_poll_records: int,
    metrics_port: int | None,
) -> None:
    """Run HANDLERS (module:Class) in one consumer until SIGTERM or SIGINT."""
    configure_logging()
    instances = [load_handler(h) for h in handlers]
    s = settings(ctx)
    config = ConsumerConfig(
        bootstrap_servers=s.require_bootstrap(),
        dsn=s.require_dsn(),
        group_id=group or instances[0].consumer_name,
        retry=RetryPolicy(
            max_attempts=max_attempts, initial_delay_s=initial_delay, max_delay_s=max_delay
        ),
        unhandled=cast(Unhandled, unhandled),
        gap_policy=cast(GapPolicy, gap_policy),
        dlq_suffix=dlq_suffix,
        batch_mode=batch,
        park_aggregates=park,
        metrics_port=metrics_port,
        max_poll_records=max_poll_records,
        schemas=Catalogue.load(schemas_dir or default_schemas_dir()),
    )
    consumer = Consumer(instances, config)

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
