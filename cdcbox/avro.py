"""The event schema catalogue: Avro schemas per event type and version, the encodings the
producer writes, the decoding consumers do, and the compatibility rules between versions.

Without a registry, Avro payloads use single-object encoding (0xC3 0x01, the schema's
8-byte little-endian CRC-64-AVRO fingerprint, then the binary body), so a consumer finds
the writer's schema from the bytes alone and resolves it into the reader schema it was
written against. With a schema registry (`Catalogue.with_registry`) they use the
Confluent wire format (`cdcbox.schema_registry`): the schema's id in the registry, so
any client that speaks that format decodes them. A consumer reads both, by their first
byte.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import fastavro
import yaml
from fastavro.schema import (
    SchemaParseException,
    fingerprint,
    parse_schema,
    to_parsing_canonical_form,
)
from fastavro.validation import ValidationError, validate

from cdcbox import wire
from cdcbox.errors import PoisonRecord, SchemaError
from cdcbox.schema_registry import SchemaRegistry, frame, is_framed, unframe

MAGIC = b"\xc3\x01"
_FILE = re.compile(r"(?P<type>[A-Za-z][A-Za-z0-9_]*)\.v(?P<version>[0-9]+)\.avsc")
Encoding = Literal["json", "avro"]
Compatibility = Literal["backward", "forward", "full"]


@dataclass(frozen=True)
class SchemaVersion:
    """One `<EventType>.v<N>.avsc`: the parsed schema and its single-object fingerprint."""

    event_type: str
    version: int
    path: Path
    schema: Any  # fastavro's parsed schema
    fingerprint: bytes
    # The schema as compact JSON (docs and defaults kept): what a registry stores.
    text: str
    # namespace.name: the subject it is registered under (record name strategy).
    full_name: str


@dataclass(frozen=True)
class EventSchemas:
    """Every version of one event type's schema, with the encoding and compatibility rule
    `events.yaml` declares for it."""

    event_type: str
    encoding: Encoding
    compatibility: Compatibility
    versions: tuple[SchemaVersion, ...]

    @property
    def latest(self) -> SchemaVersion:
        return self.versions[-1]


@dataclass(frozen=True)
class Catalogue:
    """The Avro event catalogue of `schemas/avro`: a payload is encoded with its type's
    newest schema and decoded by its fingerprint into the reader's version; `check`
    lists every break of a type's declared compatibility (`cdc-ctl schemas check`)."""

    events: dict[str, EventSchemas] = field(default_factory=dict)
    by_fingerprint: dict[bytes, SchemaVersion] = field(default_factory=dict)
    registry: SchemaRegistry | None = None
    # Writer schemas fetched from the registry, parsed, by id.
    _registered: dict[int, Any] = field(default_factory=dict, repr=False)

    def with_registry(self, registry: SchemaRegistry) -> Catalogue:
        """This catalogue writing the Confluent wire format through `registry` (each
        event type's newest schema registered under its full name) and reading it."""
        return Catalogue(self.events, self.by_fingerprint, registry)

    @classmethod
    def load(cls, directory: Path) -> Catalogue:
        """Read events.yaml and every <EventType>.v<N>.avsc; errors name the file."""
        declared_path = directory / "events.yaml"
        try:
            declared = yaml.safe_load(declared_path.read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise SchemaError(f"{declared_path}: {e}") from e
        versions: dict[str, list[SchemaVersion]] = {}
        for path in sorted(directory.glob("*.avsc")):
            match = _FILE.fullmatch(path.name)
            if match is None:
                continue  # e.g. envelope.avsc: documentation, not an event type
            versions.setdefault(match["type"], []).append(
                _load_version(path, match["type"], int(match["version"]))
            )
        events, by_fp = {}, {}
        for event_type, spec in declared.items():
            found = sorted(versions.get(event_type, []), key=lambda v: v.version)
            if not found:
                raise SchemaError(f"{declared_path}: {event_type} has no {event_type}.v1.avsc")
            encoding = spec.get("encoding", "json")
            compatibility = spec.get("compatibility", "backward")
            if encoding not in ("json", "avro") or compatibility not in (
                "backward",
                "forward",
                "full",
            ):
                raise SchemaError(
                    f"{declared_path}: {event_type}: encoding must be json|avro "
                    "and compatibility backward|forward|full"
                )
            events[event_type] = EventSchemas(event_type, encoding, compatibility, tuple(found))
            by_fp.update({v.fingerprint: v for v in found})
        return cls(events, by_fp)

    # --- producing -------------------------------------------------------------------
    def encode(self, event_type: str, payload: Any) -> tuple[bytes, str] | None:
        """Validate against the newest schema and encode; None for an unknown event type."""
        schemas = self.events.get(event_type)
        if schemas is None:
            return None
        latest = schemas.latest
        try:
            validate(payload, latest.schema, raise_errors=True)
        except ValidationError as e:
            fields = ", ".join(sorted({str(err.field) for err in e.errors}))
            raise SchemaError(
                f"{event_type} payload does not match {latest.path.name} "
                f"(field {fields}): {e.errors[0]}"
            ) from e
        if schemas.encoding == "json":
            return None  # validated; the producer writes it as JSON
        if self.registry is not None:  # may raise RegistryUnavailable: nothing written yet
            schema_id = self.registry.id_for(latest.full_name, latest.text)
            return frame(schema_id, _body(latest.schema, payload)), wire.CONTENT_TYPE_AVRO
        body = MAGIC + latest.fingerprint + _body(latest.schema, payload)
        return body, wire.CONTENT_TYPE_AVRO

    # --- consuming -------------------------------------------------------------------
    def reader_schema(self, event_type: str, version: int | None) -> Any | None:
        """The schema a handler reads with: its pinned version, else the newest."""
        schemas = self.events.get(event_type)
        if schemas is None:
            return None
        if version is None:
            return schemas.latest.schema
        for v in schemas.versions:
            if v.version == version:
                return v.schema
        raise SchemaError(f"{event_type} has no schema version {version}")

    def decode(self, value: bytes, reader_schema: Any | None = None) -> Any:
        """Decode single-object or Confluent-framed bytes, resolving the writer schema
        into `reader_schema` (default: the newest version of the same event type)."""
        if is_framed(value):
            return self._decode_registered(value, reader_schema)
        if len(value) < 10 or value[:2] != MAGIC:
            raise PoisonRecord("value is not Avro single-object encoded (no C3 01 header)")
        writer = self.by_fingerprint.get(value[2:10])
        if writer is None:
            raise PoisonRecord(f"unknown Avro schema fingerprint {value[2:10].hex()}")
        reader = reader_schema or self.events[writer.event_type].latest.schema
        try:
            return fastavro.schemaless_reader(io.BytesIO(value[10:]), writer.schema, reader)
        except Exception as e:  # fastavro raises assorted errors for corrupt bodies
            raise PoisonRecord(f"Avro body does not decode with {writer.path.name}: {e}") from e

    def _decode_registered(self, value: bytes, reader_schema: Any | None) -> Any:
        schema_id, body = unframe(value)
        if self.registry is None:
            raise PoisonRecord(
                f"Avro in the Confluent wire format (schema id {schema_id}), but this "
                "consumer has no schema registry configured"
            )
        writer = self._registered.get(schema_id)
        if writer is None:  # RegistryUnavailable propagates: the record waits
            text = self.registry.schema(schema_id)
            try:
                writer = parse_schema(json.loads(text))
            except (ValueError, SchemaParseException) as e:
                raise PoisonRecord(f"schema id {schema_id} does not parse: {e}") from e
            self._registered[schema_id] = writer
        name = writer.get("name") if isinstance(writer, dict) else None
        reader = reader_schema or self._newest_named(name) or writer
        try:
            return fastavro.schemaless_reader(io.BytesIO(body), writer, reader)
        except Exception as e:  # fastavro raises assorted errors for corrupt bodies
            raise PoisonRecord(f"Avro body does not decode with schema id {schema_id}: {e}") from e

    def _newest_named(self, full_name: Any) -> Any | None:
        for schemas in self.events.values():
            if schemas.latest.full_name == full_name:
                return schemas.latest.schema
        return None

    # --- evolution -------------------------------------------------------------------
    def check(self) -> list[str]:
        """Every incompatibility between consecutive versions, as readable sentences."""
        problems = []
        for schemas in self.events.values():
            for old, new in zip(schemas.versions, schemas.versions[1:], strict=False):
                rules = {
                    "backward": [(new, old)],
                    "forward": [(old, new)],
                    "full": [(new, old), (old, new)],
                }[schemas.compatibility]
                for reader, writer in rules:
                    for p in can_read(reader.schema, writer.schema, schemas.event_type):
                        problems.append(
                            f"{schemas.event_type} v{writer.version} -> v{reader.version} "
                            f"({schemas.compatibility}): {p}"
                        )
        return problems


def _load_version(path: Path, event_type: str, version: int) -> SchemaVersion:
    try:
        raw = json.loads(path.read_text())
        parsed = parse_schema(raw)
    except (OSError, ValueError, SchemaParseException) as e:  # ValueError: bad JSON
        raise SchemaError(f"{path}: invalid Avro schema: {e}") from e
    if not isinstance(raw, dict) or raw.get("type") != "record":
        raise SchemaError(f"{path}: an event schema must be a record")
    fp = int(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"), 16)
    text = json.dumps(raw, separators=(",", ":"))
    return SchemaVersion(
        event_type, version, path, parsed, fp.to_bytes(8, "little"), text, _full_name(raw)
    )


def _full_name(schema: dict[str, Any]) -> str:
    name, namespace = str(schema.get("name", "")), schema.get("namespace")
    return f"{namespace}.{name}" if namespace and "." not in name else name


def _body(schema: Any, payload: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, payload)
    return out.getvalue()


_PROMOTIONS = {
    "int": {"int"},
    "long": {"int", "long"},
    "float": {"int", "long", "float"},
    "double": {"int", "long", "float", "double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
}


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        return str(schema["type"])
    return str(schema)


def can_read(reader: Any, writer: Any, path: str) -> list[str]:
    """Why data written with `writer` cannot be read with `reader` (empty: it can)."""
    rk, wk = _kind(reader), _kind(writer)
    if wk == "union":
        return [p for branch in writer for p in can_read(reader, branch, path)]
    if rk == "union":
        if any(not can_read(branch, writer, path) for branch in reader):
            return []
        return [f"{path}: the writer's {wk} fits no branch of the reader's union"]
    if rk in _PROMOTIONS or wk in _PROMOTIONS:
        if wk in _PROMOTIONS.get(rk, set()):
            return []
        return [f"{path}: type changed from {wk} to {rk}, which Avro cannot promote"]
    if rk != wk:
        return [f"{path}: type changed from {wk} to {rk}"]
    if rk == "record":
        written = {f["name"]: f for f in writer["fields"]}
        problems = []
        for f in reader["fields"]:
            if f["name"] in written:
                problems += can_read(f["type"], written[f["name"]]["type"], f"{path}.{f['name']}")
            elif "default" not in f:
                problems.append(
                    f"{path}.{f['name']}: the reader needs this field, the writer "
                    "does not write it, and it has no default"
                )
        return problems
    if rk == "array":
        return can_read(reader["items"], writer["items"], f"{path}[]")
    if rk == "map":
        return can_read(reader["values"], writer["values"], f"{path}{{}}")
    if rk == "enum":
        missing = sorted(set(writer["symbols"]) - set(reader["symbols"]))
        if missing and "default" not in reader:
            return [f"{path}: symbols {missing} are written but unknown to the reader"]
        return []
    if rk == "fixed" and reader.get("size") != writer.get("size"):
        return [f"{path}: fixed size changed from {writer.get('size')} to {reader.get('size')}"]
    return []
