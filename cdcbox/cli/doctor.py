"""`cdc-ctl doctor`: everything a deployment needs, checked before the first event."""

from __future__ import annotations

from pathlib import Path

import click

from cdcbox.cli.common import json_option, print_json, print_table, settings
from cdcbox.connect.connectors import load_specs
from cdcbox.db import connect
from cdcbox.ops.doctor import DoctorInputs, run_checks
from cdcbox.resources import resource_dir
from cdcbox.stack.config import StackVersions


@click.command("doctor")
@click.argument("spec_path", required=False, type=click.Path(exists=True, path_type=Path))
@click.option("--topic", "topics", multiple=True, help="Topics that must exist (repeatable).")
@click.option("--max-retained-bytes", type=int, default=1 << 30, show_default=True)
@json_option
@click.pass_context
def doctor(
    ctx: click.Context,
    spec_path: Path | None,
    topics: tuple[str, ...],
    max_retained_bytes: int,
    as_json: bool,
) -> None:
    """Check everything a deployment needs before the first event; exit 1 if anything fails."""
    s = settings(ctx)
    spec = load_specs(spec_path or resource_dir("connectors"))[0]
    conn = connect(s.dsn, autocommit=True) if s.dsn else None
    try:
        checks = run_checks(
            DoctorInputs(
                conn=conn,
                connect=s.connect_client() if s.connect_url else None,
                bootstrap_servers=s.bootstrap_servers,
                kafka_security=s.kafka_security,
                spec=spec,
                names=s.names,
                expected_debezium=StackVersions.load(
                    resource_dir("infra") / "versions.env"
                ).debezium,
                max_retained_bytes=max_retained_bytes,
                limits=s.limits,
            ),
            list(topics),
        )
    finally:
        if conn is not None:
            conn.close()
    if as_json:
        print_json([c.as_dict() for c in checks])
    else:
        print_table(
            [("ok" if c.ok else "FAIL", c.name, c.detail, "" if c.ok else c.fix) for c in checks],
            ["", "check", "detail", "fix"],
        )
    if not all(c.ok for c in checks):
        raise SystemExit(1)
