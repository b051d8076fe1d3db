"""Who held the cores (`bench.cores`): a process's CPU time is found under its role, a
child that ended stays counted in its parent's, and roles follow the command line."""

from __future__ import annotations

import os
import subprocess
import sys

from bench import cores
from cdcbox.testing.waits import eventually

_BURN = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
# The live child then waits on its stdin, which stays open until the test kills it.
_BURN_THEN_WAIT = _BURN + "\nimport sys\nsys.stdin.read()"


def test_a_reaped_child_counts_for_its_parent_and_a_live_one_for_its_role() -> None:
    before = cores.snapshot()
    subprocess.run([sys.executable, "-c", _BURN], check=True)  # ends before `after`

    with subprocess.Popen([sys.executable, "-c", _BURN_THEN_WAIT], stdin=subprocess.PIPE) as live:

        def burned() -> cores.Snapshot | None:
            snapshot = cores.snapshot([live.pid])
            return snapshot if snapshot.cpu_s.get(cores.CONSUMER, 0.0) >= 0.25 else None

        try:
            after = eventually(burned, timeout=20, interval=0.05, what="the live child's CPU")
        finally:
            live.kill()
    benchmark = after.cpu_s[cores.BENCHMARK] - before.cpu_s[cores.BENCHMARK]
    assert benchmark >= 0.25  # the reaped child's 0.3 s, in this process's cutime
    assert after.cpu_s[cores.CONSUMER] >= 0.25
    shares = cores.cores_between(before, after, seconds=1.0)
    assert list(shares) == sorted(shares, key=lambda role: -shares[role])


def test_roles_by_command_line() -> None:
    me = os.getpid()
    assert cores.role_of("postgres: walsender cdcbox 127.0.0.1(5432) START_REPLICATION", 1, ())
    assert cores.role_of("postgres: walsender x", 1, ()).startswith("postgres: walsender")
    assert cores.role_of("postgres: checkpointer", 1, ()).startswith("postgres: the rest")
    assert (
        cores.role_of("java -cp x org.apache.kafka.connect.cli.ConnectDistributed", 1, ())[:13]
        == "Kafka Connect"
    )
    assert cores.role_of("java -cp x kafka.Kafka server.properties", 1, ()) == "Kafka broker"
    assert cores.role_of("anything", me, ()) == cores.BENCHMARK
    assert cores.role_of("python -c x", 7, (7,)) == cores.CONSUMER
    assert cores.role_of("bash", 1, ()) == cores.OTHER
    supervisor = "python -m cdcbox.cli.main connectors supervise --metrics-port 1"
    assert cores.role_of(supervisor, 1, ()).startswith("cdc-ctl connectors supervise")


def test_roles_under_a_hundredth_of_a_core_are_left_out() -> None:
    before = cores.Snapshot({"a": 1.0, "b": 1.0})
    after = cores.Snapshot({"a": 3.0, "b": 1.005, "c": 0.5})
    assert cores.cores_between(before, after, seconds=2.0) == {"a": 1.0, "c": 0.25}
