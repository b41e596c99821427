"""Pruning never changes results: random data, random predicates, three ways to read.

For every predicate P (hypothesis), on two partitioned v3 tables with deletes (`t`: day and bucket
transforms; `u`: identity partitions on a date, a string with NULLs and an int promoted to long,
over three partition specs; `w`: the day of a date, NULL dates, no deletes; NULLs and NaNs in the
bounds, and a string column `l` longer than the 16 characters its bounds keep, so its lower and
upper bounds are truncated):
- `iceberg_scan(t, prune := false, metadata_columns := true) WHERE P` reads every file, identity
  values by position: the reference answer;
- `iceberg_scan(t, filter := P)` prunes manifests, partitions and files by P;
- `iceberg_scan(t) WHERE P` and `lake.ns.t WHERE P` on a plain connection: DuckDB skips files by
  their identity-partition (and date's day) constants before opening them;
- the same two through `Lake.sql` (the front door), alone and inside a subquery: planned with what
  DuckDB pushes into each reference (a repeated statement reusing that planning; also as the
  query of CREATE TABLE AS into a DuckDB table); users' own views over `lake.ns.t` (temporary,
  persistent, a view over a view, in a CTE, in an IN subquery, a view with the predicate in its
  own WHERE, as the query of CREATE TABLE AS and INSERT ... SELECT, a view in another schema, named
  in full and under `SET search_path`), which the front door inlines;
  SQL `PREPARE` / `EXECUTE` of such statements (also sent as one script, and of an INSERT ... SELECT);
all return the same rows, and the pruned plan's files are a subset of the table's files.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iceduck.duckdb.catalog_views import attach_catalog_views
from iceduck.lake import Lake
from tests.support.peer import sql_string
from tests.support.write_helpers import new_lake

ROWS = 3000
TABLES = ("t", "u", "w")
LONG = "ab" * 7  # column l: LONG, then a, b or c by blocks of rows, "zzzzz" and a number


@pytest.fixture(scope="module")
def pruning_lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    lake = new_lake(Path(tmp_path_factory.mktemp("pruning")) / "wh")
    # (a column named `f` trips the writer's UPDATE, which joins an alias m(f, p): named x here)
    t = lake.create_table(
        "ns.t",
        [("id", "BIGINT"), ("x", "DOUBLE"), ("s", "VARCHAR"), ("d", "DATE"), ("k", "INTEGER"), ("l", "VARCHAR")],
        partition_by=["day(d)", "bucket(3, k)"],
    )
    src = (
        "SELECT i AS id, CASE WHEN i % 17 = 0 THEN NULL WHEN i % 23 = 0 THEN 'NaN'::DOUBLE "
        "ELSE (i % 50) / 4.0 END AS x, CASE WHEN i % 13 = 0 THEN NULL ELSE chr((97 + i % 7)::INTEGER) || (i % 5) END AS s, "
        "DATE '2026-01-01' + ((i // 200) % 6)::INTEGER AS d, (i % 9)::INTEGER AS k, "
        # longer than the 16 characters column bounds keep (truncated lower and upper bounds),
        # told apart within them
        f"CASE WHEN i % 19 = 0 THEN NULL ELSE '{LONG}' || chr((97 + (i // 300) % 3)::INTEGER) || 'zzzzz' || (i % 11) END AS l "
        "FROM range({a}, {b}) t(i)"
    )
    for a in range(0, ROWS, 1000):  # several appends: several files per partition
        t.append(lake.sql(src.format(a=a, b=a + 1000)))
    t.delete("id % 11 = 5")
    t.update({"s": "'zz'"}, "id % 97 = 1")
    u = lake.create_table(
        "ns.u",
        [("id", "BIGINT"), ("x", "DOUBLE"), ("s", "VARCHAR"), ("d", "DATE"), ("k", "INTEGER"), ("l", "VARCHAR")],
        partition_by=["d"],
    )
    u.append(lake.sql(src.format(a=0, b=1000)))
    u.update_spec(["d", "s"])
    u.append(lake.sql(src.format(a=1000, b=2000)))
    with u.update_schema() as change:
        change.widen_column("k", "long")
    u.update_spec(["k"])
    u.append(lake.sql(src.format(a=2000, b=ROWS)))
    u.delete("id % 13 = 4 AND id < 1500")
    # `w`: the day of a date (its value is the date: constants by file name on a plain connection),
    # NULL dates among them, no deletes (so every file takes the constants)
    w = lake.create_table(
        "ns.w",
        [("id", "BIGINT"), ("x", "DOUBLE"), ("s", "VARCHAR"), ("d", "DATE"), ("k", "INTEGER"), ("l", "VARCHAR")],
        partition_by=["day(d)"],
    )
    for a in range(0, ROWS, 1000):
        w.append(
            lake.sql(
                "SELECT * REPLACE (CASE WHEN id % 29 = 0 THEN NULL ELSE d END AS d) "
                f"FROM ({src.format(a=a, b=a + 1000)})"
            )
        )
    attach_catalog_views(lake.con, lake.catalog)
    for name in TABLES:  # users' own views over the lake tables (inlined by the front door)
        lake.con.execute(f"CREATE TEMP VIEW temp_{name} AS SELECT * FROM lake.ns.{name}")
        lake.con.execute(f"CREATE VIEW main_{name} AS SELECT * FROM lake.ns.{name} AS r")
        lake.con.execute(f"CREATE VIEW over_{name} AS SELECT * FROM main_{name} WHERE id > -100")
        lake.con.execute("CREATE SCHEMA IF NOT EXISTS other")
        lake.con.execute(f"CREATE VIEW other.o_{name} AS SELECT * FROM lake.ns.{name}")
    yield lake
    lake.close()


def _lit(column: str, draw: Any) -> str:
    if column == "id":
        return str(draw(st.integers(-10, ROWS + 10)))
    if column == "k":
        return str(draw(st.integers(-1, 10)))
    if column == "x":
        v = draw(st.sampled_from([0.0, 1.25, 5.0, 12.25, 100.0, math.inf, -math.inf]))
        return f"'{v}'::DOUBLE"
    if column == "s":
        return "'" + draw(st.sampled_from(["a0", "b1", "c", "g4", "zz", ""])) + "'"
    if column == "l":  # around the truncated bounds: the 16-character prefix, just above it, whole values
        tail = draw(st.sampled_from(["", "a", "b", "bz", "bzzzzz", "bzzzzz3", "c", "czzzzz10", "d"]))
        return "'" + (LONG[:13] if tail == "d" else LONG + tail) + "'"
    day = dt.date(2026, 1, 1) + dt.timedelta(days=draw(st.integers(-2, 8)))
    return f"DATE '{day.isoformat()}'"


@st.composite
def leaf(draw: Any) -> str:
    column = draw(st.sampled_from(["id", "x", "s", "d", "k", "l"]))
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "in", "null", "between"]))
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
        return f"{column} {op} {_lit(column, draw)}"
    if kind == "in":
        values = ", ".join(_lit(column, draw) for _ in range(draw(st.integers(1, 3))))
        return f"{column} {draw(st.sampled_from(['IN', 'NOT IN']))} ({values})"
    if column == "s" and draw(st.booleans()):
        pattern = draw(st.sampled_from(["a%", "b_", "c", "g4%", "z%", "%1", ""]))
        return f"s {draw(st.sampled_from(['LIKE', 'NOT LIKE']))} '{pattern}'"
    if column == "l" and draw(st.booleans()):
        pattern = draw(st.sampled_from([LONG + "b%", LONG + "bzzzzz1%", LONG + "_zz%", LONG + "c_", "ab%", "b%"]))
        return f"l {draw(st.sampled_from(['LIKE', 'NOT LIKE']))} '{pattern}'"
    if kind == "null":
        return f"{column} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    return f"{column} BETWEEN {_lit(column, draw)} AND {_lit(column, draw)}"


predicates = st.recursive(
    leaf(),
    lambda inner: st.one_of(
        st.builds(lambda a, b: f"({a} AND {b})", inner, inner),
        st.builds(lambda a, b: f"({a} OR {b})", inner, inner),
        st.builds(lambda a: f"(NOT {a})", inner),
    ),
    max_leaves=4,
)


def _rows(runner: duckdb.DuckDBPyConnection | Lake, sql: str) -> list[tuple[Any, ...]]:
    rel = runner.sql(sql)
    assert rel is not None
    rows = [tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in r) for r in rel.fetchall()]
    return sorted(rows, key=repr)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(p=predicates)
def test_pruned_scans_return_the_unpruned_rows(pruning_lake: Lake, p: str) -> None:
    lake = pruning_lake
    con = lake.con
    for name in TABLES:
        loc = sql_string(lake.table(f"ns.{name}").metadata_location)
        full = _rows(
            con,
            f"SELECT * EXCLUDE (_file, _pos) FROM iceberg_scan({loc}, prune := false, metadata_columns := true) "
            f"WHERE {p}",
        )
        ways = {
            "filter :=": (con, f"SELECT * FROM iceberg_scan({loc}, filter := {sql_string(p)})"),
            "WHERE": (con, f"SELECT * FROM iceberg_scan({loc}) WHERE {p}"),
            "view": (con, f"SELECT * FROM lake.ns.{name} WHERE {p}"),
            "Lake.sql WHERE": (lake, f"SELECT * FROM iceberg_scan({loc}) WHERE {p}"),
            "Lake.sql view": (lake, f"SELECT * FROM lake.ns.{name} WHERE {p}"),
            "Lake.sql subquery": (lake, f"SELECT * FROM (SELECT * FROM lake.ns.{name}) AS q WHERE {p}"),
            "Lake.sql temp view": (lake, f"SELECT * FROM temp_{name} WHERE {p}"),
            "Lake.sql view over a view": (lake, f"SELECT * FROM over_{name} AS o WHERE {p}"),
            "Lake.sql CTE over a view": (
                lake,
                f"WITH c AS (SELECT * FROM main_{name}) SELECT * FROM c WHERE {p}",
            ),
            "Lake.sql view in IN": (
                lake,
                f"SELECT * FROM iceberg_scan({loc}) WHERE id IN (SELECT id FROM temp_{name} WHERE {p}) AND {p}",
            ),
        }
        for way, (runner, sql) in ways.items():
            assert _rows(runner, sql) == full, (name, way, p)
        # the front door again: a repeated statement reuses what its first planning learnt
        assert _rows(lake, ways["Lake.sql view"][1]) == full, (name, "Lake.sql view, repeated", p)
        lake.sql(f"CREATE OR REPLACE TEMP TABLE pruned_copy AS SELECT * FROM lake.ns.{name} WHERE {p}")
        assert _rows(con, "SELECT * FROM pruned_copy") == full, (name, "Lake.sql CREATE TABLE AS", p)
        # users' views as the query of CREATE TABLE AS and INSERT ... SELECT into DuckDB tables
        lake.sql(f"CREATE OR REPLACE TEMP TABLE pruned_copy AS SELECT * FROM over_{name} AS o WHERE {p}")
        assert _rows(con, "SELECT * FROM pruned_copy") == full, (name, "Lake.sql CREATE TABLE AS view", p)
        con.execute("DELETE FROM pruned_copy")
        lake.sql(f"INSERT INTO pruned_copy SELECT * FROM temp_{name} WHERE {p}")
        assert _rows(con, "SELECT * FROM pruned_copy") == full, (name, "Lake.sql INSERT ... SELECT view", p)
        # a view in another schema, named in full and under a search path
        assert _rows(lake, f"SELECT * FROM other.o_{name} WHERE {p}") == full, (name, "Lake.sql other schema", p)
        lake.sql("SET search_path = 'other'")
        try:
            assert _rows(lake, f"SELECT * FROM o_{name} WHERE {p}") == full, (name, "Lake.sql search_path", p)
        finally:
            lake.sql("RESET search_path")
        # SQL PREPARE / EXECUTE: the statement DuckDB holds (its own rendering), with and without a parameter
        lake.sql(f"PREPARE pruned_q AS SELECT * FROM lake.ns.{name} WHERE {p} AND id >= $1")
        lake.sql(f"PREPARE pruned_v AS SELECT * FROM temp_{name} WHERE {p}")
        assert _rows(lake, "EXECUTE pruned_q(-1)") == full, (name, "Lake.sql EXECUTE", p)
        assert _rows(lake, "EXECUTE pruned_v") == full, (name, "Lake.sql EXECUTE view", p)
        # the two as one script, and a prepared INSERT ... SELECT into a DuckDB table
        script = f"PREPARE pruned_s AS SELECT * FROM lake.ns.{name} WHERE {p} AND id >= $1; EXECUTE pruned_s(-1)"
        assert _rows(lake, script) == full, (name, "Lake.sql PREPARE; EXECUTE script", p)
        con.execute("DELETE FROM pruned_copy")
        lake.sql(f"PREPARE pruned_i AS INSERT INTO pruned_copy SELECT * FROM temp_{name} WHERE {p} AND id >= $1")
        lake.sql("EXECUTE pruned_i(-1)")
        assert _rows(con, "SELECT * FROM pruned_copy") == full, (name, "Lake.sql EXECUTE INSERT ... SELECT", p)
        # a view with the predicate in its own WHERE, the statement without one
        con.execute(f"CREATE OR REPLACE TEMP VIEW where_{name} AS SELECT * FROM over_{name} WHERE {p}")
        for _ in range(2):
            assert _rows(lake, f"SELECT * FROM where_{name}") == full, (name, "Lake.sql view's own WHERE", p)
        plan = con.execute(
            f"SELECT file_path, kept FROM iceberg_scan_plan({loc}, filter := {sql_string(p)})"
        ).fetchall()
        every = {
            r[0]
            for r in con.execute(f"SELECT file_path FROM iceberg_files({loc}, content := 'data')").fetchall()
        }
        assert {r[0] for r in plan} == every and {r[0] for r in plan if r[1]} <= every


def test_pruning_skips_files_at_each_level(pruning_lake: Lake) -> None:
    lake = pruning_lake
    con = lake.con
    loc = sql_string(lake.table("ns.t").metadata_location)
    levels = dict(
        con.execute(
            f"SELECT skipped_at, count(*) FROM iceberg_scan_plan({loc}, filter := 'd = DATE ''2026-01-03'' AND id < 450') "
            "GROUP BY ALL"
        ).fetchall()
    )
    assert levels.get("partition", 0) > 0 and levels.get("column bounds", 0) > 0, levels
    kept = levels[None]
    assert kept < sum(levels.values())
