"""How the long-running commands log: text for people, JSON lines for log pipelines.

Per-record log lines carry the event's id, aggregate and trace id as fields
(`Event.log_extra`), so a JSON line can be searched by them without parsing the message.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Literal

LogFormat = Literal["text", "json"]
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
EVENT_FIELDS = ("event_id", "aggregate_type", "aggregate_id", "trace_id")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the event's fields when the
    line is about one, and the exception when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update({f: getattr(record, f) for f in EVENT_FIELDS if hasattr(record, f)})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(level: str = "INFO", fmt: LogFormat = "text") -> None:
    """Log to stderr at `level`. kafka-python's own INFO lines (connections, metadata,
    rebalances) stay off unless `level` is DEBUG: they drown cdcbox's."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("kafka").setLevel(logging.DEBUG if level == "DEBUG" else logging.WARNING)
