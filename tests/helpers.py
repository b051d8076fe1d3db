"""Test helpers: wait for a condition with a deadline (never a bare sleep), unique names."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    probe: Callable[[], T], timeout: float = 60.0, interval: float = 0.1, what: str = "condition"
) -> T:
    """Poll `probe` until it returns a truthy value; fail with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def unique(prefix: str) -> str:
    """A name no other test (or earlier run against the same stack) uses."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"
