-- The circuit breaker's state, shared by every process of a consumer name: open while
-- failures across many aggregates look like an outage. Each aggregate whose record used
-- up its retries is noted under the breaker row's lock, so every process counts it.
CREATE TABLE IF NOT EXISTS {breakers} (
    consumer_name text        PRIMARY KEY,
    is_open       boolean     NOT NULL DEFAULT false,
    opened_at     timestamptz,
    closed_at     timestamptz
);
CREATE TABLE IF NOT EXISTS {breaker_failures} (
    consumer_name  text        NOT NULL,
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    failed_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_name, aggregate_type, aggregate_id)
);
-- When a row last became FAILED: what the breaker replays after it closes.
ALTER TABLE {inbox} ADD COLUMN IF NOT EXISTS failed_at timestamptz;
-- A parked aggregate whose dead letters are being replayed: its live events are put back
-- on the topic behind the replayed ones instead of going to the dead-letter topic.
ALTER TABLE {parked} ADD COLUMN IF NOT EXISTS replaying boolean NOT NULL DEFAULT false;
