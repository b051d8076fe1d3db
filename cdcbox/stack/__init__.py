"""The local stack: PostgreSQL, Kafka (KRaft) and Kafka Connect with Debezium.

`cdcbox.stack.runner` starts it either as native processes (jars resolved by Maven,
PostgreSQL from Debian packages) or with docker compose, from the versions pinned in
`infra/versions.env`.
"""
