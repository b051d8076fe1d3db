"""`stack up --mode compose` runs the supervisor service unless told `--no-supervisor`."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdcbox.stack.compose import ComposeStack
from cdcbox.stack.config import StackConfig
from cdcbox.stack.secrets import StackSecrets


def compose_up_argv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, supervised: bool) -> str:
    """The arguments `up` hands `docker` (a stand-in recording them)."""
    record = tmp_path / "argv"
    fake = tmp_path / "bin" / "docker"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" > {record}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    config = StackConfig(
        state_dir=tmp_path / "state",
        cache_dir=tmp_path / "cache",
        infra_dir=tmp_path,
        with_supervisor=supervised,
    )
    compose = ComposeStack(config, StackSecrets(tmp_path / "secrets"))
    compose._build_base = "base"  # the images' base is ready
    compose.up()
    return record.read_text()


def test_the_supervisor_service_runs_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = compose_up_argv(tmp_path, monkeypatch, supervised=True)
    assert " up -d --build --wait" in argv and "--scale" not in argv


def test_no_supervisor_scales_the_service_to_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = compose_up_argv(tmp_path, monkeypatch, supervised=False)
    assert argv.rstrip().endswith("up -d --build --wait --scale supervisor=0")
