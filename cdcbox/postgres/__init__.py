"""PostgreSQL's side of the database seam (`cdcbox.seam`): the consumer's tables, one
module each owning its SQL (the inbox, the per-aggregate versions, the claim that does
both in one statement, parked aggregates, reconciliation, the group binding, the circuit
breaker), the polling relay's store, and `PostgresDatabase`, which gives them.
"""
