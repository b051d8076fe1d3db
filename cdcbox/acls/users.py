"""The SCRAM users of a plan's principals: one made for each that has none, its password
generated into a 0600 file (`DIR/kafka-<user>.password`, the stack's own naming); a user
that exists keeps its password. A password is written, never printed or returned."""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cdcbox.kafka.acls import AclAdmin
from cdcbox.kafka.base import KafkaSettings
from cdcbox.kafka.security import Mechanism


@dataclass(frozen=True)
class MadeUser:
    """A user made (its password's file), or one a dry run would make (no file)."""

    user: str
    password_file: Path | None


def ensure_users(
    settings: KafkaSettings,
    users: Sequence[str],
    directory: Path,
    mechanism: Mechanism,
    dry_run: bool = False,
) -> list[MadeUser]:
    """Make each of `users` that the cluster lacks, as `settings`' principal (the
    bootstrap admin); return those made (or, with `dry_run`, those that would be)."""
    with AclAdmin(settings) as admin:
        existing = admin.scram_users()
        made = []
        for user in (u for u in users if u not in existing):
            if dry_run:
                made.append(MadeUser(user, None))
                continue
            password_file = directory / f"kafka-{user}.password"
            if not password_file.exists():
                _write_private(password_file, secrets.token_urlsafe(24) + "\n")
            admin.upsert_scram_user(user, password_file.read_text().strip(), mechanism)
            made.append(MadeUser(user, password_file))
    return made


def _write_private(path: Path, text: str) -> None:
    """Created readable by its owner only, never readable first."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(text)
