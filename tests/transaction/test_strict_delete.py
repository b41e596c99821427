"""DELETE drops files whose metrics prove every row matches, without reading them (issue 26).

Independent truth: DuckDB deleting the same rows from its own table; "unread" is proven by removing
those files from disk first (reading one would fail)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from iceduck.errors import ValidationError


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


# -- the partition's proof (strict projection), where the files carry no column metrics ------------

_REGIONS = {"eu": range(0, 50), "us": range(50, 120), None: range(120, 150)}


def _partitioned(tmp_path: Path, partition_by: list[str]) -> tuple[Any, duckdb.DuckDBPyConnection]:
    lake = iceduck.connect(tmp_path / "wh")
    mirror = duckdb.connect()
    lake.create_namespace("ns")
    lake.create_table(
        "ns.t", [("id", "BIGINT"), ("region", "VARCHAR"), ("ts", "TIMESTAMP")], partition_by=partition_by,
        properties={"write.metadata.metrics.default": "none"},  # no bounds: only the partition can prove
    )  # fmt: skip
    mirror.execute("CREATE TABLE t (id BIGINT, region VARCHAR, ts TIMESTAMP)")
    for region, ids in _REGIONS.items():
        label = "NULL" if region is None else f"'{region}'"
        rows = (
            f"SELECT i, {label}, TIMESTAMP '2024-01-01' + to_hours(i) FROM range({ids.start}, {ids.stop}) r(i)"
        )
        lake.sql(f"INSERT INTO ns.t {rows}")
        mirror.execute(f"INSERT INTO t {rows}")
    return lake, mirror


def _same_rows(lake: Any, mirror: duckdb.DuckDBPyConnection) -> None:
    assert lake.sql("SELECT * FROM lake.ns.t ORDER BY id").fetchall() == mirror.execute(
        "SELECT * FROM t ORDER BY id"
    ).fetchall()


def _explained(lake: Any, where: str) -> dict[str, tuple[str, str]]:
    rows = lake.sql(f"EXPLAIN DELETE FROM ns.t WHERE {where}").fetchall()
    return {str(r[0]): (str(r[3]), str(r[4])) for r in rows}


def test_files_of_a_wholly_matching_partition_are_dropped_unread_without_metrics(tmp_path: Path) -> None:
    lake, mirror = _partitioned(tmp_path, ["region"])
    eu = [p for p in _paths(lake) if "region=eu" in p]
    assert eu
    explained = _explained(lake, "region = 'eu'")
    assert {explained[f"file://{p}"] if f"file://{p}" in explained else explained[p] for p in eu} == {
        ("remove", "its partition proves every row matches: dropped whole, unread")
    }
    for path in eu:
        os.remove(path)  # a DELETE that opened them would fail
    result = lake.table("ns.t").delete("region = 'eu'")
    mirror.execute("DELETE FROM t WHERE region = 'eu'")
    assert result.deleted_rows == 50
    _same_rows(lake, mirror)
    summary = lake.table("ns.t").current_snapshot().summary
    assert summary.get("deleted-data-files") == str(len(eu))
    assert summary.get("added-delete-files") is None


def test_a_null_partition_is_no_proof_of_an_inequality(tmp_path: Path) -> None:
    lake, mirror = _partitioned(tmp_path, ["region"])
    lake.sql("DELETE FROM ns.t WHERE region <> 'eu'")  # rows with a NULL region do not match
    mirror.execute("DELETE FROM t WHERE region <> 'eu'")
    _same_rows(lake, mirror)
    assert {r[0] for r in lake.sql("SELECT region FROM lake.ns.t").fetchall()} == {"eu", None}


def test_a_day_partition_proves_a_whole_day_range(tmp_path: Path) -> None:
    lake, mirror = _partitioned(tmp_path, ["day(ts)"])
    where = "ts >= TIMESTAMP '2024-01-02' AND ts < TIMESTAMP '2024-01-04'"  # ids 24-71: two whole days
    explained = _explained(lake, where)
    removed = {p for p, (action, _) in explained.items() if action == "remove"}
    assert len(removed) == 3  # day 2 (ids 24-47), day 3 (ids 48-71: two files, the inserts split it)
    for path in removed:
        os.remove(path.removeprefix("file://"))
    lake.sql(f"DELETE FROM ns.t WHERE {where}")
    mirror.execute(f"DELETE FROM t WHERE {where}")
    _same_rows(lake, mirror)
    # from noon on 5 January: that day's file is read, the later days' files are dropped unread
    where = "ts >= TIMESTAMP '2024-01-05 12:00:00'"
    rows = lake.sql(f"EXPLAIN DELETE FROM ns.t WHERE {where}").fetchall()
    actions = {(str(r[1]), str(r[3])) for r in rows if str(r[3]) != "skip"}
    assert actions == {("ts_day=2024-01-05", "read"), ("ts_day=2024-01-06", "remove"), ("ts_day=2024-01-07", "remove")}
    lake.sql(f"DELETE FROM ns.t WHERE {where}")
    mirror.execute(f"DELETE FROM t WHERE {where}")
    _same_rows(lake, mirror)


def test_a_bucket_partition_proves_nothing(tmp_path: Path) -> None:
    lake, mirror = _partitioned(tmp_path, ["bucket(2, id)"])
    where = "id IN (1, 2, 3)"
    assert all(action != "remove" for action, _ in _explained(lake, where).values())
    lake.sql(f"DELETE FROM ns.t WHERE {where}")
    mirror.execute(f"DELETE FROM t WHERE {where}")
    _same_rows(lake, mirror)


def test_an_identity_partitioned_date_is_not_promoted_to_a_timestamp(tmp_path: Path) -> None:
    """The partition values stay days while the column becomes micros (the spec forbids a promotion
    that changes a partition value): `d <> TIMESTAMP '2024-01-01'` then held for the file of
    2024-01-01 by its partition alone, and a DELETE dropped the row it does not match."""
    lake = iceduck.connect(tmp_path / "wh")
    lake.create_namespace("ns")
    t = lake.create_table("ns.t", [("id", "BIGINT"), ("d", "DATE")], partition_by=["d"], format_version=3)
    lake.sql("INSERT INTO ns.t VALUES (1, DATE '2024-01-01'), (2, DATE '2024-01-02')")
    with pytest.raises(ValidationError, match="partition field d"), t.update_schema() as u:
        u.widen_column("d", "timestamp")
    lake.sql("DELETE FROM ns.t WHERE d <> DATE '2024-01-01'")
    assert lake.sql("SELECT id, d FROM lake.ns.t").fetchall() == [(1, dt.date(2024, 1, 1))]


@pytest.mark.parametrize("metrics", ["full", "none"])  # the proof by column bounds, then by partition
def test_a_delete_reads_its_where_in_the_session_time_zone(tmp_path: Path, metrics: str) -> None:
    """DuckDB reads TIMESTAMPTZ '2024-03-10 00:00:00' in the session's zone (03:30 UTC in St. John's):
    the row at 01:59:59 UTC does not match. The writer's own cursor is in UTC, where it did: the
    file's bounds and its day both 'proved' it, and the row was deleted. The zone now comes from the
    front door (`sql.names.Session.zone`); the Python API reads it off the lake's connection."""
    lake = iceduck.connect(tmp_path / "wh")
    mirror = duckdb.connect()
    for con in (lake.con, mirror):
        con.execute("SET TimeZone = 'America/St_Johns'")
    lake.create_namespace("ns")
    lake.create_table(
        "ns.t", [("id", "BIGINT"), ("ts", "TIMESTAMPTZ")], partition_by=["day(ts)"],
        properties={"write.metadata.metrics.default": metrics},
    )  # fmt: skip
    mirror.execute("CREATE TABLE t (id BIGINT, ts TIMESTAMPTZ)")
    rows = "VALUES (1, TIMESTAMPTZ '2024-03-10 01:59:59+00'), (2, TIMESTAMPTZ '2024-03-10 12:00:00+00')"
    lake.sql(f"INSERT INTO ns.t {rows}")
    mirror.execute(f"INSERT INTO t {rows}")
    where = "ts >= TIMESTAMPTZ '2024-03-10 00:00:00'"
    lake.sql(f"DELETE FROM ns.t WHERE {where}")
    mirror.execute(f"DELETE FROM t WHERE {where}")
    assert mirror.execute("SELECT id FROM t").fetchall() == [(1,)]
    assert lake.sql("SELECT id FROM lake.ns.t").fetchall() == [(1,)]
    lake.table("ns.t").update({"id": "id + 10"}, "ts < TIMESTAMPTZ '2024-03-10 00:00:00'")
    assert lake.sql("SELECT id FROM lake.ns.t").fetchall() == [(11,)]
