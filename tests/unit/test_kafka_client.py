"""The Kafka adapter turns every kafka-python error into a cdcbox error (no service)."""

from __future__ import annotations

import pytest
from kafka import errors as kafka_errors

from cdcbox.errors import CdcboxError, CommitRefused, KafkaRequestError, KafkaUnavailable
from cdcbox.kafka.base import KafkaSettings, translated

SETTINGS = KafkaSettings("127.0.0.1:1")


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (kafka_errors.KafkaTimeoutError("no answer"), KafkaUnavailable),
        (kafka_errors.KafkaConnectionError("refused"), KafkaUnavailable),
        (kafka_errors.CommitFailedError("rebalanced"), CommitRefused),
        (kafka_errors.MessageSizeTooLargeError("too big"), KafkaRequestError),
    ],
)
def test_kafka_errors_become_cdcbox_errors(
    raised: kafka_errors.KafkaError, expected: type[CdcboxError]
) -> None:
    with pytest.raises(expected) as info, translated("send", SETTINGS):
        raise raised
    assert isinstance(info.value, CdcboxError)
    assert type(raised).__name__ in str(info.value)


def test_an_unreachable_broker_is_named_in_the_message() -> None:
    with (
        pytest.raises(KafkaUnavailable, match=r"127\.0\.0\.1:1 is unreachable"),
        translated("poll", SETTINGS),
    ):
        raise kafka_errors.KafkaTimeoutError("no answer")
