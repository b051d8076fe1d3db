"""`python -m tests.packaging DIST`, run by scripts/test: the wheel and the sdist that
`python -m build` made in DIST hold what they should, and each installs into a clean
virtual environment (no project checkout on its path) where `cdc-ctl` runs and the
library's resources (migrations, connector specs, infra files) are found.

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


def installs(artifact: Path) -> list[str]:
    """Install `artifact` into a new virtual environment; run cdc-ctl and the smoke."""
    with tempfile.TemporaryDirectory() as home:
        venv = Path(home) / "venv"
        steps = [
            [sys.executable, "-m", "venv", str(venv)],
            [str(venv / "bin/pip"), "install", "-q", str(artifact)],
            [str(venv / "bin/cdc-ctl"), "--version"],
            [str(venv / "bin/python"), "-c", SMOKE],
        ]
        for argv in steps:
            # cwd: a directory without the checkout, so nothing is imported from it.
            result = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=home)
            if result.returncode != 0:
                return [f"{artifact.name}: {' '.join(argv[-2:])} failed: {result.stderr[-500:]}"]
            if result.stdout.strip():
                print(f"  {artifact.name}: {result.stdout.strip()}")
    return []


def main(dist: Path) -> int:
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    problems = check_wheel(wheel) + check_sdist(sdist)
    if not problems:
        problems = installs(wheel) + installs(sdist)
    for problem in problems:
        print(f"packaging: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
