"""A client of the Confluent-compatible schema registry API (Confluent's Schema Registry,
Apicurio's `/apis/ccompat/v7`, Karapace) and the Confluent wire format.

A value in that format is the magic byte 0, the schema id as a 4-byte big-endian
integer, then the Avro binary body; any client that speaks it decodes the value by
fetching the writer's schema by id. Subjects are named by the record name strategy (the
schema's full name, `cdcbox.events.order.OrderCreated`): one subject per event type
whatever topic its aggregate type routes it to, so several event types share a topic.

Guarantee: an id is fetched or registered once per process and then served from memory
(ids are immutable in a registry); a registry that does not answer raises
`RegistryUnavailable` (a service outage, never a bad record); a schema id the registry
does not know is `PoisonRecord`, naming the id.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote, urlsplit

import requests

from cdcbox.errors import ConfigError, PoisonRecord, RegistryUnavailable, SchemaError

MAGIC_BYTE = b"\x00"
HEADER_BYTES = 5
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
# events.yaml's `compatibility` → the registry's level for the subject.
Level = Literal["BACKWARD", "FORWARD", "FULL"]
LEVELS: dict[str, Level] = {"backward": "BACKWARD", "forward": "FORWARD", "full": "FULL"}
# Levels at least as strict as the key (the transitive ones check every version).
_AT_LEAST = {
    "BACKWARD": {"BACKWARD", "BACKWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"},
    "FORWARD": {"FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"},
    "FULL": {"FULL", "FULL_TRANSITIVE"},
}


def frame(schema_id: int, body: bytes) -> bytes:
    """`body` in the Confluent wire format under `schema_id`."""
    return MAGIC_BYTE + schema_id.to_bytes(4, "big") + body


def is_framed(value: bytes | None) -> bool:
    """True when `value` starts like the Confluent wire format (JSON never starts with a
    NUL byte, Avro single-object encoding starts with C3 01)."""
    return value is not None and len(value) >= HEADER_BYTES and value[:1] == MAGIC_BYTE


def unframe(value: bytes) -> tuple[int, bytes]:
    """The schema id and Avro body of a Confluent-framed value, or `PoisonRecord`."""
    if not is_framed(value):
        raise PoisonRecord("value is not in the Confluent wire format (no magic byte 0)")
    return int.from_bytes(value[1:HEADER_BYTES], "big"), value[HEADER_BYTES:]


@dataclass(frozen=True)
class RegistryConfig:
    """Where the registry answers: the base URL of its Confluent-compatible API (for
    Apicurio `http://host:port/apis/ccompat/v7`), how long one request may take, and
    whether a producer registers a schema the registry lacks (as Confluent's serializers
    do by default) or only looks it up."""

    url: str
    timeout_s: float = 5.0
    auto_register: bool = True

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if "@" in parts.netloc or (not parts.netloc and "@" in self.url):
            raise ConfigError("schema registry URL must not carry credentials")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"schema registry URL {self.url!r} must start with http(s)://")
        if self.timeout_s <= 0:
            raise ConfigError(f"schema registry timeout must be positive, not {self.timeout_s}")


@dataclass
class SchemaRegistry:
    """The registry of `config`, with every id and schema it answered kept in memory."""

    config: RegistryConfig
    session: requests.Session = field(default_factory=requests.Session)
    _ids: dict[tuple[str, str], int] = field(default_factory=dict, repr=False)
    _schemas: dict[int, str] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def url(self) -> str:
        return self.config.url.rstrip("/")

    # --- producing -------------------------------------------------------------------
    def id_for(self, subject: str, schema: str) -> int:
        """The id of `schema` under `subject`: from memory, else registered (or, without
        auto-register, looked up: `SchemaError` when the registry lacks it)."""
        key = (subject, schema)
        cached = self._ids.get(key)
        if cached is not None:
            return cached
        if self.config.auto_register:
            schema_id = self.register(subject, schema)
        else:
            found = self.lookup(subject, schema)
            if found is None:
                raise SchemaError(
                    f"schema registry {self.url} has no such version of subject {subject} "
                    "and auto-register is off: run `cdc-ctl schemas register`"
                )
            schema_id = found
        with self._lock:
            self._ids[key] = schema_id
            self._schemas[schema_id] = schema
        return schema_id

    def register(self, subject: str, schema: str) -> int:
        """Register `schema` under `subject` (the registry answers the existing id when
        it holds it already); `SchemaError` when its compatibility rule refuses it."""
        answer = self._request("POST", f"/subjects/{_path(subject)}/versions", {"schema": schema})
        return int(answer["id"])

    def lookup(self, subject: str, schema: str) -> int | None:
        """The id of `schema` under `subject`, or None when it was never registered."""
        answer = self._request(
            "POST", f"/subjects/{_path(subject)}", {"schema": schema}, missing_ok=True
        )
        return None if answer is None else int(answer["id"])

    # --- consuming -------------------------------------------------------------------
    def schema(self, schema_id: int) -> str:
        """The schema registered under `schema_id`: one request per id, then memory."""
        cached = self._schemas.get(schema_id)
        if cached is not None:
            return cached
        answer = self._request("GET", f"/schemas/ids/{schema_id}", missing_ok=True)
        if answer is None:
            raise PoisonRecord(f"schema id {schema_id} is not in the schema registry {self.url}")
        kind = answer.get("schemaType", "AVRO")
        if kind != "AVRO":
            raise PoisonRecord(f"schema id {schema_id} is a {kind} schema, not Avro")
        text = str(answer["schema"])
        with self._lock:
            self._schemas[schema_id] = text
        return text

    # --- compatibility ---------------------------------------------------------------
    def has_subject(self, subject: str) -> bool:
        """True when the registry holds a version of `subject`."""
        path = f"/subjects/{_path(subject)}/versions"
        return self._request("GET", path, missing_ok=True) is not None

    def level(self, subject: str) -> str | None:
        """The subject's own compatibility level, or None where it has none set."""
        answer = self._request("GET", f"/config/{_path(subject)}", missing_ok=True)
        if answer is None:
            return None
        level = answer.get("compatibilityLevel") or answer.get("compatibility")
        return str(level) if level else None

    def set_level(self, subject: str, level: Level) -> None:
        self._request("PUT", f"/config/{_path(subject)}", {"compatibility": level})

    def incompatibilities(self, subject: str, schema: str) -> list[str]:
        """Why `schema` may not follow the subject's latest version under the subject's
        rule (empty: it may, or the subject has no version yet)."""
        answer = self._request(
            "POST",
            f"/compatibility/subjects/{_path(subject)}/versions/latest?verbose=true",
            {"schema": schema},
            missing_ok=True,
        )
        if answer is None or answer.get("is_compatible", False):
            return []
        messages = answer.get("messages") or ["the registry refused it"]
        return [str(m) for m in messages]

    def _request(
        self, method: str, path: str, body: Any = None, *, missing_ok: bool = False
    ) -> Any:
        url = self.url + path
        try:
            response = self.session.request(
                method,
                url,
                data=None if body is None else json.dumps(body),
                headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE},
                timeout=self.config.timeout_s,
            )
        except requests.RequestException as e:
            raise RegistryUnavailable(
                f"schema registry {self.url} did not answer {method} {path.split('?')[0]}: "
                f"{type(e).__name__}"
            ) from e
        if response.status_code >= 500:
            raise RegistryUnavailable(
                f"schema registry {self.url} answered {response.status_code} to {method} "
                f"{path.split('?')[0]}"
            )
        if response.status_code == 404 and missing_ok:
            return None
        if response.status_code >= 400:
            raise SchemaError(
                f"schema registry {self.url} refused {method} {path.split('?')[0]} "
                f"({response.status_code}): {_message(response)}"
            )
        try:
            return response.json()
        except ValueError as e:
            raise RegistryUnavailable(
                f"schema registry {self.url} answered {method} {path} with no JSON"
            ) from e


def at_least(level: str | None, wanted: Level) -> bool:
    """True when a subject at `level` checks at least what `wanted` does."""
    return level is not None and level.upper() in _AT_LEAST[wanted]


def _path(subject: str) -> str:
    return quote(subject, safe="")


def _message(response: requests.Response) -> str:
    try:
        answer = response.json()
    except ValueError:
        return " ".join(response.text.split())[:300]
    if isinstance(answer, dict):
        return " ".join(str(answer.get("message", answer)).split())[:500]
    return str(answer)[:300]
