"""Scan cases (issue "scan"): iceduck against the reference peer and PyIceberg 0.12.

Data set `scan` (see datasets.py): 20 M rows (id BIGINT sorted within each file, v DOUBLE, s VARCHAR,
ts TIMESTAMP) in 40 DuckDB-written Parquet files, partitioned by day(ts) over 20 days (2 files a
day), added to a v2 table with PyIceberg; a v3 table over the same files with 30% of every file's
rows deleted by deletion vectors. Data set `files4k`: 4,000 tiny files in 40 manifests.

Cases (each result checked equal between iceduck and the peer; PyIceberg's time and whether its
result is equal are extra columns, measured in a child process so its memory stays out of the
iceduck column). The main cases query the way users write SQL, through `Lake.sql` (the front door:
the WHERE prunes manifests, partitions and files):

  scan_a_full_sum        count(*), sum(v) over every row of the view lake.bench.events
  scan_b_one_day         iceberg_scan(t) WHERE <one partition of twenty> (filter on ts)
  scan_c_id_range        iceberg_scan(t) WHERE <a 0.05% range of id> (sorted within files)
  scan_d_or_two_days     iceberg_scan(t) WHERE <an OR of two partitions>; `files read` for both systems
  scan_e_dv_sum          (a) on the v3 view after 30% of rows were deleted with DVs
  scan_e_dv_selective    (b) on the v3 table: the DVs of the kept files only
  scan_f_plan_4k         one partition of a 4,000-file table: planning dominates

Variants: `_view` reads lake.bench.events WHERE ... through `Lake.sql`; `_user_view` a user's own
DuckDB view over it (`CREATE TEMP VIEW recent AS SELECT id, v, ts FROM lake.bench.events`; the
peer: the same view over `iceberg_scan(t)`) with the WHERE on the view; `_plain` runs the same
natural query on a plain DuckDB connection (no front door: identity partitions only, none here, so
DuckDB skips row groups by footers); `_filter` passes the predicate as `iceberg_scan(t, filter :=
'...')`; `scan_e_dv_sum_anti` applies the DVs as an anti join instead of the bit lookup; `_cold`
variants empty iceduck's caches (parsed manifests, SQL of recent scans, DV bit strings) before every
run. `iceduck files` counts the Parquet data files DuckDB opened for the query (its FileSystem log).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from benchmarks import Case, Context, FreshMemory, Result, benchmark
from benchmarks.datasets import SCAN_START, Dataset
from tests.support.peer import sql_string

if TYPE_CHECKING:
    import duckdb


def _day(k: int) -> str:
    import datetime as dt

    return (dt.date.fromisoformat(SCAN_START) + dt.timedelta(days=k)).isoformat()


def _one_day(k: int) -> str:
    return f"ts >= TIMESTAMP '{_day(k)}' AND ts < TIMESTAMP '{_day(k + 1)}'"


def _id_range(data: Dataset) -> tuple[int, int]:
    rows = data.info["records"]
    width = max(1, rows * 5 // 10_000)  # 0.05%
    low = rows // 3
    return low, low + width - 1


# -- PyIceberg, in a child process ---------------------------------------------------------------------

_PYICEBERG = r"""
import json, statistics, sys, time
import pyarrow.compute as pc
from pyiceberg.table import StaticTable
metadata, row_filter, columns, repeat = sys.argv[1], sys.argv[2], sys.argv[3].split(","), int(sys.argv[4])
table = StaticTable.from_metadata(metadata)
def run():
    scan = table.scan(row_filter=row_filter, selected_fields=tuple(columns)) if row_filter else table.scan(selected_fields=tuple(columns))
    t = scan.to_arrow()
    out = [t.num_rows] + [pc.sum(t.column(c)).as_py() for c in columns[1:]]
    return out
result = run()
runs = []
for _ in range(repeat):
    started = time.perf_counter()
    run()
    runs.append(time.perf_counter() - started)
print(json.dumps({"seconds": statistics.median(runs), "result": result}))
"""


def _pyiceberg(metadata: str, row_filter: str, columns: str, repeat: int) -> dict[str, Any]:
    """Median seconds and [count, sums...] of a PyIceberg scan; {"error": ...} when it cannot."""
    proc = subprocess.run(
        [sys.executable, "-c", _PYICEBERG, metadata, row_filter, columns, str(repeat)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:80]}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _extra_pyiceberg(found: dict[str, Any], rows: list[tuple[Any, ...]]) -> dict[str, object]:
    if "error" in found:
        return {"pyiceberg": f"n/a ({found['error']})"}
    seconds = found["seconds"]
    shown = f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.3f} s"
    ours = list(rows[0]) if rows else []
    same = [int(x) if isinstance(x, int) else x for x in ours] == found["result"]
    return {"pyiceberg": shown, "pyiceberg check": "ok" if same else f"MISMATCH {found['result']}"}


def _peer_files_read(metadata: str, where: str, total: int) -> int | str:
    """Data files the peer opens for a query: all minus those its 'Iceberg' log says it skipped."""
    from tests.support.peer import Peer, PeerError

    try:
        with Peer.ensure(quiet=True) as peer:
            peer.execute("CALL enable_logging('Iceberg')")
            peer.query(f"SELECT count(*) FROM iceberg_scan({sql_string(metadata)}) WHERE {where}")
            (skipped,) = peer.query(
                "SELECT count(*) FROM duckdb_logs() WHERE type = 'Iceberg' AND message LIKE '%skipped%data_file%'"
            )
        return total - int(skipped[0])
    except PeerError as e:
        return f"n/a ({str(e)[:40]})"


def _iceduck_files_opened(data: Dataset, sql: str, setup: tuple[str, ...] = ()) -> int:
    """Data files DuckDB opens when iceduck runs `sql` through `Lake.sql` (its FileSystem log),
    after the `setup` statements ran (also through `Lake.sql`)."""
    import duckdb

    import iceduck

    con = duckdb.connect()
    iceduck.register(con)
    try:
        lake = _lake(con, data)
        for statement in setup:
            lake.sql(statement)
        con.execute("CALL enable_logging('FileSystem')")
        rel = lake.sql(sql)
        assert rel is not None
        rel.fetchall()
        rows = con.execute(
            "SELECT DISTINCT json_extract_string(message, '$.path') FROM duckdb_logs() "
            "WHERE type = 'FileSystem' AND json_extract_string(message, '$.op') = 'OPEN' "
            "AND message LIKE '%.parquet%'"
        ).fetchall()
        return len(rows)
    finally:
        con.close()


# -- cases ---------------------------------------------------------------------------------------------

_LAKES: dict[int, Any] = {}
_SET_UP: dict[int, Any] = {}  # connections the case's setup statements ran on (held: ids stay theirs)


def _lake(con: duckdb.DuckDBPyConnection, data: Dataset) -> Any:
    """The `Lake` over the data set's catalog on this connection (made once per connection)."""
    from iceduck.catalog.sql import SqlCatalog
    from iceduck.lake import Lake

    found = _LAKES.get(id(con))
    if found is None or found.con is not con:
        found = Lake(data.root, con, SqlCatalog(str(data.root / "catalog.db"), name="bench"))
        _LAKES[id(con)] = found
    return found


def _filtered_case(
    ctx: Context,
    *,
    where: str | None,
    select: str = "count(*), sum(v)",
    py_filter: str | None = None,
    py_columns: str = "v,v",
    table: str = "metadata_location",
    mode: str = "where",
    files: bool = False,
    fresh: bool = False,
    cold: bool = False,
) -> Case:
    """`mode`: "where" (iceberg_scan(t) WHERE, through Lake.sql), "view" (lake.bench.<t> WHERE,
    through Lake.sql), "user_view" (the user's own DuckDB view over lake.bench.<t>, WHERE on it,
    through Lake.sql; the peer reads the same view text over iceberg_scan(t)), "plain"
    (iceberg_scan(t) WHERE on a plain connection), "filter" (iceberg_scan(t, filter := ...)),
    "anti" (DVs as an anti join)."""
    data = ctx.dataset("scan")
    metadata = data.info[table]
    loc = sql_string(metadata)
    where_sql = f" WHERE {where}" if where else ""
    peer_sql = f"SELECT {select} FROM iceberg_scan({loc}){where_sql}"
    name = "events_dv" if table == "dv_metadata_location" else "events"
    through_lake = mode in ("where", "view", "user_view")
    setup: tuple[str, ...] = ()
    peer_setup: tuple[str, ...] = ()
    if mode == "user_view":
        view = "CREATE TEMP VIEW recent AS SELECT id, v, ts FROM {}"
        setup = (view.format(f"lake.bench.{name}"),)
        peer_setup = (view.format(f"iceberg_scan({loc})"),)
        peer_sql = f"SELECT {select} FROM recent{where_sql}"
    if mode == "filter" and where:
        ours = f"SELECT {select} FROM iceberg_scan({loc}, filter := {sql_string(where)})"
    elif mode == "anti":
        ours = f"SELECT {select} FROM iceberg_scan({loc}, filter := 'id >= 0')"
    elif mode == "view":
        ours = f"SELECT {select} FROM lake.bench.{name}{where_sql}"
    elif mode == "user_view":
        ours = peer_sql
    else:
        ours = f"SELECT {select} FROM iceberg_scan({loc}){where_sql}"
    found = _pyiceberg(metadata, py_filter or "", py_columns, ctx.repeat) if py_filter is not None else {}
    extra: dict[str, object] = {}
    if files and where:
        extra["iceduck files"] = _iceduck_files_opened(data, ours, setup)
        extra["peer files"] = _peer_files_read(metadata, where, data.info["data_files"])

    def iceduck_side(con: duckdb.DuckDBPyConnection) -> object:
        if cold:
            from iceduck.duckdb.scan import clear_scan_caches

            clear_scan_caches()
        if through_lake:
            lake = _lake(con, data)
            if setup and _SET_UP.get(id(con)) is not con:  # once: DDL makes the front door plan again
                for statement in setup:
                    lake.sql(statement)
                _SET_UP[id(con)] = con
            rel = lake.sql(ours)
            rows = rel.fetchall()
        else:
            rows = con.execute(ours).fetchall()
        return Result(rows, extra=_extra_pyiceberg(found, rows) if found else {})

    # the same query text on both sides (Lake.sql's view is this scan on a plain connection)
    fresh_memory = FreshMemory(peer_sql, peer_sql, runs=ctx.repeat) if fresh else None
    return Case(
        peer_sql=peer_sql,
        iceduck=iceduck_side,
        compare=True,
        extra=extra,
        fresh_memory=fresh_memory,
        peer_setup=peer_setup,
    )


def _py_day(k: int) -> str:
    return f"ts >= '{_day(k)}T00:00:00' and ts < '{_day(k + 1)}T00:00:00'"


def _two_days() -> str:
    return f"({_one_day(3)}) OR ({_one_day(11)})"


@benchmark("scan_a_full_sum")
def scan_a(ctx: Context) -> Case:
    """(a) count(*), sum(v) over all 20 M rows of lake.bench.events (Lake.sql); MB: fresh processes."""
    return _filtered_case(ctx, where=None, mode="view", fresh=True, py_filter="")


@benchmark("scan_b_one_day")
def scan_b(ctx: Context) -> Case:
    """(b) one partition of twenty: iceberg_scan(t) WHERE <ts range> through Lake.sql."""
    return _filtered_case(ctx, where=_one_day(7), py_filter=_py_day(7), files=True)


@benchmark("scan_c_id_range")
def scan_c(ctx: Context) -> Case:
    """(c) a 0.05% range of the sorted (within files) id column, as a WHERE through Lake.sql."""
    low, high = _id_range(ctx.dataset("scan"))
    return _filtered_case(
        ctx, where=f"id BETWEEN {low} AND {high}", py_filter=f"id >= {low} and id <= {high}", files=True
    )


@benchmark("scan_d_or_two_days")
def scan_d(ctx: Context) -> Case:
    """(d) an OR of two partitions as a WHERE through Lake.sql; files read by each system."""
    return _filtered_case(ctx, where=_two_days(), py_filter=f"({_py_day(3)}) or ({_py_day(11)})", files=True)


@benchmark("scan_e_dv_sum")
def scan_e(ctx: Context) -> Case:
    """(e) sum(v) of lake.bench.events_dv after 30% of every file's rows were deleted with DVs (v3)."""
    return _filtered_case(ctx, where=None, table="dv_metadata_location", mode="view")


@benchmark("scan_e_dv_selective")
def scan_e_selective(ctx: Context) -> Case:
    """(e) one partition of the DV table as a WHERE through Lake.sql: only the kept files' DVs are read."""
    return _filtered_case(ctx, where=_one_day(7), table="dv_metadata_location", files=True)


@benchmark("scan_e_dv_sum_cold")
def scan_e_cold(ctx: Context) -> Case:
    """(e) with iceduck's caches emptied before every run (DVs decoded, manifests parsed each time)."""
    return _filtered_case(ctx, where=None, table="dv_metadata_location", mode="view", cold=True)


@benchmark("scan_f_plan_4k_cold")
def scan_f_cold(ctx: Context) -> Case:
    """(f) with iceduck's caches emptied before every run: planning reads and prunes all 40 manifests."""
    return _plan_4k(ctx, cold=True)


@benchmark("scan_f_plan_4k")
def scan_f(ctx: Context) -> Case:
    """(f) one partition of a 4,000-file table (100 partitions, 40 manifests) as a WHERE through Lake.sql."""
    return _plan_4k(ctx, cold=False)


def _plan_4k(ctx: Context, *, cold: bool) -> Case:
    data = ctx.dataset("files4k")
    loc = sql_string(data.metadata_location)
    found = _pyiceberg(data.metadata_location, "part = 17", "id,id", ctx.repeat)
    query = f"SELECT count(*), sum(id) FROM iceberg_scan({loc}) WHERE part = 17"

    def iceduck_side(con: duckdb.DuckDBPyConnection) -> object:
        if cold:
            from iceduck.duckdb.scan import clear_scan_caches

            clear_scan_caches()
        rel = _lake(con, data).sql(query)
        rows = rel.fetchall()
        return Result(rows, extra=_extra_pyiceberg(found, rows))

    return Case(
        peer_sql=query,
        iceduck=iceduck_side,
        compare=True,
        extra={"data files": data.info["data_files"]},
    )


# -- variants: the same questions asked other ways ------------------------------------------------------


@benchmark("scan_a_full_sum_scan")
def scan_a_scan(ctx: Context) -> Case:
    """(a) as iceberg_scan(t) on a plain connection."""
    return _filtered_case(ctx, where=None, mode="plain")


@benchmark("scan_b_one_day_view")
def scan_b_view(ctx: Context) -> Case:
    """(b) lake.bench.events WHERE ... through Lake.sql."""
    return _filtered_case(ctx, where=_one_day(7), mode="view")


@benchmark("scan_c_id_range_view")
def scan_c_view(ctx: Context) -> Case:
    """(c) lake.bench.events WHERE ... through Lake.sql."""
    low, high = _id_range(ctx.dataset("scan"))
    return _filtered_case(ctx, where=f"id BETWEEN {low} AND {high}", mode="view")


@benchmark("scan_d_or_two_days_view")
def scan_d_view(ctx: Context) -> Case:
    """(d) lake.bench.events WHERE ... through Lake.sql."""
    return _filtered_case(ctx, where=_two_days(), mode="view")


@benchmark("scan_b_one_day_user_view")
def scan_b_user_view(ctx: Context) -> Case:
    """(b) the user's own view over lake.bench.events (the peer: over iceberg_scan), WHERE on it."""
    return _filtered_case(ctx, where=_one_day(7), mode="user_view", files=True)


@benchmark("scan_c_id_range_user_view")
def scan_c_user_view(ctx: Context) -> Case:
    """(c) the user's own view over lake.bench.events (the peer: over iceberg_scan), WHERE on it."""
    low, high = _id_range(ctx.dataset("scan"))
    return _filtered_case(ctx, where=f"id BETWEEN {low} AND {high}", mode="user_view", files=True)


@benchmark("scan_b_one_day_plain")
def scan_b_plain(ctx: Context) -> Case:
    """(b) the natural WHERE on a plain connection (no front door; ts is not an identity partition)."""
    return _filtered_case(ctx, where=_one_day(7), mode="plain")


@benchmark("scan_b_one_day_filter")
def scan_b_filter(ctx: Context) -> Case:
    """(b) with the predicate as iceberg_scan(t, filter := '...')."""
    return _filtered_case(ctx, where=_one_day(7), mode="filter")


@benchmark("scan_c_id_range_filter")
def scan_c_filter(ctx: Context) -> Case:
    """(c) with the predicate as iceberg_scan(t, filter := '...')."""
    low, high = _id_range(ctx.dataset("scan"))
    return _filtered_case(ctx, where=f"id BETWEEN {low} AND {high}", mode="filter")


@benchmark("scan_e_dv_sum_anti")
def scan_e_anti(ctx: Context) -> Case:
    """(e) with the DVs applied as an anti join on (file_index, file_row_number)."""
    return _filtered_case(ctx, where=None, table="dv_metadata_location", mode="anti")
