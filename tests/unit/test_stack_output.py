"""The native stack's small mechanics: `stack up`'s summaries of Maven's output (a line
per 25 files downloaded, then the total; a stand-in process prints what Maven prints,
the real resolution runs in every e2e session), and which ports it hands out."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from cdcbox.stack.config import Ports
from cdcbox.stack.jars import run_maven

pytestmark = pytest.mark.unit


def test_maven_downloads_are_counted_in_a_few_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = tmp_path / "mvn.py"
    fake.write_text(
        "for i in range(60):\n"
        "    print(f'[INFO] Downloading from a-repo: https://example.invalid/{i}.jar')\n"
        "    print(f'[INFO] Downloaded from a-repo: https://example.invalid/{i}.jar (1 kB)')\n"
        "print('[INFO] BUILD SUCCESS')\n"
    )
    with caplog.at_level(logging.INFO, logger="cdcbox.stack"):
        code, tail = run_maven([sys.executable, str(fake)], "debezium")
    assert code == 0
    assert tail.endswith("[INFO] BUILD SUCCESS\n")
    assert caplog.messages == [
        "  debezium jars: 25 files downloaded so far",
        "  debezium jars: 50 files downloaded so far",
        "  debezium jars: 60 files downloaded",
    ]


def test_a_failed_maven_run_keeps_the_end_of_its_output(tmp_path: Path) -> None:
    fake = tmp_path / "mvn.py"
    fake.write_text(
        "import sys\nfor i in range(100):\n    print(f'line {i}')\n"
        "print('[ERROR] Could not resolve dependencies')\nsys.exit(1)\n"
    )
    code, tail = run_maven([sys.executable, str(fake)], "kafka")
    assert code == 1
    assert "[ERROR] Could not resolve dependencies" in tail
    assert "line 0\n" not in tail  # only the tail is kept


def test_the_ports_services_bind_late_lie_outside_the_ephemeral_range() -> None:
    """A consumer or relay binds its metrics port long after the stack started; inside
    the kernel's ephemeral range a client socket's local port may hold it already (the
    e2e metrics test once failed with "Address already in use" on 59100). MariaDB too:
    the test session starts it when its first MariaDB test runs, and a fault test
    restarts it (CI once failed with "Address already in use" on 53306)."""
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    ports = Ports()
    late = (
        *ports.consumer_metrics,
        *ports.relay_metrics,
        ports.registry,
        ports.registry_management,
        ports.mariadb,
    )
    assert not [p for p in late if low <= p <= high], (low, high, late)
