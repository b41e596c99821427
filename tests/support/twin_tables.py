"""Twin tables for the keyed-write tests (MERGE, UPDATE ... FROM, upserts): a lake table `ns.t` and a
plain DuckDB table `t` holding the same rows, a source table `s` on both connections, and what a
statement gives on each (`outcome`), so a test compares iceduck with DuckDB itself."""

from __future__ import annotations

from typing import Any

import duckdb

import iceduck
from iceduck.errors import IcebergError

# The columns of the twins and their source: (id, k, v).
COLUMNS = "id INTEGER, k INTEGER, v VARCHAR"


def values_sql(rows: list[tuple[Any, ...]]) -> str:
    """The rows as a VALUES list: `(1, NULL, 'a'), (2, 3, 'b')`."""

    def lit(x: Any) -> str:
        return "NULL" if x is None else (f"'{x}'" if isinstance(x, str) else str(x))

    return ", ".join("(" + ", ".join(lit(x) for x in r) + ")" for r in rows)


def outcome(con: Any, statement: str) -> tuple[str, Any]:
    """("rows", the result sorted) or ("error", the exception's class name) of `statement` on `con`."""
    try:
        rel = con.sql(statement)
    except (duckdb.Error, IcebergError) as e:
        return "error", type(e).__name__
    return "rows", sorted(rel.fetchall(), key=repr) if rel is not None else None


def sorted_rows(con: Any, name: str) -> list[tuple[Any, ...]]:
    """(id, k, v) of every row of table `name`, sorted."""
    return sorted(con.sql(f"SELECT id, k, v FROM {name}").fetchall(), key=repr)


def lineage(lake: iceduck.Lake, name: str = "ns.t") -> dict[int, tuple[int, int]]:
    """id -> (_row_id, _last_updated_sequence_number) of every row of lake table `name`."""
    rel = lake.sql(
        f"SELECT id, _row_id, _last_updated_sequence_number FROM iceberg_scan('{name}', row_lineage := true)"
    )
    assert rel is not None
    return {r[0]: (r[1], r[2]) for r in rel.fetchall()}


def twins(
    lake: iceduck.Lake,
    target: list[Any],
    source: list[Any],
    version: int,
    *,
    table_columns: str = COLUMNS,
    truth_columns: str | None = None,
) -> duckdb.DuckDBPyConnection:
    """The lake table ns.t (`table_columns`, format `version`) and a plain DuckDB table t
    (`truth_columns`, by default the same) with the `target` rows, the lake's in two data files so
    that deletes land in more than one; table s (`COLUMNS`) with the `source` rows on both
    connections. Returns the plain DuckDB connection."""
    lake.sql("DROP TABLE IF EXISTS ns.t")
    lake.sql(f"CREATE TABLE ns.t ({table_columns}) WITH ('format-version' = '{version}')")
    truth = duckdb.connect()
    truth.execute(f"CREATE TABLE t ({truth_columns or table_columns})")
    for con in (truth, lake.con):
        con.execute(f"CREATE OR REPLACE TABLE s ({COLUMNS})")
        if source:
            con.execute(f"INSERT INTO s VALUES {values_sql(source)}")
    if target:
        half = len(target) // 2
        for part in (target[:half], target[half:]):
            if part:
                lake.sql(f"INSERT INTO ns.t VALUES {values_sql(part)}")
        truth.execute(f"INSERT INTO t VALUES {values_sql(target)}")
    return truth
