"""Operating-system prerequisites of the native stack: a JDK, Maven and PostgreSQL.

Missing ones are installed from Debian's packages when we run as root (sessions and CI
do); otherwise the error names the package to install.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pwd
import shutil
import subprocess
from pathlib import Path

from cdcbox.errors import StackError

_CREATECLUSTER_CONF = Path("/etc/postgresql-common/createcluster.conf")

log = logging.getLogger("cdcbox.stack")


def is_root() -> bool:
    return os.geteuid() == 0


def _apt_install(packages: list[str]) -> None:
    if not is_root():
        raise StackError(f"missing {' '.join(packages)}: install them (apt-get install ...)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    log.info("installing %s with apt-get (once)", " ".join(packages))
    for argv in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
    ):
        result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise StackError(f"{' '.join(argv)} failed:\n{result.stderr[-2000:]}")
    # The install's output (the loop's last command), summarised: what it set up.
    set_up = [
        line.split()[2] for line in result.stdout.splitlines() if line.startswith("Setting up ")
    ]
    shown = ", ".join(set_up[:12]) + (f" and {len(set_up) - 12} more" if len(set_up) > 12 else "")
    log.info("  apt-get set up %d package(s): %s", len(set_up), shown or "none")


def ensure_java_and_maven() -> tuple[str, str]:
    """Paths of `java` (17+) and `mvn`, installing Debian's packages when absent."""
    missing = []
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        missing.append("openjdk-17-jre-headless")
    if shutil.which("mvn") is None:
        missing.append("maven")
    if missing:
        _apt_install(missing)
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    mvn = shutil.which("mvn")
    if java is None or mvn is None:
        raise StackError("java or mvn still missing after installing them")
    return java, mvn


def find_java(min_major: int, override_env: str) -> str:
    """A `java` of `min_major` or newer: the first of the JDK `override_env` names,
    JAVA_HOME, the one on PATH and those under /usr/lib/jvm (where Debian's and Temurin's
    packages put theirs). Debian bookworm packages none newer than 17."""
    homes = [os.environ.get(override_env), os.environ.get("JAVA_HOME")]
    on_path = shutil.which("java")
    if on_path:
        homes.append(str(Path(on_path).resolve().parent.parent))
    jvm = Path("/usr/lib/jvm")
    if jvm.is_dir():
        homes += [str(h) for h in sorted(jvm.iterdir()) if h.is_dir() and not h.is_symlink()]
    seen: dict[str, int | None] = {}
    for home in filter(None, homes):
        major = seen[home] = java_major(Path(home))
        if major is not None and major >= min_major:
            return str(Path(home) / "bin" / "java")
    listed = ", ".join(f"{home} ({major or '?'})" for home, major in seen.items()) or "none"
    raise StackError(
        f"no Java {min_major} or newer found (JDKs seen: {listed}): install one and set "
        f"{override_env} to its home"
    )


def java_major(home: Path) -> int | None:
    """The feature version of the JDK at `home`, read from its `release` file."""
    try:
        release = (home / "release").read_text()
    except OSError:
        return None
    for line in release.splitlines():
        if line.startswith("JAVA_VERSION="):
            version = line.split("=", 1)[1].strip().strip('"')
            head = version.split(".")[0]
            return int(head) if head.isdigit() else None
    return None


def ensure_postgres(major: str) -> Path:
    """The bin directory of PostgreSQL `major` from Debian's packages, installed if absent.

    Debian's package would create and start a system cluster on port 5432; we stop that
    from happening before installing, because the stack runs its own private cluster.
    """
    bin_dir = Path(f"/usr/lib/postgresql/{major}/bin")
    if not (bin_dir / "postgres").exists():
        if is_root():
            _CREATECLUSTER_CONF.parent.mkdir(parents=True, exist_ok=True)
            existing = _CREATECLUSTER_CONF.read_text() if _CREATECLUSTER_CONF.exists() else ""
            if "create_main_cluster" not in existing:
                _CREATECLUSTER_CONF.write_text(existing + "create_main_cluster = false\n")
        _apt_install([f"postgresql-{major}"])
    if not (bin_dir / "postgres").exists():
        raise StackError(f"PostgreSQL {major} binaries not found in {bin_dir}")
    return bin_dir


def ensure_mariadb() -> Path:
    """The path of Debian's `mariadbd`, installing `mariadb-server` when absent. Where
    no policy stops packages from starting services, its package starts a system server
    on port 3306; the stack runs its own private one beside it."""
    path = Path("/usr/sbin/mariadbd")
    if not path.exists():
        _apt_install(["mariadb-server", "mariadb-client"])
    if not path.exists():
        raise StackError(f"MariaDB's server is not at {path} after installing mariadb-server")
    return path


def private_root(state_dir: Path, account: str, component: str) -> Path:
    """Where a server run as system user `account` keeps its files: in the state
    directory when that user can reach it; otherwise (a state directory under root's
    private home, say) under /var/tmp, keyed by the state directory, so the same stack
    always finds them again."""
    preferred = state_dir / component
    runuser = shutil.which("runuser")
    if runuser is None:
        return preferred  # starting the server names what is missing
    state_dir.mkdir(parents=True, exist_ok=True)
    probe = subprocess.run(
        [runuser, "-u", account, "--", "test", "-x", str(state_dir)],
        check=False,
        capture_output=True,
    )
    if probe.returncode == 0:
        return preferred
    key = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:12]
    return Path("/var/tmp") / f"cdcbox-{key}" / component  # noqa: S108 - owned by `account`


def postgres_account() -> pwd.struct_passwd | None:
    """The `postgres` system account when we are root (PostgreSQL refuses to run as root)."""
    if not is_root():
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError as e:
        raise StackError("no 'postgres' system user: install postgresql-common") from e


def ensure_prometheus() -> str:
    """The path of Debian's `prometheus` binary, installing the package when absent. The
    package's own service is never started here (no init system runs it); the stack
    runs the binary itself, with its own configuration."""
    binary = shutil.which("prometheus")
    if binary is None:
        _apt_install(["prometheus"])
        binary = shutil.which("prometheus")
    if binary is None:
        raise StackError("prometheus still missing after installing Debian's package")
    return binary
