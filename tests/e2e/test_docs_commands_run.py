"""The docs' shell lines that are concrete (no `[option]`, no alternatives, no NAME to
fill in) and only read are run here as written, against the stack: each must succeed
and print something. The rest are synopses, checked against the CLI by
tests/unit/test_docs_commands.py."""

from __future__ import annotations

import re
import shlex

import click
import pytest
from click.testing import CliRunner

from cdcbox.cli.main import cli
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.topics import ensure_topics
from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import Endpoints
from tests.unit.test_docs_commands import commands

pytestmark = pytest.mark.e2e

# Command paths that only read: safe to run against the shared test stack.
READ_ONLY = {
    ("connectors", "list"),
    ("connectors", "status"),
    ("db", "sql"),
    ("diff",),
    ("dlq", "list"),
    ("doctor",),
    ("groups", "list"),
    ("inbox", "stats"),
    ("outbox", "dead", "list"),
    ("outbox", "stats"),
    ("parked", "list"),
    ("schemas", "check"),
    ("slot", "status"),
    ("stack", "env"),
    ("stack", "status"),
    ("top",),
}
PLACEHOLDER = re.compile(r"[\[\]|…<>]|\b[A-Z]{3,}\b")


def command_path(words: list[str]) -> tuple[str, ...]:
    command: click.Command = cli
    path: list[str] = []
    for word in words:
        if not (isinstance(command, click.Group) and word in command.commands):
            break
        command = command.commands[word]
        path.append(word)
    return tuple(path)


def runnable() -> list[str]:
    found: set[str] = set()
    for _, line in commands():
        words = shlex.split(line)[1:]
        path = command_path(words)
        if PLACEHOLDER.search(line) or path not in READ_ONLY:
            continue
        if path != ("top",) or "--once" in words:  # top without --once never returns
            found.add(line.strip())
    return sorted(found)


def test_the_docs_have_read_only_lines_to_run() -> None:
    assert len(runnable()) >= 10  # what this test runs must not silently shrink to none


@pytest.mark.parametrize("line", runnable())
def test_a_read_only_line_of_the_docs_runs_as_written(
    stack: Endpoints, native_stack: StackConfig, line: str
) -> None:
    words = shlex.split(line)[1:]
    if command_path(words) == ("dlq", "list"):  # the docs' example topic, as if used
        ensure_topics(KafkaSettings(stack.bootstrap_servers), [words[-1]])
    # `stack …` reads the state directory of the stack the tests run against.
    env = {"CDCBOX_STACK_DIR": str(native_stack.state_dir)}
    result = CliRunner().invoke(cli, words, env=env)
    assert result.exit_code == 0, f"`{line}` exited {result.exit_code}: {result.output[-2000:]}"
    assert result.output.strip(), f"`{line}` printed nothing"
