"""PostgreSQL for the native stack: a private cluster with wal_level=logical.

Run as the `postgres` system user when we are root, on a data directory that user owns,
started and stopped through its postmaster pid.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import psycopg

from cdcbox.errors import StackError
from cdcbox.stack import process
from cdcbox.stack.config import StackConfig
from cdcbox.stack.secrets import SUPERUSER, StackSecrets, write_private
from cdcbox.stack.system import ensure_postgres, postgres_account, private_root
from cdcbox.stack.tls import StackTls

# Sized for a 2-core, 24 GiB machine shared with two JVMs; logical decoding needs the
# replication settings, the rest keeps the defaults' durability (synchronous_commit on).
SERVER_SETTINGS = {
    "wal_level": "logical",
    "max_wal_senders": "10",
    "max_replication_slots": "10",
    "max_connections": "200",
    "shared_buffers": "512MB",
    "log_min_messages": "warning",
}


def as_postgres() -> list[str]:
    """The prefix that runs a command as the postgres system user (util-linux's runuser,
    which root has; the stack's sessions run as root)."""
    runuser = shutil.which("runuser")
    if runuser is None:
        raise StackError(
            "runuser (util-linux) is not on PATH: the native stack runs PostgreSQL as the "
            "postgres user with it (is /usr/sbin on PATH?)"
        )
    return [runuser, "-u", "postgres", "--"]


def cluster_root(state_dir: Path) -> Path:
    """Where the cluster lives (`private_root`: reachable by the postgres user)."""
    if postgres_account() is None:
        return state_dir / "postgres"
    return private_root(state_dir, "postgres", "postgres")


class NativePostgres:
    """The native stack's PostgreSQL cluster, run as the `postgres` user, stopped by pid."""

    name = "postgres"

    def __init__(self, config: StackConfig, secrets: StackSecrets) -> None:
        self.config = config
        self.secrets = secrets
        self.root = cluster_root(config.state_dir)
        self.data_dir = self.root / "data"
        self.socket_dir = self.root / "run"
        self.log_file = self.root / "postgres.log"

    # --- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        bin_dir = ensure_postgres(self.config.versions.postgres_major)
        if self.running():
            return
        self._await_crashed_server()
        self._prepare_dirs()
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb(bin_dir)
        options = " ".join(
            f"-c {k}={v}"
            for k, v in {
                **SERVER_SETTINGS,
                **self.config.postgres_settings,
                "port": str(self.config.ports.postgres),
                "listen_addresses": self.config.host,
                "unix_socket_directories": str(self.socket_dir),
                **self._ssl(),
            }.items()
        )
        result = self._run_as_postgres(
            [
                str(bin_dir / "pg_ctl"),
                "start",
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_file),
                "-w",
                "-t",
                "60",
                "-o",
                options,
            ]
        )
        if result.returncode != 0:
            raise StackError(
                f"PostgreSQL failed to start (log: {self.log_file}):\n"
                f"{result.stdout}{result.stderr}\n{process.tail(self.log_file)}"
            )
        self._create_databases()

    def _ssl(self) -> dict[str, str]:
        """With --secure: ssl=on with the stack's server certificate, copied where the
        server's user owns it (PostgreSQL refuses a key others can read)."""
        if not self.config.secure:
            return {}
        tls = StackTls.of(self.config.state_dir)
        account = postgres_account()
        paths = {}
        for name, source in (("server.crt", tls.server_cert), ("server.key", tls.server_key)):
            target = self.root / name
            write_private(target, source.read_text())
            if account is not None:
                os.chown(target, account.pw_uid, account.pw_gid)
            paths[name] = str(target)
        return {
            "ssl": "on",
            "ssl_cert_file": paths["server.crt"],
            "ssl_key_file": paths["server.key"],
        }

    def _await_crashed_server(self, timeout_s: float = 30) -> None:
        """After a crash, wait until the old postmaster is gone (a zombie until its parent
        reaps it: postgres refuses to start while postmaster.pid names a live pid) and no
        orphaned backend holds its shared memory (postgres refuses that too)."""
        lock = self._lock_file()
        if lock is None:
            return
        pid, shmid = lock
        if not process.wait_until(
            lambda: process.start_ticks(pid) is None and _attached(shmid) == 0, timeout_s
        ):
            raise StackError(
                f"PostgreSQL's previous server (pid {pid}) has not gone after {timeout_s:.0f} s "
                f"({self.data_dir / 'postmaster.pid'}); stop what still runs of it, then retry"
            )

    def _lock_file(self) -> tuple[int, int | None] | None:
        """The pid and shared memory id postmaster.pid records; None without the file."""
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
            pid = int(lines[0])
        except (OSError, ValueError, IndexError):
            return None
        try:
            shmid = int(lines[6].split()[1])  # line 7: "<shmem key> <shmem id>"
        except (ValueError, IndexError):
            shmid = None
        return pid, shmid

    def stop(self) -> None:
        record = self.pid_record()
        if record is not None:
            # SIGINT is PostgreSQL's "fast" shutdown: roll back sessions, checkpoint, exit.
            process.stop(record, sig=signal.SIGINT, timeout_s=60)

    def purge(self) -> None:
        """Delete the cluster where it lives outside the state directory (see cluster_root)."""
        if not self.root.is_relative_to(self.config.state_dir):
            shutil.rmtree(self.root.parent, ignore_errors=True)

    def running(self) -> bool:
        record = self.pid_record()
        return record is not None and record.alive()

    def pid_record(self) -> process.PidRecord | None:
        """The postmaster, read from PostgreSQL's own postmaster.pid."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        ticks = process.start_ticks(pid)
        return process.PidRecord(pid, ticks) if ticks else None

    def dsn(self, user: str = SUPERUSER) -> str:
        """A DSN without the password: libpq reads it from PGPASSFILE. With --secure it
        verifies the server's certificate against the stack's CA."""
        dsn = (
            f"postgresql://{user}@{self.config.host}:{self.config.ports.postgres}"
            f"/{self.config.database}"
        )
        if self.config.secure:
            ca = StackTls.of(self.config.state_dir).ca
            dsn += f"?sslmode=verify-full&sslrootcert={ca}"
        return dsn

    # --- helpers ---------------------------------------------------------------------
    def _prepare_dirs(self) -> None:
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        account = postgres_account()
        if account is not None:
            for path in (self.root.parent, self.root, self.socket_dir):
                if path == self.config.state_dir:
                    continue
                os.chown(path, account.pw_uid, account.pw_gid)
            probe = subprocess.run([*as_postgres(), "test", "-w", str(self.root)], check=False)
            if probe.returncode != 0:
                raise StackError(
                    f"the postgres system user cannot write {self.root}: put the stack's "
                    "state directory (--state-dir / CDCBOX_STACK_DIR) on a path every "
                    "user can traverse"
                )

    def _initdb(self, bin_dir: Path) -> None:
        account = postgres_account()
        pwfile = self.root / "initdb.pw"
        write_private(pwfile, self.secrets.superuser_password() + "\n")
        if account is not None:
            os.chown(pwfile, account.pw_uid, account.pw_gid)
        try:
            result = self._run_as_postgres(
                [
                    str(bin_dir / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-U",
                    SUPERUSER,
                    f"--pwfile={pwfile}",
                    "--auth-host=scram-sha-256",
                    "--auth-local=peer",
                    "-E",
                    "UTF8",
                    "--locale=C",
                ]
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if result.returncode != 0:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            raise StackError(f"initdb failed:\n{result.stdout}{result.stderr}")
        # Logical replication connections from loopback, password-checked like the rest.
        with (self.data_dir / "pg_hba.conf").open("a") as hba:
            hba.write("host replication all 127.0.0.1/32 scram-sha-256\n")

    def _create_databases(self) -> None:
        """The stack's database and the demo fleet's, those that do not exist yet."""
        with psycopg.connect(
            host=self.config.host,
            port=self.config.ports.postgres,
            dbname="postgres",
            user=SUPERUSER,
            password=self.secrets.superuser_password(),
            autocommit=True,
        ) as conn:
            for database in (self.config.database, *self.config.service_databases):
                exists = conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", (database,)
                ).fetchone()
                if not exists:
                    conn.execute(
                        psycopg.sql.SQL("CREATE DATABASE {}").format(
                            psycopg.sql.Identifier(database)
                        )
                    )

    def _run_as_postgres(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        prefix = as_postgres() if postgres_account() else []
        return subprocess.run(prefix + argv, capture_output=True, text=True, check=False, cwd="/")


def _attached(shmid: int | None) -> int:
    """How many processes still attach System V segment `shmid` (0 when it is gone)."""
    if shmid is None:
        return 0
    try:
        rows = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except OSError:
        return 0
    for row in rows:
        fields = row.split()  # key shmid perms size cpid lpid nattch ...
        if int(fields[1]) == shmid:
            return int(fields[6])
    return 0
