"""The stall soak's table in docs/faults.md, generated from one committed results file
(`python -m bench.soak --docs FILE`), and the summary a soak prints at its end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BEGIN, END = "<!-- stall-soak:begin -->", "<!-- stall-soak:end -->"
PAGE = Path(__file__).resolve().parents[1] / "docs" / "faults.md"


def table(runs: list[dict[str, Any]]) -> str:
    """Per fault and supervisor setting: runs, stalls left for a person (not all there 120 s
    after the fault), runs in which the supervisor acted and the longest of those, the
    longest time to all events, lost, topic duplicates (markdown)."""
    lines = [
        "| fault | supervisor | runs | stalled 120 s after the fault | supervisor acted "
        "(longest catch-up then) | caught up, longest | lost | topic duplicates |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def longest(rows: list[dict[str, Any]]) -> str:
        times = [r["caught_up_s"] for r in rows if r["caught_up_s"] is not None]
        return f"{max(times):.0f} s" if times else "-"

    for fault in dict.fromkeys(r["fault"] for r in runs):  # in the order they ran
        for supervised in (False, True):
            mine = [r for r in runs if (r["fault"], r["supervisor"]) == (fault, supervised)]
            if not mine:
                continue
            acted = [r for r in mine if r.get("heal_actions", 0)]
            if not supervised:
                acted_cell = "-"
            elif all("heal_actions" in r for r in mine):
                acted_cell = f"{len(acted)} ({longest(acted)})"
            else:
                acted_cell = "not recorded"
            lines.append(
                f"| {fault} | {'on' if supervised else 'off'} | {len(mine)} | "
                f"{sum(r['stalled'] for r in mine)} | "
                f"{acted_cell} | "
                f"{longest(mine)} | "
                f"{sum(r['committed'] - r['delivered'] for r in mine)} | "
                f"{sum(r['duplicates'] for r in mine)} |"
            )
    return "\n".join(lines)


def page_section(source: Path) -> str:
    runs = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    return f"{BEGIN}\nFrom `{source.relative_to(PAGE.parents[1])}`:\n\n{table(runs)}\n{END}"


def write_page(source: Path) -> None:
    """Put `source`'s table between the markers of docs/faults.md."""
    text = PAGE.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    PAGE.write_text(text[:start] + page_section(source) + text[end:])


def summary(runs: list[dict[str, Any]]) -> list[str]:
    lines = []
    keys = sorted({(r["fault"], r["supervisor"]) for r in runs})
    for fault, supervised in keys:
        mine = [r for r in runs if (r["fault"], r["supervisor"]) == (fault, supervised)]
        times = [r["caught_up_s"] for r in mine if r["caught_up_s"] is not None]
        lines.append(
            f"{fault:18} supervisor={'on ' if supervised else 'off'} runs={len(mine):3} "
            f"stalled={sum(r['stalled'] for r in mine):3} "
            f"lost={sum(r['committed'] - r['delivered'] for r in mine)} "
            f"duplicates={sum(r['duplicates'] for r in mine)} "
            f"caught up max={max(times, default=0):.1f}s"
        )
    return lines
