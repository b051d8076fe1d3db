"""cdcbox: the transactional outbox and inbox on PostgreSQL, Debezium and Kafka.

Producers append events in their own transaction (`cdcbox.producer`), a relay (Debezium or
the polling relay, `cdcbox.relay`) publishes them, and consumers apply each one exactly
once (`cdcbox.consumer`).

The package is layered, and imports run one way only (tests/unit/test_layering.py):

- top: `cli`, `testing`;
- services: `consumer`, `relay`, `ops`, `observe`, `stack`;
- adapters and stores: `producer`, `stores`, `kafka`, `connect`, `telemetry`;
- the shared core: the modules at the top of the package (`errors`, `wire`, `event`,
  `names`, `db`, `migrate`, `avro`, `limits`, `ids`, `resources`, `fault_switches`).

The modules that sat at the top before this layout (`cdcbox.outbox`, `cdcbox.kafka_client`,
...) still import, with a `DeprecationWarning` naming the new path, until the next release.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

from cdcbox.errors import CdcboxError

__all__ = ["CdcboxError"]
__version__ = version("cdcbox")  # one place: pyproject.toml

# Deprecated import path -> where the module lives now. Remove in the next release.
MOVED_MODULES = {
    "cdcbox.outbox": "cdcbox.producer.outbox",
    "cdcbox.async_outbox": "cdcbox.producer.async_outbox",
    "cdcbox.unit_of_work": "cdcbox.producer.unit_of_work",
    "cdcbox.sqlalchemy": "cdcbox.producer.sqlalchemy",
    "cdcbox.inbox": "cdcbox.stores.inbox",
    "cdcbox.version_guard": "cdcbox.stores.version_guard",
    "cdcbox.claim_guard": "cdcbox.stores.claim_guard",
    "cdcbox.parking": "cdcbox.stores.parking",
    "cdcbox.reconciliation": "cdcbox.stores.reconciliation",
    "cdcbox.group_binding": "cdcbox.stores.group_binding",
    "cdcbox.kafka_client": "cdcbox.kafka.client",
    "cdcbox.kafka_security": "cdcbox.kafka.security",
    "cdcbox.topics": "cdcbox.kafka.topics",
    "cdcbox.dlq": "cdcbox.kafka.dlq",
    "cdcbox.connectors": "cdcbox.connect.connectors",
    "cdcbox.connector_offsets": "cdcbox.connect.offsets",
    "cdcbox.wal_peek": "cdcbox.connect.wal_peek",
    "cdcbox.http_metrics": "cdcbox.telemetry.http_metrics",
    "cdcbox.log_format": "cdcbox.telemetry.log_format",
    "cdcbox.retention": "cdcbox.ops.retention",
    "cdcbox.slots": "cdcbox.ops.slots",
    "cdcbox.groups": "cdcbox.ops.groups",
    "cdcbox.doctor": "cdcbox.ops.doctor",
    "cdcbox.limit_checks": "cdcbox.ops.limit_checks",
    "cdcbox.check": "cdcbox.ops.check",
    "cdcbox.quarantine": "cdcbox.ops.quarantine",
    "cdcbox.exporter": "cdcbox.observe.exporter",
    "cdcbox.pipeline_state": "cdcbox.observe.pipeline_state",
    "cdcbox.top_view": "cdcbox.observe.top_view",
}


def warn_moved(old: str, new: str) -> None:
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release; import {new}",
        DeprecationWarning,
        stacklevel=3,
    )


class _MovedModuleLoader(importlib.abc.Loader):
    """Imports an old path as a view of the module at its new path: every attribute is
    read from the new module, so classes and functions are the very same objects."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        new = MOVED_MODULES[module.__name__]
        warn_moved(module.__name__, new)
        target = importlib.import_module(new)

        def forward(name: str) -> Any:
            return getattr(target, name)

        module.__getattr__ = forward  # type: ignore[method-assign]
        module.__dict__["__all__"] = getattr(
            target, "__all__", [n for n in vars(target) if not n.startswith("_")]
        )


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedModuleLoader())


if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedModuleFinder())


def __getattr__(name: str) -> Any:
    # `import cdcbox; cdcbox.outbox` and `from cdcbox import outbox` (old spellings).
    if f"cdcbox.{name}" in MOVED_MODULES:
        return importlib.import_module(f"cdcbox.{name}")
    raise AttributeError(f"module 'cdcbox' has no attribute {name!r}")
