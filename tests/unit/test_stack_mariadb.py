"""The native stack's MariaDB is looked at (status, down) on machines that never
installed it: no `mysql` account is no error until MariaDB is started."""

from __future__ import annotations

import pwd
from pathlib import Path

import pytest

from cdcbox.resources import resource_dir
from cdcbox.stack import mariadb
from cdcbox.stack.config import StackConfig
from cdcbox.stack.mariadb import NativeMariaDB


def test_a_machine_without_the_mysql_account_sees_a_stopped_mariadb(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Failed before: constructing NativeMariaDB (as `stack status` and `down` do for every
    # stack) raised "no 'mysql' system user" on a machine without mariadb-server.
    def no_such_user(name: str) -> pwd.struct_passwd:
        raise KeyError(name)

    monkeypatch.setattr(mariadb, "is_root", lambda: True)
    monkeypatch.setattr(pwd, "getpwnam", no_such_user)
    config = StackConfig(tmp_path, tmp_path / "cache", resource_dir("infra"))
    server = NativeMariaDB(config)
    assert not server.running()
    assert server.root == tmp_path / "mariadb"
    server.stop()  # nothing to stop, nothing raised
