"""cdcbox's specs as Strimzi resources (`cdc-ctl apply --emit strimzi`): the same
connector configs `apply` sends, a Connect worker that builds the pinned Debezium in, the
outbox and dead-letter topics, and a user per role with its ACLs (`cdcbox.acls`)."""
