"""Declarative connector specs: load, render, check, diff and apply them to Kafka Connect.

A spec is refused before it changes anything in Connect: a missing variable, an inline
secret or an option that neither the connector, its transforms nor its converters define
(Connect itself silently ignores unknown keys) is an error naming the key and the file.
Applying the same spec twice is a no-op.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from cdcbox.connect.client import ConnectClient, check_connector_name
from cdcbox.connect.exactly_once import fitted_to_worker
from cdcbox.connect.services import Service, check_no_collisions, parse_service
from cdcbox.errors import SpecError, UsageError
from cdcbox.names import DbNames

# The connector class of every spec in connectors/ and the plugin `doctor` looks for.
DEBEZIUM_POSTGRES_CLASS = "io.debezium.connector.postgresql.PostgresConnector"
# The Outbox Event Router's topic for an aggregate type, and its default.
ROUTE_KEY = "transforms.outbox.route.topic.replacement"
DEFAULT_ROUTE = "outbox.event.${routedByValue}"


def routed_topic(config: Mapping[str, str], aggregate_type: str) -> str:
    """The topic the connector of `config` publishes `aggregate_type`'s events to."""
    return config.get(ROUTE_KEY, DEFAULT_ROUTE).replace("${routedByValue}", aggregate_type)


_VARIABLE = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)(?::-([^}]*))?\}")
_PLACEHOLDER = re.compile(r"\$\{[a-z][a-zA-Z0-9_-]*:[^}]+\}")
# Secret-named keys, and Kafka's inline PEM private key (`ssl.keystore.key`).
_SECRET_KEY = re.compile(
    r"(password|secret|credential|token|jaas\.config|api\.key|keystore\.key|private\.key)",
    re.I,
)
# Keys that plugins define themselves (converter options) or that Connect forwards to
# clients; Connect's validate endpoint does not list them, so they are allowed by prefix.
_PASS_THROUGH_PREFIXES = (
    "key.converter.",
    "value.converter.",
    "header.converter.",
    "producer.override.",
    "consumer.override.",
    "admin.override.",
    "topic.creation.",
    "driver.",
)
REDACTED = "********"


@dataclass(frozen=True)
class ConnectorSpec:
    """A connector spec from `connectors/`, rendered: its name, its config, where it came from."""

    name: str
    config: dict[str, str]
    source: Path
    # The declared service (a `service:` spec); None for a plain connector spec.
    service: Service | None = None

    @property
    def label(self) -> str:
        """How output names it: the connector, and its service when one is declared."""
        return f"{self.name} (service {self.service.name})" if self.service else self.name

    @property
    def connector_class(self) -> str:
        return self.config["connector.class"]


def _stringify(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _read(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except OSError as e:
        raise SpecError(f"{path}: cannot read connector spec: {e}") from e
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: cannot read connector spec: {_yaml_problem(e)}") from e


def _yaml_problem(error: yaml.YAMLError) -> str:
    """PyYAML's report in one line: the problem and where (its own spans several, with
    the offending text and a caret)."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        context = f"{error.context}; " if error.context else ""
        return f"{context}{error.problem} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(error).split())


def render(path: Path, env: Mapping[str, str]) -> ConnectorSpec:
    """Read a YAML/JSON spec and substitute ${VAR} / ${VAR:-default} from `env`. A spec
    is `name` and `config`, or a service spec: `service`, `base` (the spec it
    instantiates, relative to it) and optionally `config` (keys it overrides)."""
    raw = _read(path)
    if isinstance(raw, dict) and "service" in raw:
        return _render_service(path, raw, env)
    if (
        not isinstance(raw, dict)
        or set(raw) - {"name", "config"}
        or "name" not in raw
        or not isinstance(raw.get("config"), dict)
    ):
        raise SpecError(
            f"{path}: a spec is a mapping with exactly 'name' and 'config' (or a service "
            "spec: 'service', 'base' and optionally 'config')"
        )
    substitute = _substituter(path, env)
    name = substitute("name", raw["name"])
    try:
        check_connector_name(name)
    except UsageError as e:
        raise SpecError(f"{path}: {e}") from None
    config = {str(k): substitute(str(k), v) for k, v in raw["config"].items()}
    if "connector.class" not in config:
        raise SpecError(f"{path}: config needs connector.class")
    if "name" in config and config["name"] != name:
        raise SpecError(f"{path}: config.name {config['name']!r} differs from name {name!r}")
    config.pop("name", None)
    check_secrets(path, config)
    return ConnectorSpec(name=name, config=config, source=path)


def _render_service(path: Path, raw: dict[str, Any], env: Mapping[str, str]) -> ConnectorSpec:
    if set(raw) - {"service", "base", "config"} or not isinstance(raw.get("base"), str):
        raise SpecError(
            f"{path}: a service spec is 'service', 'base' (the connector spec it "
            "instantiates) and optionally 'config'"
        )
    overrides = raw.get("config") or {}
    if not isinstance(overrides, dict):
        raise SpecError(f"{path}: config is a mapping of the keys it overrides")
    substitute = _substituter(path, env)
    service = parse_service(path, raw["service"], substitute)
    base = render(path.parent / raw["base"], {**env, **service.variables()})
    if base.service is not None:
        raise SpecError(f"{path}: base {raw['base']} is itself a service spec")
    config = {**base.config, **{str(k): substitute(str(k), v) for k, v in overrides.items()}}
    check_secrets(path, config)
    return ConnectorSpec(name=base.name, config=config, source=path, service=service)


def _substituter(path: Path, env: Mapping[str, str]) -> Callable[[str, Any], str]:
    """Renders `${VAR}` / `${VAR:-default}` in one value of the spec at `path`."""

    def substitute(key: str, value: Any) -> str:
        def one(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            raise SpecError(
                f"{path}: {key} uses ${{{name}}}, which is not set (see `cdc-ctl stack env`)"
            )

        return _VARIABLE.sub(one, _stringify(value))

    return substitute


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def check_secrets(path: Path, config: Mapping[str, str]) -> None:
    """Secrets must be config-provider placeholders, resolved by the worker, never inline."""
    for key, value in config.items():
        if is_secret_key(key) and value and not _PLACEHOLDER.fullmatch(value):
            raise SpecError(
                f"{path}: {key} holds a literal secret; use a config provider placeholder "
                "such as ${file:/path/secrets.properties:password}"
            )


def redact(config: Mapping[str, str]) -> dict[str, str]:
    """What may be printed: placeholders are shown, literal secrets are masked."""
    return {
        k: (REDACTED if is_secret_key(k) and not _PLACEHOLDER.fullmatch(v) else v)
        for k, v in config.items()
    }


def schema_defaults(names: DbNames) -> dict[str, str]:
    """With a schema other than public (`--schema`), a spec's table, publication and
    message prefix default to that schema's."""
    if names.schema == "public":
        return {}
    return {
        "CDCBOX_OUTBOX_TABLE": names.outbox_qualified,
        "CDCBOX_PUBLICATION": names.publication,
        "CDCBOX_MESSAGE_PREFIX": names.message_prefix,
    }


def load_specs(
    path: Path, env: Mapping[str, str] | None = None, names: DbNames | None = None
) -> list[ConnectorSpec]:
    """One spec file, or every *.yaml / *.yml / *.json file of a directory, sorted; the
    specs of a directory may not share a connector, slot, topic prefix, publication or
    table (`check_no_collisions`). Every command renders specs here, so `apply`, `diff`,
    `doctor` and `slot` see one config: `names`' schema fills the defaults of
    `schema_defaults`, and `env` (the process environment when None) overrides them."""
    env = {
        **schema_defaults(names or DbNames()),
        **(dict(os.environ) if env is None else env),
    }
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in {".yaml", ".yml", ".json"})
        if not files:
            raise SpecError(f"{path}: no connector specs (*.yaml, *.yml, *.json)")
        specs = [render(p, env) for p in files]
        check_no_collisions({s.source: {"name": s.name, "config": s.config} for s in specs})
        return specs
    return [render(path, env)]


@dataclass(frozen=True)
class ConfigDiff:
    """How a spec's config differs from the live connector's (`exists` False: no live one)."""

    added: dict[str, str] = field(default_factory=dict)
    removed: dict[str, str] = field(default_factory=dict)
    changed: dict[str, tuple[str, str]] = field(default_factory=dict)
    exists: bool = True

    @property
    def empty(self) -> bool:
        return self.exists and not (self.added or self.removed or self.changed)

    def lines(self) -> list[str]:
        """Human diff with secrets redacted on both sides."""
        out = [] if self.exists else ["(new connector)"]
        for k, v in sorted(redact(self.added).items()):
            out.append(f"+ {k}={v}")
        for k, v in sorted(redact(self.removed).items()):
            out.append(f"- {k}={v}")
        for k, (old, new) in sorted(self.changed.items()):
            old_r, new_r = redact({k: old})[k], redact({k: new})[k]
            out.append(f"~ {k}: {old_r} -> {new_r}")
        return out


def diff(live: Mapping[str, str] | None, desired: Mapping[str, str]) -> ConfigDiff:
    if live is None:
        return ConfigDiff(added=dict(desired), exists=False)
    current = {k: v for k, v in live.items() if k != "name"}
    return ConfigDiff(
        added={k: v for k, v in desired.items() if k not in current},
        removed={k: v for k, v in current.items() if k not in desired},
        changed={
            k: (current[k], v) for k, v in desired.items() if k in current and current[k] != v
        },
    )


def validate(client: ConnectClient, spec: ConnectorSpec) -> None:
    """Ask Connect's validate endpoint (changes nothing) and refuse unknown options."""
    result = client.validate(spec.connector_class, {**spec.config, "name": spec.name})
    problems = [
        f"{item['value']['name']}: {'; '.join(item['value']['errors'])}"
        for item in result.get("configs", [])
        if item["value"].get("errors")
    ]
    known = {item["definition"]["name"] for item in result.get("configs", [])}
    unknown = sorted(
        k for k in spec.config if k not in known and not k.startswith(_PASS_THROUGH_PREFIXES)
    )
    problems += [
        f"{k}: unknown option (not defined by {spec.connector_class}, its transforms or Connect)"
        for k in unknown
    ]
    if problems:
        raise SpecError(
            f"{spec.source}: connector {spec.name!r} refused:\n  " + "\n  ".join(problems)
        )


@dataclass(frozen=True)
class ApplyResult:
    """What `apply` did to one connector and the state it reached."""

    name: str
    diff: ConfigDiff
    changed: bool
    state: str


def apply(
    client: ConnectClient,
    spec: ConnectorSpec,
    timeout_s: float = 120,
    progress: Callable[[str], None] | None = None,
) -> ApplyResult:
    """Validate, diff, upsert when different, then wait until connector and tasks RUN;
    `progress` hears each step and each state seen while waiting. Exactly-once the spec
    requires is asked for as `requested` where the workers lack it (said to `progress`)."""
    say = progress or (lambda _message: None)
    say(f"validating with the worker's {spec.config.get('connector.class', '?')}")
    spec = replace(spec, config=fitted_to_worker(client, spec.connector_class, spec.config, say))
    validate(client, spec)
    change = diff(client.config(spec.name), spec.config)
    if not change.empty:
        say(f"writing its config ({len(change.lines())} change(s))")
        client.put_config(spec.name, spec.config)
    client.wait_until(
        spec.name, "RUNNING", timeout_s, progress=lambda state: say(f"waiting for RUNNING: {state}")
    )
    return ApplyResult(spec.name, change, not change.empty, "RUNNING")


# Debezium's PostgreSQL connector streams from this slot when its config names none.
DEFAULT_SLOT = "debezium"


def connectors_using_slot(
    slot: str, specs: list[ConnectorSpec], client: ConnectClient | None
) -> list[str]:
    """Names of the connectors whose `slot.name` is `slot`: from `specs` and, when a
    client is given, from every connector configured on the Connect cluster."""
    configs = {spec.name: spec.config for spec in specs}
    if client is not None:
        for name in client.connectors():
            live = client.config(name)
            if live is not None:
                configs[name] = live
    return sorted(
        name
        for name, config in configs.items()
        if config.get("connector.class", "").endswith("PostgresConnector")
        and config.get("slot.name", DEFAULT_SLOT) == slot
    )
