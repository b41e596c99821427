"""`register(con)`: every iceduck SQL function on a DuckDB connection."""

from __future__ import annotations

import duckdb

from iceduck.duckdb.functions import TableFunction, install


def all_functions() -> list[TableFunction]:
    """Every table function iceduck provides, in documentation order."""
    return []


def register(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Add iceduck's table functions (iceberg_snapshots, iceberg_files, ...) to the connection."""
    for fn in all_functions():
        install(con, fn)
    return con
