"""Which committed results file the documentation shows: the newest whole run git
tracks, with each section a later `--only` run measured put in its place."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def latest() -> Path:
    """The newest whole run's results file git tracks: a run of scripts/bench adds an
    untracked one, which the documentation shows only once it is committed (with
    `--docs`). A run of one section (`--only`) is not a whole run."""
    return max(p for p in committed(RESULTS, "*.json") if ONLY not in p.name)


# `scripts/bench --only SECTION` names its file <time>-<size>-only-<section>.json.
ONLY = "-only-"


def with_newest_sections(results: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Path]]:
    """`results`, with each section a newer committed `--only` run measured put in its
    place; and the file each such section came from."""
    merged, sources = dict(results), {}
    for path in sorted(committed(RESULTS, f"*{ONLY}*.json")):
        only = json.loads(path.read_text())
        if only["started"] > results["started"]:  # ISO 8601 UTC: ordered as text
            for key in only.keys() - {"machine", "size", "started", "finished"}:
                merged[key], sources[key] = only[key], path
    return merged, sources


def committed(directory: Path, pattern: str) -> list[Path]:
    """Files of `directory` matching `pattern` that git tracks (every match outside a
    git checkout)."""
    found = sorted(directory.glob(pattern))
    listed = subprocess.run(
        ["git", "ls-files", "--", str(directory)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:
        return found
    tracked = {(ROOT / line).resolve() for line in listed.stdout.splitlines()}
    return [path for path in found if path.resolve() in tracked]


def relative(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
