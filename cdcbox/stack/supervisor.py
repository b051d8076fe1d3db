"""The supervisor beside the stack's Connect workers: `cdc-ctl connectors supervise`,
started by `stack up` unless `--no-supervisor`, stopped by `stack down` by its pid.

It heals what leaves the pipeline RUNNING while it publishes nothing (cdcbox.ops.heal):
it restarts FAILED or stuck tasks and ends transactions that hold readers back; it never
kills a process. Its counters are on its own `/metrics` (`ports.supervisor`).
"""

from __future__ import annotations

from cdcbox.acls.plan import SUPERVISOR_USER
from cdcbox.stack.config import StackConfig
from cdcbox.stack.spawned import CdcCtlService


class NativeSupervisor(CdcCtlService):
    """`cdc-ctl connectors supervise` for this stack, with its defaults."""

    name = "supervisor"
    command = ("connectors", "supervise")
    kafka_user = SUPERVISOR_USER  # it may abort transactions; the operator may not

    def __init__(self, config: StackConfig) -> None:
        super().__init__(config, config.ports.supervisor)
