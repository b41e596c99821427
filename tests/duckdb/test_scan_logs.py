"""What a scan skipped, in DuckDB's log (type 'Iceberg', as the extension writes it), and pruning on
UUID columns (offered to DuckDB as text for capture: the rule that keeps it exact)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

import iceduck
from iceduck.lake import Lake
from tests.support.peer import sql_string

LOW = ("10000000-0000-4000-8000-000000000001", "1fffffff-0000-4000-8000-000000000001")
HIGH = ("a0000000-0000-4000-8000-000000000001", "afffffff-0000-4000-8000-000000000001")


@pytest.fixture
def uuids(lake: Lake) -> Iterator[Lake]:
    """ns.u: two data files, UUIDs [LOW] (n 1, 2) and [HIGH] (n 3, 4)."""
    lake.sql("CREATE TABLE ns.u (u UUID, n INT)")
    lake.sql(f"INSERT INTO ns.u VALUES ('{LOW[0]}', 1), ('{LOW[1]}', 2)")
    lake.sql(f"INSERT INTO ns.u VALUES ('{HIGH[0]}', 3), ('{HIGH[1]}', 4)")
    yield lake


def _files(lake: Lake) -> dict[str, str]:
    """Data file path -> 'low' / 'high'."""
    rows = lake.sql("SELECT file_path, lower_bound FROM iceberg_column_stats('ns.u') WHERE column_name = 'u'")
    assert rows is not None
    return {path: "low" if low == LOW[0] else "high" for path, low in rows.fetchall()}


def _logged(lake: Lake) -> list[str]:
    rows = lake.sql("SELECT message FROM duckdb_logs() WHERE type = 'Iceberg' ORDER BY timestamp")
    assert rows is not None
    return [m for (m,) in rows.fetchall()]


def _rows(lake: Lake, sql: str) -> list[tuple[int, ...]]:
    rel = lake.sql(sql)
    assert rel is not None
    return sorted(rel.fetchall())


@pytest.mark.parametrize(
    ("where", "skipped"),
    [
        (f"u = '{HIGH[0]}'", "low"),
        (f"u = '{HIGH[0].upper()}'", "low"),  # a UUID literal in any case
        (f"u IN ('{LOW[1]}', '{{{LOW[0]}}}')", "high"),  # braces: DuckDB's (and Python's) UUID text
        ("u < '20000000-0000-4000-8000-000000000000'", "high"),
        (f"u >= '{HIGH[0]}'", "low"),
        (f"NOT (u <> '{LOW[0]}')", "high"),
        # the column's text compared with text that is no canonical UUID: text order is not UUID
        # order ('a0...' > 'FF...'), so nothing may be skipped on it
        ("u::VARCHAR > 'FFFFFFFF-0000-4000-8000-000000000000'", None),
        (f"u::VARCHAR <> '{HIGH[0].upper()}'", None),
        ("u::VARCHAR >= '1'", None),
    ],
)
def test_a_natural_where_on_a_uuid_column_prunes_exactly(
    uuids: Lake, where: str, skipped: str | None
) -> None:
    lake = uuids
    files = _files(lake)
    unpruned = _rows(lake, f"SELECT n FROM iceberg_scan('ns.u', prune := false) WHERE {where}")
    lake.sql("CALL enable_logging('Iceberg')")
    for query in (
        f"SELECT n FROM lake.ns.u WHERE {where}",
        f"SELECT n FROM iceberg_scan('ns.u') WHERE {where}",
    ):
        lake.sql("CALL truncate_duckdb_logs()")
        assert _rows(lake, query) == unpruned, query
        expected = [path for path, kind in files.items() if kind == skipped]
        logged = _logged(lake)
        assert [m.split("'")[3] for m in logged] == expected, (query, logged)


def test_filter_text_on_a_uuid_column_prunes(uuids: Lake) -> None:
    """`filter :=` reads the text the same way (any connection)."""
    plan = uuids.sql(
        f"SELECT kept, count(*) FROM iceberg_scan_plan('ns.u', filter := 'u = ''{LOW[1]}''') GROUP BY ALL"
    )
    assert plan is not None and sorted(plan.fetchall()) == [(False, 1), (True, 1)]


def test_the_log_line_names_the_skipped_file_and_why(uuids: Lake) -> None:
    lake = uuids
    low = next(p for p, kind in _files(lake).items() if kind == "low")
    lake.sql("CALL enable_logging('Iceberg')")
    lake.sql("CALL truncate_duckdb_logs()")
    assert _rows(lake, f"SELECT n FROM lake.ns.u WHERE u = '{HIGH[1]}'") == [(4,)]
    assert _logged(lake) == [
        f"Iceberg Filter Pushdown, skipped 'data_file': '{low}', u = {HIGH[1]} but the upper bound is {LOW[1]}"
    ]


def test_logs_are_written_when_a_statement_runs_not_when_it_binds(uuids: Lake) -> None:
    """A relation binds when made and again at each read: one line per skipped file per run, as
    the extension logs each scan; none under EXPLAIN, none with logging off or another type."""
    lake = uuids
    query = f"SELECT n FROM lake.ns.u WHERE u = '{HIGH[1]}'"
    lake.sql("CALL enable_logging('Iceberg')")
    lake.sql("CALL truncate_duckdb_logs()")
    rel = lake.sql(query)
    assert rel is not None and _logged(lake) == []
    rel.fetchall()
    rel.fetchall()
    assert len(_logged(lake)) == 2
    lake.sql("CALL truncate_duckdb_logs()")
    lake.sql(f"EXPLAIN {query}").fetchall()  # type: ignore[union-attr]
    assert _logged(lake) == []
    for setting in (
        "CALL disable_logging()",
        "CALL enable_logging('QueryLog')",
        "CALL enable_logging(level := 'warning')",
    ):
        lake.sql(setting)
        lake.sql("CALL truncate_duckdb_logs()")
        assert _rows(lake, query) == [(4,)]
        assert _logged(lake) == [], setting


def test_enable_logging_keeps_the_other_types_it_names(lake: Lake) -> None:
    """The call runs as DuckDB runs it without 'Iceberg' (its level rule included), plus the type."""
    call = "CALL enable_logging(['QueryLog', 'Iceberg'], level := 'debug')"
    settings = "SELECT current_setting('enabled_log_types'), current_setting('logging_mode'), current_setting('logging_level')"
    lake.sql(call)
    rel = lake.sql(settings)
    assert rel is not None
    types, mode, level = rel.fetchall()[0]
    plain = duckdb.connect()
    try:
        plain.execute(call.replace(", 'Iceberg'", ""))
        duck_level = plain.execute(settings).fetchall()[0][2]
    finally:
        plain.close()
    assert (sorted(types.split(",")), mode, level) == (["Iceberg", "QueryLog"], "ENABLE_SELECTED", duck_level)


def test_a_plain_connection_logs_once_the_type_is_selected_by_setting(uuids: Lake, tmp_path: Path) -> None:
    """DuckDB refuses `CALL enable_logging('Iceberg')` without the extension; the settings work."""
    loc = sql_string(uuids.table("ns.u").metadata_location)
    con = duckdb.connect()
    iceduck.register(con)
    try:
        con.execute(
            "SET enabled_log_types = 'Iceberg'; SET logging_mode = 'enable_selected'; SET enable_logging = true"
        )
        rows = con.execute(f"SELECT n FROM iceberg_scan({loc}, filter := 'u = ''{LOW[0]}''')").fetchall()
        assert rows == [(1,)]
        logged = con.execute("SELECT message FROM duckdb_logs() WHERE type = 'Iceberg'").fetchall()
        assert len(logged) == 1 and "skipped 'data_file'" in logged[0][0]
    finally:
        con.close()


@pytest.mark.parametrize(
    ("settings", "logs"),
    [
        ("SET enabled_log_types = 'FileSystem'; SET logging_mode = 'enable_selected'", False),
        ("SET enabled_log_types = 'FileSystem,Iceberg'; SET logging_mode = 'enable_selected'", True),
        ("SET disabled_log_types = 'Iceberg'; SET logging_mode = 'disable_selected'", False),
        ("SET disabled_log_types = 'FileSystem'; SET logging_mode = 'disable_selected'", True),
        ("SET logging_mode = 'level_only'; SET logging_level = 'warning'", False),
        ("SET logging_mode = 'level_only'; SET logging_level = 'info'", True),
    ],
)
def test_skipped_files_are_logged_only_where_the_logger_keeps_the_type(
    uuids: Lake, settings: str, logs: bool
) -> None:
    """Scans only ask whether logging is on; DuckDB's logger keeps an 'Iceberg' line or drops it
    by its level, mode and types, as it does for its own types: on a plain connection (`filter :=`)
    and through the front door (a natural WHERE, whose rewritten call reads the setting at each bind)."""
    loc = sql_string(uuids.table("ns.u").metadata_location)
    plain = duckdb.connect()
    iceduck.register(plain)
    text = f"'u = ''{LOW[0]}'''"
    ways = (
        (plain, lambda: plain.execute(f"SELECT n FROM iceberg_scan({loc}, filter := {text})").fetchall()),
        (uuids.con, lambda: _rows(uuids, f"SELECT n FROM iceberg_scan({loc}) WHERE u = '{LOW[0]}'")),
    )
    count = "SELECT count(*) FROM duckdb_logs() WHERE type = 'Iceberg'"
    try:
        for con, run in ways:
            con.execute(f"{settings}; SET enable_logging = true")
            ((before,),) = con.execute(count).fetchall()
            assert run() == [(1,)]
            ((after,),) = con.execute(count).fetchall()
            assert (after > before) == logs, con
    finally:
        uuids.con.execute("SET enable_logging = false; RESET logging_mode; RESET logging_level")
        plain.close()
