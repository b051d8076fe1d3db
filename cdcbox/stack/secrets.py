"""Generated credentials of the local stack, kept in files only their owner can read.

Nothing prints them: clients get a PGPASSFILE path, Kafka Connect gets a properties file
read through its FileConfigProvider, so the password never travels in a connector config.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cdcbox.errors import ConfigError
from cdcbox.names import DbNames

SUPERUSER = "postgres"


@dataclass(frozen=True)
class StackSecrets:
    """The stack's generated passwords, in files only their owner can read."""

    directory: Path

    @property
    def superuser_password_file(self) -> Path:
        return self.directory / "postgres.password"

    @property
    def debezium_properties(self) -> Path:
        """`password=...` for the Debezium role; read by Connect's FileConfigProvider."""
        return self.directory / "debezium.properties"

    @property
    def pgpass(self) -> Path:
        return self.directory / "pgpass"

    @property
    def mariadb_password_file(self) -> Path:
        """The compose stack's MariaDB user's password (the native server keeps its own
        in `mariadb.cnf`, see cdcbox.stack.mariadb)."""
        return self.directory / "mariadb.password"

    @property
    def mariadb_client_file(self) -> Path:
        """A MariaDB client option file holding that password, for DSNs on the host."""
        return self.directory / "mariadb-compose.cnf"

    def ensure(self, host: str, port: int) -> None:
        """Create the passwords once; later calls keep them (the data directory uses them)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        if not self.superuser_password_file.exists():
            write_private(self.superuser_password_file, secrets.token_urlsafe(24) + "\n")
        if not self.debezium_properties.exists():
            write_private(self.debezium_properties, f"password={secrets.token_urlsafe(24)}\n")
        if not self.mariadb_password_file.exists():
            write_private(self.mariadb_password_file, secrets.token_urlsafe(24) + "\n")
        mariadb_password = self.mariadb_password_file.read_text().strip()
        write_private(self.mariadb_client_file, f"[client]\npassword={mariadb_password}\n")
        lines = [
            f"{host}:{port}:*:{SUPERUSER}:{self.superuser_password()}",
            f"{host}:{port}:*:{DbNames().debezium_role}:{self.debezium_password()}",
        ]
        write_private(self.pgpass, "\n".join(lines) + "\n")

    def superuser_password(self) -> str:
        return self.superuser_password_file.read_text().strip()

    def debezium_password(self) -> str:
        return read_password_properties(self.debezium_properties)


def read_password_properties(path: Path) -> str:
    """The `password` entry of a Java properties file (the format Connect's provider reads)."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read the password file {path}: {e.strerror}") from e
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "password":
            return value.strip()
    raise ConfigError(f"{path} has no 'password=' line")


def write_private(path: Path, text: str) -> None:
    """Write `text` to a file only its owner can read (created so, never readable first)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
