"""The performance page's tables, one function per section of a results file, each
returning its Markdown lines (`bench.report` assembles them into the page)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import cores as roles
from bench.results_files import relative
from bench.stats import spread
from bench.targets import MET, NOT_MEASURED, Measured, judged, median


def _n(value: Any, digits: int = 0) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and abs(value) < 10 and digits == 0:
        digits = 2
    return f"{value:,.{digits}f}"


def _measured(value: Measured | None, unit: str = "") -> str:
    """One value, or a spread as `median (min to max)`."""
    if value is None:
        return "—"
    if isinstance(value, dict):
        return f"{_n(value['median'])} ({_n(value['min'])} to {_n(value['max'])}) {unit}".strip()
    return f"{_n(value)} {unit}".strip()


def targets(results: dict[str, Any]) -> list[str]:
    lines = [
        "| area | target | limit | measured: median (min to max) | median / limit | |",
        "|---|---|---:|---:|---:|---|",
    ]
    for t, value, verdict in judged(results):
        sign = "≥" if t.at_least else "≤"
        shown = verdict if verdict in (MET, NOT_MEASURED) else f"**{verdict}**"
        ratio = None if value is None else median(value) / t.limit
        lines.append(
            f"| {t.area} | {t.what} | {sign} {_n(float(t.limit))} {t.unit} | "
            f"{_measured(value, t.unit)} | {_n(ratio)} | {shown} |"
        )
    return lines


def _ratios(title: str, ratios: dict[str, Measured]) -> list[str]:
    lines = [f"| {title} | median | min | max |", "|---|---:|---:|---:|"]
    for name, value in ratios.items():
        if isinstance(value, dict):
            lines.append(
                f"| {name.replace('_', ' ')} | {_n(value['median'])} | {_n(value['min'])} "
                f"| {_n(value['max'])} |"
            )
    return lines


def e2e(results: dict[str, Any]) -> list[str]:
    lines = [
        "| relay | asked/s | offered/s | delivered/s | relay leg p50 / p99 ms "
        "| end to end p50 / p95 / p99 ms | applied after writers stopped, s "
        "| cores busy | consumer's cycle: records, poll / apply / durable / offsets ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for relay, runs in results["e2e"].items():
        for asked, run in runs.items():
            leg, lat = run["relay_leg_ms"] or {}, run["latency_ms"] or {}
            latency = (
                f"{_n(lat.get('p50'))} / {_n(lat.get('p95'))} / {_n(lat.get('p99'))}"
                if lat
                else "not reported: rate not reached"
            )
            lines.append(
                f"| {relay.replace('_', ' ')} | {_n(float(asked))} | {_n(run['offered_per_s'])} "
                f"| {_n(run['delivered_per_s'])} | {_n(leg.get('p50'))} / {_n(leg.get('p99'))} "
                f"| {latency} | {_n(run['drain_after_writes_s'], 2)} "
                f"| {_n(run.get('cores_busy'), 2)} | {_cycle(run)} |"
            )
    return lines


def cores(results: dict[str, Any]) -> list[str]:
    """Who held the machine's cores while pgbench wrote, per CDC run (`bench.cores`): the
    ladder's rates, then the top rate's variants."""
    runs = {
        f"{_n(float(asked))}/s{relay.removeprefix('cdc').replace('_', ' ')}": run["cores_by_role"]
        for relay, by_rate in results["e2e"].items()
        if relay.startswith("cdc")
        for asked, run in by_rate.items()
        if "cores_by_role" in run
    }
    if not runs:
        return ["Cores by process: not measured by this run."]
    busiest = max(runs.values(), key=lambda by_role: sum(by_role.values()))
    roles = sorted(
        {role for by_role in runs.values() for role in by_role},
        key=lambda role: -busiest.get(role, 0.0),
    )
    return [
        "Which process held the cores while pgbench wrote, CDC (cores, from `/proc`):",
        "",
        "| process | " + " | ".join(runs) + " |",
        "|---|" + "---:|" * len(runs),
        *(
            f"| {role} | "
            + " | ".join(_n(by_role.get(role), 2) for by_role in runs.values())
            + " |"
            for role in roles
        ),
        "| **every process** | "
        + " | ".join(_n(sum(by_role.values()), 2) for by_role in runs.values())
        + " |",
    ]


def _cycle(run: dict[str, Any]) -> str:
    """A run's mean poll cycle (`bench.processes.cycle_ms`): records a cycle, then each
    part's mean; "—" for runs measured before the metric existed."""
    cycle = run.get("consumer_cycle")
    if not cycle or not cycle["cycles"]:
        return "—"
    means = cycle["mean_ms"]
    parts = " / ".join(_n(means[p], 1) for p in ("poll", "apply", "durable", "offsets"))
    return f"{_n(run['processed'] / cycle['cycles'], 1)}, {parts}"


def exactly_once(results: dict[str, Any], source: Path | None) -> list[str]:
    """Exactly-once source on against off (bench.exactly_once), from `source` where a
    later run measured only that."""
    eos = results.get("exactly_once")
    if not eos:
        return ["Exactly-once on against off: not measured by this run."]
    rounds = len(eos["rounds"]["on"])
    lines = [
        *(
            [f"Exactly-once on against off, from `{relative(source)}`:", ""]
            if source is not None
            else []
        ),
        f"| Connect workers' exactly-once source ({rounds} interleaved rounds) "
        f"| sustained events/s ({eos['backlog']:,}-event backlog) "
        f"| relay leg p99 ms at {eos['rate']:,}/s | end to end p99 ms at {eos['rate']:,}/s |",
        "|---|---:|---:|---:|",
    ]
    for side, values in eos["sides"].items():
        lines.append(
            f"| {side} | {_measured(values['sustained_per_s'])} "
            f"| {_measured(values['relay_p99_ms'])} | {_measured(values['e2e_p99_ms'])} |"
        )
    return [*lines, "", *_ratios("exactly-once, round by round", eos["ratios"])]


def relay(results: dict[str, Any], source: Path | None) -> list[str]:
    """The polling relay's tail and drains (bench.relay_tail)."""
    relay = results.get("relay")
    if not relay:
        return ["The polling relay's tail and drains: not measured by this run."]
    tail, drains = relay["tail_ms"], relay["drain_rows_per_s"]
    rounds = len(relay["runs"]["tail"])
    return [
        *([f"The polling relay, from `{relative(source)}`:", ""] if source else []),
        f"| polling relay ({relay['workers']} workers, {rounds} interleaved rounds) "
        "| median (min to max) |",
        "|---|---:|",
        *(
            f"| commit → broker append at {relay['rate']:,}/s, {q} ms | {_measured(tail[q])} |"
            for q in ("p50", "p99", "max")
        ),
        *(
            f"| {name}, {relay['backlog']:,} rows: rows/s | {_measured(value)} |"
            for name, value in drains.items()
        ),
        *_relay_beside_bare(relay),
    ]


def outbox_modes(results: dict[str, Any], source: Path | None) -> list[str]:
    """The outbox without a table beside the table outbox (bench.outbox_modes)."""
    modes = results.get("outbox_modes")
    if not modes:
        return ["The outbox without a table: not measured by this run."]
    rounds = len(modes["runs"]["append one_row"])
    tps, wal, legs = modes["append_tps"], modes["wal_bytes_per_event"], modes["relay_leg_ms"]
    sustained = modes["sustained_per_s"]

    def leg(mode: str, q: str) -> str:
        return _measured(legs[mode][q]) if mode in legs else "not reached"

    def cpu_per_event(role: str) -> list[str]:
        """A role's CPU per event delivered at the rate, µs (runs before `bench.cores`
        recorded it have no row)."""
        at_rate = {mode: [r["at_rate"] for r in modes["runs"][f"cdc {mode}"]] for mode in legs}
        if set(at_rate) != {"table", "messages"} or not all(
            "cores_by_role" in run for runs in at_rate.values() for run in runs
        ):
            return []
        per_event = {
            mode: spread(
                [1e6 * r["cores_by_role"].get(role, 0.0) / r["delivered_per_s"] for r in runs]
            )
            for mode, runs in at_rate.items()
        }
        return [
            f"| CDC at {modes['rate']:,}/s: {role}, CPU µs per event | — "
            f"| {_measured(per_event['table'])} | {_measured(per_event['messages'])} | — |"
        ]

    return [
        *([f"The two outboxes, from `{relative(source)}`:", ""] if source else []),
        f"| {rounds} interleaved rounds, median (min to max) | floor (business row alone) "
        "| table outbox | outbox without a table | `pg_logical_emit_message` alone |",
        "|---|---:|---:|---:|---:|",
        f"| append: tps (pgbench, pipelined) | {_measured(tps['floor'])} "
        f"| {_measured(tps['table'])} | {_measured(tps['messages'])} "
        f"| {_measured(tps['raw message'])} |",
        f"| WAL bytes per event, beyond the floor's | — | {_measured(wal['table'])} "
        f"| {_measured(wal['messages'])} | {_measured(wal['raw message'])} |",
        f"| CDC sustained, {modes['backlog']:,}-event backlog: events/s | — "
        f"| {_measured(sustained['table'])} | {_measured(sustained['messages'])} | — |",
        *(
            f"| CDC at {modes['rate']:,}/s, commit → Kafka {q} ms | — | {leg('table', q)} "
            f"| {leg('messages', q)} | — |"
            for q in ("p50", "p99")
        ),
        *cpu_per_event(roles.CONNECT),
        *cpu_per_event(roles.WALSENDER),
        "",
        "| ratio, round by round | median | min | max |",
        "|---|---:|---:|---:|",
        *(
            f"| {name} | {_n(r['median'])} | {_n(r['min'])} | {_n(r['max'])} |"
            for name, r in modes["ratios"].items()
        ),
    ]


def _relay_beside_bare(relay: dict[str, Any]) -> list[str]:
    """The tail of the relay beside a bare loop's at the same rate, the writers'
    transactions of each run, and where the bare loop's batches spent their longest."""
    if "bare_tail_ms" not in relay:
        return []
    rows = [
        ("commit → broker append, {q} ms", "tail_ms", "bare_tail_ms", ("p50", "p99", "max")),
        ("pgbench's own transaction, {q} ms", "writer_ms", "bare_writer_ms", ("p99", "max")),
    ]
    steps = relay["bare_steps_max_ms"]
    return [
        "",
        f"| at {relay['rate']:,}/s, {relay['workers']} workers each, interleaved "
        "| cdcbox relay | bare loop (`bench.bare_relay`) |",
        "|---|---:|---:|",
        *(
            f"| {label.format(q=q)} | {_measured(relay[ours][q])} | {_measured(relay[bare][q])} |"
            for label, ours, bare, quantiles in rows
            for q in quantiles
        ),
        *(
            f"| bare loop, its longest {step} of a batch, ms | — | {_measured(steps[step])} |"
            for step in ("claim", "send", "mark")
        ),
    ]


def consumer(results: dict[str, Any]) -> list[str]:
    cost = results["consumer_cost"]
    rounds = cost.get("rounds", 1)
    lines = [
        f"| consumer ({cost['records']:,} pre-filled records, {rounds} interleaved rounds) "
        "| records/s: median (min to max) | p50 / p99 ms per record | peak RSS MB |",
        "|---|---:|---:|---:|",
    ]
    for name, rate in cost["records_per_s"].items():
        record = cost["record_ms"].get(name)
        per = f"{_n(record['p50'], 2)} / {_n(record['p99'], 2)}" if record else "—"
        lines.append(
            f"| {name.replace('_', ' ')} | {_measured(rate)} | {per} | {_n(cost['rss_mb'][name])} |"
        )
    return [*lines, "", *_ratios("consumer ratio, round by round", cost["ratios"])]


def record_cost(results: dict[str, Any]) -> list[str]:
    cost = results["record_cost"]
    lines = [
        f"| one record, per-record mode ({cost['records']:,} records) | µs per record |",
        "|---|---:|",
    ]
    lines += [f"| {step} | {_n(us, 1)} |" for step, us in cost["us_per_record"].items()]
    lines.append(f"| **total** | **{_n(cost['us_total'], 1)}** |")
    lines.append(
        f"| (the COMMIT, waiting for its WAL flush as by default) | "
        f"{_n(cost['us_commit_waiting_for_flush'], 1)} |"
    )
    return lines


def producer(results: dict[str, Any]) -> list[str]:
    p = results["producer"]
    rounds = p.get("rounds", 1)
    lines = [
        f"| producer transaction (pgbench, {p['clients']} clients, {rounds} interleaved "
        f"rounds of {p['seconds']} s) | tps: median (min to max) |",
        "|---|---:|",
    ]
    lines += [f"| {name} | {_measured(v.get('tps', v))} |" for name, v in p["tps"].items()]
    return [*lines, "", *_ratios("producer ratio, round by round", p["ratios"])]


def growth(results: dict[str, Any]) -> list[str]:
    inbox, outbox = results.get("inbox_growth"), results.get("outbox_growth")
    if not inbox or not outbox:
        return []
    lines = [
        f"| inbox rows ({inbox['records']:,} records a run, {inbox['rounds']} interleaved "
        "rounds) | per record rec/s, empty → this inbox | ratio | batch rec/s, empty → this "
        "inbox | ratio | exporter reading ms, empty → this inbox | the whole-inbox count "
        "it replaced, ms |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, at in inbox["sizes"].items():
        rate, ratio, scrape = at["records_per_s"], at["ratios"], at["scrape_s"]
        lines.append(
            f"| {int(size):,} | {_n(rate['per_record empty']['median'])} → "
            f"{_n(rate['per_record']['median'])} | {_measured(ratio['per_record / empty'])} | "
            f"{_n(rate['batch empty']['median'])} → {_n(rate['batch']['median'])} | "
            f"{_measured(ratio['batch / empty'])} | "
            f"{_n(scrape['scrape empty']['median'] * 1000, 1)} → "
            f"{_n(scrape['scrape']['median'] * 1000, 1)} | "
            f"{_n(at['whole_inbox_count_s'] * 1000)} |"
        )
    tps = outbox["tps"]
    lines += [
        "",
        f"| outbox rows ({outbox['rounds']} interleaved rounds) | append tps, empty outbox "
        "| append tps, this outbox | ratio |",
        "|---:|---:|---:|---:|",
        f"| {outbox['rows']:,} | {_measured(tps['empty'])} | {_measured(tps['full'])} | "
        f"{_measured(outbox['ratios']['append, full / empty'])} |",
        "",
        "| purge | rows | seconds | rows/s | meanwhile, against before | overlap |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, purge in (
        ("outbox purge (append)", outbox["purge"]),
        ("inbox purge (batch consumer)", inbox["purge"]),
    ):
        lines.append(
            f"| {name} | {purge['rows']:,} | {_n(purge['seconds'], 1)} | "
            f"{_n(purge['rows_per_s'])} | {_n(purge['during / baseline'])} | "
            f"{_n(purge['overlap'])} |"
        )
    return lines + _paced_purges(inbox, outbox)


def _paced_purges(inbox: dict[str, Any], outbox: dict[str, Any]) -> list[str]:
    paced = [("outbox purge", "append tps", p) for p in outbox.get("paced_purges", [])] + [
        ("inbox purge", "batch consumer rec/s", p) for p in inbox.get("paced_purges", [])
    ]
    if not paced:
        return []
    lines = [
        "",
        f"| paced purge ({paced[0][2]['rounds']} interleaved rounds) | `--max-rate` | "
        "purge rows/s | writers | writers alone | writers beside the purge | "
        "beside / alone | overlap |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for name, writers, p in paced:
        lines.append(
            f"| {name} | {p['max_rate']:,} | {_measured(p['rows_per_s'])} | {writers} | "
            f"{_measured(p['alone'])} | {_measured(p['beside'])} | "
            f"{_measured(p['beside / alone'])} | {_measured(p['overlap'])} |"
        )
    return lines
