"""A `Fleet` from what a deployment already declares: its connector specs (each connector
Connect runs; a `service:` spec's aggregate types are the topics its relay and its
connector publish) and its consuming services' handlers (the topics they subscribe to)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cdcbox.acls.plan import ConnectRole, ConsumerRole, Fleet, RelayRole, topics_of
from cdcbox.connect.connectors import ConnectorSpec
from cdcbox.consumer.handler import BaseHandler


def fleet_from(
    specs: Sequence[ConnectorSpec],
    consumers: Mapping[str, Sequence[type[BaseHandler] | BaseHandler]],
    connect: ConnectRole | None = None,
) -> Fleet:
    """Connect runs every spec's connector; each spec declaring a service gives that
    service a relay; each entry of `consumers` (service name → its handlers) a consuming
    service under its own group. Connect may publish every topic its connectors' services
    declare; if one declares none, every outbox topic. `connect`: the worker's group and
    storage topics (the shipped worker's by default)."""
    connect = connect or ConnectRole()
    relays = tuple(
        RelayRole(s.service.name, topics_of(s.service.aggregates))
        for s in specs
        if s.service is not None and s.service.aggregates is not None
    )
    undeclared = any(s.service is None or s.service.aggregates is None for s in specs)
    published = None if undeclared else tuple(sorted({t for r in relays for t in r.topics}))
    return Fleet(
        connect=ConnectRole(
            group=connect.group,
            storage_topics=connect.storage_topics,
            connectors=tuple((s.name, s.config.get("topic.prefix", "")) for s in specs),
            publishes=published,
            exactly_once=connect.exactly_once,
        ),
        relays=relays,
        consumers=tuple(
            ConsumerRole(service, _subscribed(handlers))
            for service, handlers in sorted(consumers.items())
        ),
    )


def _subscribed(handlers: Sequence[type[BaseHandler] | BaseHandler]) -> tuple[str, ...]:
    return tuple(sorted({t for h in handlers for t in h.subscribed_topics()}))
