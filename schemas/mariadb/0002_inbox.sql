-- The consumers' tables on MariaDB: the same tables as on PostgreSQL (schemas/sql 0002,
-- 0004, 0005, 0007), the same guarantees. Identifiers and texts are utf8mb4 with a binary
-- collation (byte for byte, as on PostgreSQL); aggregate ids are VARBINARY so that a key
-- of consumer name, aggregate type and id (at most 1,024 bytes: cdcbox.limits) fits
-- InnoDB's 3,072-byte index limit. Times are UTC (the sessions' time zone is +00:00).

-- The inbox: one row per (event, consumer), its primary key the dedupe.
CREATE TABLE IF NOT EXISTS {inbox} (
    event_id          CHAR(36)        CHARACTER SET ascii NOT NULL,
    consumer_name     VARCHAR(200)    NOT NULL,
    event_type        VARCHAR(200)    NOT NULL,
    aggregate_type    VARCHAR(200)    NULL,
    aggregate_id      VARBINARY(1024) NULL,
    aggregate_version BIGINT          NULL,
    status            VARCHAR(10)     CHARACTER SET ascii NOT NULL
                      CHECK (status IN ('RECEIVED', 'PROCESSED', 'SKIPPED', 'FAILED')),
    skip_reason       TEXT            NULL,
    received_at       DATETIME(6)     NOT NULL DEFAULT UTC_TIMESTAMP(6),
    processed_at      DATETIME(6)     NULL,
    retry_count       INT             NOT NULL DEFAULT 0,
    error_message     TEXT            NULL,
    source_topic      VARCHAR(249)    CHARACTER SET ascii NULL,
    source_partition  INT             NULL,
    source_offset     BIGINT          NULL,
    failed_at         DATETIME(6)     NULL,
    PRIMARY KEY (event_id, consumer_name),
    -- Lookups of unfinished rows (FAILED, RECEIVED) by aggregate (no partial index here).
    KEY {inbox}_unfinished (consumer_name, status, aggregate_type, aggregate_id(255)),
    -- The purge deletes finished rows by the time they were last touched.
    KEY {inbox}_touched (status, processed_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The last aggregate version each consumer applied (the version guard).
CREATE TABLE IF NOT EXISTS {versions} (
    consumer_name  VARCHAR(200)    NOT NULL,
    aggregate_type VARCHAR(200)    NOT NULL,
    aggregate_id   VARBINARY(1024) NOT NULL,
    version        BIGINT          NOT NULL,
    updated_at     DATETIME(6)     NOT NULL DEFAULT UTC_TIMESTAMP(6),
    PRIMARY KEY (consumer_name, aggregate_type, aggregate_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Events a handler refused as an illegal transition, for people to reconcile.
CREATE TABLE IF NOT EXISTS {reconciliation} (
    event_id       CHAR(36)        CHARACTER SET ascii NOT NULL,
    consumer_name  VARCHAR(200)    NOT NULL,
    event_type     VARCHAR(200)    NOT NULL,
    aggregate_type VARCHAR(200)    NULL,
    aggregate_id   VARBINARY(1024) NULL,
    reason         TEXT            NOT NULL,
    recorded_at    DATETIME(6)     NOT NULL DEFAULT UTC_TIMESTAMP(6),
    PRIMARY KEY (event_id, consumer_name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Aggregates a consumer parked behind a dead-lettered event.
CREATE TABLE IF NOT EXISTS {parked} (
    consumer_name  VARCHAR(200)    NOT NULL,
    aggregate_type VARCHAR(200)    NOT NULL,
    aggregate_id   VARBINARY(1024) NOT NULL,
    event_id       CHAR(36)        CHARACTER SET ascii NOT NULL,
    reason         TEXT            NOT NULL,
    parked_at      DATETIME(6)     NOT NULL DEFAULT UTC_TIMESTAMP(6),
    replaying      BOOLEAN         NOT NULL DEFAULT FALSE,
    PRIMARY KEY (consumer_name, aggregate_type, aggregate_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The Kafka consumer group each consumer name runs in.
CREATE TABLE IF NOT EXISTS {bindings} (
    consumer_name VARCHAR(200) NOT NULL PRIMARY KEY,
    group_id      VARCHAR(255) NOT NULL,
    bound_at      DATETIME(6)  NOT NULL DEFAULT UTC_TIMESTAMP(6)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The circuit breaker's state, shared by every process of a consumer name.
CREATE TABLE IF NOT EXISTS {breakers} (
    consumer_name VARCHAR(200) NOT NULL PRIMARY KEY,
    is_open       BOOLEAN      NOT NULL DEFAULT FALSE,
    opened_at     DATETIME(6)  NULL,
    closed_at     DATETIME(6)  NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE IF NOT EXISTS {breaker_failures} (
    consumer_name  VARCHAR(200)    NOT NULL,
    aggregate_type VARCHAR(200)    NOT NULL,
    aggregate_id   VARBINARY(1024) NOT NULL,
    failed_at      DATETIME(6)     NOT NULL DEFAULT UTC_TIMESTAMP(6),
    PRIMARY KEY (consumer_name, aggregate_type, aggregate_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
