-- The append's own cost: the rules of 0008, 0010 and 0011, unchanged, checked for less.
--
-- PostgreSQL 15 reads every CHECK constraint's expression tree afresh for each INSERT
-- statement it executes, so a single-row append paid for five constraints' trees, one
-- of them a regular expression ('^[A-Za-z0-9._-]{{1,200}}$', an automaton of 200 repeated
-- states). One CHECK now calls one PL/pgSQL function, compiled once per session, with
-- the same rules; a row that breaks one is refused with that rule's name, as before.
-- The payload limit stays a constraint of its own (`cdc-ctl db migrate` keeps it in step
-- with the configured limit). NOT VALID: rows already written are not re-checked.
CREATE OR REPLACE FUNCTION {publishable_function}(
    aggregate_type text, aggregate_id text, aggregate_version bigint, event_type text,
    content_type text, trace_id text, causation_id text
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    broken text;
BEGIN
    IF NOT (octet_length(aggregate_type) BETWEEN 1 AND 200
            AND translate(aggregate_type,
                'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-', '') = ''
            AND right(aggregate_type, 4) <> '.dlq') THEN
        broken := 'outbox_aggregate_type_names_a_topic';
    ELSIF NOT aggregate_version >= 0 THEN
        broken := 'outbox_aggregate_version_not_negative';
    ELSIF NOT (octet_length(aggregate_id) BETWEEN 1 AND 1024
               AND octet_length(event_type) BETWEEN 1 AND 200
               AND octet_length(content_type) <= 200
               AND octet_length(trace_id) <= 512) THEN
        broken := 'outbox_fields_fit_headers';
    ELSIF NOT octet_length(causation_id) <= 512 THEN
        broken := 'outbox_causation_id_fits_header';
    ELSE
        RETURN true;
    END IF;
    RAISE EXCEPTION 'new row for the outbox violates check constraint "%"', broken
        USING ERRCODE = 'check_violation', CONSTRAINT = broken;
END
$$;
ALTER TABLE {outbox}
    DROP CONSTRAINT IF EXISTS outbox_aggregate_type_names_a_topic,
    DROP CONSTRAINT IF EXISTS outbox_aggregate_version_not_negative,
    DROP CONSTRAINT IF EXISTS outbox_fields_fit_headers,
    DROP CONSTRAINT IF EXISTS outbox_causation_id_fits_header,
    DROP CONSTRAINT IF EXISTS outbox_publishable,
    ADD CONSTRAINT outbox_publishable
        CHECK ({publishable_function}(aggregate_type, aggregate_id, aggregate_version,
               event_type, content_type, trace_id, causation_id))
        NOT VALID;

-- The topic-key claim (0010) ran for every INSERT statement: a transition table and two
-- queries each time. It runs now for a row whose aggregate type this session has not
-- checked yet: a session lists the types it checked in `cdcbox.checked_aggregate_types`,
-- which a rolled-back transaction or savepoint forgets with the claims it made, and a
-- type checked once stays valid (a claim is never taken back). Raw SQL is still checked.
-- BEFORE the row: the next row of the same statement already sees the list (an AFTER
-- trigger would run only at the statement's end, once for every row of a bulk insert).
CREATE OR REPLACE FUNCTION {topic_keys_function}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    taken_by text;
BEGIN
    -- Claim first, check after: a concurrent writer's claim of the same key makes this
    -- INSERT wait for it, and the check below (a new snapshot) then sees it.
    INSERT INTO {topic_keys} (topic_key, aggregate_type)
    VALUES (translate(NEW.aggregate_type, '.', '_'), NEW.aggregate_type),
           (translate(NEW.aggregate_type, '.', '_') || '_dlq', NEW.aggregate_type)
    ON CONFLICT (topic_key) DO NOTHING;
    SELECT c.aggregate_type INTO taken_by FROM {topic_keys} AS c
    WHERE c.topic_key IN (translate(NEW.aggregate_type, '.', '_'),
                          translate(NEW.aggregate_type, '.', '_') || '_dlq')
      AND c.aggregate_type <> NEW.aggregate_type
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'aggregate type % collides with % in Kafka topic names', NEW.aggregate_type, taken_by
            USING ERRCODE = 'check_violation',
                  HINT = 'Kafka reads "." and "_" alike in topic names; rename one of them';
    END IF;
    PERFORM set_config('cdcbox.checked_aggregate_types',
        coalesce(current_setting('cdcbox.checked_aggregate_types', true), '')
            || '|' || {topic_keys_literal} || ':' || NEW.aggregate_type || '|',
        false);
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS {topic_keys_trigger} ON {outbox};
CREATE TRIGGER {topic_keys_trigger} BEFORE INSERT ON {outbox}
    FOR EACH ROW
    WHEN (strpos(coalesce(current_setting('cdcbox.checked_aggregate_types', true), ''),
                 '|' || {topic_keys_literal} || ':' || NEW.aggregate_type || '|') = 0)
    EXECUTE FUNCTION {topic_keys_function}();
