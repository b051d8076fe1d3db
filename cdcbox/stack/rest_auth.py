"""Basic auth on the secured native stack's Connect REST API (`stack up --secure`).

Kafka Connect's own `BasicAuthSecurityRestExtension` (the connect-basic-auth-extension
jar, resolved with Kafka's) checks every request against the JAAS login context
`KafkaConnect`, here a `PropertyFileLoginModule` over a users file with one user,
`cdcbox`, whose generated password sits in `secrets/tls/connect-rest-cdcbox.password`.
`stack env` names that file (`CDCBOX_CONNECT_PASSWORD_FILE`), never the password.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from cdcbox.stack.secrets import write_private

EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
LOGIN_MODULE = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule"
USER = "cdcbox"


@dataclass(frozen=True)
class ConnectRestAuth:
    """The secured stack's Connect REST basic-auth user and its password file."""

    directory: Path  # secrets/tls, beside the stack's other secured-mode secrets

    @classmethod
    def of(cls, state_dir: Path) -> ConnectRestAuth:
        return cls(state_dir / "secrets" / "tls")

    @property
    def password_file(self) -> Path:
        return self.directory / f"connect-rest-{USER}.password"

    @property
    def users_file(self) -> Path:
        return self.directory / "connect-rest-users.properties"

    @property
    def jaas_file(self) -> Path:
        return self.directory / "connect-rest-jaas.conf"

    def ensure(self) -> None:
        """The password (made once), and the users and JAAS files the worker reads."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.password_file.exists():
            write_private(self.password_file, secrets.token_urlsafe(24) + "\n")
        write_private(self.users_file, f"{USER}={self.credentials()[1]}\n")
        write_private(
            self.jaas_file,
            f'KafkaConnect {{\n  {LOGIN_MODULE} required\n  file="{self.users_file}";\n}};\n',
        )

    def credentials(self) -> tuple[str, str]:
        return USER, self.password_file.read_text().strip()

    def worker_properties(self) -> dict[str, str]:
        return {"rest.extension.classes": EXTENSION}

    def system_properties(self) -> dict[str, str]:
        return {"java.security.auth.login.config": str(self.jaas_file)}
