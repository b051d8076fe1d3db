"""`cdc-ctl doctor`: everything a deployment needs, checked before the first event."""

from __future__ import annotations

from pathlib import Path

import click

from cdcbox.acls.checks import acl_checks
from cdcbox.acls.plan import plan
from cdcbox.cli.acls import consumer_option, fleet_of, group_option
from cdcbox.cli.common import json_option, print_json, print_table, settings
from cdcbox.connect.connectors import load_specs
from cdcbox.db import connect
from cdcbox.ops.check import Check
from cdcbox.ops.deploy import spec_database, spec_topics, topic_names_check
from cdcbox.ops.doctor import DoctorInputs, run_checks
from cdcbox.resources import resource_dir
from cdcbox.stack.config import StackVersions


@click.command("doctor")
@click.argument("spec_path", required=False, type=click.Path(exists=True, path_type=Path))
@click.option("--topic", "topics", multiple=True, help="Topics that must exist (repeatable).")
@click.option("--max-retained-bytes", type=int, default=1 << 30, show_default=True)
@click.option(
    "--max-transaction-age",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Seconds a Kafka transaction may stay open before it counts as holding readers back.",
)
@click.option(
    "--stuck-after",
    type=click.FloatRange(min=0),
    default=20.0,
    show_default=True,
    help="Seconds a RUNNING connector's slot is watched when it has WAL after it "
    "(the specs' heartbeat moves a healthy one every 10 s); 0: not watched.",
)
@click.option(
    "--acls",
    "check_acls",
    is_flag=True,
    help="Also check Kafka's ACLs against `acls plan` (the specs and --consumer): a "
    "principal that lacks a grant its role needs, or holds more.",
)
@consumer_option
@group_option
@click.option(
    "--service-role",
    metavar="ROLE",
    help="Check the service's own database role: cdcbox's tables of its schema, and no "
    "table of another schema it may read.",
)
@json_option
@click.pass_context
def doctor(
    ctx: click.Context,
    spec_path: Path | None,
    topics: tuple[str, ...],
    max_retained_bytes: int,
    max_transaction_age: float,
    stuck_after: float,
    check_acls: bool,
    consumers: tuple[str, ...],
    connect_group: str,
    service_role: str | None,
    as_json: bool,
) -> None:
    """Check everything a deployment needs before the first event; exit 1 if anything
    fails. SPEC_PATH may be a directory of service specs: each service's database is
    checked (the DSN turned to it), Connect and Kafka once."""
    s = settings(ctx)
    rows: list[tuple[str, Check]] = []
    specs = load_specs(spec_path or resource_dir("connectors"), names=s.names)
    for index, spec in enumerate(specs):
        service = spec.service
        dsn, names = spec_database(spec, s.dsn, s.names) if s.dsn else (None, s.names)
        conn = connect(dsn, autocommit=True) if dsn else None
        first = index == 0
        try:
            checks = run_checks(
                DoctorInputs(
                    conn=conn,
                    connect=s.connect_client() if s.connect_url and first else None,
                    bootstrap_servers=s.bootstrap_servers if first else None,
                    kafka_security=s.kafka_security,
                    spec=spec,
                    names=names,
                    expected_debezium=StackVersions.load(
                        resource_dir("infra") / "versions.env"
                    ).debezium,
                    max_retained_bytes=max_retained_bytes,
                    limits=s.limits,
                    max_transaction_age_s=max_transaction_age,
                    stuck_after_s=stuck_after,
                    service_role=service_role,
                ),
                list(topics) if first else [],
            )
        finally:
            if conn is not None:
                conn.close()
        rows += [(service.name if service else "", c) for c in checks]
    if s.dsn and s.bootstrap_servers:
        rows.append(("", topic_names_check(s.kafka(), spec_topics(specs, s.dsn, s.names))))
    if check_acls:
        planned = plan(fleet_of(specs, consumers, connect_group))
        rows += [("", c) for c in acl_checks(s.kafka(), planned)]
    labelled = any(service for service, _ in rows)
    if as_json:
        print_json([{**c.as_dict(), **({"service": n} if labelled else {})} for n, c in rows])
    else:
        table = [
            ("ok" if c.ok else "FAIL", c.name, c.detail, "" if c.ok else c.fix) for _, c in rows
        ]
        if labelled:
            print_table(
                [(n, *row) for (n, _), row in zip(rows, table, strict=True)],
                ["service", "", "check", "detail", "fix"],
            )
        else:
            print_table(table, ["", "check", "detail", "fix"])
    if not all(c.ok for _, c in rows):
        raise SystemExit(1)
