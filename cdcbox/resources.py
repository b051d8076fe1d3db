"""Where the project's data directories (infra/, schemas/, connectors/) live at run time.

In a source checkout they sit next to the package; in an installed wheel they are copied
into `cdcbox/_resources`. Everything that reads them asks here, so both layouts work.
"""

from __future__ import annotations

from pathlib import Path

from cdcbox.errors import ConfigError

_PACKAGE_DIR = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """Return the directory `name` (e.g. "infra") from the checkout or the installed wheel."""
    for candidate in (_PACKAGE_DIR.parent / name, _PACKAGE_DIR / "_resources" / name):
        if candidate.is_dir():
            return candidate
    raise ConfigError(f"cdcbox resource directory {name!r} not found next to {_PACKAGE_DIR}")
