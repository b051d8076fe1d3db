"""The parked-aggregates cache under an assignment that lands while it reloads."""

from __future__ import annotations

from typing import Any

from cdcbox.postgres.parking import Parking

KEY = ("c", "order", "a1")


class TableRead:
    """Stands in for the session during `refresh`: returns the table's rows, and lets
    `during` run while they are read (as kafka-python's IO thread may)."""

    def __init__(self, rows: list[tuple[str, str, str]], during: Any = None) -> None:
        self.rows, self.during = rows, during

    def execute(self, *_: Any) -> TableRead:
        return self

    def fetchall(self) -> list[tuple[str, str, str]]:
        if self.during is not None:
            self.during()
        return self.rows


def test_a_reload_trusts_the_cache_again() -> None:
    parking = Parking()
    parking.invalidate()
    assert parking.might_be_parked(KEY)
    parking.refresh(TableRead([]), ["c"])  # type: ignore[arg-type]
    assert not parking.might_be_parked(KEY)


def test_an_invalidation_during_a_reload_keeps_the_cache_distrusted() -> None:
    parking = Parking()
    parking.refresh(TableRead([], during=parking.invalidate), ["c"])  # type: ignore[arg-type]
    # The rows were read before the assignment finished: they may miss a park made
    # by the partitions' previous owner, so every key still asks the database.
    assert parking.might_be_parked(KEY)
    parking.refresh(TableRead([]), ["c"])  # type: ignore[arg-type]
    assert not parking.might_be_parked(KEY)
