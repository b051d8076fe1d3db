"""`apply` against Connect workers without exactly-once source support: the spec's
`required` is asked for as `requested`, said in one line; with the support, or where
the spec does not require it, the config goes as written. (Connect's validate answer
is faked here; tests/compose run it against a real worker.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cdcbox.cli.main import cli
from cdcbox.connect.client import ConnectClient
from cdcbox.connect.exactly_once import SUPPORT, fitted_to_worker
from cdcbox.errors import ConfigError
from cdcbox.stack.config import StackConfig
from cdcbox.stack.connect_worker import worker_properties

LACKING = "This worker does not have exactly-once source support enabled."


class Worker(ConnectClient):
    def __init__(self, enabled: bool) -> None:
        super().__init__("http://connect.invalid")
        self.enabled = enabled

    def validate(self, connector_class: str, config: dict[str, str]) -> dict[str, Any]:
        errors = [] if self.enabled or config.get(SUPPORT) != "required" else [LACKING]
        return {"configs": [{"value": {"name": SUPPORT, "errors": errors}}]}


def test_required_becomes_requested_on_a_worker_without_it_and_says_so() -> None:
    said: list[str] = []
    config = fitted_to_worker(Worker(enabled=False), "C", {SUPPORT: "required"}, said.append)
    assert config[SUPPORT] == "requested"
    assert len(said) == 1 and "exactly.once.source.support=enabled" in said[0]


def test_a_worker_with_it_gets_the_spec_as_written() -> None:
    said: list[str] = []
    config = fitted_to_worker(Worker(enabled=True), "C", {SUPPORT: "required"}, said.append)
    assert (config, said) == ({SUPPORT: "required"}, [])


def test_a_spec_that_does_not_require_it_is_left_alone() -> None:
    said: list[str] = []
    config = fitted_to_worker(Worker(enabled=False), "C", {"tasks.max": "1"}, said.append)
    assert (config, said) == ({"tasks.max": "1"}, [])


def test_the_stack_setting_reaches_every_worker_and_refuses_a_typo(tmp_path: Path) -> None:
    config = StackConfig(tmp_path, tmp_path, tmp_path, exactly_once="preparing")
    properties = worker_properties("b:9092", "127.0.0.1", 8083, "/p", exactly_once="preparing")
    assert properties["exactly.once.source.support"] == config.exactly_once == "preparing"
    assert worker_properties("b:9092", "h", 1, "/p")["exactly.once.source.support"] == "enabled"
    with pytest.raises(ConfigError, match="--exactly-once must be one of enabled, preparing"):
        StackConfig(tmp_path, tmp_path, tmp_path, exactly_once="on")  # type: ignore[arg-type]


def test_stack_up_says_which_settings_it_takes() -> None:
    result = CliRunner().invoke(cli, ["stack", "up", "--exactly-once", "on"])
    assert result.exit_code == 2
    assert "'on' is not one of 'enabled', 'preparing', 'disabled'" in result.output
