-- The outbox on MariaDB: one row per event, inserted in the producer's own transaction,
-- published by cdcbox's polling relay (Debezium's MariaDB connector is not used here).
-- The columns are the PostgreSQL outbox's, so the relay builds the same records:
-- created_at is UTC without a zone (the record timestamp), occurred_at the same instant as
-- ISO-8601 text; trace_id '' and aggregate_version 0 when absent, never NULL.
-- Text columns are utf8mb4 with a binary collation: ids compare byte for byte, as on
-- PostgreSQL. The limits of cdcbox.limits bound each column (checked before writing).
CREATE TABLE IF NOT EXISTS {outbox} (
    id                BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    event_id          CHAR(36)     CHARACTER SET ascii NOT NULL,
    aggregate_type    VARCHAR(200) NOT NULL,
    aggregate_id      VARCHAR(1024) NOT NULL,
    aggregate_version BIGINT       NOT NULL DEFAULT 0,
    event_type        VARCHAR(200) NOT NULL,
    payload           LONGBLOB     NOT NULL,
    content_type      VARCHAR(200) NOT NULL DEFAULT 'application/json',
    trace_id          VARCHAR(512) NOT NULL DEFAULT '',
    causation_id      VARCHAR(512) NOT NULL DEFAULT '',
    status            VARCHAR(10)  CHARACTER SET ascii NOT NULL DEFAULT 'PENDING'
                      CHECK (status IN ('PENDING', 'PROCESSING', 'SENT', 'RETRY', 'DEAD')),
    retry_count       INT          NOT NULL DEFAULT 0,
    next_retry_at     DATETIME(6)  NULL,
    locked_by         VARCHAR(200) NULL,
    locked_until      DATETIME(6)  NULL,
    created_at        DATETIME(6)  NOT NULL,
    occurred_at       CHAR(27)     CHARACTER SET ascii NOT NULL,
    sent_at           DATETIME(6)  NULL,
    last_error        TEXT         NULL,
    UNIQUE KEY {outbox}_event_id (event_id),
    -- The claim reads due rows in id order; the blocker lookup an aggregate's rows.
    KEY {outbox}_claim (status, id),
    KEY {outbox}_aggregate (aggregate_type, aggregate_id(255), id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
