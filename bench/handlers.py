"""The benchmark's business write, the same for the bare clients and for cdcbox: one
row per event into `bench_effect`, written the ways a user writes a handler."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import psycopg

from cdcbox.consumer import Event, Handler

EFFECT_DDL = "CREATE TABLE IF NOT EXISTS bench_effect (event_id uuid, aggregate_id text, n int)"
EFFECT_INSERT = "INSERT INTO bench_effect VALUES (%s, %s, %s)"

# plain: `handle()` only, as the getting-started guide writes it; handle_batch: also the
# batch override with `executemany`; pipelined: plain with `pipelined = True`.
Style = Literal["plain", "handle_batch", "pipelined"]


class _Plain(Handler):
    event_types = frozenset({"Bench"})

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        conn.execute(EFFECT_INSERT, (event.event_id, event.aggregate_id, event.payload["n"]))


class _WithBatch(_Plain):
    def handle_batch(self, events: Sequence[Event], conn: psycopg.Connection[Any]) -> None:
        with conn.cursor() as cur:  # the bare consumer's statement, as executemany
            cur.executemany(
                EFFECT_INSERT, [(e.event_id, e.aggregate_id, e.payload["n"]) for e in events]
            )


def effect_handler(name: str, aggregate_type: str, style: Style = "plain") -> Handler:
    """The effect handler under consumer name `name`, written in `style`."""
    handler_class = type(
        "Effect",
        (_WithBatch if style == "handle_batch" else _Plain,),
        {
            "consumer_name": name,
            "aggregate_types": (aggregate_type,),
            "pipelined": True if style == "pipelined" else None,
        },
    )
    handler: Handler = handler_class()
    return handler
