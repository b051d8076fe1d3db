-- Kafka reads '.' and '_' alike when it checks a new topic's name against the others
-- (`Order.Line` collides with `Order_Line`, `Order_dlq` with `Order`'s dead letters,
-- `outbox.event.Order.dlq`): the second cannot be created and the Debezium task fails.
-- Each aggregate type claims the keys of its topic and of its dead-letter topic here, at
-- its first write; a type whose keys another holds is refused, raw SQL included. One
-- statement-level trigger per INSERT: a probe of this small table, no write once known.
CREATE TABLE IF NOT EXISTS {topic_keys} (
    topic_key      text PRIMARY KEY,
    aggregate_type text NOT NULL
);
CREATE OR REPLACE FUNCTION {topic_keys_function}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    clash record;
BEGIN
    -- Claim first, check after: a concurrent writer's claim of the same key makes this
    -- INSERT wait for it, and the check below (a new snapshot) then sees it.
    INSERT INTO {topic_keys} (topic_key, aggregate_type)
    SELECT k.topic_key, t.aggregate_type
    FROM (SELECT DISTINCT aggregate_type FROM new_rows) AS t,
         LATERAL (VALUES (translate(t.aggregate_type, '.', '_')),
                         (translate(t.aggregate_type, '.', '_') || '_dlq')) AS k(topic_key)
    ON CONFLICT (topic_key) DO NOTHING;
    SELECT t.aggregate_type AS new_type, c.aggregate_type AS taken_by INTO clash
    FROM (SELECT DISTINCT aggregate_type FROM new_rows) AS t,
         LATERAL (VALUES (translate(t.aggregate_type, '.', '_')),
                         (translate(t.aggregate_type, '.', '_') || '_dlq')) AS k(topic_key)
    JOIN {topic_keys} AS c ON c.topic_key = k.topic_key
    WHERE c.aggregate_type <> t.aggregate_type
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'aggregate type % collides with % in Kafka topic names', clash.new_type, clash.taken_by
            USING ERRCODE = 'check_violation',
                  HINT = 'Kafka reads "." and "_" alike in topic names; rename one of them';
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS {topic_keys_trigger} ON {outbox};
CREATE TRIGGER {topic_keys_trigger} AFTER INSERT ON {outbox}
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {topic_keys_function}();
