"""One convention per concept across cdc-ctl's commands: every read command can answer
in JSON, every destructive one asks unless --yes and can say what it would do with
--dry-run, and every option's --help names its environment variable."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from cdcbox.cli.main import cli

pytestmark = pytest.mark.unit

READS = [
    ("connectors", "list"), ("connectors", "status"), ("outbox", "stats"),
    ("outbox", "dead", "list"), ("groups", "list"), ("groups", "lag"), ("slot", "status"),
    ("inbox", "stats"), ("dlq", "list"), ("parked", "list"), ("doctor",), ("diff",),
    ("stack", "status"),
]  # fmt: skip
DESTRUCTIVE = [
    ("connectors", "delete"), ("dlq", "replay"), ("outbox", "purge"), ("inbox", "purge"),
    ("slot", "drop"), ("offsets", "reset"), ("offsets", "set"),
]  # fmt: skip


def command(path: tuple[str, ...]) -> click.Command:
    found: click.Command = cli
    for name in path:
        assert isinstance(found, click.Group)
        found = found.commands[name]
    return found


def options(path: tuple[str, ...]) -> set[str]:
    return {o for p in command(path).params if isinstance(p, click.Option) for o in p.opts}


@pytest.mark.parametrize("path", READS, ids=" ".join)
def test_every_read_command_answers_in_json(path: tuple[str, ...]) -> None:
    assert "--json" in options(path)


@pytest.mark.parametrize("path", DESTRUCTIVE, ids=" ".join)
def test_every_destructive_command_asks_and_can_dry_run(path: tuple[str, ...]) -> None:
    assert {"--yes", "--dry-run"} <= options(path)


def test_every_option_with_an_environment_variable_names_it_in_help() -> None:
    help_text = CliRunner().invoke(cli, ["relay", "run", "--help"], terminal_width=200).output
    assert "env var: CDCBOX_METRICS_HOST" in help_text
