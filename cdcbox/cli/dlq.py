"""`cdc-ctl dlq`: dead-letter topics, listed, shown and replayed."""

from __future__ import annotations

import click

from cdcbox.cli.common import (
    confirm,
    dry_run_option,
    json_option,
    print_json,
    print_table,
    settings,
    yes_option,
)
from cdcbox.errors import UsageError
from cdcbox.kafka import dlq as dead_letters


@click.group("dlq")
def dlq() -> None:
    """Dead-letter topics: list, show, replay."""


@dlq.command("list")
@click.argument("topic")
@json_option
@click.pass_context
def dlq_list(ctx: click.Context, topic: str, as_json: bool) -> None:
    letters = dead_letters.read(settings(ctx).kafka(), topic)
    if as_json:
        print_json([d.summary() for d in letters])
    else:
        print_table(
            [
                (
                    d.partition,
                    d.offset,
                    d.event_id,
                    d.header("event_type"),
                    d.header("cdcbox.error.type"),
                    d.header("cdcbox.error.message")[:60],
                )
                for d in letters
            ],
            ["partition", "offset", "event_id", "event_type", "error", "message"],
        )


@dlq.command("show")
@click.argument("topic")
@click.option("--event-id", required=True)
@json_option
@click.pass_context
def dlq_show(ctx: click.Context, topic: str, event_id: str, as_json: bool) -> None:
    """One dead letter: where it sits, its headers and its value."""
    letters = dead_letters.read(settings(ctx).kafka(), topic)
    for d in dead_letters.select(letters, {event_id}):
        shown = {
            **d.summary(),
            "headers": {k: v.decode(errors="replace") for k, v in d.headers},
            "value": (d.value or b"").decode(errors="replace"),
        }
        if as_json:
            print_json(shown)
            continue
        for name, value in shown.items():
            if isinstance(value, dict):
                click.echo(f"{name}:")
                for key, text in value.items():
                    click.echo(f"  {key}: {text}")
            else:
                click.echo(f"{name}: {value}")


@dlq.command("replay")
@click.argument("topic")
@click.option("--event-id", "event_ids", multiple=True, help="Replay these (repeatable).")
@click.option("--all", "replay_all", is_flag=True, help="Replay every dead letter.")
@yes_option
@dry_run_option
@click.pass_context
def dlq_replay(
    ctx: click.Context,
    topic: str,
    event_ids: tuple[str, ...],
    replay_all: bool,
    yes: bool,
    dry_run: bool,
) -> None:
    """Republish dead letters to their original topic, same key, value and event id.

    Parked aggregates stay parked: their consumer applies the replayed events in order
    and releases an aggregate with its last held-back event."""
    if not event_ids and not replay_all:
        raise UsageError("name --event-id ... or --all")
    s = settings(ctx)
    kafka = s.kafka()
    letters = dead_letters.select(
        dead_letters.read(kafka, topic), None if replay_all else set(event_ids)
    )
    if dry_run:
        click.echo(f"would replay {len(letters)} dead letter(s) from {topic}")
        return
    if replay_all:
        confirm(yes, f"replay all {len(letters)} dead letter(s) from {topic}?")
    with (
        s.consumer_database() as db,
        click.progressbar(length=len(letters), label="replaying") as bar,
    ):
        count = dead_letters.replay(
            kafka,
            letters,
            progress=bar.update,
            parked_in=db.sessions(),
            parking=db.stores.parking,
        )
    click.echo(f"replayed {count} dead letter(s) from {topic}")
