"""What every `cdc-ctl` command shares: settings from flags/environment, output, exit codes.

Exit codes: 0 ok, 1 a check failed, 2 usage, 3 a service was unreachable. Library errors
become one readable line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar

import click
import psycopg

from cdcbox.cli.kafka_options import kafka_security
from cdcbox.connect.client import ConnectClient
from cdcbox.connect.wal_peek import parse_lsn
from cdcbox.db import connect
from cdcbox.errors import CdcboxError, ConfigError, ServiceUnavailable, UsageError
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.security import KafkaSecurity
from cdcbox.limits import EventLimits
from cdcbox.names import DbNames
from cdcbox.telemetry.log_format import LEVELS

if TYPE_CHECKING:
    from cdcbox.seam.database import ConsumerState

EXIT_OK, EXIT_CHECK_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Settings:
    """Where the services are; `cdc-ctl stack env` output sets exactly these variables."""

    dsn: str | None
    bootstrap_servers: str | None
    connect_url: str | None
    connect_auth: tuple[str, str] | None
    schema: str = "public"
    limits: EventLimits = EventLimits()
    # The raw --kafka-* options, turned into `KafkaSecurity` when a command needs Kafka
    # (inside its error handling: a bad option is one line, and only where it matters).
    kafka_options: dict[str, Any] = field(default_factory=dict)

    @property
    def kafka_security(self) -> KafkaSecurity:
        return kafka_security(**self.kafka_options) if self.kafka_options else KafkaSecurity()

    @property
    def names(self) -> DbNames:
        """cdcbox's tables in the schema `--schema` / CDCBOX_SCHEMA names."""
        return DbNames(schema=self.schema)

    def require_dsn(self) -> str:
        if not self.dsn:
            raise ConfigError("no database: pass --dsn or set CDCBOX_DSN (see `cdc-ctl stack env`)")
        return self.dsn

    def require_bootstrap(self) -> str:
        if not self.bootstrap_servers:
            raise ConfigError("no Kafka: pass --bootstrap-servers or set CDCBOX_BOOTSTRAP_SERVERS")
        return self.bootstrap_servers

    def kafka(self) -> KafkaSettings:
        return KafkaSettings(self.require_bootstrap(), security=self.kafka_security)

    def require_connect(self) -> str:
        if not self.connect_url:
            raise ConfigError("no Kafka Connect: pass --connect-url or set CDCBOX_CONNECT_URL")
        return self.connect_url

    def connect_client(self) -> ConnectClient:
        return ConnectClient(self.require_connect(), auth=self.connect_auth)

    def database(self) -> psycopg.Connection[Any]:
        """An autocommit connection: each library call opens its own transactions."""
        return connect(self.require_dsn(), autocommit=True)

    @contextmanager
    def consumer_database(self) -> Iterator[ConsumerState]:
        """The consumers' tables of the DSN's database, PostgreSQL or MariaDB, with one
        autocommit session (`sessions()`), closed at exit."""
        from cdcbox.databases import database_for

        database = database_for(self.require_dsn()).consumer_state(self.names, True)
        try:
            yield database
        finally:
            database.sessions.close()


def settings(ctx: click.Context) -> Settings:
    obj = ctx.find_root().obj
    assert isinstance(obj, Settings)
    return obj


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
yes_option = click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
dry_run_option = click.option(
    "--dry-run", is_flag=True, help="Only say what would be done; change nothing."
)
max_rate_option = click.option(
    "--max-rate",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="ROWS_PER_S",
    help="Delete at most this many rows per second on average, leaving CPU and WAL to "
    "the writers beside the purge [no limit].",
)


def confirm(yes: bool, question: str) -> None:
    """Ask `question` unless --yes; a no (or no terminal to ask on) aborts, exit 1."""
    if not yes:
        click.confirm(question, abort=True)


class DeletingProgress:
    """A purge's progress bar, sized by the count the purge makes before deleting:
    pass the instance as `progress` (called with rows deleted so far and the count)."""

    def __init__(self) -> None:
        self._bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = click.progressbar(length=total, label="deleting", show_pos=True)
            self._bar.__enter__()
        self._bar.update(done - self._bar.pos)

    def __enter__(self) -> DeletingProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


def default_state_dir() -> Path:
    return Path(os.environ.get("CDCBOX_STACK_DIR", ".cdcbox/stack")).resolve()


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))
    return Path(os.environ.get("CDCBOX_CACHE_DIR", str(Path(base) / "cdcbox")))


@contextmanager
def mapped_errors() -> Iterator[None]:
    """cdcbox's errors as one line on stderr and the documented exit code: the one place
    every command's errors are mapped (`CdcGroup`, the root group, runs them all in it)."""
    try:
        yield
    except ServiceUnavailable as e:
        _fail(str(e), EXIT_UNREACHABLE)
    except (ConfigError, UsageError) as e:
        _fail(str(e), EXIT_USAGE)
    except CdcboxError as e:
        _fail(str(e), EXIT_CHECK_FAILED)
    except psycopg.errors.UndefinedTable as e:
        _fail(f"PostgreSQL: {_first_line(e)} (has `cdc-ctl db migrate` run?)", EXIT_USAGE)
    except psycopg.OperationalError as e:
        _fail(f"PostgreSQL: {_first_line(e)}", EXIT_UNREACHABLE)
    except psycopg.Error as e:
        _fail(f"PostgreSQL: {_first_line(e)}", EXIT_CHECK_FAILED)


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


class CdcGroup(click.Group):
    """The root group: its callback and every command below it run inside
    `mapped_errors`, so no command maps errors of its own."""

    def invoke(self, ctx: click.Context) -> Any:
        with mapped_errors():
            return super().invoke(ctx)


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def logging_options(fn: Callable[P, R]) -> Callable[P, R]:
    """`--log-level` and `--log-format` of the long-running commands."""
    fn = click.option(
        "--log-format",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        envvar="CDCBOX_LOG_FORMAT",
        help="json: one object per line, with event_id, aggregate_id and trace_id fields.",
    )(fn)
    return click.option(
        "--log-level",
        type=click.Choice(LEVELS, case_sensitive=False),
        default="INFO",
        show_default=True,
        envvar="CDCBOX_LOG_LEVEL",
        help="DEBUG also shows kafka-python's own lines.",
    )(fn)


def stop_on_signals(stop: Callable[[], None]) -> None:
    """SIGTERM and SIGINT ask a loop to finish its batch and return, instead of killing it."""

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)


def print_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> None:
    """Aligned columns for people; `--json` output is for scripts."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=str))


class LsnType(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.2
    """A WAL position in PostgreSQL's text form (`0/16B3748`) or as an integer."""

    name = "lsn"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        try:
            lsn = parse_lsn(text) if "/" in text else int(text)
        except ValueError:
            self.fail(f"{value!r} is not an LSN (PostgreSQL's 0/16B3748, or an integer)")
        if not 0 <= lsn < 2**64:
            self.fail(f"{value!r} is outside the WAL's positions")
        return lsn


LSN = LsnType()
