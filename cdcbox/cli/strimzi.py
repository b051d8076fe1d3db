"""`cdc-ctl apply --emit strimzi`: the specs `apply` would send to Connect, written as
Strimzi resources instead (cdcbox.strimzi); nothing is sent anywhere."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from cdcbox.cli.acls import fleet_of
from cdcbox.cli.common import Settings, print_json
from cdcbox.connect.connectors import ConnectorSpec
from cdcbox.resources import resource_dir
from cdcbox.stack.config import StackVersions
from cdcbox.stack.connect_worker import worker_properties
from cdcbox.strimzi.emit import StrimziTarget, resources, write

_EMIT_OPTIONS = [
    click.option(
        "--emit",
        type=click.Choice(["strimzi"]),
        help="Write the specs as Strimzi resources (KafkaConnector, KafkaConnect, KafkaTopic, "
        "KafkaUser) instead of sending them to Connect.",
    ),
    click.option(
        "--out",
        type=click.Path(file_okay=False, path_type=Path),
        help="With --emit: the directory to write one file per resource to.",
    ),
    click.option(
        "--kafka-cluster",
        default="cdcbox",
        show_default=True,
        help="With --emit: the name of Strimzi's Kafka resource.",
    ),
    click.option(
        "--namespace",
        default="cdcbox",
        show_default=True,
        help="With --emit: the namespace of the Secrets the connectors read.",
    ),
    click.option(
        "--image",
        help="With --emit: the image Strimzi builds Connect into (your registry's) "
        "[default: cdcbox-connect:<Debezium version>].",
    ),
]


def emit_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`--emit`, `--out`, `--kafka-cluster`, `--namespace`, `--image` on a command."""
    for option in reversed(_EMIT_OPTIONS):
        fn = option(fn)
    return fn


def emit_strimzi(
    s: Settings,
    loaded: Sequence[ConnectorSpec],
    consumers: Sequence[str],
    connect_group: str,
    placement: tuple[str, str, str | None],
    out: Path | None,
    as_json: bool,
) -> None:
    """Write (or print as JSON) the resources of `loaded` and the `--consumer` services;
    `placement`: the Kafka cluster's name, the Secrets' namespace, the image (None: named
    after the pinned Debezium)."""
    kafka_cluster, namespace, image = placement
    infra = resource_dir("infra")
    versions = StackVersions.load(infra / "versions.env")
    target = StrimziTarget(
        kafka_cluster=kafka_cluster,
        namespace=namespace,
        image=image or f"cdcbox-connect:{versions.debezium}",
        debezium_version=versions.debezium,
        worker=worker_properties("", "", 0, "", s.limits, group=connect_group),
        jmx_rules=(infra / "observability" / "jmx-exporter.yml").read_text(),
        limits=s.limits,
    )
    found = resources(loaded, fleet_of(loaded, consumers, connect_group), target)
    if as_json:
        print_json([resource for _, resource in found])
        return
    if out is None:
        raise click.UsageError("--emit strimzi writes files: name the directory with --out")
    for written in write(found, out):
        click.echo(str(written))
