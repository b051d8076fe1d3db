-- Aggregates a consumer has parked: once one event of an aggregate is dead-lettered, its
-- later events are dead-lettered behind it (not applied out of order) until an operator
-- releases the aggregate and replays the dead-letter topic.
CREATE TABLE IF NOT EXISTS {parked} (
    consumer_name  text        NOT NULL,
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    event_id       uuid        NOT NULL,
    reason         text        NOT NULL,
    parked_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_name, aggregate_type, aggregate_id)
);
