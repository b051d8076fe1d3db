-- Least privilege for Debezium: it may replicate and read the outbox table, nothing else.
-- The publication covers the outbox only and publishes inserts only: CDC never needs the
-- relay's status updates or retention deletes, so they are not even decoded.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {debezium_role_name}) THEN
        CREATE ROLE {debezium_role} WITH LOGIN REPLICATION;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_publication WHERE pubname = {publication_name}) THEN
        CREATE PUBLICATION {publication} FOR TABLE {outbox} WITH (publish = 'insert');
    END IF;
END
$$;
GRANT USAGE ON SCHEMA {schema} TO {debezium_role};
GRANT SELECT ON {outbox} TO {debezium_role};
