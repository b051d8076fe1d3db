"""The next contributor's map cannot go stale (issue 53, item 4): every path the layout
page names exists, every subpackage of `cdcbox` is on it, every module it lists in a
package is there, and every dotted `cdcbox.<package>.…` name in the docs and the
docstrings resolves."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
LAYOUT = ROOT / "docs" / "contributing" / "layout.md"
PACKAGE = ROOT / "cdcbox"


def rows(table_header: str) -> list[list[str]]:
    """The cells of each row of the layout page's table that starts with `table_header`."""
    text = LAYOUT.read_text()
    table = text[text.index(table_header) :].split("\n\n")[0].splitlines()[2:]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in table]


def test_every_top_level_path_of_the_layout_page_exists() -> None:
    for path, _holds in rows("| path | holds |"):
        for name in re.findall(r"`([^`]+)`", path):
            assert (ROOT / name).exists(), name


def test_every_subpackage_is_on_the_layout_page_with_the_modules_it_lists() -> None:
    listed = {}
    for _layer, package, holds in rows("| layer | package | holds |"):
        name = package.strip("`/")
        listed[name] = holds
        where = PACKAGE if name == "*.py" else PACKAGE / name
        for module in re.findall(r"`([a-z_]+\.py)`", holds):
            found = list(where.glob(module)) or list(where.glob(f"*/{module}"))
            assert found, f"{name}: {module}"
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert subpackages <= set(listed), subpackages - set(listed)


def dotted_names() -> dict[str, Path]:
    """Each `cdcbox.<subpackage>.…` name in the docs, the README and the docstrings (a
    name under a plain module, `cdcbox.event.id`, is a header or a logger, not a path)."""
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    found: dict[str, Path] = {}
    for path in [ROOT / "README.md", *ROOT.glob("docs/**/*.md"), *PACKAGE.rglob("*.py")]:
        for name in re.findall(r"\bcdcbox(?:\.[A-Za-z_]\w*)+", path.read_text()):
            if name.split(".")[1] in subpackages:
                found.setdefault(name, path)
    return found


def resolves(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attribute in parts[i:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def test_every_dotted_cdcbox_name_in_the_docs_and_docstrings_resolves() -> None:
    names = dotted_names()
    assert "cdcbox.seam.stores" in names  # the scan finds what it should
    missing = {
        name: str(path.relative_to(ROOT)) for name, path in names.items() if not resolves(name)
    }
    assert missing == {}
