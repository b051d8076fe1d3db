"""Services declared in connector specs: one producing service per database or schema,
its connector's names derived so that no two services can collide.

A service spec names the service, its database and schema, and the connector spec it
instantiates (`base`); everything that must differ between services is derived from
its name and schema — the connector, the replication slot (cluster-wide), the
publication (per database: the schema's), the outbox table, Debezium's topic prefix and
its database role (which may read this service's outbox only) — and wins over the
`CDCBOX_*` variables the base spec reads, which still supply the rest (hosts, secrets).
`load_specs` refuses two specs that would share any of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psycopg.conninfo import make_conninfo

from cdcbox.errors import ConfigError, SpecError
from cdcbox.names import DbNames

SERVICE_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
SERVICE_KEYS = {"name", "database", "schema", "aggregates"}
AGGREGATE_TYPE = re.compile(r"[A-Za-z0-9._-]{1,200}")


@dataclass(frozen=True)
class Service:
    """A producing service: its name, the database its outbox lives in (None: the one
    the environment's `CDCBOX_CONNECT_DB_NAME` names), its schema, and the aggregate
    types it emits (None: not declared), from which `cdcbox.acls` grants Write on their
    topics only."""

    name: str
    database: str | None = None
    schema: str = "public"
    aggregates: tuple[str, ...] | None = None

    @property
    def names(self) -> DbNames:
        """Its tables in its schema, and a Debezium role of its own: a role may read only
        the outbox of the one service it publishes."""
        return DbNames(schema=self.schema, debezium_role=self.debezium_role)

    @property
    def debezium_role(self) -> str:
        return f"cdcbox_debezium_{self.name}"

    @property
    def connector(self) -> str:
        return f"{self.name.replace('_', '-')}-outbox"

    @property
    def slot(self) -> str:
        return f"cdcbox_{self.name}"

    @property
    def topic_prefix(self) -> str:
        return f"cdcbox-{self.name.replace('_', '-')}"

    def variables(self) -> dict[str, str]:
        """The spec variables this service derives (they win over the environment's)."""
        derived = {
            "CDCBOX_CONNECTOR_NAME": self.connector,
            "CDCBOX_SLOT_NAME": self.slot,
            "CDCBOX_PUBLICATION": self.names.publication,
            "CDCBOX_MESSAGE_PREFIX": self.names.message_prefix,
            "CDCBOX_OUTBOX_TABLE": self.names.outbox_qualified,
            "CDCBOX_TOPIC_PREFIX": self.topic_prefix,
            "CDCBOX_DEBEZIUM_ROLE": self.debezium_role,
        }
        if self.database:
            derived["CDCBOX_CONNECT_DB_NAME"] = self.database
        return derived

    def dsn(self, dsn: str) -> str:
        """`dsn` (the operator's, to one database of the cluster) turned to this
        service's database."""
        return make_conninfo(dsn, dbname=self.database) if self.database else dsn


def parse_service(path: Path, raw: Any, substitute: Any) -> Service:
    """The `service:` block of a spec, checked; `substitute(key, value)` renders
    `${VAR}` in its values as in the config."""
    if not isinstance(raw, dict) or set(raw) - SERVICE_KEYS or "name" not in raw:
        raise SpecError(
            f"{path}: service is a mapping with 'name' and optionally 'database', 'schema', "
            "'aggregates'"
        )
    raw = dict(raw)
    aggregates = _aggregates(path, raw.pop("aggregates", None))
    values = {k: substitute(f"service.{k}", v) for k, v in raw.items()}
    if not SERVICE_NAME.fullmatch(values["name"]):
        raise SpecError(
            f"{path}: service.name {values['name']!r} must be lower-case letters, digits "
            "and '_', starting with a letter, at most 40 (it names the slot and connector)"
        )
    service = Service(
        values["name"],
        values.get("database") or None,
        values.get("schema", "public"),
        aggregates,
    )
    try:
        service.names  # noqa: B018 (validates the schema name)
    except ConfigError as e:
        raise SpecError(f"{path}: service.schema: {e}") from None
    return service


def _aggregates(path: Path, raw: Any) -> tuple[str, ...] | None:
    """`service.aggregates`: a list of aggregate types (each a Kafka topic name's tail)."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(
        isinstance(a, str) and AGGREGATE_TYPE.fullmatch(a) for a in raw
    ):
        raise SpecError(
            f"{path}: service.aggregates is a list of aggregate types (letters, digits, "
            f"'.', '_', '-'), got {raw!r}"
        )
    return tuple(raw)


def check_no_collisions(specs: Mapping[Path, Mapping[str, Any]]) -> None:
    """Refuse, naming both files, two connector specs that would share a connector name,
    a replication slot or topic prefix (per cluster), or a publication or outbox table
    (per database): the second would steal the first's events or publish them twice."""
    seen: dict[tuple[str, ...], Path] = {}
    for path, spec in specs.items():
        config, name = spec["config"], spec["name"]
        cluster = (config.get("database.hostname", ""), str(config.get("database.port", "")))
        database = (*cluster, config.get("database.dbname", ""))
        keys = {
            "connector name": (name,),
            "replication slot": (*cluster, config.get("slot.name", "debezium")),
            "topic prefix": (config.get("topic.prefix", ""),),
            "publication": (*database, config.get("publication.name", "dbz_publication")),
            "outbox table": (*database, config.get("table.include.list", "")),
        }
        for what, key in keys.items():
            other = seen.setdefault((what, *key), path)
            if other != path:
                raise SpecError(
                    f"{path} and {other} share the {what} {key[-1]!r}: give each service "
                    "its own (a `service:` spec derives them from its name and schema)"
                )
