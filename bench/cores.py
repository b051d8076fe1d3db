"""Which process holds which share of the machine's cores while a run writes, from /proc.

Each process's CPU time is `utime + stime` of `/proc/PID/stat` (every thread of it), plus
`cutime + cstime`: the children it reaped. A process that ends between two snapshots
thus stays counted, in its parent's role: pgbench (reaped by the benchmark) and
PostgreSQL's short-lived backends (reaped by the postmaster). Processes are grouped by
role from their command line; a role's cores are its CPU seconds over the wall seconds
between the snapshots (2.0 on two cores is the whole machine).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")

WALSENDER = "postgres: walsender (Debezium's WAL decoding)"
CONNECT = "Kafka Connect (Debezium, its producers)"
# Command-line marks, first match wins; a process matching none is "other".
# The supervisor first: its command line may name a DSN ("postgresql://…").
_ROLES: tuple[tuple[str, str], ...] = (
    ("connectors supervise", "cdc-ctl connectors supervise (the stack's supervisor)"),
    ("postgres: walsender", WALSENDER),
    ("postgres", "postgres: the rest (backends, WAL writer, checkpointer)"),
    ("ConnectDistributed", CONNECT),
    ("kafka.Kafka", "Kafka broker"),
    ("java", "other JVM (schema registry)"),
)
CONSUMER = "cdcbox consumer"
BENCHMARK = "benchmark: pgbench (reaped) and the arrival probe"
OTHER = "other"


@dataclass(frozen=True)
class Snapshot:
    """CPU seconds per role at one instant (children reaped included)."""

    cpu_s: dict[str, float]


def _stat_fields(pid: str) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # ended while we looked
        return None
    return text.rsplit(")", 1)[1].split()  # after "(comm)", which may hold spaces


def _cmdline(pid: str) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def role_of(cmdline: str, pid: int, consumer_pids: Iterable[int]) -> str:
    """The role a process of `cmdline` plays in the run."""
    if pid in consumer_pids:
        return CONSUMER
    if pid == os.getpid():
        return BENCHMARK
    for mark, role in _ROLES:
        if mark in cmdline:
            return role
    return OTHER


def snapshot(consumer_pids: Iterable[int] = ()) -> Snapshot:
    """Every process's CPU seconds so far, summed by role."""
    consumers = set(consumer_pids)
    cpu: dict[str, float] = defaultdict(float)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry.name)
        if fields is None:
            continue
        # Fields after the command: state is [0], utime [11], stime [12], cutime [13],
        # cstime [14] (proc(5)'s fields 14-17).
        ticks = sum(int(f) for f in fields[11:15])
        cpu[role_of(_cmdline(entry.name), int(entry.name), consumers)] += ticks / _TICK
    return Snapshot(dict(cpu))


def cores_between(before: Snapshot, after: Snapshot, seconds: float) -> dict[str, float]:
    """Each role's cores between two snapshots `seconds` apart, busiest first; roles
    that used under a hundredth of a core are left out."""
    roles = set(before.cpu_s) | set(after.cpu_s)
    cores = {
        role: (after.cpu_s.get(role, 0.0) - before.cpu_s.get(role, 0.0)) / seconds for role in roles
    }
    return dict(sorted(((r, c) for r, c in cores.items() if c >= 0.01), key=lambda rc: -rc[1]))
