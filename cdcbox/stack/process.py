"""Start and stop the stack's processes by pid, never by name.

A pid file holds the pid and the kernel's start time of that process, so a stale file
whose pid was reused by an unrelated process is recognised and that process left alone.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cdcbox.errors import StackError


def start_ticks(pid: int) -> str | None:
    """The process start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces; it is wrapped in parentheses.
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[19]


# The processes this one started: referenced so that a running child is never garbage
# collected (Popen warns about that), and polled to collect their exit status.
_children: dict[int, subprocess.Popen[bytes]] = {}


@atexit.register
def _reap_all() -> None:
    """Collect the status of children that exited but were never asked about; the rest
    are services meant to outlive this process (`cdc-ctl stack up`)."""
    for pid in list(_children):
        _reap(pid)


def _reap(pid: int) -> None:
    """Collect the exit status if `pid` is our own child, so it does not linger as a zombie."""
    child = _children.get(pid)
    if child is not None:
        if child.poll() is not None:
            del _children[pid]
        return
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


@dataclass(frozen=True)
class PidRecord:
    """A process the stack started, known by pid and start time, so a later process that
    reuses the pid is never taken for it."""

    pid: int
    start_ticks: str

    def alive(self) -> bool:
        """True while this exact process (not a later one with the same pid) exists."""
        _reap(self.pid)
        ticks = start_ticks(self.pid)
        if ticks != self.start_ticks:
            return False
        state = Path(f"/proc/{self.pid}/stat").read_text()
        return state[state.rindex(")") + 2] != "Z"


def write_pid(pid_file: Path, pid: int) -> PidRecord:
    ticks = start_ticks(pid)
    if ticks is None:
        raise StackError(f"process {pid} exited before its pid file {pid_file} was written")
    record = PidRecord(pid, ticks)
    pid_file.write_text(f"{pid} {ticks}\n")
    return record


def read_pid(pid_file: Path) -> PidRecord | None:
    try:
        pid, ticks = pid_file.read_text().split()
    except (OSError, ValueError):
        return None
    return PidRecord(int(pid), ticks)


def spawn(
    argv: Sequence[str],
    *,
    log_file: Path,
    pid_file: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> PidRecord:
    """Start a long-running process detached from our session, output to `log_file`."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    _children[proc.pid] = proc
    return write_pid(pid_file, proc.pid)


def stop(record: PidRecord, *, sig: signal.Signals = signal.SIGTERM, timeout_s: float = 60) -> None:
    """Signal one process by pid and wait for it to exit; SIGKILL after the deadline."""
    if not record.alive():
        return
    os.kill(record.pid, sig)
    if wait_until(lambda: not record.alive(), timeout_s):
        return
    os.kill(record.pid, signal.SIGKILL)
    if not wait_until(lambda: not record.alive(), 10):
        raise StackError(f"process {record.pid} survived SIGKILL")


class PidTracked:
    """A process of the stack tracked by its pid file: inspected and stopped by that
    pid only, whatever else runs on the machine."""

    pid_file: Path
    stop_timeout_s: float = 60

    def pid_record(self) -> PidRecord | None:
        return read_pid(self.pid_file)

    def running(self) -> bool:
        record = self.pid_record()
        return record is not None and record.alive()

    def stop(self) -> None:
        record = self.pid_record()
        if record is not None:
            stop(record, timeout_s=self.stop_timeout_s)
            self.pid_file.unlink(missing_ok=True)


def wait_until(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.2) -> bool:
    """Poll `predicate` until it is true or the deadline passes; returns the last answer."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log, for error messages that point at the cause."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log written)"
