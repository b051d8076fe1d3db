"""The documentation cannot drift from the code: its reference pages are what
tests/docs_reference.py generates now, its wire contract table is `cdcbox.wire`'s, and
every Python block of the README and docs/ is one a test executes
(tests/e2e/test_readme.py). The site itself is built with `mkdocs build --strict` by
scripts/test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cdcbox import wire
from tests import docs_reference
from tests.e2e.test_readme import MARKERS, python_blocks

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(docs_reference.PAGES))
def test_each_reference_page_is_what_the_code_generates(name: str) -> None:
    page = docs_reference.DOCS / name
    assert page.read_text() == docs_reference.PAGES[name](), "run: python -m tests.docs_reference"


def test_the_wire_contract_page_lists_the_headers_both_relays_send_in_order() -> None:
    text = (ROOT / "docs/concepts/wire-contract.md").read_text()
    headers_table = text[text.index("| header |") :].split("\n\n")[0]
    rows = [line.split("|")[1:3] for line in headers_table.splitlines()[2:]]
    documented = [(h.strip(" `"), c.strip(" `")) for h, c in rows]
    assert documented == [(wire.HEADER_EVENT_ID, "event_id")] + [
        (header, column) for column, header in wire.COLUMN_HEADERS
    ]


def test_every_python_block_of_the_docs_is_executed_by_a_test() -> None:
    blocks = python_blocks()
    unclaimed = [b.splitlines()[0] for b in blocks if not any(m in b for m in MARKERS)]
    assert not unclaimed, f"Python blocks no test runs: {unclaimed}"
    assert len(blocks) >= len(MARKERS)


def test_the_readme_stays_short_and_links_only_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        assert (ROOT / target).is_file(), target
