"""The front door reads a statement's table references from DuckDB's parse tree and resolves them
as DuckDB binds them and as the lake's writes do (iceduck/sql/references.py).

Truth: the same rows read through `lake.<ns>.<t>` (the fully qualified view DuckDB binds on
its own), DuckDB's own tables of the same name, and the planner's kept files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from iceduck.lake import Lake
from iceduck.sql import parse_tree as pt
from tests.sql.test_natural_where import _all, _kept, opened
from tests.support.write_helpers import new_lake


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    lake = new_lake(Path(tmp_path_factory.mktemp("references")) / "wh")
    lake.sql("CREATE SCHEMA demo")
    lake.sql("CREATE TABLE demo.t (id BIGINT, d DATE) PARTITIONED BY (d)")
    for day in range(3):
        lake.sql(f"INSERT INTO demo.t SELECT i, DATE '2024-01-01' + {day} FROM range({day * 10}, {day * 10 + 10}) r(i)")
    yield lake
    lake.close()


def _rows(lake: Lake, query: str) -> list[Any]:
    result = lake.sql(query)
    assert result is not None
    return sorted(result.fetchall())


def test_a_namespace_qualified_name_reads_the_lake_table_as_insert_writes_it(lake: Lake) -> None:
    """`ns.t` with namespace `ns` in the lake and nothing of DuckDB's so named: INSERT writes the
    lake table, and SELECT (a join, a subquery, a CTE's body, an INSERT's query) reads it; main
    said "schema demo does not exist" for every read."""
    truth = sorted(lake.con.execute("SELECT * FROM lake.demo.t").fetchall())
    assert len(truth) == 30
    assert _rows(lake, "SELECT * FROM demo.t") == truth
    assert _rows(lake, "SELECT * FROM demo.T WHERE id < 5") == [r for r in truth if r[0] < 5]
    assert _rows(lake, "SELECT t.id, t.d FROM demo.t JOIN (SELECT 3 AS id) k USING (id)") == [truth[3]]
    assert _rows(lake, "WITH c AS (SELECT * FROM demo.t WHERE d = DATE '2024-01-02') SELECT count(*) FROM c") == [(10,)]
    assert _rows(lake, "SELECT count(*) FROM range(3) WHERE range IN (SELECT id FROM demo.t)") == [(3,)]
    lake.con.execute("CREATE TEMP TABLE copied (id BIGINT, d DATE)")
    try:
        lake.sql("INSERT INTO copied SELECT * FROM demo.t WHERE id >= 25")
        assert sorted(lake.con.execute("SELECT * FROM copied").fetchall()) == [r for r in truth if r[0] >= 25]
    finally:
        lake.con.execute("DROP TABLE copied")


def test_a_namespace_qualified_name_prunes(lake: Lake) -> None:
    where = "id BETWEEN 21 AND 23"  # the files' bounds, not their partition values
    kept = _kept(lake, "demo.t", where)
    assert kept and kept < _all(lake, "demo.t")
    for _ in range(2):
        with opened(lake.con) as files:
            assert _rows(lake, f"SELECT count(*) FROM demo.t WHERE {where}") == [(3,)]
        assert files == kept


def test_after_use_a_bare_name_prunes_and_travels(lake: Lake) -> None:
    """`USE lake.demo`: `t` is the lake view DuckDB binds on the search path (pruned like
    `lake.demo.t`, main read every file), and `t AT (VERSION => ...)` reads that snapshot."""
    ((database,),) = lake.con.execute("SELECT current_database()").fetchall()
    first = lake.con.execute(
        "SELECT snapshot_id FROM iceberg_snapshots('demo.t') ORDER BY sequence_number LIMIT 1"
    ).fetchall()[0][0]
    where = "id BETWEEN 11 AND 13"
    kept = _kept(lake, "demo.t", where)
    assert kept and kept < _all(lake, "demo.t")
    lake.sql("USE lake.demo")
    try:
        for _ in range(2):
            with opened(lake.con) as files:
                assert _rows(lake, f"SELECT count(*) FROM t WHERE {where}") == [(3,)]
            assert files == kept
        assert _rows(lake, f"SELECT count(*) FROM t AT (VERSION => {first})") == [(10,)]
        assert _rows(lake, f"SELECT count(*) FROM demo.t AT (VERSION => {first}) WHERE id < 3") == [(3,)]
        # a CTE shadows the table, as in DuckDB
        assert _rows(lake, "WITH t AS (SELECT 42 AS id) SELECT * FROM t") == [(42,)]
    finally:
        lake.sql(f"USE {database}.main")


def test_duckdbs_own_names_win_and_quoted_dots_are_one_part(lake: Lake) -> None:
    """A DuckDB schema `demo` with a table `t` is what `demo.t` names (for INSERT too); a quoted
    name holding a dot is one part, never `ns`.`t`."""
    con = lake.con
    with pytest.raises(duckdb.Error, match=r"demo\.t"):
        lake.sql('SELECT * FROM "demo.t"')
    with pytest.raises(duckdb.Error):
        lake.sql('SELECT * FROM demo."t.x"')
    con.execute("CREATE SCHEMA demo; CREATE TABLE demo.t AS SELECT 7 AS own")
    try:
        assert _rows(lake, "SELECT * FROM demo.t") == [(7,)]
        lake.sql("INSERT INTO demo.t VALUES (8)")
        assert sorted(con.execute("SELECT * FROM memory.demo.t").fetchall()) == [(7,), (8,)]
        assert len(_rows(lake, "SELECT * FROM lake.demo.t")) == 30
    finally:
        con.execute("DROP SCHEMA demo CASCADE")
    assert len(_rows(lake, "SELECT * FROM demo.t")) == 30


def test_the_tree_finds_references_where_the_grammar_puts_them(lake: Lake) -> None:
    """CTE scope, subqueries in expressions, set operations, PIVOT sources, function arguments."""
    tree = pt.parse_query(
        lake.con,
        "WITH c AS (SELECT * FROM a.b) SELECT (SELECT max(x) FROM s.\"t.u\"), * FROM c, iceberg_scan('n.t') s "
        "WHERE EXISTS (SELECT 1 FROM c AS c2) UNION ALL SELECT * FROM p PIVOT (sum(v) FOR k IN (1, 2)) "
        "UNION ALL FROM read_parquet((SELECT 'f' FROM q))",
    )
    assert tree is not None
    refs = list(pt.table_refs(tree))
    names = sorted(".".join(r.parts) for r in refs if r.kind == pt.BASE_TABLE and not r.is_cte)
    assert names == ["a.b", "p", "q", "s.t.u"]
    assert sorted(r.parts[0] for r in refs if r.kind == pt.BASE_TABLE and r.is_cte) == ["c", "c"]
    assert sorted(r.function for r in refs if r.kind == pt.TABLE_FUNCTION) == ["iceberg_scan", "read_parquet"]
    assert pt.parse_query(lake.con, "INSERT INTO x SELECT 1") is None
    assert pt.parse_query(lake.con, "SELECT 1; SELECT 2") is None


def test_statements_about_a_query_and_write_subqueries_resolve_ns_t_too(lake: Lake) -> None:
    """PREPARE/EXECUTE, EXPLAIN, DESCRIBE of `ns.t`, and a DELETE whose WHERE reads `ns.u`."""
    truth = sorted(lake.con.execute("SELECT * FROM lake.demo.t").fetchall())
    lake.sql("PREPARE by_id AS SELECT * FROM demo.t WHERE id = $1")
    assert _rows(lake, "EXECUTE by_id(4)") == [r for r in truth if r[0] == 4]
    assert "READ_PARQUET" in str(_rows(lake, "EXPLAIN SELECT count(*) FROM demo.t"))
    assert _rows(lake, "DESCRIBE demo.t") == sorted(lake.con.execute("DESCRIBE lake.demo.t").fetchall())
    lake.sql("CREATE TABLE demo.gone AS SELECT * FROM demo.t WHERE id IN (1, 2)")
    try:
        assert _rows(lake, "SELECT count(*) FROM demo.gone") == [(2,)]
        lake.sql("CREATE TABLE demo.t2 AS SELECT * FROM demo.t")
        result = lake.sql("DELETE FROM demo.t2 WHERE id IN (SELECT id FROM demo.gone)")
        assert result is not None and result.fetchall() == [(2,)]
        assert _rows(lake, "SELECT * FROM demo.t2") == [r for r in truth if r[0] not in (1, 2)]
    finally:
        lake.sql("DROP TABLE IF EXISTS demo.gone")
        lake.sql("DROP TABLE IF EXISTS demo.t2")
