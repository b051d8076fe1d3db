"""A transactional producer that opens a transaction, writes to one topic and then
waits to be killed: run as `python -m tests.abandoned_txn BOOTSTRAP TOPIC KEY`; it prints
`open TRANSACTIONAL_ID` once its record is on the partition (the transaction still open)."""

from __future__ import annotations

import sys
import threading
import uuid

from kafka import KafkaProducer


def main(bootstrap: str, topic: str, key: str) -> None:
    txn_id = f"cdcbox-test-abandoned-{uuid.uuid4()}"
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=txn_id,
        transaction_timeout_ms=600_000,
    )
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, key=key.encode(), value=None, partition=0)
    producer.flush()
    print("open", txn_id, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(*sys.argv[1:4])
