"""This process's cache of a parked-aggregate table, shared by both databases' parking
stores (`cdcbox.postgres.parking`, `cdcbox.mariadb.consumer_state`)."""

from __future__ import annotations

from collections.abc import Callable

from cdcbox.seam.stores import ParkedKey, ParkState


class ParkedCache:
    """This process's cache of a parked-aggregate table, whichever the database.

    The cache (`might_be_parked`) is only a shortcut for the common case "not parked":
    `state` asks the database, so an operator's release counts at once, and a key
    this process parked is in the cache from the moment it commits. `refresh` reloads the
    cache from the table (the consumer calls it at start, now and then, and on every
    partition assignment, so a park made by another member is seen).
    """

    def __init__(self) -> None:
        self._cache: set[ParkedKey] = set()
        self._stale = False
        self._invalidations = 0  # written by `invalidate` only, read by `refresh`

    def _reload(self, keys: Callable[[], set[ParkedKey]]) -> None:
        """Replace the cache with `keys()`. An `invalidate` that lands while the table is
        read keeps the cache distrusted."""
        invalidations = self._invalidations
        self._cache = keys()
        if self._invalidations == invalidations:
            self._stale = False

    def _answer(self, key: ParkedKey, replaying: bool | None) -> ParkState | None:
        """The database's answer for `key` (None: no row); a released key leaves the cache."""
        if replaying is None:
            self._cache.discard(key)
            return None
        return "replaying" if replaying else "held"

    def invalidate(self) -> None:
        """Distrust the cache until the next `refresh` (e.g. after a partition assignment):
        meanwhile every key might be parked, so `state` asks the database. Safe to call
        from another thread (kafka-python's IO thread runs the assignment listener); it
        touches no database session."""
        self._invalidations += 1
        self._stale = True

    def might_be_parked(self, key: ParkedKey) -> bool:
        return self._stale or key in self._cache

    def remember(self, key: ParkedKey) -> None:
        self._cache.add(key)
