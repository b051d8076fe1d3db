"""The base of the compose stack's images, made here when no registry hands it out.

Every image of infra/docker-compose.yml is built on `debian:bookworm-slim`. Where the
engine has no such image and cannot pull it, it is made from Debian's archive
(`debootstrap --variant=minbase bookworm`, then `docker import`), as a machine with a
Debian mirror and no image registry can. On networks that intercept TLS, the build
stages (pip, Maven) trust a CA bundle: the base with that bundle added is the build base.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cdcbox.errors import StackError

BASE_IMAGE = "debian:bookworm-slim"
BUILD_BASE_IMAGE = "cdcbox/build-base:local"
DEBOOTSTRAP_SUITE = "bookworm"
_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)
log = logging.getLogger("cdcbox.stack")


@dataclass(frozen=True)
class Docker:
    """The `docker` command line, against the engine the environment names."""

    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    def run(
        self, *args: str, timeout: float = 600, stdin: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(
                ["docker", *args],
                env=self.env,
                input=stdin,
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except FileNotFoundError as e:
            raise StackError("docker is not installed (Debian: apt-get install docker.io)") from e
        except subprocess.TimeoutExpired as e:
            raise StackError(f"docker {args[0]} did not finish within {timeout:.0f}s") from e

    def has_image(self, name: str) -> bool:
        return self.run("image", "inspect", name, timeout=60).returncode == 0


def ensure_base(docker: Docker, work_dir: Path) -> None:
    """`debian:bookworm-slim` in the engine: there already, pulled, or made from Debian's
    archive (root and debootstrap needed) in a directory under `work_dir`."""
    if docker.has_image(BASE_IMAGE):
        return
    pulled = docker.run("pull", BASE_IMAGE, timeout=900)
    if pulled.returncode == 0:
        return
    reason = _last_line(pulled.stderr) or "no registry answered"
    log.info(
        "  %s cannot be pulled (%s): making it from Debian's archive with debootstrap "
        "(a minute or two)",
        BASE_IMAGE,
        reason,
    )
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None or os.geteuid() != 0:
        raise StackError(
            f"{BASE_IMAGE} cannot be pulled ({reason}) and cannot be made here: making it "
            "takes root and debootstrap (apt-get install debootstrap)"
        )
    work_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="debootstrap-", dir=work_dir) as root:
        made = subprocess.run(
            [debootstrap, "--variant=minbase", DEBOOTSTRAP_SUITE, root],
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode != 0:
            raise StackError(f"debootstrap {DEBOOTSTRAP_SUITE} failed:\n{made.stdout[-2000:]}")
        tar = subprocess.run(
            ["tar", "--numeric-owner", "-C", root, "-c", "."], capture_output=True, check=True
        )
    imported = docker.run(
        "import", "--change", 'CMD ["bash"]', "-", BASE_IMAGE, stdin=tar.stdout, timeout=600
    )
    if imported.returncode != 0:
        raise StackError(f"docker import {BASE_IMAGE} failed: {_last_line(imported.stderr)}")


def build_base(docker: Docker, ca_bundle: Path | None) -> str:
    """The image the build stages start from: the base itself, or with `ca_bundle`'s
    certificates added to Debian's trust store (each a file of its own, as Debian's
    update-ca-certificates and its Java hook read them) when a CA bundle is given."""
    if ca_bundle is None:
        return BASE_IMAGE
    try:
        certificates = split_certificates(ca_bundle.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise StackError(f"the CA bundle {ca_bundle} cannot be read: {e}") from e
    if not certificates:
        raise StackError(f"the CA bundle {ca_bundle} holds no PEM certificate")
    with tempfile.TemporaryDirectory(prefix="cdcbox-build-base-") as context:
        certs = Path(context) / "certs"
        certs.mkdir()
        for number, certificate in enumerate(certificates):
            (certs / f"cdcbox-build-ca-{number:04d}.crt").write_text(certificate + "\n")
        (Path(context) / "Dockerfile").write_text(
            f"FROM {BASE_IMAGE}\nCOPY certs/ /usr/local/share/ca-certificates/\n"
        )
        built = docker.run("build", "--quiet", "--tag", BUILD_BASE_IMAGE, context)
    if built.returncode != 0:
        raise StackError(f"the build base could not be built: {_last_line(built.stderr)}")
    return BUILD_BASE_IMAGE


def split_certificates(pem: str) -> list[str]:
    """Each PEM certificate of a bundle, in order."""
    return _CERTIFICATE.findall(pem)


def _last_line(output: bytes) -> str:
    lines = output.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else ""
