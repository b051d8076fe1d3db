"""Publishing records that cannot be applied to the dead-letter topic (`<topic>.dlq`).

The original key, value and headers travel unchanged, so `cdc-ctl dlq replay` can put
the very same event back; error headers say why and from where. The publish is awaited:
if it fails, the runner must not commit the record's offset.
"""

from __future__ import annotations

from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError

from cdcbox.errors import CdcboxError

ERROR_HEADERS = (
    "cdcbox.error.type",
    "cdcbox.error.message",
    "cdcbox.error.attempts",
    "cdcbox.original.topic",
    "cdcbox.original.partition",
    "cdcbox.original.offset",
    "cdcbox.consumer",
)


class DeadLetterError(CdcboxError, RuntimeError):
    """The dead-letter topic could not be written; the record stays uncommitted."""


class DeadLetters:
    def __init__(
        self, producer: KafkaProducer, suffix: str = ".dlq", timeout_s: float = 30
    ) -> None:
        self.producer = producer
        self.suffix = suffix
        self.timeout_s = timeout_s

    def publish(
        self, record: Any, *, error_type: str, message: str, attempts: int, consumer: str
    ) -> None:
        # kafka-python cannot write null header values; an absent value travels as b"".
        original = [(k, v or b"") for k, v in (record.headers or []) if k not in ERROR_HEADERS]
        extra = zip(
            ERROR_HEADERS,
            (
                error_type,
                message[:4000],
                str(attempts),
                record.topic,
                str(record.partition),
                str(record.offset),
                consumer,
            ),
            strict=True,
        )
        headers = original + [(k, v.encode()) for k, v in extra]
        try:
            self.producer.send(
                record.topic + self.suffix, key=record.key, value=record.value, headers=headers
            ).get(timeout=self.timeout_s)
        except KafkaError as e:
            raise DeadLetterError(
                f"cannot publish {record.topic}[{record.partition}]@{record.offset} to "
                f"{record.topic + self.suffix}: {e}"
            ) from e
