-- The Kafka consumer group each consumer name runs in. A name's inbox rows, aggregate
-- versions and parked aggregates are one state; two groups running one name would each
-- receive every event and split that state, so a consumer refuses to start in a group
-- other than the one recorded here unless told to move.
CREATE TABLE IF NOT EXISTS {bindings} (
    consumer_name text        PRIMARY KEY,
    group_id      text        NOT NULL,
    bound_at      timestamptz NOT NULL DEFAULT now()
);
