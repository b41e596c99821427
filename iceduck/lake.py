"""The embedded default: a DuckDB connection on a local warehouse folder with a SQLite catalog.

`connect(warehouse)` opens (creating if needed) the warehouse, registers iceduck's SQL functions on
a fresh DuckDB connection, and exposes the catalog's tables as `lake.<namespace>.<table>`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

DEFAULT_WAREHOUSE = "warehouse"


class Lake:
    """A DuckDB connection with iceduck registered and a warehouse attached as `lake`."""

    def __init__(self, warehouse: str | Path, con: duckdb.DuckDBPyConnection) -> None:
        self.warehouse = Path(warehouse)
        self.con = con

    def sql(self, query: str, params: Any = None) -> duckdb.DuckDBPyRelation | None:
        """Run SQL; returns a relation for queries (print it, or `.fetchall()`), None otherwise."""
        return self.con.sql(query, params=params)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Lake:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(warehouse: str | Path = DEFAULT_WAREHOUSE) -> Lake:
    """Open the embedded default warehouse (created when missing) and return a `Lake`."""
    from iceduck.duckdb.binding import register

    path = Path(warehouse)
    path.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    register(con)
    return Lake(path, con)
