"""What every Kafka client of `cdcbox.kafka.client` shares: its settings, and the one
translation of kafka-python's errors into `CdcboxError` subclasses (see that module)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Self

from kafka import errors as kafka_errors

from cdcbox.errors import (
    CommitRefused,
    KafkaRequestError,
    KafkaUnavailable,
)
from cdcbox.kafka.security import KafkaSecurity


@dataclass(frozen=True)
class KafkaSettings:
    """Where the brokers are and how to reach them; the only input of every client."""

    bootstrap_servers: str
    request_timeout_ms: int = 30000
    security: KafkaSecurity = field(default_factory=KafkaSecurity)

    def options(self) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "request_timeout_ms": self.request_timeout_ms,
            **self.security.client_options(),
        }


@contextmanager
def translated(what: str, settings: KafkaSettings) -> Iterator[None]:
    try:
        yield
    except (
        kafka_errors.CommitFailedError,
        kafka_errors.RebalanceInProgressError,
        kafka_errors.IllegalGenerationError,
        kafka_errors.UnknownMemberIdError,
    ) as e:
        # The group moved on (or is moving): the partitions' next owner redelivers.
        raise CommitRefused(f"{what}: {e}", kind=type(e).__name__) from e
    except kafka_errors.KafkaError as e:
        kind = type(e).__name__
        if isinstance(e, kafka_errors.RetriableError) or kind == "NoBrokersAvailable":
            raise KafkaUnavailable(
                f"Kafka at {settings.bootstrap_servers} is unreachable ({what}: {_text(e)})"
            ) from e
        raise KafkaRequestError(f"{what}: {_text(e)}", kind=kind) from e


def _text(error: Exception) -> str:
    """kafka-python's message, prefixed with its class name once."""
    text, kind = str(error), type(error).__name__
    return text if text.startswith(kind) else f"{kind}: {text}"


class Client:
    """A kafka-python client built from `settings`, each call on it translated."""

    def __init__(self, settings: KafkaSettings, build: Callable[[], Any], what: str) -> None:
        self.settings = settings
        with translated(f"connecting the {what}", settings):
            self._client = build()

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with translated(what, self.settings):
            return fn(*args, **kwargs)

    def close(self, **kwargs: Any) -> None:
        self._call("close", self._client.close, **kwargs)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
