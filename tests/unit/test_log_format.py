"""The long-running commands' logging: JSON lines with the event's fields, and
kafka-python's own INFO lines kept off the console."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from cdcbox.cli.main import cli
from cdcbox.errors import CdcboxError
from cdcbox.event import Event
from cdcbox.kafka.client import Admin, KafkaSettings
from cdcbox.kafka.security import KafkaSecurity, Secret
from cdcbox.telemetry import log_format

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root, kafka = logging.getLogger(), logging.getLogger("kafka")
    handlers, level, kafka_level = root.handlers[:], root.level, kafka.level
    yield
    root.handlers[:], kafka.level = handlers, kafka_level
    root.setLevel(level)


def test_a_json_line_carries_the_events_fields(capsys: pytest.CaptureFixture[str]) -> None:
    event = Event(
        event_id=uuid.uuid4(),
        event_type="Created",
        aggregate_type="order",
        aggregate_id="o-1",
        aggregate_version=1,
        occurred_at=None,
        trace_id="00-abc-def-01",
        content_type="application/json",
        payload={},
        value=b"{}",
        topic="outbox.event.order",
        partition=0,
        offset=7,
    )
    log_format.configure("INFO", "json")
    logging.getLogger("cdcbox.consumer").warning("failed %s", "once", extra=event.log_extra)
    line = json.loads(capsys.readouterr().err.strip())
    assert line["message"] == "failed once"
    assert line["level"] == "WARNING" and line["logger"] == "cdcbox.consumer"
    assert line["event_id"] == str(event.event_id)
    assert (line["aggregate_type"], line["aggregate_id"]) == ("order", "o-1")
    assert line["trace_id"] == "00-abc-def-01"


def test_kafka_python_info_is_off_unless_debug(capsys: pytest.CaptureFixture[str]) -> None:
    log_format.configure("INFO", "text")
    logging.getLogger("kafka.cluster").info("Updated metadata")
    logging.getLogger("cdcbox.relay").info("relay started")
    err = capsys.readouterr().err
    assert "relay started" in err and "Updated metadata" not in err
    log_format.configure("DEBUG", "text")
    logging.getLogger("kafka.cluster").info("Updated metadata")
    assert "Updated metadata" in capsys.readouterr().err


def test_an_unknown_log_format_is_refused_by_name() -> None:
    result = CliRunner().invoke(cli, ["relay", "run", "--log-format", "xml"])
    assert result.exit_code == 2
    assert "--log-format" in result.output


def test_debug_logging_never_prints_a_kafka_password(capsys: pytest.CaptureFixture[str]) -> None:
    """Audit 26, case 12: at DEBUG kafka-python logs its admin client's whole configuration,
    SASL password included; the log configuration blanks every password it carries."""
    secret = "hunter2-sasl"
    security = KafkaSecurity(
        protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", username="app", password=Secret(secret)
    )
    settings = KafkaSettings("127.0.0.1:1", request_timeout_ms=600, security=security)
    log_format.configure("DEBUG", "text")
    with pytest.raises(CdcboxError):
        Admin(settings, api_version_auto_timeout_ms=300).close()
    err = capsys.readouterr().err
    assert "sasl_plain_password" in err  # kafka-python did log its configuration
    assert secret not in err


def test_kafka_pythons_recovered_errors_are_one_line_outside_debug(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """kafka-python logs a socket closed under its IO thread with a whole traceback (seen
    in a consumer's log as it stopped); cdcbox's lines never carry one outside DEBUG."""

    def recovered_error(level: str) -> str:
        log_format.configure(level, "text")
        try:
            None.recv(4096)  # type: ignore[attr-defined]
        except AttributeError:
            logging.getLogger("kafka.net.transport").exception("Error receiving socket")
        return capsys.readouterr().err

    line = recovered_error("INFO")
    assert "Traceback" not in line
    assert "Error receiving socket: AttributeError: 'NoneType' object has no attribute" in line
    assert "Traceback" in recovered_error("DEBUG")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_an_exceptions_text_and_traceback_are_redacted_too(
    fmt: log_format.LogFormat, capsys: pytest.CaptureFixture[str]
) -> None:
    """Audit 33, case 15: the redaction rewrote the message only; an exception's text and
    its traceback (a driver quoting its DSN or configuration) went out as they were."""
    log_format.configure("INFO", fmt)
    try:
        raise RuntimeError("cannot connect with password=hunter2-exc to postgresql://a:pw9@h/d")
    except RuntimeError:
        logging.getLogger("cdcbox.test").exception("failed")
    err = capsys.readouterr().err
    assert "RuntimeError" in err and "failed" in err
    assert "hunter2-exc" not in err and "pw9" not in err
    if fmt == "json":
        assert "RuntimeError" in json.loads(err.splitlines()[-1])["exception"]


def test_the_drivers_own_words_about_a_password_are_not_taken_for_one() -> None:
    """MariaDB's "(using password: YES)" says whether a password was sent; redacting
    it garbled the message (issue 52, item 2). A real value still goes."""
    line = "Access denied for user 'cdcbox'@'127.0.0.1' (using password: YES)"
    assert log_format.redact(line) == line
    assert log_format.redact("(using password: NO); password: hunter2") == (
        "(using password: NO); password: '***'"
    )
