"""The consumer's per-record steps, one concern per module, composed in
`cdcbox.consumer.pipeline` in the order a record meets them:

route (decode, find the handler) → dead_letter's parked gate → retry (with the breaker)
around transaction (claim → guard → handler → mark, then COMMIT) → dead_letter when the
retries are spent; batch runs the same transaction for a whole poll batch.
"""
