"""The `pytest11` entry point `cdcbox.testing`: pytest loads it wherever cdcbox is
installed. It registers the fixtures of `cdcbox.testing` when the libraries they need
are there (the `testing` extra); on a producer-only install it registers nothing, so a
service's own test session is never broken by the plugin. It lives outside the
`cdcbox.testing` package, whose own import needs those libraries."""

from __future__ import annotations

try:
    from cdcbox.testing import (
        cdcbox_aggregate_type,
        cdcbox_database,
        cdcbox_harness,
        cdcbox_mariadb,
        cdcbox_schema,
        cdcbox_stack,
        pytest_unconfigure,
    )
except ModuleNotFoundError:  # cdcbox without its consumer libraries: nothing to offer
    pass
else:
    __all__ = [
        "cdcbox_aggregate_type",
        "cdcbox_database",
        "cdcbox_harness",
        "cdcbox_mariadb",
        "cdcbox_schema",
        "cdcbox_stack",
        "pytest_unconfigure",
    ]
