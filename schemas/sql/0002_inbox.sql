-- The inbox: one row per (event, consumer). Its primary key is the dedupe: a redelivered
-- event conflicts and is skipped. Written in the handler's transaction.
CREATE TABLE IF NOT EXISTS {inbox} (
    event_id          uuid        NOT NULL,
    consumer_name     text        NOT NULL,
    event_type        text        NOT NULL,
    aggregate_type    text,
    aggregate_id      text,
    aggregate_version bigint,
    status            text        NOT NULL
                      CHECK (status IN ('RECEIVED', 'PROCESSED', 'SKIPPED', 'FAILED')),
    skip_reason       text,
    received_at       timestamptz NOT NULL DEFAULT now(),
    processed_at      timestamptz,
    retry_count       integer     NOT NULL DEFAULT 0,
    error_message     text,
    source_topic      text,
    source_partition  integer,
    source_offset     bigint,
    PRIMARY KEY (event_id, consumer_name)
);
CREATE INDEX IF NOT EXISTS {inbox_status_index} ON {inbox} (consumer_name, status, received_at);

-- The last aggregate version each consumer applied; the version guard reads and writes it
-- in the handler's transaction.
CREATE TABLE IF NOT EXISTS {versions} (
    consumer_name  text   NOT NULL,
    aggregate_type text   NOT NULL,
    aggregate_id   text   NOT NULL,
    version        bigint NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_name, aggregate_type, aggregate_id)
);

-- Events a handler refused as an illegal transition, for people to reconcile.
CREATE TABLE IF NOT EXISTS {reconciliation} (
    event_id       uuid        NOT NULL,
    consumer_name  text        NOT NULL,
    event_type     text        NOT NULL,
    aggregate_type text,
    aggregate_id   text,
    reason         text        NOT NULL,
    recorded_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, consumer_name)
);
