"""`cdc-ctl schemas check|register`: refuse an incompatible change to an event's schema,
against the files and, with `--registry-url`, against the schema registry."""

from __future__ import annotations

from pathlib import Path

import click

from cdcbox.avro import Catalogue
from cdcbox.cli.common import json_option, print_json
from cdcbox.registry_gate import check_against, register_all
from cdcbox.resources import resource_dir
from cdcbox.schema_registry import RegistryConfig, SchemaRegistry


def default_schemas_dir() -> Path:
    return resource_dir("schemas") / "avro"


def load_catalogue(directory: Path | None, registry_url: str | None) -> Catalogue:
    """The catalogue in `directory` (the shipped one by default), writing and reading
    the Confluent wire format through the registry at `registry_url` when one is given."""
    catalogue = Catalogue.load(directory or default_schemas_dir())
    if not registry_url:
        return catalogue
    return catalogue.with_registry(SchemaRegistry(RegistryConfig(registry_url)))


def _registry(url: str) -> SchemaRegistry:
    return SchemaRegistry(RegistryConfig(url))


directory_argument = click.argument(
    "directory", required=False, type=click.Path(exists=True, path_type=Path)
)


@click.group("schemas")
def schemas() -> None:
    """The Avro event catalogue (schemas/avro) and the schema registry."""


@schemas.command("check")
@directory_argument
@click.option(
    "--registry-url",
    envvar="CDCBOX_REGISTRY_URL",
    help="Also check each Avro event type's newest schema against this schema registry "
    "(its Confluent-compatible API), under the subject's rule.",
)
@click.option(
    "--files-only",
    is_flag=True,
    help="Check the files only, even where CDCBOX_REGISTRY_URL names a registry.",
)
@json_option
def check(
    directory: Path | None, registry_url: str | None, files_only: bool, as_json: bool
) -> None:
    """Parse every schema and check each event type's versions under its declared mode,
    then against the registry. Exit 1 on any incompatibility."""
    catalogue = Catalogue.load(directory or default_schemas_dir())
    problems = catalogue.check()
    if registry_url and not files_only:
        problems += check_against(catalogue, _registry(registry_url))
    if as_json:
        events = [
            {
                "event_type": event_type,
                "versions": [v.version for v in s.versions],
                "encoding": s.encoding,
                "compatibility": s.compatibility,
                "subject": s.latest.full_name,
            }
            for event_type, s in sorted(catalogue.events.items())
        ]
        print_json({"events": events, "problems": problems})
    else:
        for event_type, s in sorted(catalogue.events.items()):
            click.echo(
                f"{event_type}: {len(s.versions)} version(s), {s.encoding}, {s.compatibility}"
            )
        for problem in problems:
            click.echo(f"incompatible: {problem}", err=True)
    if problems:
        raise SystemExit(1)


@schemas.command("register")
@directory_argument
@click.option(
    "--registry-url",
    envvar="CDCBOX_REGISTRY_URL",
    required=True,
    help="The schema registry's Confluent-compatible API, e.g. "
    "http://127.0.0.1:28081/apis/ccompat/v7 (the stack's).",
)
@json_option
def register(directory: Path | None, registry_url: str, as_json: bool) -> None:
    """Set each Avro event type's subject to its declared rule (BACKWARD unless
    events.yaml says otherwise) and register its versions, oldest first. The registry
    refuses an incompatible version: exit 1, naming it."""
    catalogue = Catalogue.load(directory or default_schemas_dir())
    problems = catalogue.check()
    if problems:
        for problem in problems:
            click.echo(f"incompatible: {problem}", err=True)
        raise SystemExit(1)
    done = register_all(catalogue, _registry(registry_url))
    if as_json:
        print_json(
            [
                {
                    "event_type": r.event_type,
                    "subject": r.subject,
                    "compatibility": r.level,
                    "ids": {str(version): schema_id for version, schema_id in r.ids},
                }
                for r in done
            ]
        )
        return
    for r in done:
        ids = ", ".join(f"v{version} -> id {schema_id}" for version, schema_id in r.ids)
        click.echo(f"{r.event_type}: subject {r.subject}, {r.level}: {ids}")
