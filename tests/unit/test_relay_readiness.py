"""The polling relay's /readyz reflects its state: 503 naming the cause while it cannot
claim (its database does not answer), 200 on /healthz meanwhile (it is alive and
retrying). No service is needed: the database it is given does not exist."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request

import pytest

from cdcbox.relay.config import RelayConfig
from cdcbox.relay.worker import RelayWorker
from tests.helpers import eventually, free_port

pytestmark = pytest.mark.unit


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except urllib.error.URLError:
        return 0, "not listening yet"


def test_readyz_names_why_the_relay_cannot_work_while_healthz_says_it_lives() -> None:
    port = free_port()
    worker = RelayWorker(
        RelayConfig(
            dsn=f"postgresql://nobody@127.0.0.1:{free_port()}/none?connect_timeout=1",
            bootstrap_servers="127.0.0.1:1",
            worker_id="w1",
            listen=False,
            poll_interval_s=0.1,
            metrics_port=port,
        )
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        _status, reason = eventually(
            lambda: got if (got := get(f"http://127.0.0.1:{port}/readyz"))[0] == 503 else None,
            timeout=30,
            what="/readyz 503",
        )
        assert reason.startswith("cannot relay:"), reason
        assert get(f"http://127.0.0.1:{port}/healthz")[0] == 200
        assert "cdcbox_build_info" in get(f"http://127.0.0.1:{port}/metrics")[1]
    finally:
        worker.stop()
        thread.join(timeout=30)
