"""Exactly-once on the topic (Kafka Connect's KIP-618): with
`exactly.once.source.support=enabled` on every worker, a source task's records and its
source offsets commit in one Kafka transaction, so a worker's crash puts no duplicate
on the topics for `read_committed` readers.

The shipped connector specs say `exactly.once.support: required`. A worker without the
support refuses that on validation; `fitted_to_worker` then asks for `requested`
instead (the connector runs, at least once), and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cdcbox.connect.client import ConnectClient

SUPPORT = "exactly.once.support"
WORKER_SETTING = "exactly.once.source.support=enabled"
# Connect's validation error, DistributedHerder.validateSourceConnectorExactlyOnceSupport.
_WORKER_LACKS = "does not have exactly-once source support enabled"


def worker_lacks_it(client: ConnectClient, connector_class: str, config: Mapping[str, str]) -> bool:
    """True when the Connect cluster refuses `exactly.once.support: required` because
    its workers run without exactly-once source support."""
    result = client.validate(connector_class, {**config, SUPPORT: "required"})
    return any(_WORKER_LACKS in error for error in _errors(result, SUPPORT))


def fitted_to_worker(
    client: ConnectClient,
    connector_class: str,
    config: Mapping[str, str],
    say: Callable[[str], None],
) -> dict[str, str]:
    """`config`, with `required` lowered to `requested` where the workers lack the
    support (told to `say` in one line); unchanged otherwise."""
    fitted = dict(config)
    if fitted.get(SUPPORT) == "required" and worker_lacks_it(client, connector_class, fitted):
        fitted[SUPPORT] = "requested"
        say(
            f"exactly-once: the Connect workers run without {WORKER_SETTING}; registering "
            f"with {SUPPORT}=requested (a worker crash may put duplicates on the topics; "
            "`cdc-ctl doctor` names the settings to add)"
        )
    return fitted


def _errors(result: Mapping[str, Any], name: str) -> list[str]:
    return [
        error
        for item in result.get("configs", [])
        if item["value"].get("name") == name
        for error in item["value"].get("errors") or []
    ]
