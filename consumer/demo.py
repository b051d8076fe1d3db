"""The demo: the order example as a fleet, each service on a database of its own
(`consumer.fleet`). Orders are written with their OrderCreated events in one
transaction; five services apply them; inventory answers each from its own outbox
(StockReserved or StockRejected), and orders confirms or cancels on that answer (the
way back); a payment arriving for a cancelled order lands in reconciliation. Then
everything is redelivered to inventory to show that it changes nothing and emits
nothing again. Prints each hop's counts and the round trip's latency.
Run by scripts/demo against a live stack."""

from __future__ import annotations

import argparse
import os
import statistics

from cdcbox.consumer import Outcome
from cdcbox.consumer.stats import ConsumerStats
from consumer.fleet import ORDERS
from consumer.fleet_run import FleetRun, run_fleet


def print_summary(r: FleetRun, writers: int, rate: float) -> None:
    print(
        f"run {r.run}: {r.orders} orders (OrderCreated as Avro) written to the orders "
        f"database by {writers} writers in {r.wrote_s:.1f}s ({r.orders / r.wrote_s:.0f} orders/s"
        + (f", {rate:.0f}/s asked)" if rate else ", a burst)")
    )
    print("hop 1, orders → the five services, each on its own database:")
    for name, stats in r.stats.items():
        if name != ORDERS.name:
            print(f"  {name:<14} {_outcomes(stats)}")
    print(
        f"hop 2, inventory → orders (the way back): {r.answers['StockReserved']} "
        f"StockReserved, {r.answers['StockRejected']} StockRejected published by inventory "
        f"for {r.answered_orders} orders; orders {r.statuses['CONFIRMED']} confirmed, "
        f"{r.statuses['CANCELLED']} cancelled"
    )
    if r.round_trip_ms:
        print(
            f"round trip (order committed → its confirmation committed, through both "
            f"connectors): p50 {statistics.median(r.round_trip_ms):.0f} ms, p99 "
            f"{r.round_trip_ms[int(0.99 * (len(r.round_trip_ms) - 1))]:.0f} ms; every order "
            f"answered {r.answered_s:.1f}s after the first was written"
        )
    print(
        f"payments: {r.final_statuses['PAID']} orders paid, {r.reconciled} payments for "
        f"cancelled orders in reconciliation (orders' consumer: {_outcomes(r.stats[ORDERS.name])}, "
        f"refused={r.stats[ORDERS.name][Outcome.REFUSED]})"
    )
    print(
        f"replay to inventory: duplicates skipped={r.replay[Outcome.DUPLICATE]}, applied "
        f"again={r.replay[Outcome.PROCESSED]}; answers on the topic: "
        f"{r.answers_after_replay} (exactly one per order)"
    )


def _outcomes(stats: ConsumerStats) -> str:
    return (
        f"processed={stats[Outcome.PROCESSED]:<6} skipped={stats[Outcome.SKIPPED]:<5} "
        f"dead-lettered={stats[Outcome.DEAD_LETTERED]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--orders", type=int, default=1000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument(
        "--rate",
        type=float,
        default=50,
        help="Orders/s, steady; the six consumers and the writers share this one process "
        "(0: a burst as fast as the writers go; the round trip then includes the queue).",
    )
    parser.add_argument("--timeout", type=float, default=180)
    args = parser.parse_args()
    result = run_fleet(
        os.environ["CDCBOX_DSN"],
        os.environ["CDCBOX_BOOTSTRAP_SERVERS"],
        args.orders,
        args.writers,
        args.rate,
        args.timeout,
        mariadb_dsn=os.environ.get("CDCBOX_MARIADB_DSN"),
    )
    print_summary(result, args.writers, args.rate)


if __name__ == "__main__":
    main()
