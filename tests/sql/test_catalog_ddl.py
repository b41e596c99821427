"""COMMENT ON, CREATE VIEW and COPY FROM DATABASE on the lake persist in the Iceberg catalog or are
refused: none reports success while saving nothing (they used to land in DuckDB's copy only).

Truth: the table metadata read by a new `Lake` on the same warehouse (and, through REST, by a client
of the server), and the rows DuckDB holds in the source database.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

import iceduck
from iceduck.errors import IcebergError, TableNotFoundError
from tests.support.rest_helpers import serving


@pytest.fixture
def warehouse(tmp_path: Path) -> Iterator[Path]:
    with iceduck.connect(tmp_path / "wh") as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t (id INTEGER, v VARCHAR)")
    yield tmp_path / "wh"


def test_comments_are_the_table_comment_property_and_the_field_doc(warehouse: Path) -> None:
    with iceduck.connect(warehouse) as lake:
        assert lake.sql("COMMENT ON TABLE lake.ns.t IS 'orders of the day'").fetchall() == []
        lake.sql("COMMENT ON COLUMN lake.ns.t.v IS 'the value'")
        lake.sql("COMMENT ON COLUMN ns.t.ID IS 'the key'")
    with iceduck.connect(warehouse) as again:  # what the catalog holds
        t = again.table("ns.t")
        assert t.properties["comment"] == "orders of the day"
        assert [(f.name, f.doc) for f in t.schema.fields] == [("id", "the key"), ("v", "the value")]
        again.sql("COMMENT ON TABLE lake.ns.t IS NULL")
        again.sql("COMMENT ON COLUMN lake.ns.t.v IS NULL")
        t = again.table("ns.t")
        assert "comment" not in t.properties
        assert [(f.name, f.doc) for f in t.schema.fields] == [("id", "the key"), ("v", None)]
        with pytest.raises(IcebergError, match="no column 'nope'"):
            again.sql("COMMENT ON COLUMN lake.ns.t.nope IS 'x'")
        with pytest.raises(TableNotFoundError, match=r"ns\.missing"):
            again.sql("COMMENT ON TABLE lake.ns.missing IS 'x'")
        # DuckDB's own tables keep DuckDB's COMMENT ON
        again.sql("CREATE TABLE plain (a INT)")
        again.sql("COMMENT ON TABLE plain IS 'duck'")
        assert again.sql("SELECT comment FROM duckdb_tables() WHERE table_name = 'plain'").fetchall() == [
            ("duck",)
        ]


def test_a_view_in_a_folder_catalog_is_refused_and_one_in_duckdb_made(tmp_path: Path) -> None:
    # (the SQLite and REST catalogs keep Iceberg views: tests/sql/test_iceberg_views.py)
    with iceduck.connect(tmp_path / "folders", catalog="folder") as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE lake.ns.t (id INTEGER)")
        for name in ("lake.ns.v", "ns.v"):
            with pytest.raises(IcebergError, match="cannot hold Iceberg views"):
                lake.sql(f"CREATE VIEW {name} AS SELECT 1 AS a")
            with pytest.raises(IcebergError, match="cannot hold Iceberg views"):
                lake.sql(f"CREATE OR REPLACE VIEW {name} AS SELECT 1 AS a")
        # a statement DuckDB's parser refuses gets DuckDB's syntax error, before anything runs
        for statement in ("CREATE VIEW lake.ns.v", "CREATE VIEW lake.ns.v (1) AS SELECT 1"):
            with pytest.raises(duckdb.ParserException, match="syntax error"):
                lake.sql(statement)
        lake.sql("CREATE VIEW v AS SELECT count(*) AS n FROM lake.ns.t")
        assert lake.sql("SELECT n FROM v").fetchall() == [(0,)]


@pytest.mark.parametrize(
    "statement", ["CREATE VIEW lake.ns.v", "CREATE VIEW ns.v AS", "CREATE VIEW lake.ns.v (a b) AS SELECT 1, 2"]
)
def test_a_view_statement_duckdb_cannot_parse_is_refused_as_such_where_views_are_kept(
    tmp_path: Path, statement: str
) -> None:
    # (the SQLite catalog keeps views: the refusal is DuckDB's own syntax error, not a catalog
    # without views, and nothing is created)
    with iceduck.connect(tmp_path / "wh") as lake:
        lake.sql("CREATE SCHEMA ns")
        with pytest.raises(duckdb.ParserException, match="syntax error"):
            lake.sql(statement)
        assert tuple(lake.catalog.list_views("ns")) == ()


def test_copy_from_database_to_the_lake_writes_iceberg_tables(warehouse: Path) -> None:
    truth = duckdb.connect()
    with iceduck.connect(warehouse) as lake:
        for con in (lake, truth):
            con.sql("ATTACH ':memory:' AS mem")
            con.sql("CREATE TABLE mem.trips AS SELECT i AS id, 'st' || (i % 3) AS s FROM range(50) r(i)")
            con.sql("CREATE SCHEMA mem.ops")
            con.sql("CREATE TABLE mem.ops.fixes AS SELECT i AS id, i * 1.5 AS x FROM range(7) r(i)")
        lake.sql("COPY FROM DATABASE mem TO lake")
    with iceduck.connect(warehouse) as again:
        assert sorted(again.list_tables("main")) == ["trips"]
        for name in ("main.trips", "ops.fixes"):
            got = sorted(again.sql(f"SELECT * FROM lake.{name}").fetchall())
            assert got == sorted(truth.sql(f"SELECT * FROM mem.{name}").fetchall())
        # a second copy would overwrite nothing: refused before writing
        again.sql("ATTACH ':memory:' AS mem2")
        again.sql("CREATE TABLE mem2.trips AS SELECT 1 AS id")
        again.sql("CREATE TABLE mem2.other AS SELECT 1 AS id")
        with pytest.raises(IcebergError, match=r"main\.trips exist already"):
            again.sql("COPY FROM DATABASE mem2 TO lake")
        assert "other" not in again.list_tables("main")
        again.sql("CREATE VIEW mem2.main.w AS SELECT 1")
        with pytest.raises(IcebergError, match="view w"):
            again.sql("COPY FROM DATABASE mem2 TO lake")


def test_comments_through_attach_reach_the_rest_catalog(tmp_path: Path) -> None:
    with serving(tmp_path / "served") as server, iceduck.connect(tmp_path / "local") as lake:
        lake.sql(
            f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )
        lake.sql("CREATE SCHEMA cat.ns")
        lake.sql("CREATE TABLE cat.ns.t (id INTEGER)")
        lake.sql("COMMENT ON TABLE cat.ns.t IS 'served'")
        lake.sql("COMMENT ON COLUMN cat.ns.t.id IS 'key'")
        with iceduck.connect(server.url, authorization_type="none") as remote:
            t = remote.table("ns.t")
            assert t.properties["comment"] == "served"
            assert [(f.name, f.doc) for f in t.schema.fields] == [("id", "key")]


def test_the_extension_property_procedures_set_and_remove_table_properties(warehouse: Path) -> None:
    with iceduck.connect(warehouse) as lake:
        lake.sql(
            "CALL set_iceberg_table_properties(lake.ns.t, {'owner': 'ops', 'commit.retry.num-retries': '7'})"
        )
        lake.sql("CALL set_iceberg_table_properties('ns.t', MAP {'tier': 'gold'})")
        lake.sql("CALL remove_iceberg_table_properties(lake.ns.t, ['owner'])")
    with iceduck.connect(warehouse) as again:
        props = again.table("ns.t").properties
        assert props["commit.retry.num-retries"] == "7" and props["tier"] == "gold" and "owner" not in props
        assert again.sql("CALL pragma_version()").fetchall()[0][0].startswith("v")  # DuckDB's own CALLs


def test_use_a_namespace_then_write_by_bare_names_as_duckdb_does(warehouse: Path) -> None:
    truth = duckdb.connect()
    truth.sql("CREATE SCHEMA ns; CREATE TABLE ns.t (id INTEGER, v VARCHAR)")
    script = [
        "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "UPDATE t SET v = 'z' WHERE id = 2",
        "DELETE FROM t WHERE id = 3",
        "MERGE INTO t USING (SELECT 4 AS id, 'm' AS v) AS s USING (id) WHEN NOT MATCHED THEN INSERT *",
    ]
    with iceduck.connect(warehouse) as lake:
        lake.sql("USE lake.ns")
        truth.sql("USE ns")
        for statement in script:
            assert lake.sql(statement).fetchall() == truth.sql(statement).fetchall()
        lake.sql("CALL set_iceberg_table_properties(t, {'k': 'v'})")
        assert sorted(lake.sql("SELECT * FROM t").fetchall()) == sorted(
            truth.sql("SELECT * FROM t").fetchall()
        )
        lake.sql("USE memory")
        lake.sql("CREATE TABLE t (a INTEGER)")  # DuckDB's own again
        lake.sql("INSERT INTO t VALUES (9)")
        assert lake.sql("SELECT * FROM memory.t").fetchall() == [(9,)]
    with iceduck.connect(warehouse) as again:
        assert sorted(again.sql("SELECT * FROM lake.ns.t").fetchall()) == [(1, "a"), (2, "z"), (4, "m")]
        assert again.table("ns.t").properties["k"] == "v"
