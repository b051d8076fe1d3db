-- Events a connector could not publish, kept whole by `cdc-ctl connectors quarantine`
-- when it moves the connector past them (the quarantine topic gets them too, with the
-- payload when Kafka takes it). Nothing here is deleted by retention.
CREATE TABLE IF NOT EXISTS {quarantine} (
    event_id          uuid        PRIMARY KEY,
    outbox_id         bigint      NOT NULL,
    aggregate_type    text        NOT NULL,
    aggregate_id      text        NOT NULL,
    aggregate_version bigint      NOT NULL,
    event_type        text        NOT NULL,
    payload           bytea       NOT NULL,
    content_type      text        NOT NULL,
    trace_id          text        NOT NULL,
    occurred_at       text        NOT NULL,
    connector         text        NOT NULL,
    lsn               pg_lsn      NOT NULL,
    error             text        NOT NULL,
    quarantined_at    timestamptz NOT NULL DEFAULT now()
);
