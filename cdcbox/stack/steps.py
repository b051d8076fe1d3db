"""What `stack up` is doing while it does it: every step (packages installed, jars
resolved, each component started) is logged when it begins and when it ends, with the
time it took, on the `cdcbox.stack` logger; `cdc-ctl stack up` prints them on stderr."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger("cdcbox.stack")


@contextmanager
def step(what: str) -> Iterator[None]:
    """Log `what` as begun, then as done (or failed) with its duration."""
    log.info("%s ...", what)
    started = time.monotonic()
    try:
        yield
    except BaseException:
        log.info("%s: failed after %.1fs", what, time.monotonic() - started)
        raise
    log.info("%s: done in %.1fs", what, time.monotonic() - started)
