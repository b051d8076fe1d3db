"""`python -m tests.packaging DIST`, run by scripts/test: the wheel and the sdist that
`python -m build` made in DIST hold what they should, and each installs into a clean
virtual environment (no project checkout on its path): with the `cli` extra, `cdc-ctl`
runs and the library's resources (migrations, connector specs, infra files) are found;
the wheel alone (a producer-only service) appends events with psycopg and nothing of
Kafka, Avro, click or the terminal UI, and its `cdc-ctl` says in one line what is missing.

Exits 1 with one line per problem; prints what it checked."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

# What the wheel must carry beside the code, and what it must not.
WHEEL_MUST = (
    "cdcbox/py.typed",
    "cdcbox/_resources/schemas/sql/0001_outbox.sql",
    "cdcbox/_resources/connectors/outbox-postgres.yaml",
    "cdcbox/_resources/connectors/fleet/orders.yaml",
    "cdcbox/_resources/connectors/messages/outbox-messages.yaml",
    "cdcbox/_resources/schemas/sql/messages/functions/emit.sql",
    "cdcbox/_resources/infra/versions.env",
    "cdcbox/_resources/infra/observability/alerts.yml",
)
WHEEL_MUST_NOT = ("bench/", "tests/", "consumer/")
SMOKE = """
import cdcbox
from cdcbox.migrate import discover
from cdcbox.connect.connectors import load_specs
from cdcbox.resources import resource_dir
assert discover("cdc"), "no migrations found"
assert resource_dir("connectors").joinpath("outbox-postgres.yaml").is_file()
print("cdcbox", cdcbox.__version__, "from", cdcbox.__file__)
"""
PRODUCER_ONLY = """
import sys
from cdcbox import NewEvent, Outbox, UnitOfWork
from cdcbox.producer.outbox import event_row
from cdcbox.migrate import discover
import cdcbox.pytest_plugin  # pytest's entry point: registers nothing here, raises nothing
row = event_row(NewEvent("order", "o-1", "OrderCreated", {"total": 1}))
assert row.payload == b'{"total":1}' and discover("cdc")
heavy = {"kafka", "fastavro", "click", "rich", "requests", "prometheus_client", "yaml"}
loaded = heavy & {name.split(".")[0] for name in sys.modules}
assert not loaded, f"a producer-only install imported {sorted(loaded)}"
print("producer-only: appends with psycopg alone")
"""


def check_wheel(wheel: Path) -> list[str]:
    names = zipfile.ZipFile(wheel).namelist()
    problems = [f"{wheel.name}: missing {m}" for m in WHEEL_MUST if m not in names]
    problems += [f"{wheel.name}: carries {n}" for n in names if n.startswith(WHEEL_MUST_NOT)]
    return problems


def check_sdist(sdist: Path) -> list[str]:
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    wanted = ("pyproject.toml", "README.md", "cdcbox/__init__.py", "schemas/sql/0001_outbox.sql")
    return [f"{sdist.name}: missing {m}" for m in wanted if m not in names]


def installs(artifact: Path, extra: str) -> list[str]:
    """Install `artifact` (with `extra`) into a new virtual environment and run what that
    install must be able to do."""
    requirement = f"cdcbox[{extra}] @ {artifact.as_uri()}" if extra else str(artifact)
    with tempfile.TemporaryDirectory() as home:
        venv = Path(home) / "venv"
        setup = [
            [sys.executable, "-m", "venv", str(venv)],
            [str(venv / "bin/pip"), "install", "-q", requirement],
        ]
        checks = (
            [[str(venv / "bin/cdc-ctl"), "--version"], [str(venv / "bin/python"), "-c", SMOKE]]
            if extra
            else [[str(venv / "bin/python"), "-c", PRODUCER_ONLY]]
        )
        for argv in setup + checks:
            # cwd: a directory without the checkout, so nothing is imported from it.
            result = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=home)
            if result.returncode != 0:
                return [f"{artifact.name}: {' '.join(argv[-2:])} failed: {result.stderr[-500:]}"]
            if result.stdout.strip():
                print(f"  {artifact.name}[{extra}]: {result.stdout.strip()}")
        if not extra:
            return _cdc_ctl_names_its_extra(venv, home, artifact)
    return []


def _cdc_ctl_names_its_extra(venv: Path, home: str, artifact: Path) -> list[str]:
    result = subprocess.run(
        [str(venv / "bin/cdc-ctl"), "--version"], capture_output=True, text=True, cwd=home
    )
    wanted = "pip install 'cdcbox[cli]'"
    if result.returncode != 2 or wanted not in result.stderr or "Traceback" in result.stderr:
        return [f"{artifact.name}: cdc-ctl without the cli extra said {result.stderr!r}"]
    print(f"  {artifact.name}: cdc-ctl without the cli extra: {result.stderr.strip()}")
    return []


def main(dist: Path) -> int:
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    problems = check_wheel(wheel) + check_sdist(sdist)
    if not problems:
        problems = installs(wheel, "") + installs(wheel, "cli") + installs(sdist, "cli")
    for problem in problems:
        print(f"packaging: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
