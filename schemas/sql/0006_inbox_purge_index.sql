-- The inbox purge deletes PROCESSED/SKIPPED rows by the time they were last touched
-- (processed_at: a FAILED row replayed later is processed later than it was received).
-- Partial, on exactly the purge's expression, so each purge batch reads only the rows it
-- deletes instead of rescanning the table.
CREATE INDEX IF NOT EXISTS {inbox_purge_index} ON {inbox} ((coalesce(processed_at, received_at)))
    WHERE status IN ('PROCESSED', 'SKIPPED');
