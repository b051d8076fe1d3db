-- Indexes only the polling relay needs: claiming due rows, and holding back an aggregate's
-- later events while an earlier one is unsent. They end in `id` (insertion order), the
-- order the relay claims and publishes in. CDC mode skips them; each index costs
-- every producer transaction.
CREATE INDEX IF NOT EXISTS {outbox_claim_index}
    ON {outbox} (status, next_retry_at, id);
CREATE INDEX IF NOT EXISTS {outbox_aggregate_index}
    ON {outbox} (aggregate_type, aggregate_id, id);
