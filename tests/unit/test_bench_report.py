"""The documentation's performance section is the newest committed results file's, and the
targets are judged as they say: not measured is never met."""

from __future__ import annotations

import json
from typing import Any

from bench import cores, report, report_tables, results_files
from bench.stats import interleaved, ratio_spread, spread
from bench.targets import CROSSES, MET, MISSED, NOT_MEASURED, TARGETS, judged


def test_the_docs_show_the_newest_committed_results_and_their_plot() -> None:
    text = report.PAGE.read_text()
    shown = text[text.index(report.BEGIN) : text.index(report.END) + len(report.END)]
    newest = results_files.latest()
    assert shown == report.section(newest), f"run: python -m bench.report {newest} --docs"
    plot = newest.with_suffix(".png")
    assert (report.PLOTS / plot.name).read_bytes() == plot.read_bytes()


def _cdc_run(delivered: float, reached: bool, drain_s: float | None) -> dict[str, Any]:
    return {"delivered_per_s": delivered, "reached": reached, "drain_after_writes_s": drain_s}


def test_targets_judge_limits_both_ways_and_report_what_was_not_measured() -> None:
    results: dict[str, Any] = {
        "consumer_cost": {"records_per_s": {"cdcbox_per_record": 2500.0}},
        "e2e": {
            "cdc": {
                "1000": {"latency_ms": {"p99": 300.0}},
                # pgbench did not reach 5,000/s: its delivered rate does not count.
                "5000": _cdc_run(4500.0, reached=False, drain_s=0.1),
                # Reached, but a backlog was left behind: not sustained.
                "4000": _cdc_run(3900.0, reached=True, drain_s=9.0),
                "3000": _cdc_run(3050.0, reached=True, drain_s=0.2),
            }
        },
    }
    verdicts = {(t.area, t.what): (value, verdict) for t, value, verdict in judged(results)}
    assert verdicts[("consumer", "per record: records/s")] == (2500.0, MET)
    assert verdicts[("CDC end to end", "p99 at 1,000 ev/s")] == (300.0, MISSED)
    assert verdicts[("CDC end to end", "sustained, no growing backlog")] == (3050.0, MET)
    assert verdicts[("CDC end to end", "p99 at 2,000 ev/s")] == (None, NOT_MEASURED)
    assert verdicts[("memory", "relay peak RSS")] == (None, NOT_MEASURED)
    assert len(verdicts) == len(TARGETS)


def test_a_spread_is_met_or_missed_only_as_a_whole() -> None:
    """Interleaved rounds give a spread: a median past the limit is not enough."""

    def verdict(*rates: float) -> str:
        results = {"consumer_cost": {"records_per_s": {"cdcbox_per_record": spread(rates)}}}
        by_name = {t.what: v for t, _, v in judged(results)}
        return by_name["per record: records/s"]

    assert verdict(2100.0, 2500.0, 2200.0) == MET
    assert verdict(1900.0, 2100.0, 2200.0) == CROSSES
    assert verdict(1500.0, 1900.0, 1800.0) == MISSED


def test_a_new_results_file_does_not_change_what_the_readme_must_show(tmp_path: Any) -> None:
    """scripts/bench writes a new, untracked results file: the docs still show the
    committed one until it is committed and regenerated, so scripts/test keeps passing."""
    newest = results_files.latest()
    fresh = results_files.RESULTS / "99991231T235959Z-quick.json"
    fresh.write_text(newest.read_text())
    try:
        assert results_files.latest() == newest
    finally:
        fresh.unlink()


def test_runs_are_interleaved_round_by_round_and_ratios_taken_within_a_round() -> None:
    calls: list[str] = []

    def run(name: str, value: float) -> Any:
        def measure() -> dict[str, float]:
            calls.append(name)
            return {"rate": value * (len(calls) + 1)}  # the machine speeds up over time

        return measure

    results = interleaved({"a": run("a", 1.0), "b": run("b", 2.0)}, rounds=3)
    assert calls == ["a", "b", "a", "b", "a", "b"]
    ratio = ratio_spread(results, "b", "a", "rate")
    # Each ratio pairs the runs of one round, never a run with another round's.
    assert [round(v, 2) for v in ratio["values"]] == [3.0, 2.5, 2.33]
    assert ratio["median"] == ratio["values"][1] and ratio["min"] < ratio["max"]


def test_a_later_run_of_one_section_replaces_that_section_only(
    tmp_path: Any, monkeypatch: Any
) -> None:
    whole = {"started": "2026-12-04T16:29:39Z", "exactly_once": {"old": 1}, "e2e": {"x": 1}}
    earlier = tmp_path / "20261203T000000Z-full-only-exactly_once.json"
    later = tmp_path / "20261205T000000Z-full-only-exactly_once.json"
    earlier.write_text(json.dumps({"started": "2026-12-03T00:00:00Z", "exactly_once": {"a": 1}}))
    later.write_text(json.dumps({"started": "2026-12-05T00:00:00Z", "exactly_once": {"b": 2}}))
    monkeypatch.setattr(results_files, "committed", lambda directory, pattern: [earlier, later])
    merged, sources = results_files.with_newest_sections(whole)
    assert merged == {**whole, "exactly_once": {"b": 2}}
    assert sources == {"exactly_once": later}


def _modes_run(connect_cores: float, delivered: float) -> dict[str, Any]:
    at_rate = {"delivered_per_s": delivered, "cores_by_role": {cores.CONNECT: connect_cores}}
    return {"at_rate": at_rate}


def test_the_two_outboxes_show_each_role_s_cpu_per_event_delivered() -> None:
    leg = {q: spread([30.0]) for q in ("p50", "p99")}
    modes: dict[str, Any] = {
        "rate": 1000,
        "backlog": 10,
        "runs": {
            "append one_row": [{}, {}],
            "cdc table": [_modes_run(0.3, 1000.0), _modes_run(0.5, 1000.0)],
            "cdc messages": [_modes_run(0.4, 800.0), _modes_run(0.6, 1000.0)],
        },
        "append_tps": {m: spread([1.0]) for m in ("floor", "table", "messages", "raw message")},
        "wal_bytes_per_event": {m: spread([1.0]) for m in ("table", "messages", "raw message")},
        "relay_leg_ms": {"table": leg, "messages": leg},
        "sustained_per_s": {m: spread([1.0]) for m in ("table", "messages")},
        "ratios": {},
    }
    lines = report_tables.outbox_modes({"outbox_modes": modes}, None)
    (connect,) = [line for line in lines if cores.CONNECT in line]
    # 0.3 and 0.5 cores at 1,000/s; 0.4 at 800/s (500 µs) and 0.6 at 1,000/s.
    assert connect.split("|")[3:5] == [" 400 (300 to 500) ", " 550 (500 to 600) "]
    (walsender,) = [line for line in lines if cores.WALSENDER in line]
    assert walsender.split("|")[3].strip() == "0.00 (0.00 to 0.00)"
    del modes["runs"]["cdc table"][0]["at_rate"]["cores_by_role"]  # an older results file
    assert not [
        line for line in report_tables.outbox_modes({"outbox_modes": modes}, None) if "µs" in line
    ]
