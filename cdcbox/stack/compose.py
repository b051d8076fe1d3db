"""The stack under docker compose, for users whose machines run a Docker engine.

Same versions as the native runner (compose reads infra/versions.env), same ports on
127.0.0.1 and the same generated secrets, copied by the compose file's one-shot
`secrets` service into a volume, readable only by each container's own user. Every
image is built from this repository on `debian:bookworm-slim` (cdcbox.stack.images makes
that base where no registry hands it out).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from cdcbox.errors import StackError
from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import ComponentStatus, Endpoints
from cdcbox.stack.images import Docker, build_base, ensure_base
from cdcbox.stack.registry import CCOMPAT_PATH
from cdcbox.stack.secrets import StackSecrets
from cdcbox.stack.steps import step


def docker_engine_answers() -> bool:
    """True only when a Docker engine responds; a bare client is not enough."""
    if shutil.which("docker") is None:
        return False
    try:
        result = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and bool(result.stdout.strip())


# What Maven, pip, apt and Go print when a TLS certificate cannot be verified: on a
# network that intercepts TLS, the builds need its CA (`--build-ca`).
_UNTRUSTED = re.compile(
    r"PKIX path building failed|unable to find valid certification path|"
    r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|"
    r"x509: certificate signed by unknown authority|server certificate verification failed",
    re.IGNORECASE,
)


def up_failure(stderr: str, project: str, build_ca: Path | None) -> str:
    """The message of a failed `docker compose up`: its first line says what to do, the
    output's tail follows."""
    if _UNTRUSTED.search(stderr):
        first = (
            "an image build could not verify a TLS certificate (a network that intercepts "
            "TLS?): run `cdc-ctl stack up --mode compose --build-ca "
            "/etc/ssl/certs/ca-certificates.crt` (or set CDCBOX_BUILD_CA) to trust its CA"
        )
        if build_ca is not None:
            first = (
                f"an image build could not verify a TLS certificate, though it trusts "
                f"{build_ca}: is the intercepting proxy's CA in that bundle?"
            )
    else:
        first = f"docker compose up failed (see `docker compose -p {project} logs`)"
    return f"{first}\n{stderr[-3000:]}"


class ComposeStack:
    """The stack run by `docker compose` from `infra/docker-compose.yml`."""

    def __init__(self, config: StackConfig, secrets: StackSecrets) -> None:
        self.config = config
        self.secrets = secrets
        self.project = config.compose_project
        self._build_base: str | None = None

    def environment(self) -> dict[str, str]:
        """Variables the compose file reads (besides infra/versions.env)."""
        ports = self.config.ports
        return {
            "CDCBOX_SECRETS_DIR": str(self.secrets.directory),
            "CDCBOX_PG_PORT": str(ports.postgres),
            "CDCBOX_KAFKA_PORT": str(ports.kafka),
            "CDCBOX_CONNECT_PORT": str(ports.connect),
            "CDCBOX_REGISTRY_PORT": str(ports.registry),
            "CDCBOX_MARIADB_PORT": str(ports.mariadb),
            "CDCBOX_DATABASE": self.config.database,
            "CDCBOX_CONNECT_EXACTLY_ONCE": self.config.exactly_once,
            **({"CDCBOX_BUILD_BASE": self._build_base} if self._build_base else {}),
        }

    def prepare_images(self) -> None:
        """The base image (pulled, or made from Debian's archive) and the build base
        (the base trusting `config.build_ca`): what `up --build` needs before it builds."""
        docker = Docker()
        with step("base image debian:bookworm-slim"):
            ensure_base(docker, self.config.cache_dir)
        trusting = f" trusting {self.config.build_ca}" if self.config.build_ca else ""
        with step(f"build base{trusting}"):
            self._build_base = build_base(docker, self.config.build_ca)

    def run_compose(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **self.environment()}
        argv = [
            "docker",
            "compose",
            "-p",
            self.project,
            "--env-file",
            str(self.config.infra_dir / "versions.env"),
            "-f",
            str(self.config.infra_dir / "docker-compose.yml"),
            *args,
        ]
        try:
            return subprocess.run(
                argv, env=env, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired as e:
            raise StackError(
                f"docker compose {args[0]} did not finish within {timeout:.0f}s (images still "
                "pulling or building?); it may still be running: "
                f"`docker compose -p {self.project} ps`, then run the command again"
            ) from e

    def up(self) -> Endpoints:
        """Build what changed, start every service and wait until each is healthy (the
        one-shot ones: finished); the first build takes minutes."""
        if self._build_base is None:
            self.prepare_images()
        with step("docker compose up (images are built on the first run)"):
            # The supervisor is a service of the default profile: `--no-supervisor` keeps
            # it at 0.
            scale = [] if self.config.with_supervisor else ["--scale", "supervisor=0"]
            result = self.run_compose("up", "-d", "--build", "--wait", *scale, timeout=1800)
        if result.returncode != 0:
            raise StackError(up_failure(result.stderr, self.project, self.config.build_ca))
        return self.endpoints()

    def endpoints(self) -> Endpoints:
        host, ports = self.config.host, self.config.ports
        return Endpoints(
            dsn=f"postgresql://postgres@{host}:{ports.postgres}/{self.config.database}",
            pgpassfile=str(self.secrets.pgpass),
            bootstrap_servers=f"{host}:{ports.kafka}",
            connect_url=f"http://{host}:{ports.connect}",
            connect_db_host="postgres",
            connect_db_port="5432",
            connect_db_name=self.config.database,
            # Where the `secrets` service of the compose file puts Connect's copy.
            connect_db_secrets="/run/cdcbox-secrets/connect/debezium.properties",
            debezium_password_file=str(self.secrets.debezium_properties),
            registry_url=f"http://{host}:{ports.registry}{CCOMPAT_PATH}",
            mariadb_dsn=(
                f"mariadb://cdcbox@{host}:{ports.mariadb}/{self.config.database}"
                f"?option_file={self.secrets.mariadb_client_file}"
            ),
        )

    def down(self, purge: bool) -> None:
        args = ["down", "--volumes"] if purge else ["down"]
        result = self.run_compose(*args)
        if result.returncode != 0:
            raise StackError(f"docker compose down failed:\n{result.stderr[-3000:]}")

    def status(self) -> list[ComponentStatus]:
        result = self.run_compose("ps", "--format", "{{.Service}} {{.State}}", timeout=60)
        states = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
        return [
            ComponentStatus(name, states.get(name) == "running", states.get(name, "absent"))
            for name in ("postgres", "registry", "kafka", "connect", "supervisor")
            if name != "supervisor" or self.config.with_supervisor or name in states
        ]
