"""Services on MariaDB: their outbox (`MariaDbOutbox`), its migrations, and the sessions
the polling relay publishes it through. Needs the `mariadb` extra (PyMySQL)."""

from cdcbox.mariadb.connection import MariaDbDsn, connect
from cdcbox.mariadb.migrate import migrate
from cdcbox.mariadb.outbox import MariaDbOutbox

__all__ = ["MariaDbDsn", "MariaDbOutbox", "connect", "migrate"]
