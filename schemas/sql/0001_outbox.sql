-- The outbox: one row per event, inserted in the producer's own transaction.
-- CDC mode only ever inserts (and retention deletes); the status/lease columns serve the
-- polling relay. created_at is `timestamp` (UTC, no zone) because Debezium's Outbox Event
-- Router requires that type for table.field.event.timestamp; occurred_at is the same
-- instant as ISO-8601 text, so the header is byte-identical whichever relay sends it.
-- trace_id is '' and aggregate_version 0 when absent, never NULL: a NULL column becomes a
-- null header, which not every Kafka client can write (the polling relay must match).
CREATE TABLE IF NOT EXISTS {outbox} (
    id                bigserial   PRIMARY KEY,
    event_id          uuid        NOT NULL UNIQUE,
    aggregate_type    text        NOT NULL,
    aggregate_id      text        NOT NULL,
    aggregate_version bigint      NOT NULL DEFAULT 0,
    event_type        text        NOT NULL,
    payload           bytea       NOT NULL,
    content_type      text        NOT NULL DEFAULT 'application/json',
    trace_id          text        NOT NULL DEFAULT '',
    status            text        NOT NULL DEFAULT 'PENDING'
                      CHECK (status IN ('PENDING', 'PROCESSING', 'SENT', 'RETRY', 'DEAD')),
    retry_count       integer     NOT NULL DEFAULT 0,
    next_retry_at     timestamptz,
    locked_by         text,
    locked_until      timestamptz,
    created_at        timestamp   NOT NULL DEFAULT (clock_timestamp() AT TIME ZONE 'UTC'),
    occurred_at       text        NOT NULL
                      DEFAULT to_char(clock_timestamp() AT TIME ZONE 'UTC',
                                      'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
    sent_at           timestamptz,
    last_error        text
);
