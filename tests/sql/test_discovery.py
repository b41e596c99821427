"""Lake.sql lists the user's relations only: SHOW TABLES, SHOW ALL TABLES, information_schema."""

from __future__ import annotations

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
