-- Wake the polling relay as soon as events commit: one NOTIFY per inserting statement,
-- delivered at COMMIT (never for a rolled-back transaction). CDC mode does without it.
CREATE OR REPLACE FUNCTION {notify_function}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify({channel}, '');
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS {notify_trigger} ON {outbox};
CREATE TRIGGER {notify_trigger} AFTER INSERT ON {outbox}
    FOR EACH STATEMENT EXECUTE FUNCTION {notify_function}();
