"""Maintenance cases (issue 5): what maintenance buys a streaming table, and what a rewrite costs.

* `maintenance_query_before` / `maintenance_query_after`: the scenario table of
  `tests/maintenance/test_maintenance_scenario.py` (300 small appends over 3 day partitions, 50 DV deletes of 8
  rows; small scale: 60 and 10) before and after the recommended maintenance (data rewrite and
  manifest rewrite; no expiry, so the "before" metadata file still reads). The timed query is
  `SELECT count(*), sum(amount) ... WHERE day = DATE '2022-01-09'` through `iceberg_scan` (iceduck)
  and the reference peer's `iceberg_scan`, on the same metadata file; results must agree. Extra
  columns: cold planning time (metadata caches cleared, `plan_scan` with the filter), files read
  (data files kept plus the delete files they need) and bytes scanned (their sizes; a DV counts its
  blob), and manifests read.
* `maintenance_rewrite`: rewriting every file of a table (`rewrite_all`, 1% of rows deleted by
  DVs, so deletes are applied and row lineage carried) against DuckDB's own
  `COPY (SELECT * FROM read_parquet([...])) TO ... (COMPRESSION zstd)` of the same files in this
  process. `vs COPY` is the ratio of medians (target: within 2x); planning and the commit are
  included on iceduck's side. Before every run the table's pointer is set back.
"""

from __future__ import annotations

import datetime as dt
import random
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import Case, Context, Result, benchmark

if TYPE_CHECKING:
    import duckdb

DATA = Path(__file__).resolve().parent / ".data" / "maintenance"
SCENARIO = {"small": (60, 10), "full": (300, 50)}
REWRITE_ROWS = {"small": (200_000, 20), "full": (10_000_000, 100)}
QUERY = "SELECT count(*), sum(amount) FROM iceberg_scan({t}) WHERE day = DATE '2022-01-09'"


def _median(fn: Callable[[], object], repeat: int, before: Callable[[], object] = lambda: None) -> float:
    before()
    fn()
    runs = []
    for _ in range(repeat):
        before()
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def _scenario(scale: str) -> dict[str, str]:
    """Build (once per process and scale) the scenario table and maintain it; both metadata files."""
    found = _SCENARIOS.get(scale)
    if found is not None:
        return found
    import pyarrow as pa

    import iceduck
    from iceduck.maintenance import Maintainer

    appends, deletes = SCENARIO[scale]
    folder = DATA / f"scenario-{scale}"
    shutil.rmtree(folder, ignore_errors=True)
    lake = iceduck.connect(folder / "warehouse")
    lake.create_namespace("bench")
    t = lake.create_table(
        "bench.stream", [("id", "BIGINT"), ("day", "DATE"), ("v", "VARCHAR"), ("amount", "DOUBLE")],
        partition_by=["day"],
    )  # fmt: skip
    for i in range(appends):
        ids = list(range(i * 10, (i + 1) * 10))
        t.append(
            pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "day": pa.array([19000 + i % 3] * 10, pa.date32()),
                    "v": [f"v{x}" for x in ids],
                    "amount": [x * 0.25 for x in ids],
                }
            )
        )
    rng = random.Random(5)
    for _ in range(deletes):
        t.delete(f"id IN ({', '.join(map(str, rng.sample(range(appends * 10), 8)))})")
    before = t.metadata_location
    m = Maintainer.for_lake(lake, "bench.stream")
    m.rewrite_data_files(dry_run=False)
    m.rewrite_manifests(dry_run=False)
    found = _SCENARIOS[scale] = {"before": before, "after": t.metadata_location}
    lake.close()
    return found


_SCENARIOS: dict[str, dict[str, str]] = {}


def _scan_numbers(metadata: str, repeat: int) -> dict[str, Any]:
    from iceduck.expr import equal
    from iceduck.scan.planner import plan_scan
    from iceduck.table import Table, clear_caches

    def plan() -> Any:
        table = Table.load(metadata)
        return plan_scan(table, table.metadata.current_snapshot(), equal("day", dt.date(2022, 1, 9)))

    seconds = _median(plan, repeat, before=clear_caches)
    p = plan()
    deletes = {(d.path, d.file.content_offset): d.file for task in p.tasks for d in task.deletes}
    delete_bytes = sum(
        f.content_size_in_bytes if f.content_size_in_bytes is not None else f.file_size_in_bytes
        for f in deletes.values()
    )
    return {
        "planning ms": round(seconds * 1000, 1),
        "manifests read": p.report.manifests
        - p.report.manifests_skipped
        + p.report.delete_manifests
        - p.report.delete_manifests_skipped,
        "data files read": len(p.tasks),
        "delete files read": len({path for path, _ in deletes}),
        "bytes scanned": sum(task.file.file_size_in_bytes for task in p.tasks) + delete_bytes,
    }


def _query_case(ctx: Context, which: str) -> Case:
    from tests.support.peer import sql_string

    metadata = _scenario(ctx.scale)[which]
    sql = QUERY.format(t=sql_string(metadata))

    def iceduck_side(con: duckdb.DuckDBPyConnection) -> object:
        return con.execute(sql).fetchall()

    return Case(peer_sql=sql, iceduck=iceduck_side, compare=True, extra=_scan_numbers(metadata, ctx.repeat))


@benchmark("maintenance_query_before", description="a day's sum on the streaming table before maintenance")
def query_before(ctx: Context) -> Case:
    return _query_case(ctx, "before")


@benchmark("maintenance_query_after", description="the same query after the recommended maintenance")
def query_after(ctx: Context) -> Case:
    return _query_case(ctx, "after")


@benchmark(
    "maintenance_rewrite",
    description="rewrite every file (deletes applied) vs DuckDB's COPY of the same rows",
)
def rewrite(ctx: Context) -> Case:
    import iceduck
    from iceduck.maintenance.rewrite_data import RewriteOptions, execute_rewrite_data, plan_rewrite_data
    from iceduck.transaction.commit import TableCommitter

    n, files = REWRITE_ROWS[ctx.scale]
    folder = DATA / f"rewrite-{ctx.scale}"
    shutil.rmtree(folder, ignore_errors=True)
    lake = iceduck.connect(folder / "warehouse")
    lake.create_namespace("bench")
    t = lake.create_table(
        "bench.rw",
        [("id", "BIGINT"), ("k", "INTEGER"), ("station", "VARCHAR"), ("d", "DATE"), ("x", "DOUBLE")],
    )
    for f in range(files):
        lo, hi = f * n // files, (f + 1) * n // files
        t.append(
            lake.con.sql(
                f"SELECT i::BIGINT AS id, (i % 1000)::INTEGER AS k, 'station-' || (i % 500) AS station, "
                f"DATE '2026-01-01' + (i % 30)::INTEGER AS d, (i * 0.5)::DOUBLE AS x FROM range({lo}, {hi}) t(i)"
            )
        )
    t.delete("id % 100 = 7")
    base = t.metadata_location
    committer = TableCommitter(lake.catalog, "bench", "rw", lake.io)
    paths = [
        r[0]
        for r in lake.con.execute(
            f"SELECT file_path FROM iceberg_files('{base}', content := 'data')"
        ).fetchall()
    ]

    def reset() -> None:
        current = t.metadata_location
        if current != base:
            lake.catalog.commit("bench", "rw", current, base)

    written: dict[str, Any] = {}

    def run_rewrite() -> None:
        table = committer.load()
        p = plan_rewrite_data(table, RewriteOptions(rewrite_all=True))
        written["result"] = execute_rewrite_data(committer.load, committer.commit, p)

    listing = "[" + ", ".join(f"'{p}'" for p in paths) + "]"
    copy_target = folder / "copy.parquet"

    def run_copy() -> None:
        lake.con.execute(
            f"COPY (SELECT * FROM read_parquet({listing})) TO '{copy_target}' (FORMAT parquet, COMPRESSION zstd)"
        )

    copy_s = _median(run_copy, ctx.repeat)
    rewrite_s = _median(run_rewrite, ctx.repeat, before=reset)
    rows = written["result"].rows_written

    def iceduck_side(con: duckdb.DuckDBPyConnection) -> object:
        reset()
        run_rewrite()
        return Result([(written["result"].rows_written,)])

    return Case(
        peer_sql=None,
        iceduck=iceduck_side,
        extra={
            "rows in": n,
            "files in": files,
            "rows out": rows,
            "rewrite s": round(rewrite_s, 3),
            "COPY zstd s": round(copy_s, 3),
            "vs COPY": f"{rewrite_s / copy_s:.2f}x",
            "rows/s": f"{rows / rewrite_s:,.0f}",
        },
    )
