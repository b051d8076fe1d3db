"""The Python examples of the README and the docs, executed as written against the stack, so
they cannot rot."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql

from cdcbox.consumer import Handler, Outcome
from cdcbox.event import decode
from cdcbox.names import DbNames
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.schema_registry import RegistryConfig, SchemaRegistry
from cdcbox.stack.endpoints import Endpoints
from cdcbox.testing import Harness, Record, migrated_schema
from consumer.orders import SCHEMA
from tests.helpers import eventually, unique

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
# Each Python block of the README and the docs holds one of these; `block` finds it, and
# tests/unit/test_docs.py fails on a block none of them names (one no test runs).
MARKERS = (
    "outbox.append(conn, NewEvent(",
    "class PaymentHandler(Handler):",
    "UnitOfWork(conn) as uow",
    "SessionEvents(session)",
    "AsyncOutbox().append(",
    "def test_a_payment_marks_its_order_paid",
    "class ShipmentHandler(Handler):",
    "class AsyncPaymentHandler(AsyncHandler):",
    "class StockHandler(Handler):",
    "class ShipmentEvents(Handler):",
    'schemas = Catalogue.load(Path("schemas/avro"))',
    "registered = Catalogue.load(",
    "outbox = MariaDbOutbox()",  # tests/integration/test_mariadb_outbox.py
    "def handle(self, event: Event, conn: Session)",  # tests/e2e/test_mariadb_consumer.py
    "serialize = AvroSerializer(registry",  # tests/e2e/test_schema_registry.py
)


def python_blocks() -> list[str]:
    """Every distinct Python block of README.md and docs/ (the README repeats three)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = (re.findall(r"```python\n(.*?)```", p.read_text(), flags=re.S) for p in pages)
    return list(dict.fromkeys(b for blocks in found for b in blocks))


def block(marker: str) -> str:
    """The one Python block of the docs holding `marker` (one of MARKERS)."""
    assert marker in MARKERS
    (found,) = [b for b in python_blocks() if marker in b]
    return found


def latest(dsn: str, event_type: str) -> tuple[str, int]:
    """The order's status and the version of its latest `event_type` event."""
    with psycopg.connect(dsn) as conn:
        status = conn.execute("SELECT status FROM orders WHERE order_id = 'o-42'").fetchone()
        version = conn.execute(
            "SELECT aggregate_version FROM outbox_event WHERE aggregate_id = 'o-42' "
            "AND event_type = %s ORDER BY id DESC LIMIT 1",
            (event_type,),
        ).fetchone()
    assert status is not None and version is not None
    return status[0], version[0]


def test_readme_producer_and_handler_examples_run_as_written(
    stack: Endpoints, run_consumer: Any
) -> None:
    producer = block("outbox.append(conn, NewEvent(")
    handler = block("class PaymentHandler(Handler):")
    unit_of_work = block("UnitOfWork(conn) as uow")
    session = block("SessionEvents(session)")
    asyncio_block = block("AsyncOutbox().append(")
    # The examples use unqualified business tables: give them a schema of their own.
    schema = unique("readme")
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    dsn = f"{stack.dsn}?options={quote(f'-c search_path={schema},public')}"
    with psycopg.connect(dsn) as conn, conn.transaction():
        conn.execute(SCHEMA.read_text())

    exec(compile(producer, "docs (producer)", "exec"), {"dsn": dsn})  # noqa: S102
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT status FROM orders WHERE order_id = 'o-42'").fetchone() == (
            "CREATED",
        )
    uow_names: dict[str, Any] = {"dsn": dsn}
    exec(compile(unit_of_work, "docs (unit of work)", "exec"), uow_names)  # noqa: S102
    assert latest(dsn, "OrderShipped") == ("SHIPPED", 2)
    exec(compile(session, "docs (SQLAlchemy)", "exec"), uow_names)  # noqa: S102
    uow_names["engine"].dispose()  # its pooled connection, closed before it is collected
    assert latest(dsn, "OrderDelivered") == ("DELIVERED", 3)
    exec(compile(asyncio_block, "docs (asyncio)", "exec"), {"dsn": dsn})  # noqa: S102
    assert latest(dsn, "OrderCancelled") == ("CANCELLED", 4)
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE orders SET status = 'CREATED' WHERE order_id = 'o-42'")

    namespace: dict[str, Any] = {}
    exec(compile(handler, "docs (handler)", "exec"), namespace)  # noqa: S102
    payment_handler: Handler = namespace["PaymentHandler"]()
    with psycopg.connect(dsn) as conn, conn.transaction():
        Outbox().append(
            conn,
            NewEvent(
                "order",
                "o-42",
                "PaymentSucceeded",
                {"order_id": "o-42", "payment_id": "p-1", "amount_cents": 1999},
            ),
        )

    def paid() -> bool:
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SELECT status FROM orders WHERE order_id = 'o-42'").fetchone()
        return row == ("PAID",)

    # A fresh group each run (it must read the topic from the start), on a database an
    # earlier run may have bound the README's consumer name to its own group.
    readme_group = {"group": unique("readme"), "move_to_group": True}
    with run_consumer([payment_handler], dsn_override=dsn, **readme_group):
        eventually(paid, timeout=90, what="the README handler to mark o-42 PAID")


def test_readme_handler_test_runs_in_a_users_project_on_the_plugin(
    stack: Endpoints, tmp_path: Path
) -> None:
    """The README's sample test, in a project of its own (the handler as `payments.py`),
    run by pytest with nothing but cdcbox installed: the plugin loads by its entry point
    and finds the stack through the CDCBOX_* variables."""
    handler = block("class PaymentHandler(Handler):")
    sample = block("def test_a_payment_marks_its_order_paid")
    (tmp_path / "payments.py").write_text(handler)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_payments.py").write_text(sample)
    schema = unique("readme_user")  # the sample's `orders` table goes there
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    env = {
        **os.environ,
        **stack.as_env(),
        "CDCBOX_DSN": f"{stack.dsn}?options={quote(f'-c search_path={schema},public')}",
        "PYTHONPATH": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout


def test_readme_typed_and_async_handler_examples_run_as_written(stack: Endpoints) -> None:
    """Through the consumer's real pipeline on the stack's PostgreSQL (the harness: the
    Kafka leg is the same for every handler and covered above)."""
    typed = block("class ShipmentHandler(Handler):")
    async_block = block("class AsyncPaymentHandler(AsyncHandler):")
    namespace: dict[str, Any] = {}
    exec(compile(typed, "docs (typed payload)", "exec"), namespace)  # noqa: S102
    exec(compile(async_block, "docs (async handler)", "exec"), namespace)  # noqa: S102
    schema = unique("readme_handlers")
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    dsn = f"{stack.dsn}?options={quote(f'-c search_path={schema},public')}"
    paid, shipped, unfit = (unique("o") for _ in range(3))
    with psycopg.connect(dsn) as conn, conn.transaction():
        conn.execute(SCHEMA.read_text())
        for order_id in (paid, shipped, unfit):
            conn.execute(
                "INSERT INTO orders (order_id, customer_id, total_cents) VALUES (%s, 'c', 1)",
                (order_id,),
            )
    handlers = [namespace["ShipmentHandler"](), namespace["AsyncPaymentHandler"]()]
    with Harness(dsn, handlers) as harness:
        outcomes = harness.send(
            NewEvent("order", paid, "PaymentSucceeded", {"amount_cents": 1}),
            NewEvent("order", shipped, "OrderShipped", {"order_id": shipped, "carrier": "x"}),
            NewEvent("order", unfit, "OrderShipped", {"order_id": unfit}),  # no carrier
        )
        assert outcomes == Counter({Outcome.PROCESSED: 2, Outcome.DEAD_LETTERED: 1})
        (letter,) = harness.dead_letters("outbox.event.order")
        assert b"carrier" in (dict(letter.headers)["cdcbox.error.message"] or b"")
    with psycopg.connect(dsn) as conn:
        statuses: dict[str, str] = dict(
            conn.execute("SELECT order_id, status FROM orders").fetchall()
        )
    assert statuses == {paid: "PAID", shipped: "SHIPPED", unfit: "CREATED"}


def test_readme_handler_that_produces_runs_as_written(stack: Endpoints) -> None:
    """The stock handler answers each order from its own outbox, in the order's
    transaction: reserved when every line is in stock, rejected (nothing reserved)
    otherwise, each answer naming its order event as cause."""
    example = block("class StockHandler(Handler):")
    namespace: dict[str, Any] = {}
    exec(compile(example, "docs (handler that produces)", "exec"), namespace)  # noqa: S102
    line = lambda sku, n: {"sku": sku, "quantity": n}  # noqa: E731
    orders = [
        NewEvent("order", "o-1", "OrderCreated", {"lines": [line("a", 2), line("b", 1)]}),
        NewEvent("order", "o-2", "OrderCreated", {"lines": [line("a", 2), line("b", 1)]}),
    ]
    with readme_schema(stack, "readme_stock") as (dsn, names):
        with psycopg.connect(dsn) as conn, conn.transaction():
            conn.execute("INSERT INTO stock (sku, available) VALUES ('a', 5), ('b', 1)")
        with Harness(dsn, [namespace["StockHandler"]()], names=names) as harness:
            records = [harness.record(o) for o in orders]
            assert harness.send(*records, records[0]) == Counter(
                {Outcome.PROCESSED: 2, Outcome.DUPLICATE: 1}
            )
            answers = [decode(r) for r in harness.emitted()]
        with psycopg.connect(dsn) as conn:
            stock: dict[str, int] = dict(
                conn.execute("SELECT sku, available FROM stock").fetchall()
            )
    assert [(a.aggregate_id, a.event_type, a.payload) for a in answers] == [
        ("o-1", "StockReserved", {"order_id": "o-1"}),
        ("o-2", "StockRejected", {"order_id": "o-2", "short_of": "b"}),
    ]
    assert [a.causation_id for a in answers] == [str(decode(r).event_id) for r in records]
    assert stock == {"a": 3, "b": 0}  # o-2 reserved nothing: its savepoint rolled back


def test_readme_foreign_handler_reads_its_producers_records(stack: Endpoints) -> None:
    """The README's handler for another producer's records, through the real pipeline:
    its header names and topic pattern are what it subscribes to and decodes with."""
    example = block("class ShipmentEvents(Handler):")
    namespace: dict[str, Any] = {}
    exec(compile(example, "docs (foreign producer)", "exec"), namespace)  # noqa: S102
    handler = namespace["ShipmentEvents"]()
    assert handler.subscribed_topics() == ("shipment.events",)
    record = Record(
        "shipment.events", 0, 0, b"s-1", b'{"orderId": "o-5"}',
        [("eventId", b"dispatch-1"), ("type", b"ShipmentDispatched"), ("version", b"1")],
    )  # fmt: skip
    with readme_schema(stack, "readme_foreign") as (dsn, names):
        with psycopg.connect(dsn) as conn, conn.transaction():
            conn.execute(
                "INSERT INTO orders (order_id, customer_id, total_cents) VALUES ('o-5', 'c', 1)"
            )
        with Harness(dsn, [handler], names=names) as harness:
            assert harness.send(record, record) == Counter(
                {Outcome.PROCESSED: 1, Outcome.DUPLICATE: 1}
            )
        with psycopg.connect(dsn) as conn:
            status = conn.execute("SELECT status FROM orders WHERE order_id = 'o-5'").fetchone()
    assert status == ("SHIPPED",)


@contextmanager
def readme_schema(stack: Endpoints, prefix: str) -> Iterator[tuple[str, DbNames]]:
    """A schema of its own, migrated, with the example's business tables; a DSN whose
    search_path finds them. Dropped afterwards, with its publication."""
    names = DbNames(schema=unique(prefix))
    dsn = f"{stack.dsn}?options={quote(f'-c search_path={names.schema},public')}"
    migrated_schema(dsn, names, "cdc")
    try:
        with psycopg.connect(dsn) as conn, conn.transaction():
            conn.execute(SCHEMA.read_text())
        yield dsn, names
    finally:
        with psycopg.connect(stack.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(names.schema)))
            conn.execute(
                sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(names.publication))
            )


def test_the_avro_example_loads_the_shipped_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the repository's root, as the guide shows it."""
    monkeypatch.chdir(ROOT)
    example = block('schemas = Catalogue.load(Path("schemas/avro"))')
    namespace: dict[str, Any] = {}
    exec(compile(example, "docs (Avro)", "exec"), namespace)  # noqa: S102
    assert "OrderCreated" in namespace["outbox"].schemas.events


def test_the_registry_example_writes_the_confluent_format(
    monkeypatch: pytest.MonkeyPatch, stack: Endpoints
) -> None:
    """The guide's registry example, against the stack's registry: an OrderCreated
    encodes as magic byte 0 and the id the registry gave its schema."""
    monkeypatch.chdir(ROOT)
    example = block("registered = Catalogue.load(")
    example = example.replace("http://127.0.0.1:28081/apis/ccompat/v7", stack.registry_url)
    namespace: dict[str, Any] = {}
    exec(compile(example, "docs (Avro, registry)", "exec"), namespace)  # noqa: S102
    order = {"order_id": "o", "customer_id": "c", "total_cents": 1, "lines": []}
    encoded = namespace["outbox"].schemas.encode("OrderCreated", order)
    assert encoded is not None and encoded[0][:1] == b"\x00"
    schema_id = int.from_bytes(encoded[0][1:5], "big")
    fresh = SchemaRegistry(RegistryConfig(stack.registry_url))  # no cache: asks the registry
    stored = json.loads(fresh.schema(schema_id))
    assert stored == json.loads(namespace["registered"].events["OrderCreated"].latest.text)
