"""`cdcbox_build_info`: the running version, in every registry cdcbox serves, so a
dashboard can tell which release each process runs (Prometheus' `*_build_info` idiom)."""

from __future__ import annotations

import platform
from importlib.metadata import version

from prometheus_client import CollectorRegistry, Gauge


def register_build_info(registry: CollectorRegistry, component: str) -> None:
    """A gauge at 1 labelled with cdcbox's version, the component and Python's version."""
    Gauge(
        "cdcbox_build_info",
        "Always 1: the version of cdcbox this process runs",
        ["version", "component", "python"],
        registry=registry,
    ).labels(version("cdcbox"), component, platform.python_version()).set(1)
