"""Every public class of the package says what it is and what it guarantees: a class
without a docstring fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cdcbox

pytestmark = pytest.mark.unit

PACKAGE = Path(cdcbox.__file__).parent


def test_every_public_class_has_a_docstring() -> None:
    missing = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.ClassDef)
        and not node.name.startswith("_")
        and ast.get_docstring(node) is None
    ]
    assert missing == []
