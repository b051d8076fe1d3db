-- Every lookup of the inbox by status looks for unfinished rows (FAILED: dead-lettered,
-- holding its aggregate; RECEIVED: claimed by a batch still in flight): the parked gate,
-- a replayed event's predecessors, the failures to replay after a breaker, the
-- exporter's counts. A partial index on those rows alone stays as small as they are and
-- is not written by the claim of an event that succeeds (nearly every claim), unlike the
-- index over every row's status it replaces, which grew with the inbox and cost every
-- claim an index insertion. Building it reads the inbox once, holding off its writers
-- meanwhile: purge a large inbox first (`cdc-ctl inbox purge`).
CREATE INDEX IF NOT EXISTS {inbox_unfinished_index}
    ON {inbox} (consumer_name, aggregate_type, aggregate_id, status)
    WHERE status IN ('FAILED', 'RECEIVED');
DROP INDEX IF EXISTS {inbox_status_index_qualified};
