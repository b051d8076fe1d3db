"""`cdc-ctl schemas check`: refuse an incompatible change to an event's schema."""

from __future__ import annotations

from pathlib import Path

import click

from cdcbox.avro import Catalogue
from cdcbox.resources import resource_dir


def default_schemas_dir() -> Path:
    return resource_dir("schemas") / "avro"


@click.group("schemas")
def schemas() -> None:
    """The Avro event catalogue (schemas/avro)."""


@schemas.command("check")
@click.argument("directory", required=False, type=click.Path(exists=True, path_type=Path))
def check(directory: Path | None) -> None:
    """Parse every schema and check each event type's versions under its declared mode."""
    catalogue = Catalogue.load(directory or default_schemas_dir())
    problems = catalogue.check()
    for event_type, s in sorted(catalogue.events.items()):
        click.echo(f"{event_type}: {len(s.versions)} version(s), {s.encoding}, {s.compatibility}")
    for problem in problems:
        click.echo(f"incompatible: {problem}", err=True)
    if problems:
        raise SystemExit(1)
