"""The consumer's tables, one module each owning its SQL: the inbox (dedupe and outcome),
the per-aggregate versions, the claim that does both in one statement, parked aggregates,
reconciliation, and the group binding. The consumer and the operator commands use them;
they import only the shared core.
"""
