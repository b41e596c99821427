"""DELETE drops files whose metrics prove every row matches, without reading them (issue 26).

Independent truth: DuckDB deleting the same rows from its own table; "unread" is proven by removing
those files from disk first (reading one would fail)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck


def _lake(tmp_path: Path, mode: str) -> tuple[Any, duckdb.DuckDBPyConnection]:
    lake = iceduck.connect(tmp_path / "wh")
    mirror = duckdb.connect()
    lake.sql("CREATE SCHEMA ns")
    lake.sql(f"CREATE TABLE ns.t (id BIGINT, v VARCHAR) WITH ('write.delete.mode' = '{mode}')")
    mirror.execute("CREATE TABLE t (id BIGINT, v VARCHAR)")
    for f in range(4):  # four files: ids 0-99, 100-199, 200-299, 300-399
        rows = f"SELECT i, 'v' || i FROM range({f * 100}, {(f + 1) * 100}) r(i)"
        lake.sql(f"INSERT INTO ns.t {rows}")
        mirror.execute(f"INSERT INTO t {rows}")
    return lake, mirror


def _files(lake: Any) -> dict[str, tuple[int, int]]:
    """Live data file path -> (lowest id, highest id), read from the files."""
    rows = lake.con.execute(
        "SELECT filename, min(id), max(id) FROM read_parquet(?, filename := true) GROUP BY ALL",
        [[p for p in _paths(lake)]],
    ).fetchall()
    return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}


def _paths(lake: Any) -> list[str]:
    rows = lake.con.execute("SELECT file_path FROM iceberg_metadata('lake.ns.t')").fetchall()
    return sorted({str(r[0]).removeprefix("file://") for r in rows if str(r[0]).endswith(".parquet")})


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_a_delete_of_whole_files_reads_none_of_them(tmp_path: Path, mode: str) -> None:
    lake, mirror = _lake(tmp_path, mode)
    files = _files(lake)
    doomed = [p for p, (lo, hi) in files.items() if lo >= 100 and hi < 300]
    assert len(doomed) == 2
    for path in doomed:
        os.remove(path)  # a DELETE that opened them would fail
    where = "id >= 100 AND id < 300"
    result = lake.table("ns.t").delete(where)
    mirror.execute(f"DELETE FROM t WHERE {where}")
    assert result.deleted_rows == 200
    assert lake.sql("SELECT * FROM lake.ns.t ORDER BY id").fetchall() == mirror.execute(
        "SELECT * FROM t ORDER BY id"
    ).fetchall()
    summary = lake.table("ns.t").current_snapshot().summary
    assert summary.get("deleted-data-files") == "2"
    assert summary.get("added-delete-files") is None  # no deletion vector written


def test_a_partly_matching_file_is_read_and_the_rest_dropped(tmp_path: Path) -> None:
    lake, mirror = _lake(tmp_path, "merge-on-read")
    where = "id > 150 OR id IN (7, 8)"
    lake.sql(f"DELETE FROM ns.t WHERE {where}")
    mirror.execute(f"DELETE FROM t WHERE {where}")
    assert lake.sql("SELECT * FROM lake.ns.t ORDER BY id").fetchall() == mirror.execute(
        "SELECT * FROM t ORDER BY id"
    ).fetchall()
    summary = lake.table("ns.t").current_snapshot().summary
    assert summary.get("deleted-data-files") == "2"  # ids 200-399
    assert summary.get("added-delete-files") == "2"  # ids 151-199 and 7, 8: deletion vectors


@pytest.mark.parametrize(
    "where",
    [
        "id >= 100 AND id < 300 AND v LIKE 'v1%'",  # DuckDB keeps the LIKE: no proof from bounds
        "id >= 100 AND id < 300 AND length(v) = 3",
        "id >= 100 AND id < 300 AND v <> 'v150'",  # bounds cannot prove a string inequality here
    ],
)
def test_no_file_is_dropped_without_proof(tmp_path: Path, where: str) -> None:
    lake, mirror = _lake(tmp_path, "merge-on-read")
    lake.sql(f"DELETE FROM ns.t WHERE {where}")
    mirror.execute(f"DELETE FROM t WHERE {where}")
    assert lake.sql("SELECT * FROM lake.ns.t ORDER BY id").fetchall() == mirror.execute(
        "SELECT * FROM t ORDER BY id"
    ).fetchall()


def test_a_session_collation_gives_no_proof(tmp_path: Path) -> None:
    lake, mirror = _lake(tmp_path, "merge-on-read")
    lake.sql("UPDATE ns.t SET v = 'A' WHERE id >= 300")
    mirror.execute("UPDATE t SET v = 'A' WHERE id >= 300")
    for con in (lake.con, mirror):
        con.execute("SET default_collation = 'nocase'")
    where = "v <> 'a'"  # under NOCASE no row with v = 'A' matches, whatever the bounds say
    lake.sql(f"DELETE FROM ns.t WHERE {where}")
    mirror.execute(f"DELETE FROM t WHERE {where}")
    assert lake.sql("SELECT * FROM lake.ns.t ORDER BY id").fetchall() == mirror.execute(
        "SELECT * FROM t ORDER BY id"
    ).fetchall()
