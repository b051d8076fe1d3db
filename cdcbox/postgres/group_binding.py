"""One consumer name, one Kafka consumer group.

A consumer name keys its inbox rows, aggregate versions and parked aggregates. Run in two
groups, the name would get every event twice over and split that state between them (an
event applied by one group is a "duplicate" the other never applied). The first group a
name runs in is recorded; another group is refused until an operator moves the name.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import sql

from cdcbox.names import DbNames
from cdcbox.seam.stores import names_to_move
from cdcbox.session import Session


class GroupBinding:
    """One consumer name, one consumer group: the first group a name runs in is recorded,
    and a start in another group is refused unless the name is moved on purpose."""

    def __init__(self, names: DbNames = DbNames()) -> None:
        table = names.table("bindings")
        self._bind = sql.SQL(
            "INSERT INTO {} (consumer_name, group_id) SELECT unnest(%s::text[]), %s "
            "ON CONFLICT (consumer_name) DO NOTHING"
        ).format(table)
        self._read = sql.SQL(
            "SELECT consumer_name, group_id FROM {} WHERE consumer_name = ANY(%s) FOR UPDATE"
        ).format(table)
        self._groups = sql.SQL("SELECT DISTINCT group_id FROM {} ORDER BY 1").format(table)
        self._move = sql.SQL(
            "UPDATE {} SET group_id = %s, bound_at = now() WHERE consumer_name = ANY(%s)"
        ).format(table)

    def groups(self, conn: Session) -> list[str]:
        """Every group a consumer name of this schema is bound to."""
        return [group for (group,) in conn.execute(self._groups).fetchall()]

    def bind(
        self,
        conn: Session,
        consumer_names: Sequence[str],
        group_id: str,
        move: bool = False,
    ) -> None:
        """Record `group_id` for names seen for the first time; refuse (ConfigError) a name
        bound to another group, unless `move`, which rebinds it to `group_id`."""
        names = list(consumer_names)
        with conn.transaction():
            conn.execute(self._bind, (names, group_id))
            bound = conn.execute(self._read, (names,)).fetchall()
            moving = names_to_move(bound, group_id, move)
            if moving:
                conn.execute(self._move, (group_id, moving))
