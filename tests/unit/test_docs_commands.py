"""The docs' shell: every `cdc-ctl` command line of the README and the docs site (shell
blocks and inline code) names a command and options `cdc-ctl` has, and every other line
of a shell block runs a script or a compose file the repository has. The lines are
synopses (`[--batch]`, `cdc|polling`) run against a stack elsewhere in the suite, so they
are checked against the CLI itself here, with no stack."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import click
import pytest

from cdcbox.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELL_BLOCK = re.compile(r"```(?:bash|sh|console)\n(.*?)```", re.S)
INLINE = re.compile(r"`(cdc-ctl [^`]+)`")


def shell_lines(text: str) -> list[str]:
    """Each command of each shell block: continuations joined, comments dropped."""
    lines: list[str] = []
    for block in SHELL_BLOCK.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            command = line.split(" #", 1)[0].strip()
            if command and not command.startswith("#"):
                lines.append(command)
    return lines


def commands() -> list[tuple[str, str]]:
    """(page, cdc-ctl line) of every page, from shell blocks and from inline code."""
    found: list[tuple[str, str]] = []
    for page in PAGES:
        text = page.read_text()
        name = str(page.relative_to(ROOT))
        for line in shell_lines(text):
            found += [(name, c) for c in re.findall(r"cdc-ctl [^\"')]+", line)]
        found += [(name, c) for c in INLINE.findall(text) if "…" not in c]
    return found


def check(line: str) -> None:
    """Walk `line` down cdc-ctl's command tree; every option it names must exist there."""
    words = [w.strip("[]") for w in shlex.split(line.replace("|", " | "))][1:]
    command: click.Command = cli
    for word in words:
        if isinstance(command, click.Group) and word in command.commands:
            command = command.commands[word]
            continue
        if word.startswith("--"):
            option = word.split("=", 1)[0]
            known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
            assert option in known, f"`{line}`: {command.name} has no option {option}"
    assert not isinstance(command, click.Group) or command is not cli, f"`{line}`: no command"


@pytest.mark.parametrize(("page", "line"), commands(), ids=lambda v: str(v)[:60])
def test_a_cdc_ctl_line_of_the_docs_names_what_the_cli_has(page: str, line: str) -> None:
    check(line)


def test_the_check_refuses_what_the_cli_does_not_have() -> None:
    with pytest.raises(AssertionError, match="no option --colour"):
        check("cdc-ctl consume x:Y --colour")
    with pytest.raises(AssertionError, match="no command"):
        check("cdc-ctl --dsn postgresql://x")


def test_the_other_shell_lines_run_what_the_repository_has() -> None:
    """Scripts exist and are executable; compose files and profiles exist."""
    for page in PAGES:
        for line in shell_lines(page.read_text()):
            first = line.split()[0]
            if first.startswith("scripts/"):
                script = ROOT / first
                assert script.is_file() and script.stat().st_mode & 0o111, f"{page}: {line}"
            elif line.startswith("docker compose"):
                words = shlex.split(line)
                files = [words[i + 1] for i, w in enumerate(words) if w in ("-f", "--env-file")]
                assert files and all((ROOT / f).is_file() for f in files), f"{page}: {line}"
                compose = "".join((ROOT / f).read_text() for f in files if f.endswith(".yml"))
                for i, word in enumerate(words):
                    if word == "--profile":
                        profile = re.escape(words[i + 1])
                        assert re.search(rf"profiles: \[[^]]*\b{profile}\b", compose), line


def test_a_dockerfile_of_the_docs_extends_the_image_compose_builds() -> None:
    """The image users extend: its name is the one compose builds, the user it copies as
    is the image's, and its CMD is a cdc-ctl command line (the image's entrypoint)."""
    dockerfile = (ROOT / "infra" / "images" / "cdcbox.Dockerfile").read_text()
    compose = (ROOT / "infra" / "docker-compose.yml").read_text()
    assert 'ENTRYPOINT ["cdc-ctl"]' in dockerfile
    blocks = [
        block
        for page in PAGES
        for block in re.findall(r"```dockerfile\n(.*?)```", page.read_text(), re.S)
    ]
    assert blocks
    for block in blocks:
        image = re.search(r"^FROM (\S+)", block, re.M)
        assert image and f"image: {image.group(1)}" in compose
        for user in re.findall(r"--chown=(\w+)", block):
            assert re.search(rf"useradd .* {user}$", dockerfile, re.M), user
        command = re.search(r"^CMD (\[.*\])", block, re.M)
        assert command, block
        check("cdc-ctl " + " ".join(json.loads(command.group(1))))
