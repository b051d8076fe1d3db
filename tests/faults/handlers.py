"""A handler for consumer processes the fault tests start with `cdc-ctl consume`.

The test (the edge) passes its names through the environment; each applied event is one
row in e2e_effect, so effects can be counted exactly.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import psycopg

from cdcbox.consumer import AsyncHandler, Event, Handler, NewEvent


class EffectHandler(Handler):
    consumer_name = os.environ.get("FAULT_CONSUMER", "fault-consumer")
    aggregate_types = (os.environ.get("FAULT_AGGREGATE_TYPE", "fault"),)
    event_types = frozenset({"Changed"})
    delay_s = float(os.environ.get("FAULT_HANDLER_DELAY_S", "0"))
    # While this file exists every call fails: an outage of what the handler depends on.
    outage_file = os.environ.get("FAULT_OUTAGE_FILE", "")

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        if self.outage_file and os.path.exists(self.outage_file):
            raise ConnectionError("downstream service unavailable")
        if self.delay_s:
            time.sleep(self.delay_s)  # a slow handler, so a kill lands mid-batch
        conn.execute(
            "INSERT INTO e2e_effect (consumer_name, event_id, aggregate_id, version, headers) "
            "VALUES (%s, %s, %s, %s, '{}')",
            (self.consumer_name, event.event_id, event.aggregate_id, event.aggregate_version),
        )


class LedgerHandler(Handler):
    """The fault ledger's business effect: one fault_effect row per call, no unique
    constraint, so a second application of an event shows as a second row."""

    consumer_name = os.environ.get("FAULT_CONSUMER", "fault-consumer")
    aggregate_types = (os.environ.get("FAULT_AGGREGATE_TYPE", "fault"),)
    event_types = frozenset({"Changed"})
    delay_s = float(os.environ.get("FAULT_HANDLER_DELAY_S", "0"))

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        if self.delay_s:
            time.sleep(self.delay_s)  # simulated slow work, not synchronisation
        conn.execute(
            "INSERT INTO fault_effect (consumer_name, event_id, aggregate_id, n) "
            "VALUES (%s, %s, %s, %s)",
            (self.consumer_name, event.event_id, event.aggregate_id, event.payload["n"]),
        )


class AnsweringHandler(LedgerHandler):
    """The first hop of the two-hop ledger (inventory answering orders): LedgerHandler's
    effect and, in the same transaction, an answer emitted from this service's outbox:
    aggregate type FAULT_ANSWER_TYPE, the same aggregate, version and write sequence."""

    answer_type = os.environ.get("FAULT_ANSWER_TYPE", "fault-answer")

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        super().handle(event, conn)
        self.emit(
            conn,
            event,
            NewEvent(
                self.answer_type,
                event.aggregate_id,
                "Changed",
                {"n": event.payload["n"]},
                aggregate_version=event.aggregate_version,
            ),
        )


class AsyncLedgerHandler(AsyncHandler):
    """LedgerHandler as an async handler, writing on the record's AsyncConnection."""

    consumer_name = LedgerHandler.consumer_name
    aggregate_types = LedgerHandler.aggregate_types
    event_types = LedgerHandler.event_types
    delay_s = LedgerHandler.delay_s

    async def handle(self, event: Event, conn: psycopg.AsyncConnection[Any]) -> None:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        await conn.execute(
            "INSERT INTO fault_effect (consumer_name, event_id, aggregate_id, n) "
            "VALUES (%s, %s, %s, %s)",
            (self.consumer_name, event.event_id, event.aggregate_id, event.payload["n"]),
        )
