"""The shipped alert rules (infra/observability/alerts.yml), checked and unit-tested by
promtool from Debian's Prometheus package: every rule is valid, each alert fires on the
series that should raise it and stays quiet on a healthy pipeline
(tests/unit/alert_rules_test.yml), and each names its runbook entry."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from cdcbox.resources import resource_dir
from cdcbox.stack.system import ensure_prometheus

pytestmark = pytest.mark.unit
RULES = resource_dir("infra") / "observability" / "alerts.yml"
RULE_TESTS = Path(__file__).with_name("alert_rules_test.yml")
ROOT = Path(__file__).resolve().parents[2]


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    binary = Path(ensure_prometheus()).with_name("promtool")
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, check=False, cwd=cwd
    )


def test_promtool_checks_the_rules() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 12 rules found" in result.stdout


def test_promtool_unit_tests_pass_for_every_alert() -> None:
    result = promtool("test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    tested = {
        case["alertname"]
        for group in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in group["alert_rule_test"]
        if case["exp_alerts"]
    }
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    assert tested == {r["alert"] for r in rules}  # each alert shown to fire


def test_each_alert_links_a_page_of_the_docs() -> None:
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            page = rule["annotations"]["runbook_url"].split()[0]
            assert (ROOT / page).is_file(), (rule["alert"], page)
