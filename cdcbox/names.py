"""Names of the database objects cdcbox owns, validated once and quoted everywhere.

Every SQL statement composes these through `psycopg.sql.Identifier`, never string
formatting, so a configurable name can never become an injection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

from psycopg import sql

from cdcbox.errors import ConfigError

_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")
DEFAULT_PUBLICATION = "cdcbox_outbox"


@dataclass(frozen=True)
class DbNames:
    """The names of every database object cdcbox owns in one schema, validated (plain
    lower-case identifiers, derived names within PostgreSQL's 63 characters)."""

    schema: str = "public"
    outbox: str = "outbox_event"
    inbox: str = "inbox_event"
    versions: str = "consumer_aggregate_version"
    reconciliation: str = "consumer_reconciliation"
    parked: str = "consumer_parked_aggregate"
    bindings: str = "consumer_group_binding"
    breakers: str = "consumer_breaker"
    breaker_failures: str = "consumer_breaker_failure"
    quarantine: str = "outbox_quarantine"
    topic_keys: str = "outbox_topic_key"
    migrations: str = "cdcbox_schema_migrations"
    # "" derives it: `cdcbox_outbox` for the public schema (the name it always had),
    # `cdcbox_outbox_<schema>` for any other, so two services never share one.
    publication: str = ""
    debezium_role: str = "cdcbox_debezium"

    def __post_init__(self) -> None:
        if not self.publication:
            derived = (
                DEFAULT_PUBLICATION if self.schema == "public" else f"cdcbox_outbox_{self.schema}"
            )
            object.__setattr__(self, "publication", derived)
        for f in fields(self):
            value = getattr(self, f.name)
            if not _IDENTIFIER.fullmatch(value):
                raise ConfigError(
                    f"database name {f.name}={value!r} is not a plain lower-case SQL "
                    "identifier (letters, digits, underscore; at most 63 characters)"
                )
        for what, derived in self._derived().items():
            if len(derived) > 63:
                raise ConfigError(
                    f"the {what} {derived!r} would be {len(derived)} characters, over "
                    "PostgreSQL's 63 (it would be cut, or refused): shorten the schema "
                    "or table names"
                )

    def _derived(self) -> dict[str, str]:
        """Names cdcbox builds from the configured ones."""
        return {
            "NOTIFY channel": self.notify_channel,
            "outbox index": f"{self.outbox}_aggregate_idx",
            "outbox trigger": f"{self.outbox}_topic_keys",
            "emit ready function": f"{self.outbox}_emit_ready",
            "messages-only trigger": f"{self.outbox}_messages_only",
            "inbox index": f"{self.inbox}_status_idx",
            "inbox unfinished index": f"{self.inbox}_unfinished_idx",
        }

    def table(self, name: str) -> sql.Identifier:
        """A schema-qualified table identifier: `table("outbox")` → "public"."outbox_event"."""
        return sql.Identifier(self.schema, getattr(self, name))

    @property
    def notify_channel(self) -> str:
        """The LISTEN/NOTIFY channel the polling relay waits on."""
        return f"{self.schema}_{self.outbox}"

    @property
    def emit_function(self) -> sql.Identifier:
        """The function that emits events as logical decoding messages (the outbox
        without a table, migration messages/0001)."""
        return sql.Identifier(self.schema, f"{self.outbox}_emit")

    @property
    def emit_ready_function(self) -> sql.Identifier:
        """Whether the outbox without a table can emit now (its slot is healthy)."""
        return sql.Identifier(self.schema, f"{self.outbox}_emit_ready")

    @property
    def message_prefix(self) -> str:
        """The logical decoding message prefix of this schema's events: the connector's
        `message.prefix.include.list` (the publication's name, unique per schema)."""
        return self.publication

    @property
    def outbox_qualified(self) -> str:
        """`schema.table`, as Debezium's table.include.list names it."""
        return f"{self.schema}.{self.outbox}"

    def template_values(self) -> dict[str, sql.Composable]:
        """What the SQL files under schemas/sql may reference as `{name}`."""
        return {
            "schema": sql.Identifier(self.schema),
            "outbox": self.table("outbox"),
            "inbox": self.table("inbox"),
            "versions": self.table("versions"),
            "reconciliation": self.table("reconciliation"),
            "parked": self.table("parked"),
            "bindings": self.table("bindings"),
            "breakers": self.table("breakers"),
            "breaker_failures": self.table("breaker_failures"),
            "quarantine": self.table("quarantine"),
            "topic_keys": self.table("topic_keys"),
            "topic_keys_function": sql.Identifier(self.schema, f"{self.outbox}_topic_keys"),
            "topic_keys_trigger": sql.Identifier(f"{self.outbox}_topic_keys"),
            "publishable_function": sql.Identifier(self.schema, f"{self.outbox}_publishable"),
            # Names this schema's topic keys in a session's cache of checked types (0013).
            "topic_keys_literal": sql.Literal(f"{self.schema}.{self.topic_keys}"),
            "inbox_status_index": sql.Identifier(f"{self.inbox}_status_idx"),
            "inbox_status_index_qualified": sql.Identifier(self.schema, f"{self.inbox}_status_idx"),
            "inbox_unfinished_index": sql.Identifier(f"{self.inbox}_unfinished_idx"),
            "inbox_purge_index": sql.Identifier(f"{self.inbox}_purge_idx"),
            "inbox_touched_statistics": sql.Identifier(self.schema, f"{self.inbox}_touched"),
            "outbox_claim_index": sql.Identifier(f"{self.outbox}_claim_idx"),
            "outbox_aggregate_index": sql.Identifier(f"{self.outbox}_aggregate_idx"),
            "outbox_claim_index_qualified": sql.Identifier(self.schema, f"{self.outbox}_claim_idx"),
            "outbox_aggregate_index_qualified": sql.Identifier(
                self.schema, f"{self.outbox}_aggregate_idx"
            ),
            "outbox_unsent_index": sql.Identifier(f"{self.outbox}_unsent_idx"),
            "outbox_blocker_index": sql.Identifier(f"{self.outbox}_blocker_idx"),
            "notify_function": sql.Identifier(self.schema, f"{self.outbox}_notify"),
            "emit_function": self.emit_function,
            "emit_ready_function": self.emit_ready_function,
            "refuse_rows_function": sql.Identifier(self.schema, f"{self.outbox}_messages_only"),
            "refuse_rows_trigger": sql.Identifier(f"{self.outbox}_messages_only"),
            "notify_trigger": sql.Identifier(f"{self.outbox}_notify"),
            "channel": sql.Literal(self.notify_channel),
            "publication": sql.Identifier(self.publication),
            "publication_name": sql.Literal(self.publication),
            "debezium_role": sql.Identifier(self.debezium_role),
            "debezium_role_name": sql.Literal(self.debezium_role),
        }
