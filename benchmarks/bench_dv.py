"""Deletion-vector cases (issue 28) on v3 tables the reference peer wrote and deleted from.

The `dv` data set (`benchmarks/datasets.py`, `DV_SHAPES`) holds one table per shape, each written by
DuckDB 1.5.5's iceberg extension through `iceduck serve` (so the deletion vectors are laid out the
way that writer lays them out: one Puffin file per data file), then DELETEd from by a predicate:

* `large_*`: one INSERT (a few files of ~1.6 M rows each at full scale), `small_*`: many INSERTs
  (one small file each);
* `s01` / `s30` / `s90`: 0.1% / 30% / 90% of rows deleted, scattered (`hash(id) % ...`);
  `c30`: 30% deleted in runs of 30,000 consecutive rows (clustered).
* `v2_large_s30`, `v2_small_s30`: as `large_s30` / `small_s30` in a format-v2 table, so the peer
  writes position-delete Parquet files (one per data file) instead of deletion vectors.

The `dvmore` data set adds (`DV_MORE_SHAPES`): `large_m30`, 30% deleted by six DELETEs of 5% (each
file's vector merged with the one before, six snapshots), and `spark_large_s30` / `spark_multi_s30`,
the same shapes written and deleted from by Spark with Java Iceberg (one Puffin file per DELETE holding
every touched file's vector); their cases are n/a where the Java reference is not installed.

For every shape three queries, the same text on both sides over `iceberg_scan('<metadata.json>')`:
`dv_<shape>_full` (`count(*), sum(val)` of the whole table), `dv_<shape>_selective` (the same over a
1% id range) and `dv_<shape>_count` (`count(*)`). Results are compared. The MB columns of `dv_large_s30_full` and
`dv_small_s30_full` are each side's peak RSS in a fresh process (`FreshMemory`).

`dv_decode` times iceduck alone: deletion vectors from the Puffin bytes (already in memory) to the
live-row bit strings the scan filters with, over every DV of `large_s30`; `M positions/s` is per
core (CPU time of this process).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from benchmarks import Case, Context, FreshMemory, Result, benchmark
from benchmarks.datasets import DV_MORE_SHAPES, DV_SHAPES
from tests.support.peer import sql_string

if TYPE_CHECKING:
    import duckdb

QUERIES = {
    "full": "SELECT count(*), sum(val) FROM {t}",
    "selective": "SELECT count(*), sum(val) FROM {t} WHERE id BETWEEN {lo} AND {hi}",
    "count": "SELECT count(*) FROM {t}",
}


FRESH = ("large_s30", "small_s30")


def shape_kind(shape: str) -> str:
    """The data set holding a shape's table: `dv` or `dvmore`."""
    return "dvmore" if any(shape == s for s, *_ in DV_MORE_SHAPES) else "dv"


def table_info(tables: dict[str, Any], shape: str) -> dict[str, Any]:
    """A shape's table in its data set's `tables`; NotImplementedError (n/a) for a Spark-written
    shape the data set was built without (the Java reference was not installed)."""
    info = tables.get(shape)
    if info is None:
        raise NotImplementedError(f"{shape}: not in the data set (Spark-written: built at full scale where the Java reference is installed)")
    return cast(dict[str, Any], info)


def _case(ctx: Context, shape: str, query: str) -> Case:
    data = ctx.dataset(shape_kind(shape))
    try:
        info = table_info(data.info["tables"], shape)
    except NotImplementedError as e:
        reason = str(e)

        def missing(con: duckdb.DuckDBPyConnection) -> object:
            raise NotImplementedError(reason)

        return Case(peer_sql=None, iceduck=missing)
    rows = int(info["records"])
    lo = rows * 2 // 5  # a 1% range of ids in the middle of the table
    sql = QUERIES[query].format(t=f"iceberg_scan({sql_string(info['metadata_location'])})", lo=lo, hi=lo + rows // 100 - 1)

    def iceduck_side(con: duckdb.DuckDBPyConnection) -> object:
        return con.execute(sql).fetchall()

    return Case(
        peer_sql=sql,
        iceduck=iceduck_side,
        compare=True,
        extra={"data files": info["data_files"], "deleted": f"{info['deleted_records'] / rows:.1%}"},
        # the MB columns of these two: a fresh process per side (see benchmarks/README.md, Memory)
        fresh_memory=FreshMemory(sql, sql, runs=ctx.repeat) if query == "full" and shape in FRESH else None,
    )


def _register(shape: str, query: str) -> None:
    def setup(ctx: Context) -> Case:
        return _case(ctx, shape, query)

    setup.__doc__ = f"{QUERIES[query].split(' FROM')[0]} of the peer-written v3 table {shape} (DVs)"
    benchmark(f"dv_{shape}_{query}")(setup)


for _shape in (*(s for s, *_ in DV_SHAPES), *(s for s, *_ in DV_MORE_SHAPES)):
    for _query in QUERIES:
        _register(_shape, _query)


def decode_blobs(metadata_location: str) -> list[tuple[bytes, int, int, int]]:
    """(Puffin file bytes, blob offset, blob length, rows of its data file) for every DV of the table's
    current snapshot: what `dv_decode` decodes."""
    from iceduck.scan.planner import plan_scan
    from iceduck.table import Table

    found = []
    table = Table.load(metadata_location)
    for task in plan_scan(table, table.metadata.current_snapshot()).tasks:
        for d in task.deletes:
            puffin = Path(d.path.removeprefix("file://")).read_bytes()
            found.append((puffin, d.file.content_offset or 0, d.file.content_size_in_bytes or 0, task.file.record_count))
    return found


@benchmark("dv_decode", description="DV decode: Puffin bytes -> live-row bit strings (iceduck only)")
def dv_decode(ctx: Context) -> Case:
    from iceduck.puffin.puffin import read_deletion_vector
    from iceduck.read.deletes import live_bits_of

    data = ctx.dataset("dv")
    blobs = decode_blobs(data.info["tables"]["large_s30"]["metadata_location"])
    positions = int(data.info["tables"]["large_s30"]["deleted_records"])

    def decode() -> int:
        total = 0
        for puffin, offset, length, rows in blobs:
            bitmap = read_deletion_vector(puffin, offset, length)
            total += len(live_bits_of([bitmap], rows))
        return total

    def iceduck_side(con: duckdb.DuckDBPyConnection) -> object:
        cpu = time.process_time()
        size = decode()
        seconds = time.process_time() - cpu
        rate = positions / seconds / 1e6 if seconds > 0 else float("inf")
        return Result([(size,)], extra={"M positions/s": round(rate, 1), "cpu ms": round(seconds * 1e3, 2)})

    return Case(peer_sql=None, iceduck=iceduck_side, extra={"DVs": len(blobs), "positions": positions})
