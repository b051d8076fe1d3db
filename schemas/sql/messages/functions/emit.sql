-- The emitting function of the outbox without a table, created again by every
-- `cdc-ctl db migrate --relay messages` with the slot it names (not a versioned file).
-- `bodies[i]` is the rest of event i's JSON object (cdcbox.producer.messages writes it,
-- ASCII only), after the `occurred_at` stamped here from the clock the table outbox reads.
-- Nothing is emitted, and the transaction fails, while the connector's slot is missing,
-- not yet consistent or invalidated: no snapshot can recover a message emitted then, so
-- the business change must not commit without it. Each aggregate type claims its topic
-- keys as the table's trigger does (0010, 0013), with the same session cache.
-- Whether producers can emit now: the connector's slot exists in this database, is
-- consistent and is not invalidated (the exporter's cdcbox_outbox_emit_ready). PL/pgSQL,
-- not SQL: its plan is kept for the session, where a SQL function called from the
-- emitting function would be planned again at every call.
CREATE OR REPLACE FUNCTION {emit_ready_function}() RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT FROM pg_catalog.pg_get_replication_slots() AS s
        WHERE s.slot_name = {slot_name}
          AND s.datoid = (SELECT d.oid FROM pg_catalog.pg_database AS d
                          WHERE d.datname = pg_catalog.current_database())
          AND s.confirmed_flush_lsn IS NOT NULL AND s.wal_status IS DISTINCT FROM 'lost'
    );
END
$$;
CREATE OR REPLACE FUNCTION {emit_function}(aggregate_types text[], bodies bytea[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    taken_by text;
    t text;
    -- One clock reading for the call, as the table outbox takes one for its statement.
    stamp bytea := convert_to('{{"occurred_at":"'
        || to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
        || '",', 'UTF8');
BEGIN
    IF NOT {emit_ready_function}() THEN
        RAISE EXCEPTION 'replication slot "%" is missing or invalidated: an event emitted now could never be published', {slot_name}
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'cdc-ctl db migrate --relay messages creates it; cdc-ctl slot status shows it';
    END IF;
    FOREACH t IN ARRAY aggregate_types LOOP
        CONTINUE WHEN strpos(coalesce(current_setting('cdcbox.checked_aggregate_types', true), ''),
                             '|' || {topic_keys_literal} || ':' || t || '|') > 0;
        INSERT INTO {topic_keys} (topic_key, aggregate_type)
        VALUES (translate(t, '.', '_'), t), (translate(t, '.', '_') || '_dlq', t)
        ON CONFLICT (topic_key) DO NOTHING;
        SELECT c.aggregate_type INTO taken_by FROM {topic_keys} AS c
        WHERE c.topic_key IN (translate(t, '.', '_'), translate(t, '.', '_') || '_dlq')
          AND c.aggregate_type <> t
        LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'aggregate type % collides with % in Kafka topic names', t, taken_by
                USING ERRCODE = 'check_violation',
                      HINT = 'Kafka reads "." and "_" alike in topic names; rename one of them';
        END IF;
        PERFORM set_config('cdcbox.checked_aggregate_types',
            coalesce(current_setting('cdcbox.checked_aggregate_types', true), '')
                || '|' || {topic_keys_literal} || ':' || t || '|',
            false);
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(bodies, 1), 0) LOOP
        PERFORM pg_catalog.pg_logical_emit_message(true, {message_prefix}, stamp || bodies[i]);
    END LOOP;
    RETURN coalesce(array_length(bodies, 1), 0);
END
$$;
