"""Typed payloads: a handler declares `payload_types = {"OrderCreated": OrderCreated}` and
receives an instance instead of a dict, validated; a payload that does not fit is a
poison record, dead-lettered (and its aggregate parked) like any undecodable payload.

A type is a dataclass or a pydantic (v2) model; pydantic is an optional dependency
(`cdcbox[pydantic]`), used only when a model is declared. A dataclass is checked as
strictly as the standard library allows without a schema library: the payload must be a
JSON object with every field that has no default, no unknown key, and values of the
plain types (str, int, float, bool, list, dict) their annotations name.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any

from cdcbox.errors import ConfigError, PoisonRecord

_PLAIN = (str, int, float, bool, list, dict)


def check_payload_types(owner: str, types: Mapping[str, type], event_types: Any) -> None:
    """Refused at start: a type for an event type the handler does not take, or a type
    that is neither a dataclass nor a pydantic model."""
    for event_type, payload_type in types.items():
        if event_type not in event_types and "*" not in event_types:
            raise ConfigError(
                f"{owner}.payload_types names {event_type!r}, which is not in its event_types"
            )
        if not (dataclasses.is_dataclass(payload_type) or _is_pydantic(payload_type)):
            raise ConfigError(
                f"{owner}.payload_types[{event_type!r}] must be a dataclass or a pydantic "
                f"model, not {payload_type!r}"
            )


def typed(payload_type: type, payload: Any, event_type: str) -> Any:
    """`payload` (decoded JSON) as an instance of `payload_type`, or `PoisonRecord`."""
    what = f"payload of {event_type} is not a valid {payload_type.__name__}"
    if _is_pydantic(payload_type):
        try:
            return payload_type.model_validate(payload)  # type: ignore[attr-defined]
        except (ValueError, TypeError, AssertionError) as e:  # a validator's own errors too
            raise PoisonRecord(f"{what}: {' '.join(str(e).split())[:500]}") from e
    if not isinstance(payload, dict):
        raise PoisonRecord(f"{what}: a JSON object is needed, not {type(payload).__name__}")
    fields = {f.name: f for f in dataclasses.fields(payload_type)}
    unknown = sorted(set(payload) - set(fields))
    if unknown:
        raise PoisonRecord(f"{what}: unknown field(s) {', '.join(unknown)}")
    missing = [
        name
        for name, f in fields.items()
        if name not in payload
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise PoisonRecord(f"{what}: missing field(s) {', '.join(missing)}")
    hints = typing.get_type_hints(payload_type)
    for name, value in payload.items():
        expected = hints.get(name)
        if expected in _PLAIN and not _is_instance(value, expected):
            raise PoisonRecord(f"{what}: {name} must be {expected.__name__}")
    try:
        return payload_type(**payload)
    except (ValueError, TypeError, AssertionError) as e:  # its own __post_init__ check
        raise PoisonRecord(f"{what}: {e}") from e


def _is_instance(value: Any, expected: type) -> bool:
    if expected is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)


def _is_pydantic(payload_type: Any) -> bool:
    return isinstance(payload_type, type) and hasattr(payload_type, "model_validate")
