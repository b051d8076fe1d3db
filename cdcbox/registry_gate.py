"""The catalogue (`schemas/avro`, the source the team edits) held against a schema
registry: `cdc-ctl schemas check --registry` and `schemas register`.

Guarantee: `check_against` lists every Avro event type whose newest schema the registry
would refuse under the subject's rule, and every subject whose rule is weaker than the
one events.yaml declares (a registry with no rule accepts anything); `register_all`
sets each subject's rule first and registers the versions oldest first, so the registry
refuses an incompatible one exactly as it would a producer's.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdcbox.avro import Catalogue, EventSchemas
from cdcbox.schema_registry import LEVELS, SchemaRegistry, at_least


@dataclass(frozen=True)
class Registered:
    """One event type's versions as the registry holds them after `register_all`."""

    event_type: str
    subject: str
    level: str
    ids: tuple[tuple[int, int], ...]  # (catalogue version, registry id)


def avro_types(catalogue: Catalogue) -> list[EventSchemas]:
    """The event types a registry takes: those events.yaml encodes as Avro."""
    return [s for _, s in sorted(catalogue.events.items()) if s.encoding == "avro"]


def check_against(catalogue: Catalogue, registry: SchemaRegistry) -> list[str]:
    """Why the catalogue's newest Avro schemas may not be produced against `registry`
    (empty: they may). A subject the registry has never seen is no problem."""
    problems = []
    for schemas in avro_types(catalogue):
        latest, wanted = schemas.latest, LEVELS[schemas.compatibility]
        subject = latest.full_name
        if not registry.has_subject(subject):
            continue
        level = registry.level(subject)
        if not at_least(level, wanted):
            problems.append(
                f"{schemas.event_type}: subject {subject} checks {level or 'no rule of its own'} "
                f"in the registry, events.yaml declares {wanted}: `cdc-ctl schemas register` "
                "sets it"
            )
        for reason in registry.incompatibilities(subject, latest.text):
            problems.append(
                f"{schemas.event_type} v{latest.version}: the registry refuses it under "
                f"subject {subject} ({level}): {reason}"
            )
    return problems


def register_all(catalogue: Catalogue, registry: SchemaRegistry) -> list[Registered]:
    """Each Avro event type's rule set on its subject, then its versions registered,
    oldest first; `SchemaError` names the version the registry refuses."""
    done = []
    for schemas in avro_types(catalogue):
        subject, level = schemas.latest.full_name, LEVELS[schemas.compatibility]
        registry.set_level(subject, level)
        ids = tuple((v.version, registry.register(subject, v.text)) for v in schemas.versions)
        done.append(Registered(schemas.event_type, subject, level, ids))
    return done
