-- Claim indexes that hold only unsent rows. The claim reads due rows in id order: a
-- partial index on id over PENDING/PROCESSING/RETRY rows gives that order without a sort
-- however long the backlog, and stays as small as the backlog (SENT rows leave it). The
-- per-aggregate blocker lookup reads only the aggregate's unsent (or DEAD) rows, never
-- its history of SENT ones. They replace 0001's full indexes, which every SENT row kept
-- growing.
CREATE INDEX IF NOT EXISTS {outbox_unsent_index}
    ON {outbox} (id) WHERE status IN ('PENDING', 'PROCESSING', 'RETRY');
CREATE INDEX IF NOT EXISTS {outbox_blocker_index}
    ON {outbox} (aggregate_type, aggregate_id, id) WHERE status <> 'SENT';
DROP INDEX IF EXISTS {outbox_claim_index_qualified};
DROP INDEX IF EXISTS {outbox_aggregate_index_qualified};
