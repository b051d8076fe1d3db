"""`cdc-ctl schemas check`: refuse an incompatible change to an event's schema."""

from __future__ import annotations

from pathlib import Path

import click

from cdcbox.avro import Catalogue
from cdcbox.cli.common import json_option, print_json
from cdcbox.resources import resource_dir


def default_schemas_dir() -> Path:
    return resource_dir("schemas") / "avro"


@click.group("schemas")
def schemas() -> None:
    """The Avro event catalogue (schemas/avro)."""


@schemas.command("check")
@click.argument("directory", required=False, type=click.Path(exists=True, path_type=Path))
@json_option
def check(directory: Path | None, as_json: bool) -> None:
    """Parse every schema and check each event type's versions under its declared mode."""
    catalogue = Catalogue.load(directory or default_schemas_dir())
    problems = catalogue.check()
    if as_json:
        events = [
            {
                "event_type": event_type,
                "versions": [v.version for v in s.versions],
                "encoding": s.encoding,
                "compatibility": s.compatibility,
            }
            for event_type, s in sorted(catalogue.events.items())
        ]
        print_json({"events": events, "problems": problems})
        if problems:
            raise SystemExit(1)
        return
    for event_type, s in sorted(catalogue.events.items()):
        click.echo(f"{event_type}: {len(s.versions)} version(s), {s.encoding}, {s.compatibility}")
    for problem in problems:
        click.echo(f"incompatible: {problem}", err=True)
    if problems:
        raise SystemExit(1)
