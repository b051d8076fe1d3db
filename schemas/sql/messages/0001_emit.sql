-- The outbox without a table (`cdc-ctl db migrate --relay messages`): each event is a
-- transactional logical decoding message, committed or rolled back with the caller's
-- transaction, which the Debezium connector of connectors/messages publishes through
-- the same Outbox Event Router. Debezium's role may replicate and nothing else: the
-- publication covers no table (pgoutput sends messages whatever the publication).
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {debezium_role_name}) THEN
        CREATE ROLE {debezium_role} WITH LOGIN REPLICATION;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_publication WHERE pubname = {publication_name}) THEN
        CREATE PUBLICATION {publication};
    END IF;
END
$$;

-- An INSERT into this schema's outbox table would never be published (the connector reads
-- messages only): refused, naming the fix, so no service writes there by mistake.
CREATE OR REPLACE FUNCTION {refuse_rows_function}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'schema % was migrated for the outbox without a table: append with Outbox(messages=True)', TG_TABLE_SCHEMA
        USING ERRCODE = 'feature_not_supported';
END
$$;
DROP TRIGGER IF EXISTS {refuse_rows_trigger} ON {outbox};
CREATE TRIGGER {refuse_rows_trigger} BEFORE INSERT ON {outbox}
    FOR EACH STATEMENT EXECUTE FUNCTION {refuse_rows_function}();
