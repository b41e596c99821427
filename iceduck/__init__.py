"""iceduck: Apache Iceberg for DuckDB, in Python.

- `iceduck.register(con)` adds the iceberg_* table functions to a DuckDB connection.
- `iceduck.connect(warehouse)` opens the embedded default: a local warehouse with a SQLite catalog.

The top-level names load on first use (PEP 562): `import iceduck.spec.types` must not pull in DuckDB,
the SQL layer and the maintenance stack, and the command line imports only what a command needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from iceduck._lazy import lazy_attribute
from iceduck._version import __version__

if TYPE_CHECKING:
    from iceduck.duckdb.binding import register
    from iceduck.lake import Lake, connect

__all__ = ["Lake", "__version__", "connect", "register"]

# name -> module that defines it
_LAZY = {"Lake": "iceduck.lake", "connect": "iceduck.lake", "register": "iceduck.duckdb.binding"}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, globals(), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
