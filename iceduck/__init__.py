"""iceduck: Apache Iceberg for DuckDB, in Python.

- `iceduck.register(con)` adds the iceberg_* table functions to a DuckDB connection.
- `iceduck.connect(warehouse)` opens the embedded default: a local warehouse with a SQLite catalog.
"""

from __future__ import annotations

from iceduck.duckdb.binding import register
from iceduck.lake import Lake, connect

__version__ = "0.1.0"
__all__ = ["Lake", "__version__", "connect", "register"]
