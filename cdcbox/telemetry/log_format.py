"""How the long-running commands log: text for people, JSON lines for log pipelines.

Per-record log lines carry the event's id, aggregate and trace id as fields
(`Event.log_extra`), so a JSON line can be searched by them without parsing the message.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Literal

LogFormat = Literal["text", "json"]
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
EVENT_FIELDS = ("event_id", "aggregate_type", "aggregate_id", "trace_id", "causation_id")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


# A password-like key and its quoted or bare value, as a dict's repr or key=value prints
# them: kafka-python logs its admin client's whole configuration at DEBUG. MariaDB's
# "(using password: YES)" only says whether one was sent: it stays as the driver wrote it.
_SECRET_VALUE = re.compile(
    r"""(?P<key>(?<!using )['"]?\w*(?:password|secret|token)\w*['"]?\s*[:=]\s*)"""
    r"""(?P<value>'[^']*'|"[^"]*"|[^\s,;}&]+)""",
    re.IGNORECASE,
)
# The password of a URL's userinfo (`postgresql://user:password@host`).
_URL_PASSWORD = re.compile(r"(?P<head>://[^/@:\s]*:)[^/\s]*@")


def redact(text: str) -> str:
    """`text` with the value of every password-, secret- or token-named setting and every
    URL's password replaced by `***`."""
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}***@", text)
    return _SECRET_VALUE.sub(lambda m: f"{m['key']}'***'", text)


class RedactingFormatter(logging.Formatter):
    """Formats as `TEXT_FORMAT`, then redacts the whole line: the message, and the
    exception's text and traceback, which a driver may fill with its DSN or settings."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class OneLineKafkaErrors(logging.Filter):
    """kafka-python logs errors it recovers from (a socket closed under its IO thread)
    with a whole traceback; outside DEBUG they are one line, the exception's type and
    message appended, like every other line a cdcbox process writes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.name.startswith("kafka"):
            error = record.exc_info[1]
            record.msg = f"{record.getMessage()}: {type(error).__name__}: {error}"
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the event's fields when the
    line is about one, and the exception when there is one; message and exception
    redacted."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line["message"] = redact(line["message"])
        line.update({f: getattr(record, f) for f in EVENT_FIELDS if hasattr(record, f)})
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(line, default=str)


def configure(level: str = "INFO", fmt: LogFormat = "text") -> None:
    """Log to stderr at `level`, every secret-named setting blanked (`redact`), in the
    message and in an exception's text and traceback alike.
    kafka-python's own INFO lines (connections, metadata, rebalances) stay off unless
    `level` is DEBUG: they drown cdcbox's."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else RedactingFormatter(TEXT_FORMAT))
    if level != "DEBUG":
        handler.addFilter(OneLineKafkaErrors())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("kafka").setLevel(logging.DEBUG if level == "DEBUG" else logging.WARNING)
