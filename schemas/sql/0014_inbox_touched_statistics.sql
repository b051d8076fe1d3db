-- Statistics on the expression the purge index (0006) is built on: the planner keeps
-- none for a partial index's expression, so without them it estimated any range of
-- last-touched times at a third of the inbox. The exporter's count of the last minute's
-- rows was then planned, on a large inbox, as a parallel scan compiled by JIT (tens of
-- milliseconds per scrape for a handful of rows). ANALYZE samples the inbox (a fixed
-- number of rows, whatever its size) so that they hold from now on; autovacuum keeps
-- them current afterwards.
CREATE STATISTICS IF NOT EXISTS {inbox_touched_statistics}
    ON (coalesce(processed_at, received_at)) FROM {inbox};
ANALYZE {inbox};
