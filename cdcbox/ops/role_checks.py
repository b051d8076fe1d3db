"""The database roles `doctor` checks: Debezium's (it may replicate and read its
service's outbox, nothing else) and a service's own (`db migrate --grant-to`: cdcbox's
tables of its schema, and no table of another schema)."""

from __future__ import annotations

from typing import Any

import psycopg

from cdcbox.names import DbNames
from cdcbox.ops.check import Check
from cdcbox.postgres.service_role import missing_rights, readable_elsewhere, readable_tables


def debezium_role_check(
    conn: psycopg.Connection[Any], role: str, names: DbNames, needs_select: bool = True
) -> Check:
    """LOGIN REPLICATION, SELECT on the outbox (CDC), and no table it may read that no
    publication publishes (an inbox, a business table). Other services' outboxes it may
    read are named, not failed: a plain spec's default role is shared by design, and a
    service spec gives each service a role of its own."""
    rights = conn.execute(
        "SELECT r.rolreplication, r.rolcanlogin, has_table_privilege(r.rolname, %s, "
        "'SELECT') FROM pg_roles r WHERE r.rolname = %s",
        (names.outbox_qualified, role),
    ).fetchone()
    if rights is None:
        return Check("debezium role", False, f"{role}: missing", _ROLE_FIX)
    beyond = [t for t in readable_tables(conn, role) if t != names.outbox_qualified]
    published = {
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT format('%I.%I', schemaname, tablename) FROM pg_publication_tables"
        )
    }
    leaks = [t for t in beyond if t not in published]
    outboxes = len(beyond) - len(leaks)
    detail = f"replication={rights[0]} login={rights[1]} select={rights[2]}"
    if leaks:
        detail += f"; may also read {', '.join(leaks[:3])}" + (" …" if len(leaks) > 3 else "")
    if outboxes:
        detail += f"; may also read {outboxes} other published outbox(es)"
    return Check(
        "debezium role",
        rights[:2] == (True, True) and (rights[2] or not needs_select) and not leaks,
        f"{role}: {detail}",
        f"{_ROLE_FIX}; revoke SELECT on what no publication publishes" if leaks else _ROLE_FIX,
    )


_ROLE_FIX = (
    "run `cdc-ctl db migrate` (it creates the role with LOGIN REPLICATION and SELECT on the outbox)"
)


def service_role_check(conn: psycopg.Connection[Any], names: DbNames, role: str) -> Check:
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
    if exists is None:
        return Check(
            "service role",
            False,
            f"{role}: missing",
            "create the role, then `cdc-ctl db migrate --grant-to ROLE`",
        )
    missing, elsewhere = missing_rights(conn, names, role), readable_elsewhere(conn, names, role)
    problems = [
        *([f"lacks {', '.join(missing)}"] if missing else []),
        *([f"may also read {', '.join(elsewhere[:3])}"] if elsewhere else []),
    ]
    return Check(
        "service role",
        not problems,
        f"{role}: " + ("; ".join(problems) or f"cdcbox's tables of {names.schema} only"),
        "`cdc-ctl db migrate --grant-to ROLE` grants what it lacks; revoke what it may "
        "read elsewhere",
    )
