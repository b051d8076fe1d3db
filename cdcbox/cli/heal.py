"""`cdc-ctl connectors heal` (once) and `cdc-ctl connectors supervise` (in a loop)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import click
from click.decorators import FC

from cdcbox.cli.common import (
    dry_run_option,
    json_option,
    logging_options,
    print_json,
    print_table,
    settings,
    stop_on_signals,
)
from cdcbox.ops.heal import Healer, HealPolicy, describe
from cdcbox.ops.supervisor import HealMetrics, supervise
from cdcbox.telemetry.http_metrics import serve
from cdcbox.telemetry.log_format import LogFormat
from cdcbox.telemetry.log_format import configure as configure_log


def _policy_options(abort_age: float | None) -> Callable[[FC], FC]:
    """--stuck-after and --abort-older-than, the latter defaulting to `abort_age`."""

    def add(fn: FC) -> FC:
        fn = click.option(
            "--stuck-after",
            type=click.FloatRange(min=1),
            default=60.0,
            show_default=True,
            help="Seconds a RUNNING task's slot may stand still, with WAL after it, before "
            "the task is restarted.",
        )(fn)
        return click.option(
            "--abort-older-than",
            type=click.FloatRange(min=1),
            default=abort_age,
            show_default=abort_age is not None,
            metavar="SECONDS",
            help="Also end transactions open this long whose producer wrote nothing for "
            "this long (their transactional id is fenced). Without it, only transactions "
            "nothing else will end are aborted.",
        )(fn)

    return add


def _healer(ctx: click.Context, abort_older_than: float | None, stuck_after: float) -> Healer:
    s = settings(ctx)
    return Healer(
        s.connect_client(),
        s.kafka(),
        s.dsn,
        HealPolicy(abort_older_than_s=abort_older_than, stuck_after_s=stuck_after),
    )


@click.command("heal")
@_policy_options(abort_age=None)
@dry_run_option
@json_option
@click.pass_context
def heal(
    ctx: click.Context,
    abort_older_than: float | None,
    stuck_after: float,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Repair, once, what keeps the pipeline from publishing while it reports RUNNING:
    restart FAILED connectors and tasks, abort transactions that hold readers back,
    restart a task whose slot stands still (watched up to --stuck-after seconds now).
    Never kills a process. Exit 1 if a repair did not take."""
    outcomes = _healer(ctx, abort_older_than, stuck_after).round(dry_run=dry_run, watch_now=True)
    if as_json:
        print_json(describe(outcomes))
    elif not outcomes:
        click.echo("nothing to heal")
    else:
        print_table(
            [(a.kind, a.target, a.reason, "would do" if dry_run else o) for a, o in outcomes],
            ["action", "target", "reason", "outcome"],
        )
    if any(o.startswith("did not take") for _, o in outcomes):
        raise SystemExit(1)


@click.command("supervise")
# A task held by a transaction left open on Connect's offsets topic does not move again
# when restarted (its restart waits on the same read): only ending the transaction
# frees it, so the supervisor ends one open and idle for 30 s unless told otherwise.
@_policy_options(abort_age=30.0)
@click.option("--interval", type=click.FloatRange(min=0.1), default=5.0, show_default=True)
@click.option("--metrics-port", type=int, default=None, envvar="CDCBOX_METRICS_PORT")
@click.option("--metrics-host", default="127.0.0.1", show_default=True)
@logging_options
@click.pass_context
def supervise_command(
    ctx: click.Context,
    abort_older_than: float | None,
    stuck_after: float,
    interval: float,
    metrics_port: int | None,
    metrics_host: str,
    log_level: str,
    log_format: LogFormat,
) -> None:
    """`heal` every --interval seconds until SIGTERM/SIGINT, the stuck-task clock kept
    across rounds; each repair one log line and one count of
    cdcbox_heal_actions_total{action} (on --metrics-port)."""
    configure_log(log_level.upper(), log_format)
    healer = _healer(ctx, abort_older_than, stuck_after)
    healer.check_login()
    metrics = HealMetrics()
    stop = threading.Event()
    if metrics_port is not None:
        alive = threading.Event()
        alive.set()
        serve(metrics.registry, metrics_host, metrics_port, alive)
    stop_on_signals(stop.set)
    supervise(healer, interval, stop, metrics)
