"""Which functions may give another value when the same text runs again: DuckDB's catalog decides
(`iceduck.duckdb.builtins`), one rule for the front door's planned statements, the scan's kept
filters and column DEFAULTs.

Independent truth: DuckDB's documented volatile functions named in issue 26 (missing from the
hand-kept list this replaces), and what a statement returns when run again later."""

from __future__ import annotations

import datetime
import subprocess
import sys
import time
from pathlib import Path

import pytest

import iceduck
from iceduck.duckdb.builtins import varies
from iceduck.duckdb.hooks import is_cacheable_filter
from iceduck.sql.types import SqlTypeError


@pytest.mark.parametrize(
    "name",
    [
        # missed by the old list
        "current_query_id", "current_transaction_id", "current_connection_id", "setval", "sleep_ms",
        "write_log", "error", "stats", "vector_type", "current_localtimestamp", "txid_current",
        # kept from it, in any case; SQL value keywords stand for the functions they call
        "NOW", "random", "uuid", "nextval", "getvariable", "current_setting", "current_date",
        "current_timestamp", "LOCALTIMESTAMP", "localtime", "current_time",
    ],
)  # fmt: skip
def test_duckdb_says_which_functions_vary(name: str) -> None:
    assert varies(name)


@pytest.mark.parametrize("name", ["abs", "lower", "year", "date_trunc", "strftime", "x", "ts", "in"])
def test_functions_with_a_consistent_form_do_not_vary(name: str) -> None:
    # year() of a TIMESTAMP WITH TIME ZONE reads the TimeZone setting, which every reuse is keyed on
    assert not varies(name)


def test_a_kept_filter_never_holds_a_varying_value() -> None:
    assert is_cacheable_filter("id IN (1, 2) AND year(ts) = 2024")
    for where in ["d = current_date", "ts < now()", "id = current_query_id()", "ts < LOCALTIMESTAMP"]:
        assert not is_cacheable_filter(where), where


def test_a_statement_run_again_reads_the_clock_again(tmp_path: Path) -> None:
    lake = iceduck.connect(tmp_path / "wh")
    lake.sql("CREATE SCHEMA ns; CREATE TABLE ns.t (id INT, ts TIMESTAMP)")
    (now,) = lake.con.execute("SELECT current_localtimestamp()").fetchall()[0]
    lake.sql("INSERT INTO ns.t VALUES (1, TIMESTAMP '2000-01-01')")  # two commits: two files
    lake.sql(f"INSERT INTO ns.t VALUES (2, TIMESTAMP '{now + datetime.timedelta(seconds=2)}')")
    query = "SELECT id FROM lake.ns.t WHERE ts < current_localtimestamp() ORDER BY id"
    first = lake.sql(query)
    assert first is not None and first.fetchall() == [(1,)]
    time.sleep(2.5)
    # the front door must not keep a pruning folded from the first run's clock
    again = lake.sql(query)
    assert again is not None and again.fetchall() == [(1,), (2,)]


def test_a_default_is_a_constant(tmp_path: Path) -> None:
    lake = iceduck.connect(tmp_path / "wh")
    lake.sql("CREATE SCHEMA ns")
    lake.sql("CREATE TABLE ns.t (id INT, y INT DEFAULT year(DATE '2024-05-01'))")
    lake.sql("INSERT INTO ns.t (id) VALUES (1)")
    rows = lake.sql("SELECT * FROM lake.ns.t")
    assert rows is not None and rows.fetchall() == [(1, 2024)]
    with pytest.raises(SqlTypeError, match=r"current_query_id\(\)"):
        lake.sql("CREATE TABLE ns.u (id BIGINT DEFAULT current_query_id())")


def test_a_statement_about_no_lake_table_reads_no_function_catalog(tmp_path: Path) -> None:
    code = (
        "import iceduck, iceduck.duckdb.builtins as b, sys; lake = iceduck.connect(sys.argv[1]); "
        "lake.sql('SELECT 1').fetchall(); lake.sql('SELECT now(), random()').fetchall(); "
        "print(b._READ is None)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "wh")], capture_output=True, text=True)
    assert (out.returncode, out.stdout.strip()) == (0, "True"), out.stderr


def test_a_column_named_like_a_volatile_function_calls_nothing() -> None:
    """A bare name is a column unless it is one of the SQL value keywords DuckDB binds as a call:
    a column `uuid` or `random` must not turn pruning off as if `uuid()` were called."""
    import duckdb

    from iceduck.sql.classify import called
    from iceduck.sql.parse_tree import parse_query

    con = duckdb.connect()
    tree = parse_query(con, "SELECT uuid, random FROM t WHERE uuid = 'x' AND ts < current_timestamp")
    assert set(called(tree)) == {"current_timestamp"}
    assert set(called(parse_query(con, "SELECT uuid() FROM t"))) == {"uuid"}
