"""One convention per concept across cdc-ctl's commands: every read command can answer
in JSON, every destructive one asks unless --yes and can say what it would do with
--dry-run, and every option's --help names its environment variable.

The command tree is walked, so a new command must be given a kind here before the suite
passes: none can escape the convention by being forgotten."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cdcbox.cli.main import cli
from cdcbox.resources import resource_dir

pytestmark = pytest.mark.unit

# Reads answer in JSON (--json); destructive commands take --yes and --dry-run; actions
# start something, change it in a way the user asked for by name, or print text meant
# for another tool (a script, shell exports).
READ, DESTRUCTIVE, ACTION = "read", "destructive", "action"
KINDS = {
    ("acls", "apply"): DESTRUCTIVE,
    ("acls", "plan"): READ,
    ("apply",): ACTION,
    ("connectors", "delete"): DESTRUCTIVE,
    ("connectors", "heal"): ACTION,
    ("connectors", "list"): READ,
    ("connectors", "pause"): ACTION,
    ("connectors", "quarantine"): DESTRUCTIVE,
    ("connectors", "restart"): ACTION,
    ("connectors", "resume"): ACTION,
    ("connectors", "status"): READ,
    ("connectors", "stop"): ACTION,
    ("connectors", "supervise"): ACTION,
    ("consume",): ACTION,
    ("db", "migrate"): ACTION,
    ("db", "sql"): ACTION,
    ("diff",): READ,
    ("dlq", "list"): READ,
    ("dlq", "replay"): DESTRUCTIVE,
    ("dlq", "show"): READ,
    ("doctor",): READ,
    ("exporter",): ACTION,
    ("groups", "lag"): READ,
    ("groups", "list"): READ,
    ("groups", "reset"): DESTRUCTIVE,
    ("inbox", "purge"): DESTRUCTIVE,
    ("inbox", "stats"): READ,
    ("offsets", "reset"): DESTRUCTIVE,
    ("offsets", "set"): DESTRUCTIVE,
    ("offsets", "show"): READ,
    ("outbox", "dead", "list"): READ,
    ("outbox", "dead", "retry"): ACTION,
    ("outbox", "purge"): DESTRUCTIVE,
    ("outbox", "stats"): READ,
    ("parked", "list"): READ,
    ("parked", "release"): ACTION,
    ("relay", "run"): ACTION,
    ("schemas", "check"): READ,
    ("schemas", "register"): ACTION,
    ("slot", "drop"): DESTRUCTIVE,
    ("slot", "status"): READ,
    ("stack", "down"): ACTION,
    ("stack", "env"): ACTION,
    ("stack", "status"): READ,
    ("stack", "up"): ACTION,
    ("top",): ACTION,
}


def leaves(
    command: click.Command, path: tuple[str, ...] = ()
) -> dict[tuple[str, ...], click.Command]:
    if isinstance(command, click.Group):
        found: dict[tuple[str, ...], click.Command] = {}
        for name, sub in command.commands.items():
            found.update(leaves(sub, (*path, name)))
        return found
    return {path: command}


COMMANDS = leaves(cli)


def options(path: tuple[str, ...]) -> set[str]:
    return {o for p in COMMANDS[path].params if isinstance(p, click.Option) for o in p.opts}


def of_kind(kind: str) -> list[tuple[str, ...]]:
    return sorted(p for p, k in KINDS.items() if k == kind)


def test_every_command_has_a_kind() -> None:
    assert sorted(COMMANDS) == sorted(KINDS)


@pytest.mark.parametrize("path", of_kind(READ), ids=" ".join)
def test_every_read_command_answers_in_json(path: tuple[str, ...]) -> None:
    assert "--json" in options(path)


@pytest.mark.parametrize("path", of_kind(DESTRUCTIVE), ids=" ".join)
def test_every_destructive_command_asks_and_can_dry_run(path: tuple[str, ...]) -> None:
    assert {"--yes", "--dry-run"} <= options(path)


def test_every_option_with_an_environment_variable_names_it_in_help() -> None:
    help_text = CliRunner().invoke(cli, ["relay", "run", "--help"], terminal_width=200).output
    assert "env var: CDCBOX_METRICS_HOST" in help_text


def test_schemas_check_answers_in_json() -> None:
    # The files only: a registry the environment names (a test session's) is for e2e.
    result = CliRunner(env={"CDCBOX_REGISTRY_URL": None}).invoke(
        cli, ["schemas", "check", "--json"]
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    catalogue = Path(str(resource_dir("schemas"))) / "avro"
    assert answer["problems"] == []
    assert {e["event_type"] for e in answer["events"]} == {
        p.name.split(".")[0] for p in catalogue.glob("*.v*.avsc")
    }
