"""The outbox's event columns: what a producer writes, the polling relay reads back and
a logical decoding message carries, by the same names."""

EVENT_COLUMNS = (
    "event_id",
    "aggregate_type",
    "aggregate_id",
    "aggregate_version",
    "event_type",
    "payload",
    "content_type",
    "trace_id",
    "causation_id",
)
