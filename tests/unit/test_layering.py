"""The package's layers, read from its imports: top (cli, testing) → services (consumer,
relay, ops, observe, stack) → adapters and stores (producer, kafka, connect, telemetry;
the database seam, its PostgreSQL and MariaDB sides and the one place that picks between
them) → the shared core at the top of `cdcbox/`. No import runs upwards, packages of
one layer import each other without a cycle, no module imports itself back, and the
package's root is a face above every layer: it re-exports the API users write, and no
module of the package imports it."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import cdcbox

pytestmark = pytest.mark.unit

PACKAGE = Path(cdcbox.__file__).parent
CORE = {
    "errors", "wire", "event", "names", "ids", "db", "migrate", "avro", "limits",
    "resources", "fault_switches", "schema_registry", "dsn", "replication",
    "registry_gate", "session",
}  # fmt: skip
# Modules at the top of the package that belong to a layer above the core.
ENTRY_POINTS = {"pytest_plugin": "testing"}
LAYERS = {
    "cli": 3, "testing": 3,
    "consumer": 2, "relay": 2, "ops": 2, "observe": 2, "stack": 2, "acls": 2,
    "strimzi": 2,
    "producer": 1, "kafka": 1, "connect": 1, "telemetry": 1,
    "seam": 1, "postgres": 1, "mariadb": 1, "databases": 1,
}  # fmt: skip


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported_modules(path: Path) -> set[str]:
    """Every cdcbox module `path` imports, at the top, in a function or under TYPE_CHECKING."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cdcbox"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("cdcbox"))
    return found


def group_of(module: str) -> str:
    """'cdcbox.consumer.steps.route' → 'consumer'; the pytest entry point → 'testing'; the
    root → 'face'; a core module → 'core'."""
    if module == "cdcbox":
        return "face"
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ENTRY_POINTS:
        return ENTRY_POINTS[parts[1]]
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "core"


def rank(module: str) -> int:
    # The root re-exports from every layer, so it sits above them all.
    return max(LAYERS.values()) + 1 if module == "cdcbox" else LAYERS.get(group_of(module), 0)


GRAPH = {m: imported_modules(p) - {m} for m, p in MODULES.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_only_the_shared_core_sits_at_the_top_of_the_package() -> None:
    """Besides the core, only the pytest entry point: it must sit outside
    `cdcbox.testing`, whose import needs what a producer-only install lacks."""
    top = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert top == CORE | set(ENTRY_POINTS)
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert packages == set(LAYERS)


def test_no_import_runs_from_a_lower_layer_to_a_higher_one() -> None:
    upward = [
        f"{importer} ({group_of(importer)}) imports {imported} ({group_of(imported)})"
        for importer, imports in GRAPH.items()
        for imported in imports
        if rank(imported) > rank(importer)
    ]
    assert upward == []


def test_packages_import_each_other_without_a_cycle() -> None:
    between: dict[str, set[str]] = defaultdict(set)
    for importer, imports in GRAPH.items():
        for imported in imports:
            a, b = group_of(importer), group_of(imported)
            if a != b and "core" not in (a, b):
                between[a].add(b)
    assert find_cycle(between) is None


def test_no_module_imports_itself_back() -> None:
    # Faces (__init__) re-export their modules, which import siblings by full path: that
    # is not a cycle of the code, so the face's edges to its own modules are left out.
    graph = {m: {i for i in imports if not i.startswith(m + ".")} for m, imports in GRAPH.items()}
    assert find_cycle(graph) is None


def test_the_layer_check_sees_an_upward_import() -> None:
    # The check above would pass vacuously if it read no imports: it must see this one.
    assert "cdcbox.kafka.client" in GRAPH["cdcbox.consumer.runner"]
    assert rank("cdcbox.cli.main") > rank("cdcbox.consumer.runner") > rank("cdcbox.postgres.inbox")
    assert rank("cdcbox.postgres.inbox") > rank("cdcbox.wire")


def test_the_root_exports_the_api_users_write() -> None:
    from cdcbox.consumer import AsyncHandler, Consumer, ConsumerConfig, Handler, Outcome
    from cdcbox.consumer.signals import RefuseTransition, RetryLater, SkipEvent
    from cdcbox.errors import CdcboxError
    from cdcbox.event import Event
    from cdcbox.producer import NewEvent, Outbox, UnitOfWork
    from cdcbox.session import AsyncSession, Session
    from cdcbox.wire import WireFormat

    expected = [
        AsyncHandler, AsyncSession, CdcboxError, Consumer, ConsumerConfig, Event, Handler, NewEvent,
        Outbox, Outcome, RefuseTransition, RetryLater, Session, SkipEvent, UnitOfWork,
        WireFormat,
    ]  # fmt: skip
    assert [getattr(cdcbox, name) for name in cdcbox.__all__] == expected
    with pytest.raises(AttributeError, match="no attribute 'outbox_typo'"):
        _ = cdcbox.outbox_typo


def test_the_root_needs_no_consumer_dependency_until_a_consumer_name_is_used() -> None:
    code = (
        "import sys, cdcbox; from cdcbox import NewEvent, Outbox, UnitOfWork;"
        "print(sorted({'kafka', 'fastavro', 'cdcbox.consumer'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_module_of_the_package_imports_its_root() -> None:
    assert [m for m, imports in GRAPH.items() if "cdcbox" in imports] == []


SQL = re.compile(r"\b(INSERT INTO|DELETE FROM|UPDATE \S+ SET|SELECT .+ FROM)\b", re.I | re.S)


def sql_in(path: Path) -> list[str]:
    """The string constants of a module that are SQL statements reading or writing tables,
    and its imports of psycopg's SQL composition."""
    tree = ast.parse(path.read_text())
    found = [
        node.value[:60]
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value)
    ]
    found += [
        "imports psycopg.sql"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.module == "psycopg.sql" or (node.module == "psycopg" and any(
            a.name == "sql" for a in node.names)))
    ]  # fmt: skip
    return found


def test_the_consumer_writes_no_sql_of_either_database() -> None:
    """The store seam (issue 37): the pipeline and its steps reach their tables through
    `cdcbox.seam.stores` only, so PostgreSQL and MariaDB stores plug in alike."""
    leaks = {
        str(path.relative_to(PACKAGE)): found
        for path in (PACKAGE / "consumer").rglob("*.py")
        if (found := sql_in(path))
    }
    assert leaks == {}


def test_the_sql_check_sees_a_statement() -> None:
    assert sql_in(PACKAGE / "postgres" / "inbox.py")
    assert sql_in(PACKAGE / "mariadb" / "inbox.py")


def third_party_imports(path: Path) -> set[str]:
    """The top-level names of every package `path` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
    return found


# A driver is one adapter's business: Kafka's client only under cdcbox/kafka/, PyMySQL
# only under cdcbox/mariadb/ (issue 53), so changing either touches one room.
DRIVERS = {"kafka": "kafka", "pymysql": "mariadb"}


def driver_leaks(package: Path) -> list[str]:
    return sorted(
        f"{path.relative_to(package)} imports {driver}"
        for path in package.rglob("*.py")
        for driver, home in DRIVERS.items()
        if driver in third_party_imports(path) and path.relative_to(package).parts[0] != home
    )


def test_each_driver_is_imported_only_by_its_adapter() -> None:
    assert driver_leaks(PACKAGE) == []


def test_the_driver_check_sees_a_leak(tmp_path: Path) -> None:
    (tmp_path / "consumer").mkdir()
    (tmp_path / "consumer" / "offsets.py").write_text("from kafka import TopicPartition\n")
    (tmp_path / "relay").mkdir()
    (tmp_path / "relay" / "store.py").write_text("def f():\n    import pymysql\n")
    assert driver_leaks(tmp_path) == [
        "consumer/offsets.py imports kafka",
        "relay/store.py imports pymysql",
    ]
