"""The secured stack's secrets never pass through a command line or a readable file
(audit 26, case 13): the SCRAM passwords reach Kafka's storage tool in an argument file
(argparse4j's @file) created 0600, and initdb's password file is 0600 from its first
byte. The tools themselves are stubbed: what is checked is what they would be given."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cdcbox.errors import StackError
from cdcbox.resources import resource_dir
from cdcbox.stack import kafka as kafka_module
from cdcbox.stack.config import StackConfig
from cdcbox.stack.kafka import NativeKafka
from cdcbox.stack.postgres import NativePostgres
from cdcbox.stack.secrets import StackSecrets
from cdcbox.stack.tls import USERS, StackTls

pytestmark = pytest.mark.unit


def config(tmp_path: Path, secure: bool = True) -> StackConfig:
    return StackConfig(
        state_dir=tmp_path / "stack",
        cache_dir=tmp_path / "cache",
        infra_dir=resource_dir("infra"),
        secure=secure,
    )


@contextmanager
def umask(mask: int) -> Iterator[None]:
    """The process's umask set to a common default for the block."""
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def private(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) & 0o077 == 0


def test_scram_passwords_reach_the_storage_tool_in_a_private_argument_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = config(tmp_path)
    tls = StackTls.of(cfg.state_dir)
    tls.directory.mkdir(parents=True)
    passwords = {user: f"pw-of-{user}-5ecret" for user in USERS}
    for user, password in passwords.items():
        tls.password_file(user).write_text(password)
    seen: dict[str, Any] = {}

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        seen["argv"] = argv
        files = [Path(a[1:]) for a in argv if a.startswith("@")]
        seen["files"] = [(f.read_text(), private(f)) for f in files]
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(kafka_module, "jvm_argv", lambda _l, _i, _h, *args: ["java", *args])
    monkeypatch.setattr("subprocess.run", run)
    broker = NativeKafka(cfg, layout=None)
    monkeypatch.setattr(broker, "_layout", lambda: None)
    broker.root.mkdir(parents=True)
    with umask(0o022):
        broker._format()
    command_line = " ".join(seen["argv"])
    assert all(password not in command_line for password in passwords.values())
    [(arguments, was_private)] = seen["files"]
    assert was_private
    assert all(f"password={password}]" in arguments for password in passwords.values())
    assert "--add-scram" in arguments.splitlines()
    assert not any(broker.root.glob("*scram*"))  # removed once the tool has run


def test_initdb_password_file_is_private_from_its_creation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = config(tmp_path, secure=False)
    secrets = StackSecrets(cfg.state_dir / "secrets")
    secrets.ensure("127.0.0.1", 55432)
    postgres = NativePostgres(cfg, secrets)
    postgres.root.mkdir(parents=True)
    modes: list[bool] = []
    real_chmod = os.chmod

    def chmod(path: Any, mode: int, **kwargs: Any) -> None:
        modes.append(private(Path(path)))  # the mode before this chmod
        real_chmod(path, mode, **kwargs)

    def run_as_postgres(argv: list[str]) -> subprocess.CompletedProcess[str]:
        [option] = [a for a in argv if a.startswith("--pwfile=")]
        modes.append(private(Path(option.split("=", 1)[1])))
        return subprocess.CompletedProcess(argv, 1, "", "stubbed")

    monkeypatch.setattr("os.chmod", chmod)
    monkeypatch.setattr(postgres, "_run_as_postgres", run_as_postgres)
    with umask(0o022), pytest.raises(StackError, match="stubbed"):
        postgres._initdb(tmp_path / "bin")
    assert modes and all(modes)


def test_a_plain_stack_gives_the_storage_tool_no_argument_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """argparse4j refuses an empty @file: without --secure there is none."""
    seen: list[list[str]] = []

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        seen.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(kafka_module, "jvm_argv", lambda _l, _i, _h, *args: ["java", *args])
    monkeypatch.setattr("subprocess.run", run)
    broker = NativeKafka(config(tmp_path, secure=False), layout=None)
    monkeypatch.setattr(broker, "_layout", lambda: None)
    broker.root.mkdir(parents=True)
    broker._format()
    assert not [a for a in seen[0] if a.startswith("@")]
