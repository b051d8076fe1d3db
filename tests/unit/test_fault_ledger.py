"""The fault ledger's arithmetic, and the documentation's ledger is the committed run's."""

from __future__ import annotations

import uuid
from pathlib import Path

from bench import soak, soak_page
from bench.results_files import committed
from tests.faults import ledger

RESULTS = Path(ledger.__file__).parent / "results"


def test_order_is_judged_on_first_effects_only() -> None:
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    in_order = [(a, "x", 1), (b, "x", 2), (a, "x", 1), (c, "y", 1)]  # a redelivered late
    assert ledger.order_violations(in_order) == 0
    assert ledger.order_violations([(b, "x", 2), (a, "x", 1)]) == 1


def test_a_ledger_is_exact_only_without_loss_double_effect_disorder_or_leak() -> None:
    clean = ledger.Ledger("s", 10, 12, 2, 10, 0, 0, 0, 0)
    assert clean.exact  # duplicates on the topic are allowed: the inbox drops them
    for field in ("lost", "double_effects", "order_violations", "rolled_back_seen"):
        assert not ledger.Ledger(**{**clean.__dict__, field: 1}).exact


def test_the_docs_show_the_latest_committed_ledger() -> None:
    latest = max(committed(RESULTS, "ledger-*.jsonl"))  # a new run's file is not yet
    text = ledger.PAGE.read_text()
    shown = text[text.index(ledger.BEGIN) : text.index(ledger.END) + len(ledger.END)]
    assert shown == ledger.page_section(latest), "run: python -m tests.faults.ledger --docs FILE"


def test_the_docs_show_the_latest_committed_soak() -> None:
    latest = max(committed(soak.RESULTS, "soak-*.jsonl"))
    text = soak_page.PAGE.read_text()
    shown = text[text.index(soak_page.BEGIN) : text.index(soak_page.END) + len(soak_page.END)]
    assert shown == soak_page.page_section(latest), "run: python -m bench.soak --docs FILE"
