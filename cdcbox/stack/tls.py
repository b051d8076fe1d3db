"""The secured native stack's certificates and SCRAM users (`cdc-ctl stack up --secure`).

A private CA signs one server certificate for `localhost` and the stack's host address;
Kafka's SASL_SSL listener and PostgreSQL (`ssl=on`) both present it, and clients trust
the CA (`ca.pem`). Kafka's users are SCRAM-SHA-512, one per role (`cdcbox.acls.plan`):
`admin` (the brokers, and the super user that bootstraps the ACLs), `connect` (the Connect
worker and its connectors), `supervisor` (`connectors supervise`), `operator` (`cdc-ctl`
and the services that have no principal of their own yet). Everything is made once with
openssl into `secrets/tls/`, mode 0600, and never printed; a service's own user is made
by `cdc-ctl acls apply --users-dir` there too.
"""

from __future__ import annotations

import secrets
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cdcbox.acls.plan import CONNECT_USER, OPERATOR_USER, SUPERVISOR_USER
from cdcbox.errors import StackError
from cdcbox.kafka.security import KafkaSecurity, Mechanism, Secret
from cdcbox.stack.secrets import write_private

MECHANISM: Mechanism = "SCRAM-SHA-512"
USERS = ("admin", CONNECT_USER, SUPERVISOR_USER, OPERATOR_USER)
ADMIN = "admin"


@dataclass(frozen=True)
class StackTls:
    """The secured stack's CA, server certificate and SCRAM users' passwords."""

    directory: Path  # secrets/tls

    @classmethod
    def of(cls, state_dir: Path) -> StackTls:
        """The TLS material of the stack whose state lives in `state_dir`."""
        return cls(state_dir / "secrets" / "tls")

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def server_cert(self) -> Path:
        return self.directory / "server.pem"

    @property
    def server_key(self) -> Path:
        return self.directory / "server.key"

    @property
    def keystore(self) -> Path:
        """The server's PKCS#8 key and certificate in one PEM file (Kafka's PEM keystore)."""
        return self.directory / "server-keystore.pem"

    def password_file(self, user: str) -> Path:
        return self.directory / f"kafka-{user}.password"

    def password(self, user: str) -> str:
        return self.password_file(user).read_text().strip()

    def ensure(self, host: str) -> None:
        """Make the CA, the server certificate and the users' passwords, once."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.directory.chmod(0o700)
        for user in USERS:
            if not self.password_file(user).exists():
                write_private(self.password_file(user), secrets.token_urlsafe(24) + "\n")
        if self.keystore.exists():
            return
        with tempfile.TemporaryDirectory() as tmp:
            ca_key, csr, ext = Path(tmp) / "ca.key", Path(tmp) / "server.csr", Path(tmp) / "ext"
            ext.write_text(f"subjectAltName=DNS:localhost,IP:{host}\n")
            _openssl(
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "3650",
                "-subj",
                "/CN=cdcbox local CA",
                "-keyout",
                str(ca_key),
                "-out",
                str(self.ca),
            )
            _openssl(
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=localhost",
                "-keyout",
                str(self.server_key),
                "-out",
                str(csr),
            )
            _openssl(
                "x509",
                "-req",
                "-in",
                str(csr),
                "-CA",
                str(self.ca),
                "-CAkey",
                str(ca_key),
                "-CAcreateserial",
                "-days",
                "3650",
                "-extfile",
                str(ext),
                "-out",
                str(self.server_cert),
            )
        for path in (self.ca, self.server_cert, self.server_key):
            path.chmod(0o600)
        write_private(self.keystore, self.server_key.read_text() + self.server_cert.read_text())

    def client(self, user: str) -> KafkaSecurity:
        """How `user` reaches the SASL_SSL listener."""
        return KafkaSecurity(
            protocol="SASL_SSL",
            sasl_mechanism=MECHANISM,
            username=user,
            password=Secret(self.password(user)),
            ca_file=self.ca,
        )

    def jaas(self, user: str) -> str:
        return (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{self.password(user)}";'
        )

    def java_client_properties(self, user: str) -> dict[str, str]:
        """A Java client's settings for the SASL_SSL listener (Connect's worker)."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.jaas.config": self.jaas(user),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca),
        }


def _openssl(*args: str) -> None:
    result = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise StackError(f"openssl {args[0]} failed: {result.stderr.strip()[-500:]}")
