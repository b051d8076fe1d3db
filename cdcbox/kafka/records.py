"""The shapes the pipeline relies on, as Protocols: a consumed record (`wire.ConsumedRecord`:
what kafka-python's `ConsumerRecord` and the harness's `Record` both are) and a sink records
are sent to (the adapter's `Producer`, the harness's memory topics). Code that reads records
or publishes dead letters is typed against these, never against a concrete client."""

from __future__ import annotations

from typing import Protocol

from cdcbox.wire import ConsumedRecord

__all__ = ["Acknowledgement", "ConsumedRecord", "RecordSink"]


class Acknowledgement(Protocol):
    """One send's acknowledgement."""

    def get(self, timeout: float) -> None:
        """Wait until the broker acknowledged the record (or raise)."""


class RecordSink(Protocol):
    """Where records are sent: each send is acknowledged through `get`."""

    def send(
        self,
        topic: str,
        *,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]],
    ) -> Acknowledgement: ...
