"""Lake.sql lists the user's relations only: SHOW TABLES, SHOW ALL TABLES, information_schema."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from iceduck.io.storage import is_remote
from iceduck.lake import Lake


def test_show_tables_lists_the_users_tables_and_the_lakes(lake: Lake) -> None:
    lake.sql("CREATE TABLE ns.trips (id BIGINT)")
    lake.sql("CREATE TABLE mine (x INTEGER)")  # a DuckDB table
    lake.sql("SELECT * FROM iceberg_snapshots('ns.trips')").fetchall()  # iceduck's sources exist now
    assert lake.sql("SHOW TABLES").fetchall() == [("lake.ns.trips",), ("mine",)]
    assert [r[:3] for r in lake.sql("SHOW ALL TABLES").fetchall()] == [
        ("lake", "ns", "trips"),
        ("memory", "main", "mine"),
    ]


def test_information_schema_holds_no_internal_names(lake: Lake) -> None:
    lake.sql("CREATE TABLE ns.trips (id BIGINT)")
    lake.sql("CREATE TABLE mine (x INTEGER)")
    assert lake.sql(
        "SELECT table_catalog, table_schema, table_name FROM information_schema.tables ORDER BY ALL"
    ).fetchall() == [("lake", "ns", "trips"), ("memory", "main", "mine")]
    # with an alias, qualified columns, and the other listings
    assert lake.sql(
        "SELECT t.table_name FROM information_schema.tables t WHERE t.table_schema = 'main'"
    ).fetchall() == [("mine",)]
    assert lake.sql(
        "SELECT tables.table_name FROM information_schema.tables WHERE table_schema = 'main'"
    ).fetchall() == [("mine",)]
    assert lake.sql(
        "SELECT count(*) FROM information_schema.columns WHERE table_name LIKE '%iceduck%'"
    ).fetchall() == [(0,)]
    assert lake.sql(
        "SELECT count(*) FROM information_schema.views WHERE table_name LIKE '%iceduck%'"
    ).fetchall() == [(0,)]
    # DuckDB itself still has them (iceduck's functions read through them)
    assert lake.con.sql(
        "SELECT count(*) > 0 FROM information_schema.tables WHERE table_name LIKE '\\_\\_iceduck\\_%' ESCAPE '\\'"
    ).fetchall() == [(True,)]


def _error(lake: Lake, sql: str) -> str:
    with pytest.raises(duckdb.Error) as failure:
        lake.sql(sql).fetchall()
    return str(failure.value)


def test_errors_suggest_no_internal_name(lake: Lake, tmp_path: Path) -> None:
    lake.sql("CREATE TABLE ns.trips (id BIGINT)")
    lake.sql("SELECT * FROM iceberg_snapshots('ns.trips')").fetchall()
    # DuckDB alone would suggest "__iceduck_iceberg_snapshots"
    assert "__iceduck" in _error_plain(lake, "SELECT * FROM iceduck_iceberg_snapshots")
    assert _error(lake, "SELECT * FROM iceduck_iceberg_snapshots") == (
        "Catalog Error: Table with name iceduck_iceberg_snapshots does not exist!"
    )
    folder = lake.table("ns.trips").location
    got = _error(lake, f"SELECT * FROM '{folder}'")
    if is_remote(folder):  # an object-store folder is not looked up for the hint: DuckDB's text
        assert got.split("\n")[0] == f"Catalog Error: Table with name {folder} does not exist!"
        assert "__iceduck" not in got and "iceduck.errors" not in got
    else:
        assert got == (
            f"Catalog Error: Table with name {folder} does not exist!\n"
            f"An Iceberg table? Read it with iceberg_scan('{folder}')"
        )


def _error_plain(lake: Lake, sql: str) -> str:
    try:
        lake.con.sql(sql).fetchall()
    except Exception as e:  # DuckDB's own answer, for comparison
        return str(e)
    raise AssertionError("no error")
