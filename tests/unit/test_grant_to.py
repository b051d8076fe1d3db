"""`db migrate --grant-to` grants PostgreSQL roles; on MariaDB it is refused before any
connection is made."""

from __future__ import annotations

import pytest

from cdcbox.databases import database_for
from cdcbox.errors import UsageError
from cdcbox.names import DbNames
from cdcbox.seam.database import Migration

pytestmark = pytest.mark.unit


def test_grant_to_is_refused_on_mariadb() -> None:
    with pytest.raises(UsageError, match="--grant-to"):
        database_for("mariadb://u@127.0.0.1:1/nowhere").migrate(
            Migration(names=DbNames(), grant_to="someone")
        )
