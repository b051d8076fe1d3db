"""MariaDB for the native stack (`stack up --with-mariadb`): a private server from
Debian's `mariadb-server` package, for services that keep their outbox on MariaDB.

It runs as the `mysql` system user when we are root (mariadbd drops to it), on loopback,
its data where that user can reach it, started and stopped by its pid. The `cdcbox` user's
password is generated once into a client option file (`[client]`), which the DSN names:
`mariadb://cdcbox@HOST:PORT/DATABASE?option_file=…`.
"""

from __future__ import annotations

import pwd
import secrets
import shutil
import subprocess
from pathlib import Path

from cdcbox.errors import StackError
from cdcbox.stack import process
from cdcbox.stack.config import StackConfig
from cdcbox.stack.secrets import write_private
from cdcbox.stack.system import ensure_mariadb, is_root, private_root

ACCOUNT = "mysql"
USER = "cdcbox"


def _account() -> pwd.struct_passwd | None:
    """The `mysql` account when we are root and it exists (Debian's mariadb-server makes
    it); None otherwise, so that a stack without MariaDB is inspected without one."""
    if not is_root():
        return None
    try:
        return pwd.getpwnam(ACCOUNT)
    except KeyError:
        return None


def server_root(state_dir: Path) -> Path:
    """Where the server's files live (`private_root`: reachable by the mysql user)."""
    if _account() is None:
        return state_dir / "mariadb"
    return private_root(state_dir, ACCOUNT, "mariadb")


class NativeMariaDB(process.PidTracked):
    """The native stack's MariaDB server, stopped by pid (SIGTERM: a clean shutdown)."""

    name = "mariadb"

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.log_file = config.state_dir / "logs" / "mariadb.log"
        self.option_file = config.state_dir / "secrets" / "mariadb.cnf"
        self._locate()

    def _locate(self) -> None:
        """Where the server's files are: known once the package made its account."""
        self.root = server_root(self.config.state_dir)
        self.data_dir = self.root / "data"
        self.socket = self.root / "mariadb.sock"
        self.pid_file = self.root / "mariadb.pid"

    def dsn(self, database: str | None = None) -> str:
        """The `cdcbox` user's DSN; its password is in the option file, never here."""
        return (
            f"mariadb://{USER}@{self.config.host}:{self.config.ports.mariadb}/"
            f"{database or self.config.database}?option_file={self.option_file}"
        )

    def start(self) -> None:
        mariadbd = ensure_mariadb()
        self._locate()
        if self.running():
            return
        self._prepare()
        argv = [
            str(mariadbd),
            "--no-defaults",
            f"--datadir={self.data_dir}",
            f"--socket={self.socket}",
            f"--pid-file={self.root / 'mariadbd.pid'}",
            f"--port={self.config.ports.mariadb}",
            f"--bind-address={self.config.host}",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=128M",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_bin",
        ]
        if _account() is not None:
            argv.append(f"--user={ACCOUNT}")
        record = process.spawn(argv, log_file=self.log_file, pid_file=self.pid_file)
        if not process.wait_until(lambda: self._answers() or not record.alive(), 60):
            raise StackError(
                f"MariaDB did not answer on {self.socket} within 60 s (log: {self.log_file}):"
                f"\n{process.tail(self.log_file)}"
            )
        if not record.alive():
            raise StackError(
                f"MariaDB exited during start-up (log: {self.log_file}):\n"
                f"{process.tail(self.log_file)}"
            )
        self._create_databases()

    def purge(self) -> None:
        """Delete the data where it lives outside the state directory (see server_root)."""
        if not self.root.is_relative_to(self.config.state_dir):
            shutil.rmtree(self.root, ignore_errors=True)

    def _prepare(self) -> None:
        """The data directory (once), owned by the server's user; the password file."""
        account = _account()
        if is_root() and account is None:
            raise StackError(f"no {ACCOUNT!r} system user: install mariadb-server")
        self.root.mkdir(parents=True, exist_ok=True)
        if account is not None:
            shutil.chown(self.root, account.pw_uid, account.pw_gid)
        if not self.option_file.exists():
            self.option_file.parent.mkdir(parents=True, exist_ok=True)
            password = secrets.token_urlsafe(24)
            write_private(self.option_file, f"[client]\npassword={password}\n")
        if (self.data_dir / "mysql").is_dir():
            return
        install_db = shutil.which("mariadb-install-db")
        if install_db is None:
            raise StackError("mariadb-install-db is not on PATH: install mariadb-server")
        argv = [
            install_db,
            "--no-defaults",
            f"--datadir={self.data_dir}",
            "--auth-root-authentication-method=socket",
            "--skip-test-db",
        ]
        if account is not None:
            argv.append(f"--user={ACCOUNT}")
        done = subprocess.run(argv, check=False, capture_output=True, text=True)
        if done.returncode != 0:
            raise StackError(f"mariadb-install-db failed:\n{(done.stdout + done.stderr)[-2000:]}")

    def _root_sql(self, statements: str) -> subprocess.CompletedProcess[str]:
        """SQL as MariaDB's root over the socket (unix_socket authentication: we are
        root), on stdin so no password it holds shows in a process list."""
        client = shutil.which("mariadb") or "mariadb"
        return subprocess.run(
            [client, "--no-defaults", f"--socket={self.socket}", "--user=root", "--batch"],
            input=statements,
            check=False,
            capture_output=True,
            text=True,
        )

    def _answers(self) -> bool:
        return self.socket.exists() and self._root_sql("SELECT 1;").returncode == 0

    def _create_databases(self) -> None:
        password = self.option_file.read_text().split("password=", 1)[1].strip()
        databases = [self.config.database, *self.config.service_databases]
        statements = [
            f"CREATE USER IF NOT EXISTS '{USER}'@'{self.config.host}' IDENTIFIED BY '{password}';",
            f"ALTER USER '{USER}'@'{self.config.host}' IDENTIFIED BY '{password}';",
        ]
        for database in databases:
            statements += [
                f"CREATE DATABASE IF NOT EXISTS `{database}`;",
                f"GRANT ALL ON `{database}`.* TO '{USER}'@'{self.config.host}';",
            ]
        done = self._root_sql("\n".join(statements))
        if done.returncode != 0:
            # The statements hold the password; a syntax error would quote them.
            message = done.stderr.strip().replace(password, "***")
            raise StackError(f"MariaDB refused the stack's users and databases: {message}")
