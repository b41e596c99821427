"""Deletes match data files however an engine spells the paths (issue 13, class 1).

Each table is written by iceduck's writer and then respelled the way Hive, Spark and Trino record
paths (`tests/support/respell.py`): manifests say `/warehouse/db/t/data/f.parquet` while position-delete
files and DVs say `hdfs://namenode:20500/warehouse/db/t/data/f.parquet`, or the reverse, `s3://`
against `s3a://`, `file:/` against `file:///`. The truth is computed from the inputs: ids
0..N-1 minus the ids each DELETE removed. Current reads, time travel, `iceberg_changes`, the
writer's own DELETE/UPDATE on the respelled table, and `iceberg_delete_check` are checked.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

import iceduck
from iceduck.lake import connect
from tests.support.respell import newest_metadata, respell

HDFS = "hdfs://namenode:20500/warehouse/db/t"
PLAIN = "/warehouse/db/t"


def _at(root: str) -> Callable[[str], str]:
    return lambda rel: f"{root}/{rel}"


# name -> (location, metadata spelling, data spelling, delete-file spelling, reference spelling)
SPELLINGS: dict[str, tuple[str, Callable[[str], str], Callable[[str], str], Callable[[str], str], Callable[[str], str]]] = {
    # Hive/Spark on HDFS: short paths in manifests, qualified ones inside delete files
    "hdfs-location-short-data": (HDFS, _at(HDFS), _at(PLAIN), _at(PLAIN), _at(HDFS)),
    # the reverse: a short table location, qualified data paths, short references
    "short-location-qualified-data": (PLAIN, _at(PLAIN), _at(HDFS), _at(HDFS), _at(PLAIN)),
    # qualified everywhere but the references
    "hdfs-everywhere-short-references": (HDFS, _at(HDFS), _at(HDFS), _at(HDFS), _at(PLAIN)),
    # Hadoop's S3 connectors: s3:// in manifests, s3a:// and s3n:// in delete files
    "s3-and-s3a": ("s3://bucket/wh/t", _at("s3://bucket/wh/t"), _at("s3://bucket/wh/t"), _at("s3n://bucket/wh/t"), _at("s3a://bucket/wh/t")),
    # Java's file:/ next to file:/// and plain paths
    "file-uris": ("file:/warehouse/db/t", _at("file:/warehouse/db/t"), _at("file:///warehouse/db/t"), _at("file:/warehouse/db/t"), _at(PLAIN)),
}  # fmt: skip

N = 200


def _rows(n: int) -> pa.Table:
    return pa.table(
        {"id": pa.array(range(n), pa.int64()), "k": pa.array([i % 4 for i in range(n)], pa.int64())}
    )


def _build(tmp_path: Path, version: int) -> tuple[object, Path, list[int]]:
    """A table of N ids in 4 partitions, two DELETEs (merge-on-read): ids % 7 == 0, then ids % 5 == 0."""
    lake = connect(tmp_path / "wh", catalog="folder")
    lake.create_namespace("db")
    t = lake.create_table(
        "db.t", [("id", "BIGINT"), ("k", "BIGINT")], partition_by=["k"], format_version=version
    )
    t.append(_rows(N))
    t.append(_rows(N).slice(0, 0))
    t.delete("id % 7 = 0")
    t.delete("id % 5 = 0")
    snaps = [s.snapshot_id for s in t.load().metadata.snapshots]
    return lake, Path(t.location), snaps


def _expected(*removed: Callable[[int], bool]) -> list[int]:
    return [i for i in range(N) if not any(r(i) for r in removed)]


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    iceduck.register(c)
    yield c
    c.close()


# v2 position-delete files naming their data file (as iceduck writes them) or not (as Spark does:
# scoped by partition only); v3 deletion vectors (always naming their data file).
KINDS = [(2, False), (2, True), (3, False)]


@pytest.mark.parametrize(("version", "unscoped"), KINDS)
@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_deletes_apply_however_paths_are_spelled(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, spelling: str, version: int, unscoped: bool
) -> None:
    lake, folder, snaps = _build(tmp_path, version)
    location, metadata, data, deletes, references = SPELLINGS[spelling]
    md = respell(
        folder, location=location, metadata=metadata, data=data, deletes=deletes, references=references,
        unscoped=unscoped,
    )  # fmt: skip
    ids = lambda sql, *a: sorted(r[0] for r in con.execute(sql, list(a)).fetchall())  # noqa: E731
    scan = f"SELECT id FROM iceberg_scan('{md}'"
    # current read
    assert ids(scan + ")") == _expected(lambda i: i % 7 == 0, lambda i: i % 5 == 0)
    # time travel to the snapshot after the first DELETE
    after_first = snaps[-2]
    assert ids(scan + ", snapshot_id := ?)", after_first) == _expected(lambda i: i % 7 == 0)
    # iceberg_changes: the second DELETE removed exactly the ids % 5 == 0 that were still live
    deleted = ids(
        f"SELECT id FROM iceberg_changes('{md}', from_snapshot := ?) WHERE change_type = 'delete'",
        after_first,
    )
    assert deleted == [i for i in range(N) if i % 5 == 0 and i % 7 != 0]
    # every reference of every delete file matches a live data file, after normalisation only
    check = con.execute(
        f"SELECT sum(exact), sum(normalized), sum(unmatched) FROM iceberg_delete_check('{md}')"
    ).fetchone()
    assert check is not None and check[2] == 0 and check[0] + check[1] > 0
    if spelling != "file-uris":
        assert check[0] == 0  # the spellings differ: no reference matches as written
    # the writer's view: a third DELETE and an UPDATE on the respelled table see the old deletes
    t = lake.table("db.t")  # type: ignore[attr-defined]
    t.delete("id % 3 = 0")
    t.update({"k": "k + 10"}, "id % 2 = 0")
    md_now = newest_metadata(folder)
    live = _expected(lambda i: i % 7 == 0, lambda i: i % 5 == 0, lambda i: i % 3 == 0)
    rows = con.execute(f"SELECT id, k FROM iceberg_scan('{md_now}')").fetchall()
    assert sorted(r[0] for r in rows) == live
    assert sorted(rows) == sorted((i, i % 4 + (10 if i % 2 == 0 else 0)) for i in live)
    lake.close()  # type: ignore[attr-defined]
