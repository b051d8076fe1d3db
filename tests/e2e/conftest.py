"""Fixtures for end-to-end tests: a recording handler and a consumer running in a thread."""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from psycopg.types.json import Jsonb

from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import apply, load_specs
from cdcbox.consumer import AsyncHandler, Consumer, ConsumerConfig, ConsumerStats, Event, Handler
from cdcbox.migrate import migrate
from cdcbox.resources import resource_dir
from cdcbox.stack import runner
from cdcbox.stack.config import Ports, StackConfig
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.secrets import read_password_properties
from tests.helpers import drop_slot_once_released, free_ports, unique

EFFECTS_DDL = """
CREATE TABLE IF NOT EXISTS e2e_effect (
    seq            bigserial PRIMARY KEY,
    consumer_name  text   NOT NULL,
    event_id       uuid   NOT NULL,
    aggregate_id   text   NOT NULL,
    version        bigint,
    headers        jsonb  NOT NULL,
    payload        jsonb
)"""


INSERT_EFFECT = (
    "INSERT INTO e2e_effect (consumer_name, event_id, aggregate_id, version, headers, "
    "payload) VALUES (%s, %s, %s, %s, %s, %s)"
)


def effect_row(name: str, event: Event) -> tuple[Any, ...]:
    headers = {
        "event_type": event.event_type,
        "aggregate_type": event.aggregate_type,
        "occurred_at": event.occurred_at.isoformat() if event.occurred_at else None,
        "trace_id": event.trace_id,
        "content_type": event.content_type,
        "topic": event.topic,
    }
    return (
        name,
        event.event_id,
        event.aggregate_id,
        event.aggregate_version,
        Jsonb(headers),
        Jsonb(event.payload),
    )


def recording_handler(
    name: str,
    aggregate_type: str,
    event_types: set[str],
    fail: Callable[[Event], bool] | None = None,
    flavour: str = "sync",
) -> Handler:
    """A handler whose effect is one row per applied event in e2e_effect; `flavour`
    "async" makes it an `AsyncHandler` writing on its `AsyncConnection`."""

    def check(event: Event) -> None:
        if fail is not None and fail(event):
            raise RuntimeError(f"handler refuses {event.event_id}")

    class Recorder(Handler):
        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            check(event)
            conn.execute(INSERT_EFFECT, effect_row(name, event))

    class AsyncRecorder(AsyncHandler):
        async def handle(self, event: Event, conn: psycopg.AsyncConnection[Any]) -> None:
            check(event)
            await conn.execute(INSERT_EFFECT, effect_row(name, event))

    base = {"sync": Recorder, "async": AsyncRecorder}[flavour]
    handler_class = type(
        f"{flavour.title()}Recorder",
        (base,),
        {
            "consumer_name": name,
            "aggregate_types": (aggregate_type,),
            "event_types": frozenset(event_types),
        },
    )
    handler: Handler = handler_class()
    return handler


@pytest.fixture(params=["sync", "async"])
def recorder(request: pytest.FixtureRequest) -> Callable[..., Handler]:
    """`recording_handler` of one flavour: a test taking this fixture runs for a sync
    and for an async handler (the same cases, the same assertions)."""
    return functools.partial(recording_handler, flavour=request.param)


@dataclass
class Running:
    consumer: Consumer
    thread: threading.Thread
    error: list[BaseException]

    @property
    def stats(self) -> ConsumerStats:
        return self.consumer.stats


@contextmanager
def running_in_thread(consumer: Consumer, thread_name: str) -> Iterator[Running]:
    """`consumer.run()` in a thread named `thread_name`; at exit it is stopped (finish
    the batch, commit, close), and a crash or a consumer that does not stop fails."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            consumer.run()
        except BaseException as e:  # surfaced by the test, not swallowed
            errors.append(e)

    thread = threading.Thread(target=target, name=thread_name, daemon=True)
    thread.start()
    try:
        yield Running(consumer, thread, errors)
    finally:
        consumer.stop()
        thread.join(timeout=30)
        assert not thread.is_alive(), "consumer did not stop within 30 s"
        assert not errors, f"consumer crashed: {errors!r}"


@pytest.fixture(scope="session", autouse=True)
def effects_table(stack: Endpoints) -> None:
    with psycopg.connect(stack.dsn) as conn:
        conn.execute(EFFECTS_DDL)


@pytest.fixture
def run_consumer(stack: Endpoints) -> Iterator[Callable[..., Any]]:
    """Start a Consumer in a thread; it is stopped (finish batch, commit, close) at exit."""
    running: list[Running] = []

    @contextmanager
    def start(
        handlers: list[Handler], group: str, dsn_override: str | None = None, **options: Any
    ) -> Iterator[Running]:
        config = ConsumerConfig(
            bootstrap_servers=stack.bootstrap_servers,
            dsn=dsn_override or stack.dsn,
            group_id=group,
            **options,
        )
        with running_in_thread(Consumer(handlers, config), f"consumer-{group}") as handle:
            running.append(handle)
            yield handle

    yield start
    for handle in running:
        handle.consumer.stop()


def effects(conn: psycopg.Connection[Any], consumer: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT event_id, aggregate_id, version, headers, payload FROM e2e_effect "
        "WHERE consumer_name = %s ORDER BY seq",
        (consumer,),
    ).fetchall()


def count_effects(dsn: str, consumer: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM e2e_effect WHERE consumer_name = %s", (consumer,)
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def spec_file(tmp_path: Path, stack: Endpoints, connect_client: ConnectClient) -> Iterator[Any]:
    """Write variants of the shipped spec as a separate connector with its own slot and
    topics, so applying it never disturbs the connector the other tests use."""
    created: list[tuple[str, str]] = []

    def write(base: str = "outbox-postgres.yaml", **overrides: Any) -> tuple[Path, str]:
        spec = yaml.safe_load((resource_dir("connectors") / base).read_text())
        name = unique("test-connector")
        slot = name.replace("-", "_")
        spec["name"] = name
        spec["config"].update(
            {
                "slot.name": slot,
                "transforms.outbox.route.topic.replacement": f"{name}.${{routedByValue}}",
                "topic.prefix": name,
            }
        )
        for key in [k for k in spec["config"] if k.startswith("predicates.")]:
            if key.endswith(".pattern"):  # the messages spec's: <topic.prefix>[.]message
                spec["config"][key] = f"{name}[.]message"
        for key, value in overrides.items():
            if value is None:
                spec["config"].pop(key, None)
            else:
                spec["config"][key] = value
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(spec))
        created.append((name, slot))
        return path, name

    yield write
    for name, slot in created:
        if connect_client.config(name) is not None:
            connect_client.delete(name)
        drop_slot_once_released(stack.dsn, slot)


def secured_config(native_stack: StackConfig, state_dir: Path) -> StackConfig:
    """A secured stack (`stack up --secure`: SASL_SSL, TLS, an authorizer) beside the
    session's, sharing its jar cache."""
    postgres, kafka, controller, connect, registry, management = free_ports(6)
    return dataclasses.replace(
        native_stack,
        state_dir=state_dir,
        # Free ports, not fixed ones: these lie in the ephemeral range, where a client
        # connection of the busy session stack may hold one and fail Kafka's bind. Every
        # port is its own, the registry's too: two stacks side by side (issue 53).
        ports=Ports(
            postgres=postgres,
            kafka=kafka,
            controller=controller,
            connect=connect,
            registry=registry,
            registry_management=management,
        ),
        secure=True,
        with_metrics=False,  # its ports are the session stack's
        with_supervisor=False,  # so is the supervisor's
        kafka_heap_mb=512,
        connect_heap_mb=768,
    )


@pytest.fixture(scope="session")
def secured(
    native_stack: StackConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[StackConfig, Endpoints]]:
    """A secured stack (`secured_config`), its connector applied; purged afterwards."""
    config = secured_config(native_stack, tmp_path_factory.mktemp("secured"))
    try:  # `down` also when `up` fails midway: what it started must not outlive the test
        endpoints = runner.up(config, "native")
        env = {**os.environ, **endpoints.as_env()}
        with psycopg.connect(endpoints.dsn, passfile=endpoints.pgpassfile) as conn:
            migrate(
                conn,
                debezium_password=read_password_properties(Path(endpoints.debezium_password_file)),
            )
        for spec in load_specs(resource_dir("connectors"), env=env):
            apply(ConnectClient(endpoints.connect_url, auth=endpoints.connect_auth()), spec)
        yield config, endpoints
    finally:
        runner.down(config, purge=True)
