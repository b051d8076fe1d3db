-- Rows the pipeline could not publish are refused at write, raw SQL included: one such
-- row would fail the Debezium task and hold every later event behind it (see
-- cdcbox/limits.py, which Outbox.append checks against before it writes). NOT VALID: rows
-- already written are not re-checked (no table scan, no lock held while scanning).
-- The payload size limit is a setting, kept in step by `cdc-ctl db migrate`.
ALTER TABLE {outbox}
    ADD CONSTRAINT outbox_aggregate_type_names_a_topic
        CHECK (aggregate_type ~ '^[A-Za-z0-9._-]{{1,200}}$' AND aggregate_type !~ '\.dlq$')
        NOT VALID,
    ADD CONSTRAINT outbox_aggregate_version_not_negative
        CHECK (aggregate_version >= 0) NOT VALID,
    ADD CONSTRAINT outbox_fields_fit_headers
        CHECK (octet_length(aggregate_id) BETWEEN 1 AND 1024
               AND octet_length(event_type) BETWEEN 1 AND 200
               AND octet_length(content_type) <= 200
               AND octet_length(trace_id) <= 512) NOT VALID;
