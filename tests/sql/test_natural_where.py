"""The WHERE users write prunes files: `iceberg_scan(...) WHERE`, `lake.ns.t`, joins, subqueries,
prepared statements.

Two mechanisms (docs/reading.md "What prunes"): through `Lake.sql` and the shell, the front door
plans each statement once under EXPLAIN to learn what DuckDB pushes into every reference and
rewrites the references to plan with it (manifests, partitions, column bounds); on any connection,
identity-partition values are constants looked up by file name, so DuckDB skips files of other
partitions before opening them. Counted here: the Parquet files opened, by DuckDB (its FileSystem
log) and by Python (an audit hook on open), must be exactly the files the planner keeps.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pytest

from iceduck.duckdb.capture import SCAN_ARGS_UDF
from iceduck.duckdb.context import Context
from iceduck.duckdb.scan import scan_sql_for
from iceduck.expr.expressions import equal
from iceduck.lake import Lake, connect
from iceduck.read.parquet_columns import clear_footer_caches
from iceduck.spec.types import LONG, NestedField, Schema
from iceduck.sql import read_plan
from iceduck.sql.references import References
from tests.support.peer import sql_string
from tests.support.write_helpers import new_lake

DAYS = 5
_PY_OPENED: set[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if (
        _PY_OPENED is not None
        and event == "open"
        and isinstance(args[0], str)
        and args[0].endswith(".parquet")
    ):
        _PY_OPENED.add(os.path.realpath(args[0]))


sys.addaudithook(_audit)  # an audit hook cannot be removed: it records only inside `opened`


@contextmanager
def opened(con: duckdb.DuckDBPyConnection, *, python: bool = True) -> Iterator[set[str]]:
    """The Parquet files opened inside the block, by DuckDB or (unless `python` is False) by Python
    (real paths).

    Only SELECTs run here once FileSystem logging is on (its log entries of queries begun inside
    the block are read), so the block moves no catalog version: the front door may reuse what
    it learnt about a statement across blocks."""
    global _PY_OPENED
    found: set[str] = set()
    ((enabled, types),) = con.execute(
        "SELECT current_setting('enable_logging'), current_setting('enabled_log_types')"
    ).fetchall()
    if not enabled or "FileSystem" not in str(types).split(","):
        con.execute("CALL enable_logging('FileSystem')")
    ((before,),) = con.execute("SELECT coalesce(max(context_id), 0) FROM duckdb_log_contexts()").fetchall()
    _PY_OPENED = found if python else set()
    try:
        yield found
    finally:
        _PY_OPENED = None
        rows = con.execute(
            "SELECT message FROM duckdb_logs() WHERE type = 'FileSystem' AND context_id > ? "
            "AND message LIKE '%.parquet%'",
            [before],
        ).fetchall()
        for (message,) in rows:
            entry = json.loads(message)
            if entry.get("op") == "OPEN":
                found.add(os.path.realpath(entry["path"]))


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    lake = new_lake(Path(tmp_path_factory.mktemp("natural")) / "wh")
    lake.sql("CREATE TABLE ns.byday (id BIGINT, d DATE, s VARCHAR) PARTITIONED BY (d)")
    lake.sql("CREATE TABLE ns.events (id BIGINT, ts TIMESTAMP, v DOUBLE) PARTITIONED BY (day(ts))")
    for part in range(2):  # two files per partition
        lake.sql(
            f"INSERT INTO ns.byday SELECT i, DATE '2024-01-01' + (i % {DAYS})::INTEGER, 's' || (i % 7) "
            f"FROM range({part * 1000}, {part * 1000 + 1000}) t(i)"
        )
        lake.sql(
            f"INSERT INTO ns.events SELECT i, TIMESTAMP '2024-01-01' + to_hours(((i % {DAYS}) * 24 + i % 24)::INTEGER), "
            f"i / 10 FROM range({part * 1000}, {part * 1000 + 1000}) t(i) ORDER BY i"
        )
    yield lake
    lake.close()


def _kept(lake: Lake, table: str, where: str) -> set[str]:
    loc = sql_string(lake.table(table).metadata_location)
    rows = lake.con.execute(
        f"SELECT file_path FROM iceberg_scan_plan({loc}, filter := {sql_string(where)}) WHERE kept"
    ).fetchall()
    return {os.path.realpath(r[0]) for r in rows}


def _all(lake: Lake, table: str) -> set[str]:
    loc = sql_string(lake.table(table).metadata_location)
    rows = lake.con.execute(f"SELECT file_path FROM iceberg_files({loc}, content := 'data')").fetchall()
    return {os.path.realpath(r[0]) for r in rows}


def _count(lake: Lake, table: str, where: str) -> int:
    loc = sql_string(lake.table(table).metadata_location)
    (n,) = lake.con.execute(
        f"SELECT count(*) FROM iceberg_scan({loc}, prune := false) WHERE {where}"
    ).fetchall()[0]
    return int(n)


SELECTIVE = [
    ("ns.byday", "d = DATE '2024-01-03'"),
    ("ns.byday", "d IN (DATE '2024-01-02', DATE '2024-01-05')"),
    ("ns.byday", "d = DATE '2024-01-02' OR d = DATE '2024-01-04'"),
    ("ns.byday", "NOT (d <> DATE '2024-01-01')"),
    ("ns.events", "ts >= TIMESTAMP '2024-01-02' AND ts < TIMESTAMP '2024-01-03'"),
    ("ns.events", "ts >= TIMESTAMP '2024-01-02 05:00' AND ts < TIMESTAMP '2024-01-02 06:00' OR ts IS NULL"),
    ("ns.events", "id BETWEEN 1200 AND 1210"),
]


@pytest.mark.parametrize(("table", "where"), SELECTIVE)
def test_lake_sql_opens_only_the_files_the_planner_keeps(lake: Lake, table: str, where: str) -> None:
    kept = _kept(lake, table, where)
    assert kept and kept < _all(lake, table)
    expected = _count(lake, table, where)
    loc = sql_string(lake.table(table).metadata_location)
    for query in (
        f"SELECT count(*) FROM lake.{table} WHERE {where}",
        f"SELECT count(*) FROM iceberg_scan({loc}) WHERE {where}",
        f"SELECT count(*) FROM (SELECT * FROM lake.{table}) AS sub WHERE {where}",
    ):
        for _ in range(2):  # planned, then what the planning learnt reused
            with opened(lake.con) as files:
                rows = lake.sql(query).fetchall()  # type: ignore[union-attr]
            assert rows == [(expected,)], query
            assert files == kept, query


def test_a_repeated_statement_plans_once_and_again_after_duckdb_changes(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the front door learnt about a statement holds while nothing in DuckDB changes; a view it
    joins redefined on the raw connection (not through Lake.sql) makes it plan again."""
    planned: list[str] = []
    capture = read_plan.capture_statement
    monkeypatch.setattr(read_plan, "capture_statement", lambda *a, **k: planned.append(a[2]) or capture(*a, **k))
    con = lake.con
    query = "SELECT count(*) FROM lake.ns.byday b JOIN main.wanted w ON b.d = w.d"
    try:
        for day in ("2024-01-02", "2024-01-04"):
            # a filter inside the view, which DuckDB carries over the join into lake.ns.byday
            con.execute(
                "CREATE OR REPLACE VIEW main.wanted AS SELECT * FROM (VALUES (DATE '2024-01-02'), "
                f"(DATE '2024-01-04')) t(d) WHERE d = DATE '{day}'"
            )
            where = f"d = DATE '{day}'"
            for _ in range(2):
                with opened(con) as files:
                    rows = lake.sql(query).fetchall()  # type: ignore[union-attr]
                assert rows == [(_count(lake, "ns.byday", where),)], day
                assert files == _kept(lake, "ns.byday", where), day
        assert len(planned) == 2  # once per definition of the view
    finally:
        con.execute("DROP VIEW IF EXISTS main.wanted")


def test_create_table_as_prunes_by_its_query(lake: Lake) -> None:
    """CREATE TABLE <duckdb table> AS SELECT ... FROM lake.ns.t WHERE ...: the WHERE prunes."""
    where = "ts >= TIMESTAMP '2024-01-02' AND ts < TIMESTAMP '2024-01-03'"  # day(ts): no constants
    try:
        with opened(lake.con) as files:
            lake.sql(f"CREATE OR REPLACE TEMP TABLE copied AS SELECT * FROM lake.ns.events WHERE {where}")
        assert files == _kept(lake, "ns.events", where)
        assert lake.con.execute("SELECT count(*) FROM copied").fetchall() == [
            (_count(lake, "ns.events", where),)
        ]
    finally:
        lake.con.execute("DROP TABLE IF EXISTS copied")


def test_identity_partitions_prune_before_opening_on_a_plain_connection(lake: Lake) -> None:
    """No front door: `con.sql` on the lake's connection. DuckDB opens no file of another partition.

    Without the front door the scan is planned before DuckDB pushes the WHERE, so the first scan of
    a table in a process reads every planned file's footer once in Python (does the file carry field
    ids?); that check is cached, and from then on no file of another partition is opened at all.
    The test says so instead of depending on an earlier test having warmed the cache."""
    loc = sql_string(lake.table("ns.byday").metadata_location)
    where = "d IN (DATE '2024-01-02', DATE '2024-01-05')"
    kept = _kept(lake, "ns.byday", where)
    every = _all(lake, "ns.byday")
    assert kept < every
    clear_footer_caches()
    for query in (
        f"SELECT count(*), min(d), max(d) FROM iceberg_scan({loc}) WHERE {where}",
        f"SELECT count(*), min(d), max(d) FROM lake.ns.byday WHERE {where}",
    ):
        for attempt in ("first", "repeat"):
            with opened(lake.con, python=attempt == "repeat") as files:
                rows = lake.con.sql(query).fetchall()
            assert rows == [(_count(lake, "ns.byday", where), dt.date(2024, 1, 2), dt.date(2024, 1, 5))]
            assert files == kept, (query, attempt)


def test_the_day_of_a_date_prunes_before_opening_on_a_plain_connection(lake: Lake) -> None:
    """`PARTITIONED BY (day(d))` on a DATE: the partition value is the date itself, so on a plain
    connection `d` is a constant looked up by file name like an identity partition's, and DuckDB
    opens no file of another day. A timestamp's day (`day(ts)`) is no constant: there every file
    opens (its footer decides), and only the front door prunes."""
    lake.sql("CREATE TABLE ns.daydate (id BIGINT, d DATE) PARTITIONED BY (day(d))")
    try:
        for part in range(2):
            lake.sql(
                f"INSERT INTO ns.daydate SELECT i, DATE '2024-01-01' + (i % {DAYS})::INTEGER "
                f"FROM range({part * 1000}, {part * 1000 + 1000}) t(i)"
            )
        loc = sql_string(lake.table("ns.daydate").metadata_location)
        every = _all(lake, "ns.daydate")
        for where in (
            "d = DATE '2024-01-03'",
            "d >= DATE '2024-01-04'",
            "d IN (DATE '2024-01-02', DATE '2024-01-05')",
            "d BETWEEN DATE '2024-01-02' AND DATE '2024-01-03' AND id % 2 = 0",
        ):
            kept = _kept(lake, "ns.daydate", where)
            assert kept < every, where
            for query in (
                f"SELECT count(*), min(d), max(d) FROM iceberg_scan({loc}) WHERE {where}",
                f"SELECT count(*), min(d), max(d) FROM lake.ns.daydate WHERE {where}",
            ):
                truth = lake.con.execute(
                    f"SELECT count(*), min(d), max(d) FROM iceberg_scan({loc}, prune := false) WHERE {where}"
                ).fetchall()
                lake.con.sql(query).fetchall()  # the first scan of a table reads footers in Python
                with opened(lake.con) as files:
                    rows = lake.con.sql(query).fetchall()
                assert rows == truth and rows[0][0] > 0, query
                assert files == kept, query
        ts_loc = sql_string(lake.table("ns.events").metadata_location)
        lake.con.sql(f"SELECT count(*) FROM iceberg_scan({ts_loc}) WHERE {HOUR}").fetchall()
        with opened(lake.con) as files:
            lake.con.sql(f"SELECT count(*) FROM iceberg_scan({ts_loc}) WHERE {HOUR}").fetchall()
        assert files == _all(lake, "ns.events") > _kept(lake, "ns.events", HOUR)
    finally:
        lake.sql("DROP TABLE IF EXISTS ns.daydate")


def test_full_scans_of_views_read_natively(lake: Lake) -> None:
    """`lake.ns.t` is a view over the same native SQL as iceberg_scan (no Arrow hand-over)."""
    (sql,) = lake.con.execute(
        "SELECT sql FROM duckdb_views() WHERE database_name = 'lake' AND view_name = 'byday'"
    ).fetchall()[0]
    assert "query(" in sql and "__iceduck_view" in sql
    plan = "\n".join(
        str(r[1]) for r in lake.con.execute("EXPLAIN SELECT sum(id) FROM lake.ns.byday").fetchall()
    )
    assert "READ_PARQUET" in plan.upper() and "ARROW" not in plan.upper()


def test_joins_prune_each_side_by_its_own_filters(lake: Lake) -> None:
    day = "d = DATE '2024-01-03'"
    hour = "ts >= TIMESTAMP '2024-01-04' AND ts < TIMESTAMP '2024-01-05'"
    query = (
        "SELECT count(*) FROM lake.ns.byday b JOIN lake.ns.events e ON b.id = e.id "
        "WHERE b.d = DATE '2024-01-03' AND e.ts >= TIMESTAMP '2024-01-04' AND e.ts < TIMESTAMP '2024-01-05'"
    )
    expected = lake.con.execute(
        f"SELECT count(*) FROM iceberg_scan({sql_string(lake.table('ns.byday').metadata_location)}, prune := false) b "
        f"JOIN iceberg_scan({sql_string(lake.table('ns.events').metadata_location)}, prune := false) e ON b.id = e.id "
        "WHERE b.d = DATE '2024-01-03' AND e.ts >= TIMESTAMP '2024-01-04' AND e.ts < TIMESTAMP '2024-01-05'"
    ).fetchall()
    with opened(lake.con) as files:
        assert lake.sql(query).fetchall() == expected  # type: ignore[union-attr]
    assert files == _kept(lake, "ns.byday", day) | _kept(lake, "ns.events", hour)


def test_a_left_joins_right_side_where_is_not_pushed(lake: Lake) -> None:
    """`WHERE e.id IS NULL` after a LEFT JOIN keeps unmatched rows: the right side may not be pruned by it."""
    query = (
        "SELECT count(*) FROM lake.ns.byday b LEFT JOIN lake.ns.events e ON b.id = e.id + 100000 "
        "WHERE e.id IS NULL AND b.d = DATE '2024-01-01'"
    )
    assert lake.sql(query).fetchall() == [(_count(lake, "ns.byday", "d = DATE '2024-01-01'"),)]  # type: ignore[union-attr]


def test_self_join_with_different_filters_reads_the_union(lake: Lake) -> None:
    query = (
        "SELECT count(*) FROM lake.ns.byday a, lake.ns.byday b "
        "WHERE a.id = b.id AND a.d = DATE '2024-01-01' AND b.id < 10"
    )
    expected = lake.con.execute(
        "SELECT count(*) FROM (SELECT * FROM lake.ns.byday) a, (SELECT * FROM lake.ns.byday) b "
        "WHERE a.id = b.id AND a.d = DATE '2024-01-01' AND b.id < 10"
    ).fetchall()
    assert lake.sql(query).fetchall() == expected == [(2,)]  # type: ignore[union-attr]


def test_in_subquery_and_cte(lake: Lake) -> None:
    where = "d = DATE '2024-01-02'"
    n = _count(lake, "ns.byday", where)
    for query in (
        f"SELECT count(*) FROM lake.ns.events WHERE id IN (SELECT id FROM lake.ns.byday WHERE {where})",
        f"WITH x AS (SELECT * FROM lake.ns.byday) SELECT count(*) FROM x WHERE {where}",
    ):
        assert lake.sql(query).fetchall() == [(n,)], query  # type: ignore[union-attr]


def test_prepared_statements_prune_with_their_parameters(lake: Lake) -> None:
    query = "SELECT count(*) FROM lake.ns.byday WHERE d = ?"
    for day in (dt.date(2024, 1, 2), dt.date(2024, 1, 4)):
        where = f"d = DATE '{day.isoformat()}'"
        with opened(lake.con) as files:
            rows = lake.sql(query, [day]).fetchall()  # type: ignore[union-attr]
        assert rows == [(_count(lake, "ns.byday", where),)]
        assert files == _kept(lake, "ns.byday", where)


def test_a_relation_read_again_later_keeps_its_own_filter(lake: Lake) -> None:
    """Relations re-run their text when read: a later statement's pruning must not leak into them."""
    first = lake.sql("SELECT count(*) FROM lake.ns.byday WHERE d = ?", [dt.date(2024, 1, 2)])
    second = lake.sql("SELECT count(*) FROM lake.ns.byday WHERE d = ?", [dt.date(2024, 1, 3)])
    assert first is not None and second is not None
    a = _count(lake, "ns.byday", "d = DATE '2024-01-02'")
    b = _count(lake, "ns.byday", "d = DATE '2024-01-03'")
    assert second.fetchall() == [(b,)] and first.fetchall() == [(a,)] and first.fetchall() == [(a,)]


def test_scan_calls_are_bound_with_the_arguments_duckdb_evaluated(lake: Lake) -> None:
    """An `iceberg_scan` call with literal arguments is rewritten to a call of the scan's UDF with
    the arguments DuckDB evaluated while planning (no macro to bind each time): a repeated
    statement and a relation read again still plan at every bind, so they read a commit made
    behind the connection's back (another lake on the same warehouse) and prune by their WHERE."""
    lake.sql("CREATE TABLE ns.grow (id BIGINT, d DATE) PARTITIONED BY (d)")
    try:
        lake.sql("INSERT INTO ns.grow SELECT i, DATE '2024-01-01' + (i % 3)::INTEGER FROM range(30) t(i)")
        folder = os.path.dirname(os.path.dirname(lake.table("ns.grow").metadata_location))
        other = connect(lake.location)
        where = "d = DATE '2024-01-02' AND id >= 4"
        with opened(lake.con):  # logging on before planning (turning it on moves the catalog version)
            pass
        for arg in (sql_string("ns.grow"), sql_string(folder)):
            query = f"SELECT count(*), sum(id) FROM iceberg_scan({arg}, prune := true) WHERE {where}"
            rel = lake.sql(query)
            assert rel is not None
            text = rel.sql_query()
            assert SCAN_ARGS_UDF in text and "__iceduck_scan_pruned" not in text, text
            expected = _truth(lake, "ns.grow", where)
            assert rel.fetchall() == expected
            other.sql("INSERT INTO ns.grow SELECT i, DATE '2024-01-02' FROM range(100, 103) t(i)")
            grown = _truth(lake, "ns.grow", where)
            assert grown != expected
            assert rel.fetchall() == grown  # the relation binds again: the latest commit
            with opened(lake.con) as files:
                again = lake.sql(query)
                assert again is not None and again.sql_query() == text  # the planning reused
                assert again.fetchall() == grown
            assert files == _kept(lake, "ns.grow", where)
        other.close()
    finally:
        lake.sql("DROP TABLE ns.grow")


def test_scan_calls_keep_the_macro_for_arguments_evaluated_at_each_bind(lake: Lake) -> None:
    """A parameter, an expression or a time (whose text means another instant in another time
    zone) in the arguments keeps the twin macro, which evaluates them each time the text binds."""
    loc = sql_string(lake.table("ns.byday").metadata_location)
    where = "d = DATE '2024-01-03'"
    ((snapshot,),) = lake.con.execute(f"SELECT snapshot_id FROM iceberg_snapshots({loc}) WHERE is_current").fetchall()
    for args, params in (
        (f"{loc}, snapshot_id := ?", [snapshot]),
        (f"{loc}, snapshot_id := {snapshot} + 0", None),
        (f"{loc}, as_of := '2999-01-01 00:00:00'", None),
    ):
        rel = lake.sql(f"SELECT count(*), sum(id) FROM iceberg_scan({args}) WHERE {where}", params)
        assert rel is not None
        assert "__iceduck_scan_pruned" in rel.sql_query() and SCAN_ARGS_UDF not in rel.sql_query(), args
        assert rel.fetchall() == _truth(lake, "ns.byday", where), args


def test_scan_calls_read_the_session_time_zone_at_each_bind(lake: Lake) -> None:
    """A relation over iceberg_scan(...) WHERE <TIMESTAMPTZ literal>, read again after SET TimeZone,
    plans without the pruning captured in the old zone (the rewritten call reads the zone)."""
    lake.sql("CREATE TABLE ns.tz2 (id BIGINT, t TIMESTAMPTZ) PARTITIONED BY (hour(t))")
    lake.sql(
        "INSERT INTO ns.tz2 SELECT i, TIMESTAMPTZ '2024-01-01 00:00:00+00' + to_hours(i::INTEGER) FROM range(6) t(i)"
    )
    loc = sql_string(lake.table("ns.tz2").metadata_location)
    try:
        lake.sql("SET TimeZone = 'UTC'")
        rel = lake.sql(f"SELECT id FROM iceberg_scan({loc}) WHERE t = '2024-01-01 03:00:00'::TIMESTAMPTZ")
        assert rel is not None and SCAN_ARGS_UDF in rel.sql_query()
        assert rel.fetchall() == [(3,)]
        lake.sql("SET TimeZone = 'Etc/GMT-2'")  # UTC+2: the same text names 01:00 UTC
        assert rel.fetchall() == [(1,)]
    finally:
        lake.sql("SET TimeZone = 'UTC'")
        lake.sql("DROP TABLE ns.tz2")


def _truth(lake: Lake, table: str, where: str) -> list[tuple[Any, ...]]:
    loc = sql_string(lake.table(table).metadata_location)
    return lake.con.execute(
        f"SELECT count(*), sum(id) FROM iceberg_scan({loc}, prune := false) WHERE {where}"
    ).fetchall()


def test_session_time_zone_changes_are_respected(lake: Lake) -> None:
    """A TIMESTAMPTZ literal means another instant in another zone: a relation re-read after SET
    TimeZone plans again without the pruning captured in the old zone."""
    lake.sql("CREATE TABLE ns.tz (id BIGINT, t TIMESTAMPTZ) PARTITIONED BY (hour(t))")
    lake.sql(
        "INSERT INTO ns.tz SELECT i, TIMESTAMPTZ '2024-01-01 00:00:00+00' + to_hours(i::INTEGER) FROM range(6) t(i)"
    )
    try:
        lake.sql("SET TimeZone = 'UTC'")
        rel = lake.sql("SELECT count(*) FROM lake.ns.tz WHERE t = '2024-01-01 03:00:00'::TIMESTAMPTZ")
        assert rel is not None and rel.fetchall() == [(1,)]
        lake.sql("SET TimeZone = 'Etc/GMT-2'")  # UTC+2: the same text names 01:00 UTC
        assert rel.fetchall() == [(1,)]
        got = lake.sql("SELECT id FROM lake.ns.tz WHERE t = '2024-01-01 03:00:00'::TIMESTAMPTZ")
        assert got is not None and got.fetchall() == [(1,)]
    finally:
        lake.sql("SET TimeZone = 'UTC'")
        lake.sql("DROP TABLE ns.tz")


def test_volatile_functions_give_the_right_rows(lake: Lake) -> None:
    """A filter folded from current_date is not kept for later runs; the rows are right either way."""
    days = (dt.date.today() - dt.date(2024, 1, 3)).days
    rel = lake.sql(f"SELECT count(*) FROM lake.ns.byday WHERE d = current_date - {days}")
    assert rel is not None
    assert rel.fetchall() == rel.fetchall() == [(_count(lake, "ns.byday", "d = DATE '2024-01-03'"),)]


def test_like_prefix_prunes_through_the_front_door(lake: Lake) -> None:
    """DuckDB never offers LIKE to a scan: the front door plans `s LIKE 'p%'` with the range it
    implies (byte-wise), which prunes by bounds and partitions; the rows come from the LIKE itself."""
    lake.sql("CREATE TABLE ns.names (id BIGINT, s VARCHAR) PARTITIONED BY (truncate(1, s))")
    try:
        lake.sql("INSERT INTO ns.names SELECT i, chr(97 + (i % 5)::INTEGER) || i FROM range(500) t(i)")
        lake.sql("INSERT INTO ns.names VALUES (1000, NULL), (1001, 'b'), (1002, 'bzz'), (1003, 'c')")
        n = _count(lake, "ns.names", "s LIKE 'b%'")
        assert n == 102
        kept = _kept(lake, "ns.names", "s >= 'b' AND s < 'c'")
        assert kept and kept < _all(lake, "ns.names")
        for query in (
            "SELECT count(*) FROM lake.ns.names WHERE s LIKE 'b%'",
            "SELECT count(*) FROM lake.ns.names WHERE id >= 0 AND (s LIKE 'b%' OR s LIKE 'b_')",
        ):
            with opened(lake.con) as files:
                rows = lake.sql(query).fetchall()  # type: ignore[union-attr]
            assert rows == [(n,)] and files == kept, query
        for query, where in (
            ("SELECT count(*) FROM lake.ns.names WHERE NOT s LIKE 'b%'", "NOT s LIKE 'b%'"),
            ("SELECT count(*) FROM lake.ns.names WHERE s NOT LIKE 'b%'", "s NOT LIKE 'b%'"),
            ("SELECT count(*) FROM lake.ns.names WHERE id::VARCHAR LIKE '1%'", "id::VARCHAR LIKE '1%'"),
            ("SELECT count(*) FROM lake.ns.names WHERE s LIKE 'b!%%' ESCAPE '!'", "s LIKE 'b!%%' ESCAPE '!'"),
        ):
            assert lake.sql(query).fetchall() == [(_count(lake, "ns.names", where),)], query  # type: ignore[union-attr]
    finally:
        lake.sql("DROP TABLE ns.names")


def test_a_captured_predicate_holds_only_for_the_schema_it_was_captured_with(lake: Lake) -> None:
    """A statement planned before a commit changed the table's schema (behind this connection's
    back) must not prune the new schema by it: the scan reads every file then."""

    table = lake.table("ns.byday")
    loc = table.metadata_location
    loaded = Context(lake.catalog).table({"tbl": loc})
    predicate = equal("d", dt.date(2024, 1, 3))
    schema = table.schema
    other = Schema(fields=(NestedField(99, "d", LONG),), schema_id=schema.schema_id)
    pruned = scan_sql_for(loaded, extra=(predicate, schema))
    assert scan_sql_for(loaded, extra=(predicate, other)) == scan_sql_for(loaded) != pruned


def _constant(value: Any) -> Any:
    def give() -> Any:
        return value

    return give


def test_a_statement_calling_a_python_udf_plans_each_time(lake: Lake) -> None:
    """DuckDB folds a Python UDF into the constant it pushes, and registering the UDF anew does not
    move DuckDB's catalog version: a statement calling one is planned again every time it runs."""
    con = lake.con
    query = "SELECT count(*) FROM lake.ns.byday WHERE d = wanted_day()"
    try:
        for day in (dt.date(2024, 1, 2), dt.date(2024, 1, 4)):
            with contextlib.suppress(Exception):
                con.remove_function("wanted_day")
            con.create_function("wanted_day", _constant(day), [], "DATE")
            where = f"d = DATE '{day.isoformat()}'"
            for _ in range(2):
                with opened(con) as files:
                    rows = lake.sql(query).fetchall()  # type: ignore[union-attr]
                assert rows == [(_count(lake, "ns.byday", where),)], day
                assert files == _kept(lake, "ns.byday", where), day
    finally:
        with contextlib.suppress(Exception):
            con.remove_function("wanted_day")


# -- every way users query: their own views, joins, subqueries, CTEs, parameters, the shell ------

HOUR = "ts >= TIMESTAMP '2024-01-02 05:00' AND ts < TIMESTAMP '2024-01-02 06:00'"  # day(ts): no constants


def _prunes(lake: Lake, query: str, params: Any, files: set[str], expected: Any) -> None:
    """`query` through Lake.sql, planned and then repeated: the expected rows, only `files` opened."""
    for attempt in ("planned", "repeated"):
        with opened(lake.con) as got:
            rows = lake.sql(query, params).fetchall()  # type: ignore[union-attr]
        assert rows == expected, (query, attempt)
        assert got == files, (query, attempt)


@contextmanager
def _views(lake: Lake, *definitions: str) -> Iterator[None]:
    """User views (CREATE [TEMP] VIEW name AS ...) made on the raw connection, dropped afterwards."""
    names = []
    try:
        for definition in definitions:
            lake.con.execute(definition)
            names.append(definition.split(" VIEW ", 1)[1].split()[0].split("(")[0])
        yield
    finally:
        for name in reversed(names):
            lake.con.execute(f"DROP VIEW IF EXISTS {name}")


def test_users_own_views_over_lake_tables_prune(lake: Lake) -> None:
    """A user's DuckDB view over `lake.ns.t` (temp or persistent, a view over a view, a view with a
    WHERE of its own, a view over iceberg_scan): the WHERE on it prunes like one on the table."""
    loc = sql_string(lake.table("ns.events").metadata_location)
    kept = _kept(lake, "ns.events", HOUR)
    assert kept and kept < _all(lake, "ns.events")
    n = _count(lake, "ns.events", HOUR)
    with _views(
        lake,
        "CREATE TEMP VIEW tv AS SELECT * FROM lake.ns.events",
        "CREATE VIEW pv AS SELECT id, ts, v * 2 AS v2 FROM lake.ns.events",
        "CREATE VIEW nv AS SELECT * FROM pv WHERE id >= 0",
        f"CREATE VIEW hourv AS SELECT * FROM lake.ns.events WHERE {HOUR}",
        f"CREATE TEMP VIEW sv(i, t) AS SELECT id, ts FROM iceberg_scan({loc})",
        "CREATE VIEW main.qv AS SELECT e.id, e.ts FROM lake.ns.events AS e",
    ):
        for query in (
            f"SELECT count(*) FROM tv WHERE {HOUR}",
            f"SELECT count(*) FROM pv WHERE {HOUR}",
            f"SELECT count(*) FROM nv AS x WHERE {HOUR.replace('ts', 'x.ts')}",
            "SELECT count(*) FROM hourv",
            "SELECT count(*) FROM hourv WHERE id >= 0",
            f"SELECT count(*) FROM sv WHERE {HOUR.replace('ts', 't')}",
            f"SELECT count(*) FROM main.qv WHERE {HOUR}",
            f"SELECT count(*) FROM (SELECT * FROM tv) AS q WHERE {HOUR}",
        ):
            _prunes(lake, query, None, kept, [(n,)])


def test_joins_prune_by_filters_on_either_side_and_on_the_join_key(lake: Lake) -> None:
    """DuckDB carries filters over an inner join's equal keys: a filter on one side's key prunes
    the other side too; filters on the right side prune it."""
    byday = "d = DATE '2024-01-03'"
    e_loc = sql_string(lake.table("ns.events").metadata_location)
    b_loc = sql_string(lake.table("ns.byday").metadata_location)

    def expect(where: str) -> Any:
        return lake.con.execute(
            f"SELECT count(*) FROM iceberg_scan({b_loc}, prune := false) b "
            f"JOIN iceberg_scan({e_loc}, prune := false) e ON b.id = e.id WHERE {where}"
        ).fetchall()

    right = f"e.{HOUR.replace(' AND ts', ' AND e.ts')}"
    _prunes(
        lake,
        f"SELECT count(*) FROM lake.ns.byday b JOIN lake.ns.events e ON b.id = e.id WHERE {right}",
        None,
        _all(lake, "ns.byday") | _kept(lake, "ns.events", HOUR),
        expect(right),
    )
    _prunes(
        lake,
        f"SELECT count(*) FROM lake.ns.events e JOIN lake.ns.byday b ON b.id = e.id WHERE b.{byday}",
        None,
        _all(lake, "ns.events") | _kept(lake, "ns.byday", byday),
        expect(f"b.{byday}"),
    )
    key = "b.id BETWEEN 1200 AND 1210"
    _prunes(
        lake,
        f"SELECT count(*) FROM lake.ns.byday b JOIN lake.ns.events e ON b.id = e.id WHERE {key}",
        None,
        _kept(lake, "ns.byday", "id BETWEEN 1200 AND 1210")
        | _kept(lake, "ns.events", "id BETWEEN 1200 AND 1210"),
        expect(key),
    )
    with _views(lake, "CREATE TEMP VIEW ev AS SELECT * FROM lake.ns.events"):
        _prunes(
            lake,
            f"SELECT count(*) FROM lake.ns.byday b JOIN ev e ON b.id = e.id WHERE {right}",
            None,
            _all(lake, "ns.byday") | _kept(lake, "ns.events", HOUR),
            expect(right),
        )


def test_in_subqueries_and_ctes_prune(lake: Lake) -> None:
    n = _count(lake, "ns.events", HOUR)
    kept = _kept(lake, "ns.events", HOUR)
    day = "d = DATE '2024-01-02'"
    _prunes(
        lake,
        f"SELECT count(*) FROM lake.ns.byday WHERE id IN (SELECT id FROM lake.ns.events WHERE {HOUR})",
        None,
        _all(lake, "ns.byday") | kept,
        lake.con.execute(
            f"SELECT count(*) FROM lake.ns.byday WHERE id IN (SELECT id FROM lake.ns.events WHERE {HOUR})"
        ).fetchall(),
    )
    for query in (
        f"WITH x AS (SELECT * FROM lake.ns.events) SELECT count(*) FROM x WHERE {HOUR}",
        f"WITH x AS MATERIALIZED (SELECT * FROM lake.ns.events WHERE {HOUR}) SELECT count(*) FROM x",
        f"SELECT count(*) FROM lake.ns.events WHERE {HOUR} AND EXISTS (SELECT 1 FROM lake.ns.byday WHERE {day})",
    ):
        files = kept | (_kept(lake, "ns.byday", day) if "EXISTS" in query else set())
        _prunes(lake, query, None, files, [(n,)])
    with _views(lake, "CREATE TEMP VIEW tv AS SELECT * FROM lake.ns.events"):
        _prunes(lake, f"WITH x AS (SELECT * FROM tv) SELECT count(*) FROM x WHERE {HOUR}", None, kept, [(n,)])


def test_prepared_statements_with_numbered_and_question_mark_parameters(lake: Lake) -> None:
    start, end = dt.datetime(2024, 1, 2, 5), dt.datetime(2024, 1, 2, 6)
    n = _count(lake, "ns.events", HOUR)
    kept = _kept(lake, "ns.events", HOUR)
    _prunes(
        lake, "SELECT count(*) FROM lake.ns.events WHERE ts >= $1 AND ts < $2", [start, end], kept, [(n,)]
    )
    _prunes(lake, "SELECT count(*) FROM lake.ns.events WHERE ts >= ? AND ts < ?", [start, end], kept, [(n,)])
    with _views(lake, "CREATE TEMP VIEW tv AS SELECT * FROM lake.ns.events"):
        _prunes(lake, "SELECT count(*) FROM tv WHERE ts >= $1 AND ts < $2", [start, end], kept, [(n,)])
        other = "ts >= TIMESTAMP '2024-01-03 05:00' AND ts < TIMESTAMP '2024-01-03 06:00'"
        _prunes(
            lake,
            "SELECT count(*) FROM tv WHERE ts >= $1 AND ts < $2",
            [dt.datetime(2024, 1, 3, 5), dt.datetime(2024, 1, 3, 6)],
            _kept(lake, "ns.events", other),
            [(_count(lake, "ns.events", other),)],
        )


def test_a_view_whose_meaning_cannot_be_kept_runs_as_written(lake: Lake) -> None:
    """Where a user view's text might mean something else inlined (a CTE of the statement named
    like a table the view reads, a view in another schema), the statement runs as written: DuckDB's
    own answer."""
    con = lake.con
    n = _count(lake, "ns.events", HOUR)
    con.execute("CREATE SCHEMA IF NOT EXISTS other")
    con.execute("CREATE TABLE other.small AS SELECT 1 AS id")
    con.execute("CREATE TEMP TABLE small AS SELECT 1301 AS id")  # a row of HOUR
    try:
        with _views(
            lake,
            "CREATE TEMP VIEW tv AS SELECT * FROM lake.ns.events WHERE id NOT IN (SELECT id FROM small)",
            "CREATE VIEW other.ov AS SELECT * FROM lake.ns.events WHERE id NOT IN (SELECT id FROM small)",
        ):
            try:
                without = _count(lake, "ns.events", f"{HOUR} AND id <> 1301")
                assert without == n - 1
                # the CTE `small` is not what the view reads
                rows = lake.sql(
                    f"WITH small AS (SELECT 99999 AS id) SELECT count(*) FROM tv WHERE {HOUR}"
                ).fetchall()  # type: ignore[union-attr]
                assert rows == [(without,)]
                # a view in another schema, `small` in two schemas: DuckDB's own binding decides
                rows = lake.sql(f"SELECT count(*) FROM other.ov WHERE {HOUR}").fetchall()  # type: ignore[union-attr]
                assert rows == con.execute(f"SELECT count(*) FROM other.ov WHERE {HOUR}").fetchall()
            finally:
                con.execute("DROP TABLE IF EXISTS small")
        # a temp table named like a persistent view: the statement's `shade` is the temp table
        with _views(lake, "CREATE VIEW main.shade AS SELECT * FROM lake.ns.events"):
            con.execute("CREATE TEMP TABLE shade AS SELECT 1 AS id, TIMESTAMP '2024-01-02 05:30' AS ts")
            try:
                assert lake.sql(f"SELECT count(*) FROM shade WHERE {HOUR}").fetchall() == [(1,)]  # type: ignore[union-attr]
                assert lake.sql(f"SELECT count(*) FROM main.shade WHERE {HOUR}").fetchall() == [(1,)]  # type: ignore[union-attr]
                assert lake.sql(f"SELECT count(*) FROM memory.main.shade WHERE {HOUR}").fetchall() == [(n,)]  # type: ignore[union-attr]
            finally:
                con.execute("DROP TABLE IF EXISTS shade")
    finally:
        con.execute("DROP SCHEMA IF EXISTS other CASCADE")


def test_the_shell_prunes_a_users_view(
    lake: Lake, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`iceduck -c`: the same front door (DuckDB's own file log, read in the shell's session), for a
    user's view and for SQL PREPARE / EXECUTE."""
    from iceduck.cli import main

    warehouse = Path(lake.table("ns.events").metadata_location).parents[3]
    kept = _kept(lake, "ns.events", HOUR)
    count_opened = (
        "SELECT count(DISTINCT json_extract_string(message, '$.path')) AS opened FROM duckdb_logs() "
        "WHERE type = 'FileSystem' AND message LIKE '%OPEN%' AND message LIKE '%.parquet%'"
    )
    statements = [
        "CREATE TEMP VIEW tv AS SELECT * FROM lake.ns.events",
        "CALL enable_logging('FileSystem')",
        f"SELECT count(*) AS n FROM tv WHERE {HOUR}",
        count_opened,
        "PREPARE q AS SELECT count(*) AS m FROM lake.ns.events WHERE ts >= $1 AND ts < $2",
        "EXECUTE q(TIMESTAMP '2024-01-02 05:00', TIMESTAMP '2024-01-02 06:00')",
        count_opened,
    ]
    args = ["--warehouse", str(warehouse), "--mode", "csv"]
    for s in statements:
        args += ["-c", s]
    capsys.readouterr()
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"n\n{_count(lake, 'ns.events', HOUR)}\n" in out
    assert f"m\n{_count(lake, 'ns.events', HOUR)}\n" in out  # SQL PREPARE / EXECUTE in the shell
    assert out.count(f"opened\n{len(kept)}\n") == 2


def test_a_plain_connection_prunes_a_users_view_by_identity_partitions(lake: Lake) -> None:
    """No front door (`register(con)` style: the raw connection): a user view over `lake.ns.t`
    still skips other identity partitions' files before opening them."""
    where = "d = DATE '2024-01-03'"
    kept = _kept(lake, "ns.byday", where)
    with _views(lake, "CREATE TEMP VIEW bv AS SELECT * FROM lake.ns.byday"):
        lake.con.sql(f"SELECT count(*) FROM bv WHERE {where}").fetchall()  # footers checked once
        with opened(lake.con, python=False) as files:
            rows = lake.con.sql(f"SELECT count(*) FROM bv WHERE {where}").fetchall()
        assert rows == [(_count(lake, "ns.byday", where),)]
        assert files == kept


def test_a_statement_over_a_users_view_plans_once(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    """The inlined statement is kept like any other: repeats reuse its planning."""
    planned: list[str] = []
    capture = read_plan.capture_statement
    monkeypatch.setattr(read_plan, "capture_statement", lambda *a, **k: planned.append(a[2]) or capture(*a, **k))
    with _views(lake, "CREATE TEMP VIEW once(i, t) AS SELECT id, ts FROM lake.ns.events"):
        query = f"SELECT count(*) FROM once WHERE {HOUR.replace('ts', 't')}"
        _prunes(lake, query, None, _kept(lake, "ns.events", HOUR), [(_count(lake, "ns.events", HOUR),)])
        lake.sql(query).fetchall()  # type: ignore[union-attr]
    assert len(planned) == 1


def test_statements_on_duckdb_tables_alone_do_not_read_the_views(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement naming no lake table and no view that could hold one is not planned: after a
    write to a DuckDB table (which moves DuckDB's catalog version) it reads no view's SQL."""
    settled: list[int] = []
    real = read_plan.ReadPlan.settle
    monkeypatch.setattr(read_plan.ReadPlan, "settle", lambda self: settled.append(1) or real(self))
    with _views(lake, "CREATE TEMP VIEW tv AS SELECT * FROM lake.ns.events"):
        lake.sql("CREATE TEMP TABLE plain_t (x INT)")
        try:
            for i in range(3):
                lake.sql(f"INSERT INTO plain_t VALUES ({i})")
                assert lake.sql("SELECT count(*) FROM plain_t WHERE x >= 0").fetchall() == [(i + 1,)]  # type: ignore[union-attr]
            assert settled == []
            lake.sql(f"SELECT count(*) FROM tv WHERE {HOUR}").fetchall()  # type: ignore[union-attr]
            assert settled == [1]
        finally:
            lake.con.execute("DROP TABLE IF EXISTS plain_t")


def _source_files(files: set[str], lake: Lake, table: str) -> set[str]:
    """The opened files that belong to `table` (a write also opens the files it wrote)."""
    folder = os.path.realpath(lake.table(table).location.removeprefix("file://"))
    return {f for f in files if f.startswith(folder + os.sep)}


def test_a_users_view_prunes_inside_insert_select_and_create_table_as(lake: Lake) -> None:
    """A user's view (and `lake.ns.t`) as the query of INSERT ... SELECT or CREATE TABLE AS, into a
    DuckDB table or an Iceberg one: the WHERE prunes, and the rows written are the unpruned rows."""
    kept = _kept(lake, "ns.events", HOUR)
    assert kept < _all(lake, "ns.events")
    loc = sql_string(lake.table("ns.events").metadata_location)
    truth = sorted(
        lake.con.execute(f"SELECT * FROM iceberg_scan({loc}, prune := false) WHERE {HOUR}").fetchall()
    )
    assert truth
    con = lake.con
    con.execute("CREATE TEMP TABLE dst (id BIGINT, ts TIMESTAMP, v DOUBLE)")
    lake.sql("CREATE TABLE ns.sink (id BIGINT, ts TIMESTAMP, v DOUBLE)")
    try:
        with _views(
            lake,
            "CREATE TEMP VIEW tv AS SELECT * FROM lake.ns.events",
            "CREATE VIEW pv(i, t, w) AS SELECT id, ts, v FROM lake.ns.events",
        ):
            pv_where = HOUR.replace("ts", "t")
            statements = [
                (f"INSERT INTO dst SELECT * FROM tv WHERE {HOUR}", "dst"),
                (f"INSERT INTO dst (id, ts, v) SELECT i, t, w FROM pv WHERE {pv_where}", "dst"),
                (f"INSERT INTO dst BY NAME SELECT v, id, ts FROM tv WHERE {HOUR}", "dst"),
                (f"INSERT INTO dst WITH c AS (SELECT * FROM tv) SELECT * FROM c WHERE {HOUR}", "dst"),
                (f"CREATE OR REPLACE TEMP TABLE copied AS SELECT * FROM tv WHERE {HOUR}", "copied"),
                (f"CREATE OR REPLACE TEMP TABLE copied AS SELECT i, t, w FROM pv WHERE {pv_where}", "copied"),
                (f"INSERT INTO lake.ns.sink SELECT * FROM tv WHERE {HOUR}", "lake.ns.sink"),
                (f"INSERT INTO ns.sink SELECT i, t, w FROM pv WHERE {pv_where}", "lake.ns.sink"),
                (f"INSERT INTO lake.ns.sink SELECT * FROM lake.ns.events WHERE {HOUR}", "lake.ns.sink"),
            ]
            for statement, target in statements:
                if target == "dst":
                    con.execute("DELETE FROM dst")
                elif target == "lake.ns.sink":
                    lake.sql("DELETE FROM lake.ns.sink")
                with opened(con) as files:
                    lake.sql(statement)
                assert _source_files(files, lake, "ns.events") == kept, statement
                assert sorted(con.execute(f"SELECT * FROM {target}").fetchall()) == truth, statement
            with opened(con) as files:
                lake.sql(f"CREATE TABLE ns.made AS SELECT * FROM tv WHERE {HOUR}")
            assert _source_files(files, lake, "ns.events") == kept
            assert sorted(con.execute("SELECT * FROM lake.ns.made").fetchall()) == truth
    finally:
        con.execute("DROP TABLE IF EXISTS dst")
        con.execute("DROP TABLE IF EXISTS copied")
        lake.sql("DROP TABLE IF EXISTS ns.sink")
        lake.sql("DROP TABLE IF EXISTS ns.made")


def test_sql_prepare_and_execute_prune_like_a_literal_statement(lake: Lake) -> None:
    """`PREPARE q AS ...; EXECUTE q(...)` through Lake.sql: EXECUTE plans the statement DuckDB holds
    under that name with the arguments' values, so it prunes like the statement with literals (a
    `day(ts)` partition: no identity constants to fall back on)."""
    con = lake.con
    start, end = "TIMESTAMP '2024-01-02 05:00'", "TIMESTAMP '2024-01-02 06:00'"
    kept = _kept(lake, "ns.events", HOUR)
    n = _count(lake, "ns.events", HOUR)
    loc = sql_string(lake.table("ns.events").metadata_location)
    prepared = {
        "p_pos": "SELECT count(*) FROM lake.ns.events WHERE ts >= $1 AND ts < $2",
        "p_q": f"SELECT count(*) FROM iceberg_scan({loc}) WHERE ts >= ? AND ts < ?",
        "p_named": "SELECT count(*) FROM lake.ns.events WHERE ts >= $lo AND ts < $hi",
        "p_view": "SELECT count(*) FROM tv WHERE ts >= $1 AND ts < $2",
        "p_none": f"SELECT count(*) FROM lake.ns.events WHERE {HOUR}",
        '"P Quoted"': "SELECT count(*) FROM lake.ns.events WHERE ts >= $1 AND ts < $2",
    }
    executes = [
        f"EXECUTE p_pos({start}, {end})",
        f"EXECUTE P_POS({start}, {end});",
        "EXECUTE p_pos('2024-01-02 05:00', CAST('2024-01-02 06:00' AS TIMESTAMP))",
        f"EXECUTE p_q({start}, {end})",
        f"EXECUTE p_named(lo := {start}, hi := {end})",
        f"EXECUTE p_view({start}, {end})",
        "EXECUTE p_none",
        f'EXECUTE "P Quoted"({start}, {end})',
    ]
    with _views(lake, "CREATE TEMP VIEW tv AS SELECT * FROM lake.ns.events"):
        try:
            for name, query in prepared.items():
                lake.sql(f"PREPARE {name} AS {query}")
            for statement in executes:
                _prunes(lake, statement, None, kept, [(n,)])
            # the shell's way: one script of statements
            rows = lake.sql(f"PREPARE p_script AS {prepared['p_pos']}; EXECUTE p_script({start}, {end})")
            assert rows is not None and rows.fetchall() == [(n,)]
        finally:
            for name in [*prepared, "p_script"]:
                con.execute(f"DEALLOCATE PREPARE {name}")


def test_execute_runs_what_duckdb_holds_under_the_name(lake: Lake) -> None:
    """EXECUTE reads the statement from DuckDB at each run: prepared again on the raw connection,
    shadowed by a temporary table made after PREPARE, or given arguments whose values Python cannot
    carry exactly (they run as written), EXECUTE gives DuckDB's own answer."""
    con = lake.con
    n = _count(lake, "ns.events", HOUR)
    lake.sql("PREPARE p_again AS SELECT count(*) FROM lake.ns.events WHERE ts >= $1 AND ts < $2")
    args = "(TIMESTAMP '2024-01-02 05:00', TIMESTAMP '2024-01-02 06:00')"
    try:
        assert lake.sql(f"EXECUTE p_again{args}").fetchall() == [(n,)]  # type: ignore[union-attr]
        con.execute("PREPARE p_again AS SELECT count(*) * 10 FROM lake.ns.events WHERE ts >= $1 AND ts < $2")
        assert lake.sql(f"EXECUTE p_again{args}").fetchall() == [(n * 10,)]  # type: ignore[union-attr]
        con.execute("CREATE TABLE small AS SELECT 1 AS id")
        con.execute(
            "PREPARE p_again AS SELECT count(*) FROM small JOIN lake.ns.events e ON e.id = small.id "
            "WHERE e.id >= $1 AND e.id < $2"
        )
        con.execute("CREATE TEMP TABLE small AS SELECT 1 AS id UNION ALL SELECT 2")  # made after PREPARE
        try:
            assert lake.sql("EXECUTE p_again(0, 5)").fetchall() == con.execute("EXECUTE p_again(0, 5)").fetchall() == [(2,)]  # type: ignore[union-attr]
        finally:
            con.execute("DROP TABLE temp.small")
            con.execute("DROP TABLE main.small")
        # values Python does not carry exactly: DuckDB's EXECUTE runs them
        con.execute(
            "PREPARE p_again AS SELECT $1 AS v, typeof($1) AS t, count(*) AS n FROM lake.ns.events WHERE id < 10"
        )
        for arg in ("INTERVAL 1 MONTH", "1::HUGEINT", "TIMESTAMP_NS '2024-01-01 00:00:00.123456789'", "2.5", "'x'"):
            assert lake.sql(f"EXECUTE p_again({arg})").fetchall() == con.execute(f"EXECUTE p_again({arg})").fetchall(), arg  # type: ignore[union-attr]
        with pytest.raises(duckdb.Error):
            lake.sql("EXECUTE p_missing(1)")
    finally:
        con.execute("DEALLOCATE PREPARE p_again")


def test_a_script_runs_statement_by_statement_and_each_prunes(lake: Lake) -> None:
    """`PREPARE q AS ...; EXECUTE q(...)` sent as ONE Lake.sql text prunes like the two statements
    sent apart (the script runs statement by statement, each planned as it would be alone), and so
    does every query of a script; a query before the last is run to its end, as DuckDB runs it."""
    kept = _kept(lake, "ns.events", HOUR)
    assert kept < _all(lake, "ns.events")
    n = _count(lake, "ns.events", HOUR)
    start, end = "TIMESTAMP '2024-01-02 05:00'", "TIMESTAMP '2024-01-02 06:00'"
    con = lake.con
    scripts = [
        f"PREPARE p_one AS SELECT count(*) FROM lake.ns.events WHERE ts >= $1 AND ts < $2; EXECUTE p_one({start}, {end})",
        f"PREPARE p_one AS SELECT count(*) FROM lake.ns.events WHERE ts >= ? AND ts < ?;\nEXECUTE p_one({start}, {end});",
        f"SELECT 1; SELECT count(*) FROM lake.ns.events WHERE {HOUR}",
        f"SELECT count(*) FROM lake.ns.events WHERE {HOUR}; SELECT count(*) FROM lake.ns.events WHERE {HOUR}",
    ]
    try:
        for script in scripts:
            with opened(con) as got:
                rows = lake.sql(script).fetchall()  # type: ignore[union-attr]
            assert rows == [(n,)], script
            assert got == kept, script
    finally:
        con.execute("DEALLOCATE PREPARE p_one")
    calls: list[int] = []

    def count_call(x: int) -> int:
        calls.append(x)
        return x

    con.create_function("count_call", count_call, side_effects=True)
    try:
        assert lake.sql("SELECT count_call(range) FROM range(3); SELECT 7").fetchall() == [(7,)]  # type: ignore[union-attr]
        assert sorted(calls) == [0, 1, 2]  # the first query ran, once
        calls.clear()  # a script that writes too (statement by statement already)
        script = "CREATE TEMP TABLE script_made AS SELECT 1 AS a; SELECT count_call(range) FROM range(2); SELECT 8"
        assert lake.sql(script).fetchall() == [(8,)]  # type: ignore[union-attr]
        assert sorted(calls) == [0, 1]
    finally:
        con.remove_function("count_call")
        con.execute("DROP TABLE IF EXISTS script_made")


def test_a_prepared_insert_select_prunes_at_execute(lake: Lake) -> None:
    """`PREPARE q AS INSERT INTO <DuckDB table> SELECT ... WHERE ... $1 ...; EXECUTE q(...)`: the
    INSERT DuckDB holds is planned with the arguments' values (its only stored result type is the
    row count), so only the kept files open and the rows written are the unpruned rows; a table
    made after PREPARE that shadows a name is read as DuckDB's own EXECUTE reads it."""
    kept = _kept(lake, "ns.events", HOUR)
    loc = sql_string(lake.table("ns.events").metadata_location)
    truth = sorted(
        lake.con.execute(f"SELECT * FROM iceberg_scan({loc}, prune := false) WHERE {HOUR}").fetchall()
    )
    assert truth and kept < _all(lake, "ns.events")
    start, end = "TIMESTAMP '2024-01-02 05:00'", "TIMESTAMP '2024-01-02 06:00'"
    con = lake.con
    con.execute("CREATE TEMP TABLE dst (id BIGINT, ts TIMESTAMP, v DOUBLE)")
    prepared = {
        "i_pos": "INSERT INTO dst SELECT * FROM lake.ns.events WHERE ts >= $1 AND ts < $2",
        "i_cols": f"INSERT INTO dst (id, ts, v) SELECT id, ts, v FROM iceberg_scan({loc}) WHERE ts >= ? AND ts < ?",
        "i_with": "WITH c AS (SELECT * FROM lake.ns.events) INSERT INTO dst SELECT * FROM c WHERE ts >= $lo AND ts < $hi",
        "i_view": "INSERT INTO dst SELECT * FROM tv WHERE ts >= $1 AND ts < $2",
    }
    executes = [
        f"EXECUTE i_pos({start}, {end})",
        f"EXECUTE i_cols({start}, {end})",
        f"EXECUTE i_with(lo := {start}, hi := {end})",
        f"EXECUTE i_view({start}, {end})",
        f"PREPARE i_script AS {prepared['i_pos']}; EXECUTE i_script({start}, {end})",
    ]
    try:
        with _views(lake, "CREATE TEMP VIEW tv AS SELECT * FROM lake.ns.events"):
            for name, query in prepared.items():
                lake.sql(f"PREPARE {name} AS {query}")
            for statement in executes:
                con.execute("DELETE FROM dst")
                with opened(con) as files:
                    result = lake.sql(statement)
                assert result is not None and result.fetchall() == [(len(truth),)], statement
                assert files == kept, statement
                assert sorted(con.execute("SELECT * FROM dst").fetchall()) == truth, statement
        # bound anew at each EXECUTE, like a query: a temporary table made after PREPARE shadows
        con.execute("CREATE TABLE small AS SELECT 1 AS id")
        lake.sql(
            "PREPARE i_shadow AS INSERT INTO dst SELECT e.* FROM small JOIN lake.ns.events e ON e.id = small.id "
            "WHERE e.id >= $1 AND e.id < $2"
        )
        con.execute("CREATE TEMP TABLE small AS SELECT 1 AS id UNION ALL SELECT 2")
        try:
            answers = []
            for run in (lake.sql, con.execute):
                con.execute("DELETE FROM dst")
                run("EXECUTE i_shadow(0, 5)")
                answers.append(sorted(con.execute("SELECT id FROM dst").fetchall()))
            assert answers[0] == answers[1] == [(1,), (2,)]
        finally:
            con.execute("DROP TABLE temp.small")
            con.execute("DROP TABLE main.small")
    finally:
        for name in [*prepared, "i_script", "i_shadow"]:
            with contextlib.suppress(duckdb.Error):
                con.execute(f"DEALLOCATE PREPARE {name}")
        con.execute("DROP TABLE IF EXISTS dst")


def test_views_in_other_schemas_and_under_a_search_path_prune(lake: Lake) -> None:
    """A view in another schema, or named under `SET search_path` / `SET schema` / `USE`: inlined
    where every name of its query binds as DuckDB binds it for the view (temp.main, the view's own
    schema, its database's main, the search path, the current database's main), so it prunes;
    where a name would bind elsewhere, the statement runs as written: DuckDB's own answer."""
    con = lake.con
    kept = _kept(lake, "ns.events", HOUR)
    n = _count(lake, "ns.events", HOUR)
    every = _all(lake, "ns.events")
    ((database,),) = con.execute("SELECT current_database()").fetchall()
    con.execute("CREATE SCHEMA IF NOT EXISTS other")
    con.execute("CREATE TABLE other.small AS SELECT 1301 AS id")  # a row of HOUR
    con.execute("CREATE TABLE main.small AS SELECT -1 AS id")
    con.execute("CREATE TABLE main.main_only AS SELECT 1421 AS id")  # another row of HOUR
    try:
        with _views(
            lake,
            "CREATE VIEW other.ov AS SELECT * FROM lake.ns.events",
            "CREATE VIEW other.ov_small AS SELECT * FROM lake.ns.events WHERE id NOT IN (SELECT id FROM small)",
            "CREATE VIEW other.ov_main AS SELECT * FROM lake.ns.events WHERE id NOT IN (SELECT id FROM main_only)",
        ):
            # default search path: `small` in other.ov_small is other.small for the view, main.small
            # for the statement: not inlined (read unpruned), DuckDB's answer
            _prunes(lake, f"SELECT count(*) FROM other.ov WHERE {HOUR}", None, kept, [(n,)])
            _prunes(lake, f"SELECT count(*) FROM other.ov_main WHERE {HOUR}", None, kept, [(n - 1,)])
            _prunes(lake, f"SELECT count(*) FROM {database}.other.ov WHERE {HOUR}", None, kept, [(n,)])
            _prunes(lake, f"SELECT count(*) FROM other.ov_small WHERE {HOUR}", None, every, [(n - 1,)])
            for setting, reset in (
                ("SET search_path = 'other'", "RESET search_path"),
                ("SET schema = 'other'", "RESET schema"),
                (f"USE {database}.other", f"USE {database}.main"),
                (f"SET search_path = '{database}.other,main'", "RESET search_path"),
            ):
                lake.sql(setting)
                try:
                    # now the statement's `small` is other.small too: inlined, pruned
                    _prunes(lake, f"SELECT count(*) FROM ov WHERE {HOUR}", None, kept, [(n,)])
                    _prunes(lake, f"SELECT count(*) FROM ov_small WHERE {HOUR}", None, kept, [(n - 1,)])
                    _prunes(lake, f"SELECT count(*) FROM ov_main WHERE {HOUR}", None, kept, [(n - 1,)])
                    assert lake.sql(f"SELECT count(*) FROM ov_small WHERE {HOUR}").fetchall() == con.execute(  # type: ignore[union-attr]
                        f"SELECT count(*) FROM ov_small WHERE {HOUR}"
                    ).fetchall(), setting
                finally:
                    lake.sql(reset)
            # a view of another attached database is not inlined (it binds `schema.name` in its own
            # database first): read unpruned, DuckDB's answer; after USE of that database, inlined
            con.execute("ATTACH ':memory:' AS side")
            try:
                con.execute("CREATE VIEW side.main.sv AS SELECT * FROM lake.ns.events")
                for name in ("side.sv", "side.main.sv"):
                    _prunes(lake, f"SELECT count(*) FROM {name} WHERE {HOUR}", None, every, [(n,)])
                lake.sql("USE side")
                try:
                    _prunes(lake, f"SELECT count(*) FROM sv WHERE {HOUR}", None, kept, [(n,)])
                finally:
                    lake.sql(f"USE {database}.main")
            finally:
                con.execute("DETACH side")
            # a temporary `small` made later binds first for the view and the statement alike
            con.execute("CREATE TEMP TABLE small AS SELECT 1541 AS id")  # a third row of HOUR
            try:
                _prunes(lake, f"SELECT count(*) FROM other.ov_small WHERE {HOUR}", None, kept, [(n - 1,)])
                lake.sql("SET search_path = 'other'")
                try:  # nothing named main_only in temp.main or other: ov_main still reads main.main_only
                    _prunes(lake, f"SELECT count(*) FROM ov_main WHERE {HOUR}", None, kept, [(n - 1,)])
                finally:
                    lake.sql("RESET search_path")
            finally:
                con.execute("DROP TABLE temp.small")
    finally:
        con.execute("DROP TABLE IF EXISTS main.small")
        con.execute("DROP TABLE IF EXISTS main.main_only")
        con.execute("DROP SCHEMA IF EXISTS other CASCADE")


def test_views_read_what_duckdb_reads_under_every_search_path(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Views in several schemas and an attached database reading `k` and calling `f(...)` that
    exist in each of them (and in temp.main, made later), named every way under several search
    paths: every statement through Lake.sql gives what DuckDB gives on the raw connection, and
    many of them are inlined (so pruned)."""
    con = lake.con
    inlined: list[bool] = []
    real = References.inline
    monkeypatch.setattr(References, "inline", lambda self, tree: (out := real(self, tree), inlined.append(out))[0])
    con.execute("CREATE SCHEMA s1; CREATE SCHEMA s2; ATTACH ':memory:' AS db2; CREATE SCHEMA db2.s1")
    try:
        for place, value in [("main", 1), ("s1", 2), ("s2", 3), ("db2.main", 4), ("db2.s1", 5)]:
            con.execute(f"CREATE TABLE {place}.k AS SELECT {1300 + value} AS id")
            con.execute(f"CREATE MACRO {place}.f(x) AS x + {1300 + value}")
        views = {
            "s1.v1": "id NOT IN (SELECT id FROM k)",
            "s1.v2": "id NOT IN (SELECT id FROM main.k)",
            "s1.v3": "id <> f(0)",
            "s2.v4": "id NOT IN (SELECT id FROM s1.k)",
            "db2.main.v5": "id NOT IN (SELECT id FROM k)",
            "db2.s1.v6": "id NOT IN (SELECT id FROM main.k)",
            "db2.s1.v7": "id <> f(0) AND id NOT IN (SELECT id FROM db2.k)",
            "main.v8": "id NOT IN (SELECT id FROM k)",
            "db2.s1.v9": "id NOT IN (SELECT id FROM db2.k)",
            "db2.main.v10": "id NOT IN (SELECT id FROM s1.k)",  # db2.s1.k for the view, as DuckDB keeps it
        }
        for name, where in views.items():
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM lake.ns.events WHERE {where}")
        names = ["s1.v1", "s1.v2", "s1.v3", "s2.v4", "db2.v5", "db2.main.v5", "db2.s1.v6", "db2.s1.v7"]
        names += ["db2.s1.v9", "db2.v10", "v8", "main.v8", "v1", "v4", "v6", "v9", "v10"]
        settings = [None, "SET search_path = 's1'", "SET search_path = 's2,s1'", "SET search_path = 'db2.s1'"]
        settings += ["USE db2", "USE db2.s1", "SET schema = 's2'"]
        ((database,),) = con.execute("SELECT current_database()").fetchall()
        for shadowed in (False, True):
            if shadowed:
                con.execute("CREATE TEMP TABLE k AS SELECT 1307 AS id; CREATE TEMP MACRO f(x) AS x + 1307")
            for setting in settings:
                if setting is not None:
                    lake.sql(setting)
                try:
                    for name in names:
                        query = f"SELECT count(*), sum(id) FROM {name} WHERE id BETWEEN 1290 AND 1320"
                        try:
                            want: Any = con.execute(query).fetchall()
                        except duckdb.Error:
                            want = "error"
                        try:
                            got: Any = lake.sql(query).fetchall()  # type: ignore[union-attr]
                        except duckdb.Error:
                            got = "error"
                        assert got == want, (shadowed, setting, name)
                finally:
                    lake.sql(f"USE {database}.main")
                    lake.sql("RESET search_path")
        assert sum(inlined) > len(inlined) // 3, (sum(inlined), len(inlined))
    finally:
        con.execute("DROP TABLE IF EXISTS temp.k")
        con.execute("DROP MACRO IF EXISTS temp.f")
        con.execute("DROP VIEW IF EXISTS main.v8")
        con.execute("DROP TABLE IF EXISTS main.k")
        con.execute("DROP MACRO IF EXISTS main.f")
        con.execute("DROP SCHEMA IF EXISTS s1 CASCADE")
        con.execute("DROP SCHEMA IF EXISTS s2 CASCADE")
        con.execute("DETACH DATABASE IF EXISTS db2")
