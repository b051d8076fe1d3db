"""What the tests of healing share (issue 51): a transaction a SIGKILLed producer left
open, and the supervisor running as its own process, both stopped by pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cdcbox.kafka.client import Admin, KafkaSettings
from cdcbox.kafka.transactions import TransactionAdmin
from cdcbox.stack.connect_worker import GROUP
from cdcbox.stack.endpoints import Endpoints
from tests.helpers import eventually

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def abandoned_transaction(stack: Endpoints, topic: str, key: str) -> Iterator[str]:
    """A producer's transaction left open on `topic` partition 0 by SIGKILL (a 10 min
    transaction timeout, as a user's own might have); its transactional id. At exit,
    whatever is left of it is fenced, so no later test runs behind it."""
    with subprocess.Popen(
        [sys.executable, "-m", "tests.abandoned_txn", stack.bootstrap_servers, topic, key],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    ) as proc:
        try:
            assert proc.stdout is not None
            txn_id = proc.stdout.readline().split()[1]
        finally:
            proc.send_signal(signal.SIGKILL)
    try:
        yield txn_id
    finally:
        with TransactionAdmin(KafkaSettings(stack.bootstrap_servers)) as admin:
            if any(t.transactional_id == txn_id for t in admin.open_transactions([topic])):
                admin.fence(txn_id)


def connect_offsets_topic(stack: Endpoints) -> str:
    """The stack's Connect offsets topic, `<group>-offsets` (other tests start worker
    groups of their own on the same brokers)."""
    topic = f"{GROUP}-offsets"
    with Admin(KafkaSettings(stack.bootstrap_servers)) as admin:
        assert topic in admin.list_topics(), topic
    return topic


@contextmanager
def supervisor_running(
    stack: Endpoints, log: Path, *flags: str
) -> Iterator[subprocess.Popen[bytes]]:
    """`cdc-ctl connectors supervise FLAGS` against the stack, its log in `log`; stopped
    by SIGTERM to its pid at exit (it must exit 0)."""
    env = {**os.environ, **stack.as_env()}
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cdcbox.cli.main", "connectors", "supervise", *flags],
            cwd=ROOT,
            env=env,
            stderr=out,
        )
    try:
        # Started (its SIGTERM handler set) once it says so: a stop before that would
        # kill it with the default action.
        eventually(
            lambda: "supervising" in log.read_text() or proc.poll() is not None,
            timeout=60,
            what="the supervisor started",
        )
        assert proc.poll() is None, log.read_text()[-2000:]
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-2000:]
