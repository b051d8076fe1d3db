"""The consumer's per-record steps, one concern per module, composed in
`cdcbox.consumer.pipeline` in the order a record meets them:

route (decode once, find the handlers) → park_gate → retry (with the breaker) around
transaction (claim → guard → handler → mark, then COMMIT) → dead_letter when the retries
are spent; batch runs the transaction for a whole poll batch. The numbered list is in
the pipeline's docstring, the only one.
"""
