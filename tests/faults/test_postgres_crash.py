"""The native stack after PostgreSQL crashed: `stack up` brings it back at the first try."""

from __future__ import annotations

import os
import signal

import psycopg
import pytest

from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.postgres import NativePostgres
from cdcbox.stack.secrets import StackSecrets
from tests.helpers import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


def test_start_right_after_a_postmaster_sigkill_waits_for_the_old_server_and_succeeds(
    stack: Endpoints, native_stack: StackConfig
) -> None:
    postgres = NativePostgres(native_stack, StackSecrets(native_stack.state_dir / "secrets"))
    record = postgres.pid_record()
    assert record is not None and record.alive()
    os.kill(record.pid, signal.SIGKILL)
    eventually(lambda: not record.alive(), timeout=10, what="the postmaster killed")
    # Started at once: the killed postmaster stays a zombie until its parent reaps it,
    # and its orphaned backends hold the shared memory for a moment longer.
    postgres.start()
    restarted = postgres.pid_record()
    assert restarted is not None and restarted.pid != record.pid
    with psycopg.connect(stack.dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
