"""`CREATE [OR REPLACE] VIEW` / `DROP VIEW` / `ALTER VIEW ... RENAME TO` on the lake make Iceberg views
in the SQLite catalog, readable by name here and in the next process.

Truth: plain DuckDB running the same statements on ordinary tables holding the same rows; the catalog
file read with sqlite3 (Java JdbcCatalog's layout: `iceberg_type = 'VIEW'`) and by PyIceberg's
SqlCatalog (which must not take the view for a table); the view spec's file naming.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import duckdb
import pytest

import iceduck
from iceduck.errors import AlreadyExistsError, IcebergError, TableNotFoundError
from iceduck.spec import view_metadata as vm
from iceduck.spec.types import NestedField, PrimitiveType, Schema

ROWS = "SELECT i AS id, 'st' || (i % 3) AS station, (i % 7)::INTEGER AS delay FROM range(40) r(i)"
VIEW = "SELECT station, count(*) AS n, sum(delay) AS total FROM {t} WHERE delay > 1 GROUP BY station"


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    with iceduck.connect(tmp_path / "wh") as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql(f"CREATE TABLE lake.ns.t AS {ROWS}")
    return tmp_path / "wh"


def _truth() -> duckdb.DuckDBPyConnection:
    truth = duckdb.connect()
    truth.sql(f"CREATE TABLE t AS {ROWS}")
    return truth


def test_a_view_reads_the_tables_current_snapshot_here_and_in_the_next_process(warehouse: Path) -> None:
    truth = _truth()
    truth.sql(f"CREATE VIEW v AS {VIEW.format(t='t')}")
    with iceduck.connect(warehouse) as lake:
        lake.sql(f"CREATE VIEW lake.ns.v AS {VIEW.format(t='lake.ns.t')}")
        assert sorted(lake.sql("SELECT * FROM lake.ns.v").fetchall()) == sorted(
            truth.sql("FROM v").fetchall()
        )
        for con, t in ((lake, "lake.ns.t"), (truth, "t")):
            con.sql(f"INSERT INTO {t} SELECT i, 'st9', 5 FROM range(100, 110) r(i)")
            con.sql(f"DELETE FROM {t} WHERE id < 5")
        assert sorted(lake.sql("SELECT * FROM lake.ns.v").fetchall()) == sorted(
            truth.sql("FROM v").fetchall()
        )
    with iceduck.connect(warehouse) as again:
        assert sorted(again.sql("SELECT * FROM lake.ns.v").fetchall()) == sorted(
            truth.sql("FROM v").fetchall()
        )
        again.sql("USE lake.ns")
        assert again.sql("SELECT sum(n) FROM v").fetchall() == truth.sql("SELECT sum(n) FROM v").fetchall()
        again.sql("USE memory")
        assert ("lake.ns.v",) in again.sql("SHOW TABLES").fetchall()
        kinds = again.sql(
            "SELECT table_name, table_type FROM information_schema.tables WHERE table_catalog = 'lake' "
            "AND table_name = 'v'"
        ).fetchall()
        assert kinds == [("v", "VIEW")]
        assert again.catalog.list_views("ns") == ("v",)
        assert again.catalog.list_tables("ns") == ("t",)


def test_the_catalog_keeps_a_view_row_and_a_spec_metadata_file(warehouse: Path) -> None:
    with iceduck.connect(warehouse) as lake:
        lake.sql("CREATE VIEW ns.v (a, b) AS SELECT id, station FROM lake.ns.t WHERE id < 3")
    rows = (
        sqlite3.connect(warehouse / "catalog.db")
        .execute(
            "SELECT table_namespace, table_name, metadata_location, iceberg_type FROM iceberg_tables ORDER BY 2"
        )
        .fetchall()
    )
    assert [(r[0], r[1], r[3]) for r in rows] == [("ns", "t", "TABLE"), ("ns", "v", "VIEW")]
    location = rows[1][2]
    assert re.fullmatch(
        re.escape(str(warehouse / "ns" / "v" / "metadata")) + r"/00000-[0-9a-f-]{36}\.metadata\.json",
        location,
    )
    obj = json.loads(Path(location).read_text())
    assert vm.view_metadata_problems(obj) == []
    version = obj["versions"][0]
    # the lake's database name is dropped: the text means the same in every engine
    assert version["representations"] == [
        {"type": "sql", "sql": "SELECT id, station FROM ns.t WHERE id < 3", "dialect": "duckdb"}
    ]
    assert version["default-namespace"] == ["ns"] and "default-catalog" not in version
    assert [(f["name"], f["type"]) for f in obj["schemas"][0]["fields"]] == [("a", "long"), ("b", "string")]
    # PyIceberg's SQL catalog shares the file: the view is no table there, and the namespace is not empty
    from pyiceberg.catalog.sql import SqlCatalog as PyIcebergSqlCatalog

    py = PyIcebergSqlCatalog("iceduck", uri=f"sqlite:///{warehouse / 'catalog.db'}", warehouse=str(warehouse))
    assert py.list_tables("ns") == [("ns", "t")]
    with iceduck.connect(warehouse) as lake:
        lake.sql("DROP TABLE lake.ns.t")
        with pytest.raises(IcebergError, match=r"not empty.*v"):
            lake.catalog.drop_namespace("ns")


def test_replace_if_not_exists_drop_and_rename(warehouse: Path) -> None:
    with iceduck.connect(warehouse) as lake:
        lake.sql("CREATE VIEW lake.ns.v AS SELECT id FROM lake.ns.t WHERE id < 2")
        with pytest.raises(AlreadyExistsError, match=r"view ns\.v exists already"):
            lake.sql("CREATE VIEW lake.ns.v AS SELECT 1 AS x")
        lake.sql("CREATE VIEW IF NOT EXISTS lake.ns.v AS SELECT 1 AS x")
        assert lake.sql("SELECT * FROM lake.ns.v ORDER BY 1").fetchall() == [(0,), (1,)]
        lake.sql("CREATE OR REPLACE VIEW lake.ns.v (k, s) AS SELECT id, station FROM lake.ns.t WHERE id = 4")
        assert lake.sql("SELECT k, s FROM lake.ns.v").fetchall() == [(4, "st1")]
        view = lake.catalog.load_view("ns", "v")
        assert [v.version_id for v in view.metadata.versions] == [
            1,
            2,
        ] and view.metadata.current_version_id == 2
        assert view.metadata_location.rsplit("/", 1)[1].startswith("00001-")
        with pytest.raises(AlreadyExistsError, match="a table of that name exists already"):
            lake.sql("CREATE VIEW lake.ns.t AS SELECT 1 AS x")
        with pytest.raises(IcebergError, match=r"ns\.t is a table \(use DROP TABLE\)"):
            lake.sql("DROP VIEW lake.ns.t")
        lake.sql("ALTER VIEW lake.ns.v RENAME TO w")
        assert lake.sql("SELECT k FROM lake.ns.w").fetchall() == [(4,)]
        with pytest.raises(duckdb.CatalogException):
            lake.sql("SELECT * FROM lake.ns.v")
        lake.sql("DROP VIEW lake.ns.w")
        lake.sql("DROP VIEW IF EXISTS lake.ns.w")
        with pytest.raises(TableNotFoundError, match=r"view ns\.w does not exist"):
            lake.sql("DROP VIEW lake.ns.w")
        assert lake.catalog.list_views("ns") == ()
    with iceduck.connect(warehouse) as again, pytest.raises(duckdb.CatalogException):
        again.sql("SELECT * FROM lake.ns.w")


def test_unqualified_after_use_and_views_over_views(warehouse: Path) -> None:
    with iceduck.connect(warehouse) as lake:
        lake.sql("USE lake.ns")
        lake.sql("CREATE VIEW base AS SELECT id, delay FROM t WHERE delay = 3")
        lake.sql("CREATE VIEW top AS SELECT count(*) AS n FROM base")
        assert lake.sql("SELECT n FROM top").fetchall() == [(6,)]
        assert lake.catalog.list_views("ns") == ("base", "top")
    with iceduck.connect(warehouse) as again:  # `top` is attached after `base`, which it reads
        assert again.sql("SELECT n FROM lake.ns.top").fetchall() == [(6,)]


def test_a_view_reading_outside_the_catalog_is_refused(warehouse: Path) -> None:
    with iceduck.connect(warehouse) as lake:
        lake.sql("CREATE TABLE mine AS SELECT 1 AS x")
        for query in (
            "SELECT * FROM mine",
            "SELECT * FROM memory.main.mine",
            "SELECT * FROM lake.ns.t, mine",
        ):
            with pytest.raises(
                IcebergError, match=r"reads .*mine, which is not a table or view of the lake catalog"
            ):
                lake.sql(f"CREATE VIEW lake.ns.bad AS {query}")
        assert lake.catalog.list_views("ns") == ()
        with pytest.raises(IcebergError, match=r"CREATE VIEW ns\.bad: .*nope"):
            lake.sql("CREATE VIEW lake.ns.bad AS SELECT nope FROM lake.ns.t")
        # a DuckDB view of its own stays DuckDB's
        lake.sql("CREATE VIEW mine_v AS SELECT x FROM mine")
        assert lake.sql("SELECT * FROM mine_v").fetchall() == [(1,)]
        # CTEs are the query's own
        lake.sql("CREATE VIEW lake.ns.c AS WITH k AS (SELECT id FROM lake.ns.t) SELECT max(id) AS m FROM k")
        assert lake.sql("SELECT m FROM lake.ns.c").fetchall() == [(39,)]


def test_a_view_duckdb_cannot_read_is_listed_and_says_why(warehouse: Path) -> None:
    schema = Schema((NestedField(1, "id", PrimitiveType("long")),))
    with iceduck.connect(warehouse) as lake:
        for name, sql in (
            ("spark_ok", "SELECT id FROM t WHERE id < 2"),
            ("spark_only", "SELECT id FROM t LATERAL VIEW explode(array(1)) e AS x"),
        ):
            lake.catalog.create_view(
                "ns",
                name,
                schema=schema,
                version=vm.ViewVersion(1, 1, 0, (vm.ViewRepresentation(sql, "spark"),), ("ns",), {}, "rest"),
            )
    with iceduck.connect(warehouse) as again:
        assert again.sql("SELECT * FROM lake.ns.spark_ok ORDER BY id").fetchall() == [(0,), (1,)]
        assert ("lake.ns.spark_only",) in again.sql("SHOW TABLES").fetchall()
        with pytest.raises(
            duckdb.InvalidInputException,
            match=r"Iceberg view ns\.spark_only cannot be read by DuckDB: its SQL \(spark\)",
        ):
            again.sql("SELECT * FROM lake.ns.spark_only").fetchall()
        with pytest.raises(duckdb.InvalidInputException, match="spark"):
            again.sql("SELECT count(*) FROM lake.ns.spark_only").fetchall()


def test_drop_schema_names_the_views_and_cascade_drops_them(warehouse: Path) -> None:
    with iceduck.connect(warehouse) as lake:
        lake.sql("CREATE VIEW lake.ns.v AS SELECT id FROM lake.ns.t")
        with pytest.raises(IcebergError, match=r"holds table t, view v; drop them first"):
            lake.sql("DROP SCHEMA ns")
        lake.sql("DROP SCHEMA ns CASCADE")
        assert lake.list_namespaces() == ()


def test_another_lake_open_on_the_warehouse_sees_views_come_change_and_go(warehouse: Path) -> None:
    with iceduck.connect(warehouse) as a, iceduck.connect(warehouse) as b:
        assert b.sql("SELECT count(*) FROM lake.ns.t").fetchall() == [(40,)]
        a.sql("CREATE VIEW ns.v AS SELECT id FROM lake.ns.t WHERE id = 1")
        assert b.sql("SELECT * FROM lake.ns.v").fetchall() == [(1,)]
        a.sql("CREATE OR REPLACE VIEW ns.v AS SELECT id FROM lake.ns.t WHERE id = 2")
        assert b.sql("SELECT * FROM lake.ns.v").fetchall() == [(2,)]
        a.sql("DROP VIEW ns.v")
        with pytest.raises(duckdb.CatalogException):
            b.sql("SELECT * FROM lake.ns.v")


def test_comment_on_view_is_the_views_comment_property(warehouse: Path) -> None:
    with iceduck.connect(warehouse) as lake:
        lake.sql("CREATE VIEW lake.ns.v AS SELECT id FROM lake.ns.t")
        lake.sql("COMMENT ON VIEW lake.ns.v IS 'first ids'")
        assert lake.catalog.load_view("ns", "v").metadata.properties == {"comment": "first ids"}
    with iceduck.connect(warehouse) as again:
        rows = again.sql("SELECT comment FROM duckdb_views() WHERE view_name = 'v'").fetchall()
        assert rows == [("first ids",)]
        again.sql("COMMENT ON VIEW ns.v IS NULL")
        assert again.catalog.load_view("ns", "v").metadata.properties == {}
        with pytest.raises(TableNotFoundError, match=r"view ns\.nope does not exist"):
            again.sql("COMMENT ON VIEW lake.ns.nope IS 'x'")



def test_a_view_whose_metadata_file_vanished_is_listed_and_reading_it_names_the_file(warehouse: Path) -> None:
    """As a table whose metadata file is gone: the view stays listed, reading it fails with one line
    naming the view and the file, the catalog's other views still read, and DROP VIEW removes it (it
    used to vanish with every other view of the lake, behind a warning on every statement)."""
    import subprocess
    import sys
    import warnings

    made = subprocess.run(  # another process: this one has read no view yet
        [sys.executable, "-c", (
            "import iceduck, sys\n"
            "with iceduck.connect(sys.argv[1]) as lake:\n"
            "    lake.sql('CREATE VIEW lake.ns.v AS SELECT id FROM lake.ns.t WHERE id < 3')\n"
            "    lake.sql('CREATE VIEW lake.ns.w AS SELECT count(*) AS n FROM lake.ns.t')\n"
            "    print(lake.catalog.load_view('ns', 'v').metadata_location)\n"
        ), str(warehouse)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    gone = Path(made.stdout.strip())
    gone.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning on every statement
        with iceduck.connect(warehouse) as lake:
            assert lake.sql("SELECT n FROM lake.ns.w").fetchall() == [(40,)]
            listed = "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'lake' ORDER BY 1"
            assert lake.sql(listed).fetchall() == [("t",), ("v",), ("w",)]
            assert lake.catalog.list_views("ns") == ("v", "w")
            with pytest.raises(duckdb.Error) as err:
                lake.sql("SELECT * FROM lake.ns.v").fetchall()
            message = str(err.value)
            assert "\n" not in message.strip(), message
            assert f"Iceberg view ns.v cannot be read: {gone}: file not found" in message, message
            lake.sql("DROP VIEW lake.ns.v")
            assert lake.sql(listed).fetchall() == [("t",), ("w",)]
