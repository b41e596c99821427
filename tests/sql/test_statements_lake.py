"""SQL statements on a lake, end to end: every statement kind on a temporary warehouse.

Independent truth:
* DuckDB itself: each DML statement also runs, word for word, on a plain DuckDB table with the same
  columns (`mirror`); the lake must report the same `Count` and hold the same rows.
* The reference peer (DuckDB 1.5.5 + iceberg) reads the table by its metadata file after the writes.
* Schemas, specs and properties are checked through the iceberg_* functions against values written
  out by hand.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iceduck.errors import AlreadyExistsError, IcebergError, NamespaceNotFoundError, TableNotFoundError
from iceduck.lake import PRUNE_TEXT_LIMIT, Lake, connect
from iceduck.shell import Shell
from iceduck.sql import SqlError, split_script
from iceduck.sql.types import SqlTypeError
from tests.support.peer import Peer, sql_string
from tests.support.s3_fixture import peer_reads_s3

COLUMNS = "id BIGINT, d DATE, station VARCHAR, delay INTEGER, price DECIMAL(9, 2)"


LAKE_NAMESPACES = ()  # the `lake` fixture (conftest) starts empty: the tests create their schemas


def sql(lake: Lake, text: str, params: Any = None) -> list[tuple[Any, ...]]:
    rel = lake.sql(text, params)
    return [] if rel is None else rel.fetchall()


def table_rows(lake: Lake, ident: str) -> list[tuple[Any, ...]]:
    return sql(lake, f"SELECT * FROM lake.{ident} ORDER BY ALL")


def metadata_location(lake: Lake, ident: str) -> str:
    return lake.table(ident).metadata_location


def peer_rows(peer: Peer, lake: Lake, ident: str, columns: str = "*") -> list[tuple[Any, ...]]:
    location = metadata_location(lake, ident)
    peer_reads_s3(peer, location)  # the S3 twin: the peer reads the objects with its own httpfs
    return sorted(peer.query(f"SELECT {columns} FROM iceberg_scan({sql_string(location)})"), key=repr)


def mirror_rows(mirror: duckdb.DuckDBPyConnection, ident: str) -> list[tuple[Any, ...]]:
    return mirror.execute(f"SELECT * FROM {ident} ORDER BY ALL").fetchall()


# -- DML against DuckDB's own semantics ------------------------------------------------------------

DML = [
    "INSERT INTO ns.t SELECT i, DATE '2026-10-01' + (i % 3)::INTEGER, 'st' || (i % 5), (i % 7)::INTEGER, "
    "(i % 100) / 4 FROM range(1, 301) r(i)",
    # strings and numbers cast to the column types, as DuckDB's INSERT casts them
    "INSERT INTO ns.t VALUES (1001, '2026-10-04', 'Utrecht', 3.0, '12.50'), (1002, '2026-10-04', NULL, 4, 1)",
    "INSERT INTO ns.t (station, id) VALUES ('only two', 1003)",
    "INSERT INTO ns.t BY NAME SELECT 1004 AS id, 9 AS delay",
    "DELETE FROM ns.t WHERE d = DATE '2026-10-02' AND delay = 4",
    "UPDATE ns.t SET delay = delay + 100, station = upper(station) WHERE id % 10 = 7",
    "DELETE FROM ns.t WHERE id IN (SELECT id FROM doomed)",
    "UPDATE ns.t SET price = NULL WHERE station IS NULL",
    "DELETE FROM ns.t WHERE false",
    "UPDATE ns.t SET delay = 0 WHERE id < 0",
]

VARIANTS = {
    "v3": "PARTITIONED BY (day(d))",
    "v3-bucket": "PARTITIONED BY (bucket(4, id), station)",
    "v2": "PARTITIONED BY (d) WITH ('format-version' = '2')",
    "v3-cow": "WITH ('write.delete.mode' = 'copy-on-write', 'write.update.mode' = 'copy-on-write')",
}


@pytest.mark.peer
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.s3_twin(variant=("v3", "v2"))
def test_dml_counts_and_rows_match_duckdb(lake: Lake, peer: Peer, variant: str) -> None:
    mirror = duckdb.connect()
    mirror.execute("CREATE SCHEMA ns")
    for con in (mirror, lake.con):
        con.execute("CREATE TABLE doomed AS SELECT i AS id FROM range(0, 300, 13) r(i)")
    mirror.execute(f"CREATE TABLE ns.t ({COLUMNS})")
    assert sql(lake, "CREATE SCHEMA ns") == []
    assert sql(lake, f"CREATE TABLE ns.t ({COLUMNS}) {VARIANTS[variant]}") == []
    for statement in DML:
        expected = mirror.execute(statement).fetchall()
        assert sql(lake, statement) == expected, statement
        assert table_rows(lake, "ns.t") == mirror_rows(mirror, "ns.t"), statement
    want = mirror_rows(mirror, "ns.t")
    assert sorted(sql(lake, "SELECT * FROM iceberg_scan('ns.t')"), key=repr) == sorted(want, key=repr)
    assert peer_rows(peer, lake, "ns.t") == sorted(want, key=repr)
    snapshots = sql(lake, "SELECT operation FROM iceberg_snapshots('ns.t') ORDER BY sequence_number")
    # statements that matched nothing commit nothing
    assert len(snapshots) == len(DML) - 2


@pytest.mark.s3_twin
def test_truncate_and_delete_everything(lake: Lake) -> None:
    sql(lake, "CREATE SCHEMA ns; CREATE TABLE ns.t (a INT) PARTITIONED BY (a)")
    sql(lake, "INSERT INTO ns.t SELECT i % 3 FROM range(10) r(i)")
    assert sql(lake, "TRUNCATE ns.t") == [(10,)]
    assert table_rows(lake, "ns.t") == []
    # whole files go: no data or delete files are left live
    assert sql(lake, "SELECT count(*) FROM iceberg_files('ns.t')") == [(0,)]
    sql(lake, "INSERT INTO ns.t VALUES (1), (2)")
    assert sql(lake, "DELETE FROM ns.t") == [(2,)]
    assert table_rows(lake, "ns.t") == []


def test_insert_default_values_and_write_defaults(lake: Lake) -> None:
    sql(lake, "CREATE SCHEMA ns")
    sql(lake, "CREATE TABLE ns.t (a INTEGER DEFAULT 7, b VARCHAR DEFAULT 'x', c DATE)")
    assert sql(lake, "INSERT INTO ns.t DEFAULT VALUES") == [(1,)]
    assert sql(lake, "INSERT INTO ns.t (c) VALUES (DATE '2026-01-02')") == [(1,)]
    import datetime as dt

    assert table_rows(lake, "ns.t") == [(7, "x", dt.date(2026, 1, 2)), (7, "x", None)]


def test_parameters_reach_the_insert_query(lake: Lake) -> None:
    sql(lake, "CREATE SCHEMA ns; CREATE TABLE ns.t (a BIGINT, b VARCHAR)")
    assert sql(lake, "INSERT INTO ns.t VALUES (?, ?)", [5, "five"]) == [(1,)]
    assert sql(lake, "INSERT INTO ns.t SELECT $1 + 1, $2", [5, "six"]) == [(1,)]
    assert table_rows(lake, "ns.t") == [(5, "five"), (6, "six")]
    with pytest.raises(SqlError, match="parameters are only supported"):
        lake.sql("DELETE FROM ns.t WHERE a = ?", [5])


# -- CREATE TABLE ----------------------------------------------------------------------------------


def schema_rows(lake: Lake, ident: str) -> list[tuple[Any, ...]]:
    return sql(
        lake,
        f"SELECT path, type, required, is_identifier, write_default FROM iceberg_schemas('{ident}') "
        "WHERE is_current ORDER BY field_id",
    )


def test_create_table_maps_duckdb_types(lake: Lake) -> None:
    sql(lake, "CREATE SCHEMA ns")
    sql(
        lake,
        """CREATE TABLE ns.types (
            k BIGINT PRIMARY KEY, i INTEGER NOT NULL, s SMALLINT, ti TINYINT, u8 UTINYINT, u32 UINTEGER,
            f REAL, db DOUBLE, dec DECIMAL(12, 3), dt DATE, tm TIME, ts TIMESTAMP, tz TIMESTAMPTZ,
            tns TIMESTAMP_NS, tms TIMESTAMP_MS, v VARCHAR(20) DEFAULT 'n/a', j JSON, b BLOB, u UUID, ok BOOLEAN,
            st STRUCT(x INTEGER, "Y z" VARCHAR), l INTEGER[], a DOUBLE[2], m MAP(VARCHAR, BIGINT),
            deep STRUCT(inner_list STRUCT(q DATE)[])
        )""",
    )
    assert schema_rows(lake, "ns.types") == [
        ("k", "long", True, True, None),
        ("i", "int", True, False, None),
        ("s", "int", False, False, None),
        ("ti", "int", False, False, None),
        ("u8", "int", False, False, None),
        ("u32", "long", False, False, None),
        ("f", "float", False, False, None),
        ("db", "double", False, False, None),
        ("dec", "decimal(12, 3)", False, False, None),
        ("dt", "date", False, False, None),
        ("tm", "time", False, False, None),
        ("ts", "timestamp", False, False, None),
        ("tz", "timestamptz", False, False, None),
        ("tns", "timestamp_ns", False, False, None),
        ("tms", "timestamp", False, False, None),
        ("v", "string", False, False, '"n/a"'),
        ("j", "string", False, False, None),
        ("b", "binary", False, False, None),
        ("u", "uuid", False, False, None),
        ("ok", "boolean", False, False, None),
        ("st", "struct<x: int, Y z: string>", False, False, None),
        ("l", "list<int>", False, False, None),
        ("a", "list<double>", False, False, None),
        ("m", "map<string, long>", False, False, None),
        ("deep", "struct<inner_list: list<struct<q: date>>>", False, False, None),
        ("st.x", "int", False, False, None),
        ("st.Y z", "string", False, False, None),
        ("l.element", "int", False, False, None),
        ("a.element", "double", False, False, None),
        ("m.key", "string", True, False, None),
        ("m.value", "long", False, False, None),
        ("deep.inner_list", "list<struct<q: date>>", False, False, None),
        ("deep.inner_list.element", "struct<q: date>", False, False, None),
        ("deep.inner_list.element.q", "date", False, False, None),
    ]


@pytest.mark.parametrize(
    ("column", "message"),
    [
        ("x HUGEINT", "Iceberg has no type for HUGEINT"),
        ("x UHUGEINT", "Iceberg has no type for UHUGEINT"),
        ("x UBIGINT", "Iceberg has no type for UBIGINT"),
        ("x INTERVAL", "Iceberg has no type for INTERVAL"),
        ("x UNION(a INT, b VARCHAR)", r"Iceberg has no type for UNION\(a INTEGER, b VARCHAR\)"),
        ("x TIMETZ", "Iceberg has no type for TIME WITH TIME ZONE"),
        ("x BIT", "Iceberg has no type for BIT"),
        ("x STRUCT(a INT, b INTERVAL)", "column x.b: Iceberg has no type for INTERVAL"),
        ("x NOSUCHTYPE", "column definitions"),
        ("x INT UNIQUE", "UNIQUE constraints"),
        ("x INT CHECK (x > 0)", "CHECK constraints"),
        ("x INT, y INT AS (x + 1)", "generated columns"),
        ("x TIMESTAMP DEFAULT now()", "not a constant"),
        ("x TIMESTAMP DEFAULT current_timestamp", "not a constant"),
        ("x DOUBLE DEFAULT random()", "not a constant"),
        ("x INT, y INT DEFAULT x", "DEFAULT value cannot contain column names"),
        ("x INT, X BIGINT", 'Column with name "X" already exists'),
    ],
)
def test_create_table_refusals_create_nothing(lake: Lake, column: str, message: str) -> None:
    sql(lake, "CREATE SCHEMA ns")
    with pytest.raises(IcebergError, match=message):
        lake.sql(f"CREATE TABLE ns.bad ({column})")
    assert lake.list_tables("ns") == ()


def test_create_table_options_spec_sort_and_properties(lake: Lake) -> None:
    sql(lake, "CREATE SCHEMA lake.ns")
    sql(
        lake,
        "CREATE TABLE lake.ns.t (id BIGINT, ts TIMESTAMPTZ, name VARCHAR) "
        "PARTITIONED BY (hour(ts), bucket(8, id), truncate(2, name)) SORTED BY (id DESC NULLS LAST) "
        "WITH ('format-version' = '2', 'write.delete.mode' = 'copy-on-write', 'owner' = 'me')",
    )
    assert sql(lake, "SELECT name, transform, source_columns FROM iceberg_partition_specs('ns.t')") == [
        ("ts_hour", "hour", ["ts"]),
        ("id_bucket", "bucket[8]", ["id"]),
        ("name_trunc", "truncate[2]", ["name"]),
    ]
    props = dict(sql(lake, "SELECT key, value FROM iceberg_properties('ns.t')"))
    assert props["write.delete.mode"] == "copy-on-write"
    assert props["owner"] == "me"
    assert lake.table("ns.t").format_version == 2
    order = lake.table("ns.t").sort_order
    assert [(f.direction.value, f.null_order.value) for f in order.fields] == [("desc", "nulls-last")]


def test_create_if_not_exists_and_duplicates(lake: Lake) -> None:
    sql(lake, "CREATE SCHEMA ns")
    sql(lake, "CREATE SCHEMA IF NOT EXISTS ns")
    with pytest.raises(AlreadyExistsError):
        lake.sql("CREATE SCHEMA ns")
    sql(lake, "CREATE TABLE ns.t (a INT)")
    before = metadata_location(lake, "ns.t")
    assert sql(lake, "CREATE TABLE IF NOT EXISTS ns.t (b VARCHAR)") == []
    with pytest.raises(AlreadyExistsError, match=r"ns\.t exists already"):
        lake.sql("CREATE TABLE NS.T (b VARCHAR)")
    assert metadata_location(lake, "ns.t") == before
    with pytest.raises(NamespaceNotFoundError, match="namespace 'nope' does not exist"):
        lake.sql("CREATE TABLE lake.nope.t (a INT)")


def test_v2_refuses_v3_types_and_defaults(lake: Lake) -> None:
    sql(lake, "CREATE SCHEMA ns")
    with pytest.raises(IcebergError, match="format version 3"):
        lake.sql("CREATE TABLE ns.t (a TIMESTAMP_NS) WITH ('format-version' = '2')")
    with pytest.raises(SqlTypeError, match="defaults need format version 3"):
        lake.sql("CREATE TABLE ns.t (a INT DEFAULT 1) WITH ('format-version' = '2')")
    with pytest.raises(SqlError, match="format-version must be 1, 2 or 3"):
        lake.sql("CREATE TABLE ns.t (a INT) WITH ('format-version' = '4')")
    assert lake.list_tables("ns") == ()


@pytest.mark.peer
@pytest.mark.s3_twin
def test_create_table_as_select(lake: Lake, peer: Peer) -> None:
    mirror = duckdb.connect()
    query = (
        "SELECT i AS id, DATE '2026-10-01' + (i % 4)::INTEGER AS d, 'x' || i AS label, i / 3 AS ratio, "
        "[i, i + 1] AS pair FROM range(50) r(i)"
    )
    mirror.execute(f"CREATE TABLE t AS {query}")
    sql(lake, "CREATE SCHEMA ns")
    assert sql(lake, f"CREATE TABLE ns.t PARTITIONED BY (month(d)) AS {query}") == [(50,)]
    assert table_rows(lake, "ns.t") == mirror_rows(mirror, "t")
    assert peer_rows(peer, lake, "ns.t") == sorted(mirror_rows(mirror, "t"), key=repr)
    assert sql(lake, "SELECT path, type FROM iceberg_schemas('ns.t') ORDER BY field_id") == [
        ("id", "long"),
        ("d", "date"),
        ("label", "string"),
        ("ratio", "double"),
        ("pair", "list<long>"),
        ("pair.element", "long"),
    ]
    assert sql(lake, "SELECT transform FROM iceberg_partition_specs('ns.t')") == [("month",)]
    assert sql(lake, f"CREATE TABLE ns.empty AS {query} WITH NO DATA") == [(0,)]
    assert table_rows(lake, "ns.empty") == []
    assert sql(lake, "SELECT count(*) FROM iceberg_snapshots('ns.empty')") == [(0,)]


def test_failed_create_table_as_leaves_no_table(lake: Lake, tmp_path: Path) -> None:
    sql(lake, "CREATE SCHEMA ns")
    with pytest.raises(duckdb.ConversionException):
        lake.sql("CREATE TABLE ns.t AS SELECT CAST(s AS INTEGER) AS n FROM (VALUES ('1'), ('x')) v(s)")
    assert lake.list_tables("ns") == ()
    assert not (tmp_path / "wh" / "ns" / "t").exists()
    with pytest.raises(SqlTypeError, match="Iceberg has no type for HUGEINT"):
        lake.sql("CREATE TABLE ns.t AS SELECT 1::HUGEINT AS h")
    assert lake.list_tables("ns") == ()


# -- ALTER, DROP, RENAME -------------------------------------------------------------------------


@pytest.mark.peer
@pytest.mark.s3_twin
def test_alter_table_schema_changes(lake: Lake, peer: Peer) -> None:
    sql(lake, "CREATE SCHEMA ns; CREATE TABLE ns.t (id INTEGER, name VARCHAR, junk DOUBLE)")
    sql(lake, "INSERT INTO ns.t VALUES (1, 'a', 0.5), (2, 'b', 1.5)")
    sql(lake, "ALTER TABLE ns.t ADD COLUMN platform SMALLINT DEFAULT 4")
    sql(lake, "ALTER TABLE ns.t ADD COLUMN IF NOT EXISTS platform VARCHAR")  # exists: nothing happens
    sql(lake, "ALTER TABLE ns.t ADD COLUMN note VARCHAR")
    sql(lake, 'ALTER TABLE ns.t RENAME COLUMN NAME TO "Station"')
    sql(lake, "ALTER TABLE ns.t DROP COLUMN junk")
    sql(lake, "ALTER TABLE ns.t DROP COLUMN IF EXISTS junk")
    sql(lake, "ALTER TABLE ns.t ALTER COLUMN id TYPE BIGINT")
    sql(lake, "INSERT INTO ns.t (id, \"Station\") VALUES (3000000000, 'c')")
    assert schema_rows(lake, "ns.t") == [
        ("id", "long", False, False, None),
        ("Station", "string", False, False, None),
        ("platform", "int", False, False, "4"),
        ("note", "string", False, False, None),  # no default: the key is left out (a JSON null broke Java)
    ]
    want = [(1, "a", 4, None), (2, "b", 4, None), (3000000000, "c", 4, None)]
    assert table_rows(lake, "ns.t") == want
    assert peer_rows(peer, lake, "ns.t") == want
    with pytest.raises(IcebergError):  # not a promotion Iceberg allows
        lake.sql("ALTER TABLE ns.t ALTER COLUMN id TYPE INTEGER")
    with pytest.raises(AlreadyExistsError, match="column Platform exists already"):
        lake.sql("ALTER TABLE ns.t ADD COLUMN Platform INT")
    with pytest.raises(SqlError, match="no column nope"):
        lake.sql("ALTER TABLE ns.t DROP COLUMN nope")


def test_alter_table_spec_sort_properties_and_upgrade(lake: Lake) -> None:
    sql(lake, "CREATE SCHEMA ns; CREATE TABLE ns.t (id BIGINT, d DATE) WITH ('format-version' = 2)")
    sql(lake, "ALTER TABLE ns.t SET PARTITIONED BY (year(d), bucket(2, id))")
    sql(lake, "ALTER TABLE ns.t SET SORTED BY (d)")
    sql(lake, "ALTER TABLE ns.t SET ('commit.retry.num-retries' = '7', 'a' = 'b')")
    sql(lake, "ALTER TABLE ns.t RESET ('a')")
    sql(lake, "ALTER TABLE ns.t SET ('format-version' = '3')")
    assert sql(
        lake, "SELECT spec_id, name, transform FROM iceberg_partition_specs('ns.t') WHERE is_default"
    ) == [
        (1, "d_year", "year"),
        (1, "id_bucket", "bucket[2]"),
    ]
    props = dict(sql(lake, "SELECT key, value FROM iceberg_properties('ns.t')"))
    assert props.get("commit.retry.num-retries") == "7"
    assert "a" not in props
    assert lake.table("ns.t").format_version == 3
    assert [f.transform for f in lake.table("ns.t").sort_order.fields] != []
    sql(lake, "ALTER TABLE ns.t RESET PARTITIONED BY")
    assert lake.table("ns.t").spec.fields == ()


def test_rename_drop_and_views_follow(lake: Lake, tmp_path: Path) -> None:
    sql(lake, "CREATE SCHEMA ns; CREATE SCHEMA other; CREATE TABLE ns.t (a INT)")
    sql(lake, "INSERT INTO ns.t VALUES (1)")
    sql(lake, "ALTER TABLE ns.t RENAME TO t2")
    assert table_rows(lake, "ns.t2") == [(1,)]
    with pytest.raises(duckdb.CatalogException):
        lake.sql("SELECT * FROM lake.ns.t")
    sql(lake, "ALTER TABLE ns.t2 RENAME TO lake.other.t3")
    assert table_rows(lake, "other.t3") == [(1,)]
    assert lake.list_tables("ns") == ()
    folder = Path(metadata_location(lake, "other.t3")).parent.parent
    sql(lake, "DROP TABLE other.t3 PURGE")
    assert not folder.exists()
    assert lake.list_tables("other") == ()
    with pytest.raises(duckdb.CatalogException):
        lake.sql("SELECT * FROM lake.other.t3")
    sql(lake, "DROP TABLE IF EXISTS other.t3")
    with pytest.raises(TableNotFoundError, match=r"other\.t3 does not exist"):
        lake.sql("DROP TABLE lake.other.t3")


def test_drop_schema(lake: Lake) -> None:
    sql(lake, "CREATE SCHEMA ns; CREATE TABLE ns.a (x INT); CREATE TABLE ns.b (x INT)")
    with pytest.raises(SqlError, match="holds table a, table b; drop them first"):
        lake.sql("DROP SCHEMA ns")
    sql(lake, "DROP SCHEMA ns CASCADE")
    assert lake.list_namespaces() == ()
    assert sql(
        lake, "SELECT count(*) FROM duckdb_schemas() WHERE database_name = 'lake' AND schema_name = 'ns'"
    ) == [(0,)]
    sql(lake, "DROP SCHEMA IF EXISTS lake.ns")
    # a name the lake does not have is DuckDB's business
    with pytest.raises(duckdb.CatalogException):
        lake.sql("DROP SCHEMA ns")


# -- errors change nothing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("statement", "error", "message"),
    [
        ("INSERT INTO ns.t VALUES (1, 'a', 3)", SqlError, "has 2 columns .* but 3 values"),
        ("INSERT INTO ns.t (a) VALUES (1, 2)", SqlError, r"1 column\(s\) named \(a\) but the query gives 2"),
        ("INSERT INTO ns.t (a, nope) VALUES (1, 2)", SqlError, "no column nope"),
        ("INSERT INTO ns.t (a, A) VALUES (1, 2)", SqlError, "given more than once"),
        ("INSERT INTO ns.t VALUES ('not a number', 'x')", duckdb.ConversionException, "not a number"),
        ("INSERT INTO ns.t VALUES (NULL, 'x')", IcebergError, "a"),
        ("INSERT INTO ns.t SELECT * FROM nowhere", duckdb.CatalogException, "nowhere"),
        ("INSERT INTO ns.missing VALUES (1)", TableNotFoundError, "ns.missing does not exist"),
        ("DELETE FROM ns.t WHERE nope = 1", IcebergError, "nope"),
        ("UPDATE ns.t SET nope = 1", IcebergError, "cannot set 'nope'"),
        ("UPDATE ns.t SET a = 'x'", duckdb.ConversionException, "'x'"),
        ("ALTER TABLE ns.t ADD COLUMN c HUGEINT", SqlTypeError, "Iceberg has no type for HUGEINT"),
        ("ALTER TABLE ns.t ADD COLUMN c INT NOT NULL", IcebergError, "c"),
        ("ALTER TABLE ns.t SET PARTITIONED BY (month(b))", IcebergError, "month"),
        (
            "MERGE INTO ns.t USING (SELECT 1 AS a) s ON s.a = t.nope WHEN MATCHED THEN DELETE",
            duckdb.Error,
            "nope",
        ),
        (
            "MERGE INTO ns.t USING (SELECT 9 AS a) s ON s.a = t.a WHEN NOT MATCHED THEN INSERT VALUES (NULL, 'z')",
            duckdb.Error,
            "NOT NULL",
        ),
        (
            "MERGE INTO ns.t USING (SELECT 1 AS a) s USING (a) WHEN MATCHED THEN UPDATE SET a = 'x'",
            duckdb.Error,
            "'x'",
        ),
        (
            "UPDATE ns.t SET b = s.b FROM (SELECT 1 AS a, 'q' AS b) s WHERE t.a = s.a AND t.nope",
            duckdb.Error,
            "nope",
        ),
        ("COPY ns.t FROM 'x.csv'", SqlError, "COPY"),
        ("INSERT INTO ns.t VALUES (5, 'x') ON CONFLICT DO NOTHING", IcebergError, "no identifier fields"),
        ("CREATE TABLE ns.t (x INT)", AlreadyExistsError, "exists already"),
    ],
)
def test_errors_change_nothing(lake: Lake, statement: str, error: type[Exception], message: str) -> None:
    sql(lake, "CREATE SCHEMA ns; CREATE TABLE ns.t (a INTEGER NOT NULL, b VARCHAR) PARTITIONED BY (b)")
    sql(lake, "INSERT INTO ns.t VALUES (1, 'x'), (2, 'y')")
    before = metadata_location(lake, "ns.t")
    files = {p for p in (Path(before).parent.parent).rglob("*") if p.is_file()}
    with pytest.raises(error, match=message):
        lake.sql(statement)
    assert metadata_location(lake, "ns.t") == before
    assert table_rows(lake, "ns.t") == [(1, "x"), (2, "y")]
    assert {p for p in (Path(before).parent.parent).rglob("*") if p.is_file()} == files


def test_lake_writes_refuse_duckdb_transactions_opened_behind_lake_sql(lake: Lake) -> None:
    # BEGIN through Lake.sql opens a lake transaction (tests/sql/test_transactions.py); one opened
    # on the DuckDB connection directly holds no Iceberg commits
    sql(lake, "CREATE SCHEMA ns; CREATE TABLE ns.t (a INT)")
    lake.con.execute("BEGIN TRANSACTION")
    with pytest.raises(SqlError, match="outside BEGIN"):
        lake.sql("INSERT INTO ns.t VALUES (1)")
    lake.con.execute("ROLLBACK")
    assert sql(lake, "INSERT INTO ns.t VALUES (1)") == [(1,)]


# -- routing ---------------------------------------------------------------------------------------


def test_duckdb_statements_behave_as_in_duckdb(lake: Lake) -> None:
    plain = duckdb.connect()
    script = [
        "CREATE TABLE trips (id INTEGER, city VARCHAR)",
        "INSERT INTO trips VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "UPDATE trips SET city = 'z' WHERE id > 1",
        "DELETE FROM trips WHERE id = 3",
        "ALTER TABLE trips ADD COLUMN n INTEGER DEFAULT 5",
        "CREATE SCHEMA memory.ducks",
        "CREATE TABLE ducks.t AS SELECT * FROM trips",
        "INSERT INTO ducks.t SELECT * FROM trips",
        "TRUNCATE trips",
        "SELECT * FROM ducks.t ORDER BY ALL",
        "DROP TABLE ducks.t",
        "CREATE TEMP TABLE tmp AS SELECT 1 AS x",
        "SELECT * FROM tmp",
    ]
    for statement in script:
        want = plain.sql(statement)
        got = lake.sql(statement)
        assert (got is None) == (want is None), statement
        if got is not None and want is not None:
            assert (got.columns, got.fetchall()) == (want.columns, want.fetchall()), statement
    assert lake.list_namespaces() == ()  # CREATE SCHEMA memory.ducks stayed in DuckDB


def test_duckdb_schema_with_the_table_wins_over_the_namespace(lake: Lake) -> None:
    sql(lake, "CREATE SCHEMA ns; CREATE TABLE ns.t (a INT)")  # the lake's ns.t
    sql(lake, "CREATE SCHEMA memory.ns; CREATE TABLE memory.ns.t (a INT)")  # DuckDB's own ns.t
    assert sql(lake, "INSERT INTO ns.t VALUES (1)") == [(1,)]
    assert sql(lake, "SELECT * FROM memory.ns.t") == [(1,)]
    assert table_rows(lake, "ns.t") == []
    assert sql(lake, "INSERT INTO lake.ns.t VALUES (2)") == [(1,)]
    assert table_rows(lake, "ns.t") == [(2,)]


def test_an_attached_database_called_lake_stays_duckdbs(warehouse: str) -> None:
    with connect(warehouse) as lake:
        sql(lake, "ATTACH ':memory:' AS lake")
        sql(lake, "CREATE SCHEMA lake.s; CREATE TABLE lake.s.t (x INT); INSERT INTO lake.s.t VALUES (1)")
        assert sql(lake, "SELECT * FROM lake.s.t") == [(1,)]
        assert lake.list_namespaces() == ()


def test_script_mixing_lake_and_duckdb_statements(lake: Lake) -> None:
    rel = lake.sql(
        """CREATE SCHEMA demo; -- a namespace of the catalog
        CREATE TABLE src AS SELECT range AS id FROM range(5);
        CREATE TABLE demo.t (id BIGINT, note VARCHAR);
        INSERT INTO demo.t SELECT id, 'n' || id FROM src WHERE id % 2 = 0;
        DELETE FROM demo.t WHERE id = 2;
        SELECT * FROM lake.demo.t ORDER BY id;"""
    )
    assert rel is not None
    assert rel.fetchall() == [(0, "n0"), (4, "n4")]


def test_views_see_tables_made_through_the_python_api(lake: Lake) -> None:
    sql(lake, "SELECT 1")  # the router exists before the table does
    lake.create_namespace("ns")
    lake.create_table("ns.api", [("a", "INTEGER")])
    import pyarrow as pa

    lake.table("ns.api").append(pa.table({"a": pa.array([3], pa.int32())}))
    assert table_rows(lake, "ns.api") == [(3,)]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.text(alphabet=st.sampled_from('abcXYZ_ -"é'), min_size=1, max_size=8).filter(lambda s: s.strip() == s),
    st.booleans(),
)
def test_any_spelling_reaches_the_same_table(
    tmp_path_factory: pytest.TempPathFactory, name: str, flip: bool
) -> None:
    with connect(tmp_path_factory.mktemp("wh")) as lake:
        quoted = '"' + name.replace('"', '""') + '"'
        sql(lake, f"CREATE SCHEMA {quoted}")
        sql(lake, f"CREATE TABLE {quoted}.{quoted} (x INT)")
        other = quoted.swapcase() if flip else quoted  # DuckDB matches names case-insensitively
        assert sql(lake, f"INSERT INTO lake.{other}.{other} VALUES (1)") == [(1,)]
        assert sql(lake, f"UPDATE {other}.{other} SET x = 2") == [(1,)]
        assert lake.list_tables(name) == (name,)
        assert sql(lake, f"SELECT * FROM lake.{quoted}.{quoted}") == [(2,)]


# -- the shell -------------------------------------------------------------------------------------


def test_shell_runs_lake_statements(lake: Lake) -> None:
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(lake, out, err, mode="csv", bail=True)
    shell.run_text(
        "CREATE SCHEMA ns; CREATE TABLE ns.t (id INTEGER, name VARCHAR) PARTITIONED BY (name);"
        "INSERT INTO ns.t VALUES (1, 'a'), (2, 'b'); UPDATE ns.t SET name = 'c' WHERE id = 2;"
        "SELECT * FROM lake.ns.t ORDER BY id;"
    )
    assert (err.getvalue(), shell.exit_code) == ("", 0)
    assert out.getvalue() == "Count\n2\nCount\n1\nid,name\n1,a\n2,c\n"  # INSERT and UPDATE counts
    shell.run_text("INSERT INTO ns.t VALUES (1);")
    assert (
        err.getvalue()
        == "Error: INSERT INTO ns.t: the table has 2 columns (id, name) but 1 values were supplied\n"
    )


def test_iceduck_dash_c(tmp_path: Path) -> None:
    script = (
        "CREATE SCHEMA ns; CREATE TABLE ns.t (id BIGINT, d DATE) PARTITIONED BY (day(d)); "
        "INSERT INTO ns.t VALUES (1, '2026-10-01'), (2, '2026-10-02'); DELETE FROM ns.t WHERE id = 1; "
        "SELECT id, d FROM lake.ns.t;"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "iceduck.cli",
            "--warehouse",
            str(tmp_path / "wh"),
            "--create",
            "--mode",
            "csv",
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert (result.returncode, result.stderr, result.stdout) == (
        0,
        "",
        "Count\n2\nCount\n1\nid,d\n2,2026-10-02\n",
    )


def test_scripts_with_statements_only_iceduck_parses(lake: Lake) -> None:
    sql(lake, "CREATE SCHEMA ns; CREATE SCHEMA other; CREATE TABLE ns.t (a INT)")
    script = "ALTER TABLE ns.t RENAME TO other.t; INSERT INTO other.t VALUES (1); DROP TABLE other.t PURGE;"
    pieces = split_script(lake.con, script)
    assert [(s.query.strip(), s.type) for s in pieces] == [
        ("ALTER TABLE ns.t RENAME TO other.t;", None),
        ("INSERT INTO other.t VALUES (1);", duckdb.StatementType.INSERT),
        ("DROP TABLE other.t PURGE;", None),
    ]
    sql(lake, script)
    assert lake.list_tables("ns") == lake.list_tables("other") == ()
    # any other syntax error is DuckDB's, and nothing before it runs
    with pytest.raises(duckdb.ParserException):
        lake.sql("CREATE TABLE ns.u (a INT); SELEC 1;")
    assert lake.list_tables("ns") == ()


@pytest.mark.parametrize("text", ["SELECT 42 AS a; -- c", "SELECT 42 AS a ;\n/* c */\n", "SELECT 42 AS a;;"])
def test_a_statement_ending_in_a_semicolon_and_a_comment_can_be_wrapped(lake: Lake, text: str) -> None:
    # DuckDB runs such a text but cannot wrap it in another query (a relation's limit() or show()
    # fails at the `;`): the relation is made from the statement without what follows its last token
    rel = lake.sql(text)
    assert rel is not None
    assert rel.limit(1).fetchall() == [(42,)]
    script = lake.sql(f"{text}\nSELECT 2 AS b; -- d")
    assert script is not None and script.limit(1).fetchall() == [(2,)]


def test_a_quoted_name_with_a_dot_is_one_name(lake: Lake) -> None:
    # DuckDB reads s."a.c" as table `a.c` in schema s (independent truth: its own catalog)
    duck = duckdb.connect()
    duck.execute('CREATE SCHEMA s; CREATE TABLE s."a.c" (x INT)')
    assert duck.execute("SELECT schema_name, table_name FROM duckdb_tables()").fetchall() == [("s", "a.c")]
    # The lake's catalogs key tables by 'namespace.table': such a name is refused, never read as
    # table `c` in namespace `s.a`
    sql(lake, "CREATE SCHEMA s; CREATE SCHEMA s.a; CREATE TABLE s.t (x INT)")
    for statement in [
        'CREATE TABLE s."a.c" (x INT)',
        'CREATE TABLE lake.s."a.c" AS SELECT 1 AS x',
        'INSERT INTO s."a.c" VALUES (1)',
        'ALTER TABLE s.t RENAME TO "t.2"',
        'ALTER TABLE s.t RENAME TO s."t.2"',
    ]:
        refused = r"""table ((lake\.)?s\.)?"(a\.c|t\.2)": a lake table's name cannot contain '\.'$"""
        with pytest.raises(SqlError, match=refused):
            lake.sql(statement)
    assert (lake.list_tables("s"), lake.list_tables("s.a")) == (("t",), ())
    # DuckDB's own tables keep such names
    sql(lake, 'CREATE TABLE memory.main."a.c" (x INT); INSERT INTO memory.main."a.c" VALUES (7)')
    assert sql(lake, 'SELECT * FROM memory.main."a.c"') == [(7,)]


def test_a_long_where_deletes_what_duckdb_deletes(lake: Lake) -> None:
    # a WHERE longer than PRUNE_TEXT_LIMIT plans every file (no pruning): the rows are still exactly
    # those DuckDB deletes from its own table
    mirror = duckdb.connect()
    sql(lake, "CREATE SCHEMA ns; CREATE TABLE ns.t (id BIGINT, v VARCHAR)")
    mirror.execute("CREATE TABLE t (id BIGINT, v VARCHAR)")
    for f in range(3):
        rows = f"SELECT i, 'v' || i FROM range({f * 10_000}, {(f + 1) * 10_000}) r(i)"
        sql(lake, f"INSERT INTO ns.t {rows}")
        mirror.execute(f"INSERT INTO t {rows}")
    where = "id IN (" + ", ".join(str(i * 7 + 5) for i in range(15_000)) + ") OR v = 'v3'"
    assert len(where) > PRUNE_TEXT_LIMIT
    for db, table in ((lake, "ns.t"), (mirror, "t")):
        db.sql(f"DELETE FROM {table} WHERE {where}; -- generated")
    assert table_rows(lake, "ns.t") == mirror_rows(mirror, "t")
    assert len(table_rows(lake, "ns.t")) == 30_000 - 30_000 // 7 - 1


@pytest.mark.s3_twin
def test_delete_and_update_may_read_lake_tables(lake: Lake) -> None:
    mirror = duckdb.connect()
    mirror.execute("CREATE SCHEMA ns")
    setup = [
        "CREATE TABLE ns.t (a INTEGER, b VARCHAR)",
        "CREATE TABLE ns.keep (id INTEGER, label VARCHAR)",
        "INSERT INTO ns.t SELECT i, 'x' || i FROM range(10) r(i)",
        "INSERT INTO ns.keep VALUES (2, 'two'), (3, 'three'), (8, 'eight')",
    ]
    sql(lake, "CREATE SCHEMA ns")
    for statement in setup:
        mirror.execute(statement)
        sql(lake, statement)
    for lake_statement in [
        "DELETE FROM ns.t WHERE a IN (SELECT id FROM lake.ns.keep) AND a < 5",
        "UPDATE ns.t SET b = (SELECT k.label FROM lake.ns.keep k WHERE k.id = a) WHERE a IN (SELECT id FROM lake.ns.keep)",
        'DELETE FROM ns.t WHERE a > (SELECT avg(a) FROM "lake".ns."t")',  # reads the table being changed
    ]:
        expected = mirror.execute(lake_statement.replace('"lake".', "").replace("lake.", "")).fetchall()
        assert sql(lake, lake_statement) == expected, lake_statement
        assert table_rows(lake, "ns.t") == mirror_rows(mirror, "ns.t")
    # the copies the expressions read are gone again
    assert sql(lake, "SELECT count(*) FROM duckdb_schemas() WHERE schema_name LIKE '__iceduck_lake_%'") == [
        (0,)
    ]


def test_routers_do_not_keep_lakes_alive(warehouse: str) -> None:
    import weakref

    lake = connect(warehouse)
    sql(lake, "CREATE SCHEMA ns")
    assert lake._router is not None  # the lake owns the router its first statement made
    router = weakref.ref(lake._router)
    ref = weakref.ref(lake)
    lake.close()
    del lake
    # freed by reference counting alone: the router does not hold its lake in a reference cycle
    assert ref() is None
    assert router() is None


def test_parameters_need_one_statement(lake: Lake) -> None:
    sql(lake, "CREATE SCHEMA ns; CREATE TABLE ns.t (a INT)")
    with pytest.raises(SqlError, match="one statement"):
        lake.sql("INSERT INTO ns.t VALUES (?); SELECT 1", [1])


def test_tables_made_or_dropped_behind_the_lakes_back_show_at_the_next_statement(
    warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`lake.ns.t` follows the catalog another lake (another process, PyIceberg) changes; while
    nothing was committed, a statement naming `lake.` lists nothing (the catalog's change token)."""
    from iceduck.sql import lake_views

    with connect(warehouse) as lake, connect(warehouse) as other:
        sql(other, "CREATE SCHEMA ns")
        sql(other, "CREATE TABLE ns.a (x INT)")
        sql(other, "INSERT INTO ns.a VALUES (1)")
        assert sql(lake, "SELECT * FROM lake.ns.a") == [(1,)]
        listed: list[int] = []
        real = lake_views.LakeViews.catalog_tables
        monkeypatch.setattr(
            lake_views.LakeViews,
            "catalog_tables",
            lambda self: (listed.append(1) if self.con is lake.con else None) or real(self),
        )
        for _ in range(3):
            assert sql(lake, "SELECT * FROM lake.ns.a") == [(1,)]
        assert listed == []
        sql(other, "CREATE TABLE ns.b (y INT)")
        sql(other, "INSERT INTO ns.b VALUES (2)")
        assert sql(lake, "SELECT * FROM lake.ns.b") == [(2,)] and listed == [1]
        sql(other, "INSERT INTO ns.a VALUES (3)")  # a commit: the view reads the new snapshot
        assert sorted(sql(lake, "SELECT * FROM lake.ns.a")) == [(1,), (3,)]
        assert sorted(sql(lake, "SELECT * FROM lake.ns.a WHERE x > 2")) == [(3,)]
        sql(other, "DROP TABLE ns.a")
        with pytest.raises(duckdb.CatalogException):
            sql(lake, "SELECT * FROM lake.ns.a")


def test_each_dml_statement_asks_the_catalog_for_the_table_once(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A REST catalog's loadTable is a request: a statement that read the table must not read it again to commit.
    sql(lake, f"CREATE SCHEMA ns; CREATE TABLE ns.once ({COLUMNS})")
    sql(lake, "INSERT INTO ns.once VALUES (1, DATE '2024-01-01', 'a', 5, 1.50)")
    catalog = lake.catalog
    loads: list[str] = []
    committing: list[bool] = []
    real_load, real_commit = catalog.load_table, catalog.commit_table

    def counted(namespace: str, name: str) -> str:
        if not committing:  # the embedded catalog's compare-and-swap reads the pointer itself: not a load
            loads.append(name)
        return real_load(namespace, name)

    def commit(*args: Any, **kwargs: Any) -> Any:
        committing.append(True)
        try:
            return real_commit(*args, **kwargs)
        finally:
            committing.pop()

    monkeypatch.setattr(catalog, "load_table", counted)
    monkeypatch.setattr(catalog, "commit_table", commit)
    for statement, changed in [
        ("INSERT INTO ns.once VALUES (2, DATE '2024-01-02', 'b', 7, 2.25)", 1),
        ("INSERT INTO ns.once SELECT id + 10, d, station, delay, price FROM lake.ns.once", 2),
        ("UPDATE ns.once SET delay = delay + 1 WHERE id = 2", 1),
        ("DELETE FROM ns.once WHERE id = 11", 1),
    ]:
        loads.clear()
        assert sql(lake, statement) == [(changed,)]
        # the INSERT ... SELECT also reads the table as its source: that read is the scan's, not the commit's
        assert loads.count("once") == (2 if "FROM lake" in statement else 1), statement
    monkeypatch.undo()
    assert sql(lake, "SELECT id, delay FROM lake.ns.once ORDER BY id") == [(1, 5), (2, 8), (12, 7)]
