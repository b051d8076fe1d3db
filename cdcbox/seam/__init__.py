"""The database seam: what the consumer, the polling relay and the CLI ask of a database,
whichever it is. PostgreSQL's implementation is `cdcbox.postgres`, MariaDB's
`cdcbox.mariadb`; `cdcbox.databases.database_for` picks one from a DSN, once. The seam
imports neither.
"""
