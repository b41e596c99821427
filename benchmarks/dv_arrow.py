"""Measures handing DuckDB Arrow instead of `read_parquet` for files with deletion vectors (issue 28).

    .venv/bin/python -m benchmarks.dv_arrow [--scale full] [--repeat 5] [--shapes large_s30,...]

The idea measured: read the needed column with pyarrow's C++ Parquet reader (a row group per task,
two threads, the GIL released), drop deleted rows with the live-row mask of the file's deletion
vectors (`Roaring64.to_bitset`, inverted: Arrow's bit order, no Python loop per row), and give
DuckDB the batches as a `RecordBatchReader`. For each shape it runs `count(*), sum(val)` and
`count(*)` and prints the CPU milliseconds (all threads; medians of `--repeat`) of

* `iceduck`: today's `iceberg_scan` (native `read_parquet`, `get_bit` on the live-row bits);
* `pa read`: pyarrow reading `val` alone, nothing filtered, nothing handed over (a floor);
* `filter` / `take`: read + `RecordBatch.filter(mask)` / `take(indices_nonzero(mask))` per row
  group, handed to DuckDB, which sums (the whole route);
* `counts`: for `count(*)`, batches of a NULL column as long as each file's live rows (a source
  that knows the query reads no column needs no data file);
* `peer`: DuckDB 1.5.5's extension on the same text.

Every variant's result is compared with the peer's first. Masks are built once, outside the timings
(iceduck's decode costs ~5 ms per table, `dv_decode`).
"""

from __future__ import annotations

import argparse
import collections
import functools
import statistics
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.bench_dv import shape_kind
from benchmarks.datasets import dataset
from benchmarks.dv_cpu import _peer_cpu
from tests.support.peer import Peer, sql_string


def _local(path: str) -> str:
    return path.removeprefix("file://").removeprefix("file:")


def live_masks(metadata_location: str) -> list[tuple[str, Any]]:
    """(data file, its live-row mask as an Arrow BooleanArray) for every file of the current snapshot."""
    import numpy as np
    import pyarrow as pa

    from iceduck.puffin.puffin import read_deletion_vector
    from iceduck.scan.planner import plan_scan
    from iceduck.table import Table

    table = Table.load(metadata_location)
    out = []
    for task in plan_scan(table, table.metadata.current_snapshot()).tasks:
        rows = task.file.record_count
        deleted = np.zeros((rows + 7) // 8, np.uint8)
        for d in task.deletes:
            puffin = Path(_local(table.resolve(d.path))).read_bytes()
            bitmap = read_deletion_vector(puffin, d.file.content_offset or 0, d.file.content_size_in_bytes or 0)
            deleted |= bitmap.to_bitset(rows)
        live = np.invert(deleted)
        out.append((_local(table.resolve(task.path)), pa.BooleanArray.from_buffers(pa.bool_(), rows, [None, pa.py_buffer(live)])))
    return out


def _row_groups(files: list[tuple[str, Any]]) -> list[tuple[str, int, Any]]:
    import pyarrow.parquet as pq

    units = []
    for path, mask in files:
        meta = pq.ParquetFile(path).metadata
        at = 0
        for g in range(meta.num_row_groups):
            n = meta.row_group(g).num_rows
            units.append((path, g, mask.slice(at, n)))
            at += n
    return units


def _batches(units: list[tuple[str, int, Any]], pool: ThreadPoolExecutor, how: str) -> Iterator[Any]:
    """The live rows of `val`, row group by row group in order, read two at a time."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    def work(unit: tuple[str, int, Any]) -> Any:
        path, group, mask = unit
        t = pq.ParquetFile(path).read_row_group(group, columns=["val"], use_threads=False)
        if how == "read":
            return t
        return t.filter(mask) if how == "filter" else t.take(pc.indices_nonzero(mask))

    pending: collections.deque[Any] = collections.deque()
    for unit in units:
        pending.append(pool.submit(work, unit))
        if len(pending) >= 3:
            yield from pending.popleft().result().to_batches()
    while pending:
        yield from pending.popleft().result().to_batches()


def _run(con: Any, sql: str) -> Any:
    return con.execute(sql).fetchall()


def _arrow(con: Any, text: str, schema: Any, units: list[tuple[str, int, Any]], pool: ThreadPoolExecutor, how: str) -> Any:
    import pyarrow as pa

    con.register("dv_arrow_rows", pa.RecordBatchReader.from_batches(schema, _batches(units, pool, how)))
    try:
        return con.execute(text.replace("{t}", "dv_arrow_rows")).fetchall()
    finally:
        con.unregister("dv_arrow_rows")


def _read_only(units: list[tuple[str, int, Any]], pool: ThreadPoolExecutor) -> None:
    for _ in _batches(units, pool, "read"):
        pass


def _counts(con: Any, text: str, live: list[int]) -> Any:
    import pyarrow as pa

    schema = pa.schema([("c", pa.null())])

    def gen() -> Iterator[Any]:
        block = 1 << 20
        full = pa.RecordBatch.from_arrays([pa.nulls(block)], schema=schema)
        for n in live:
            while n > 0:
                yield full if n >= block else full.slice(0, n)
                n -= block

    con.register("dv_arrow_rows", pa.RecordBatchReader.from_batches(schema, gen()))
    try:
        return con.execute(text.replace("{t}", "dv_arrow_rows")).fetchall()
    finally:
        con.unregister("dv_arrow_rows")


def main(argv: list[str] | None = None) -> int:
    """Print, per shape and query, the CPU ms of each variant and its ratio to the peer."""
    import duckdb
    import pyarrow as pa

    import iceduck

    parser = argparse.ArgumentParser(prog="python -m benchmarks.dv_arrow")
    parser.add_argument("--scale", choices=("small", "full"), default="full")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--shapes", default="large_s30,large_s90,large_s01,large_c30,small_s30,spark_large_s30")
    args = parser.parse_args(argv)
    con = duckdb.connect()
    iceduck.register(con)
    peer = Peer.ensure(quiet=True)
    peer.query("SELECT 1")
    pool = ThreadPoolExecutor(2)
    schema = pa.schema([("val", pa.float64())])
    for shape in args.shapes.split(","):
        info = dataset(shape_kind(shape), args.scale).info["tables"].get(shape)
        if info is None:
            print(f"{shape}: not in the data set", flush=True)
            continue
        files = live_masks(info["metadata_location"])
        units = _row_groups(files)
        live = [int(m.true_count) for _, m in files]
        table = f"iceberg_scan({sql_string(info['metadata_location'])})"
        for query, text in (("full", "SELECT count(*), sum(val) FROM {t}"), ("count", "SELECT count(*) FROM {t}")):
            sql = text.replace("{t}", table)
            variants: dict[str, Callable[[], Any]] = {"iceduck": functools.partial(_run, con, sql)}
            if query == "full":
                variants["pa read"] = functools.partial(_read_only, units, pool)
                for how in ("filter", "take"):
                    variants[how] = functools.partial(_arrow, con, text, schema, units, pool, how)
            else:
                variants["counts"] = functools.partial(_counts, con, text, live)
            truth = [tuple(r) for r in peer.query(sql)]
            for name, run in variants.items():
                got = run()
                if got is not None and [tuple(r) for r in got] != truth:
                    raise SystemExit(f"{shape} {query} {name}: {got} != peer {truth}")
            cpu: dict[str, list[float]] = {name: [] for name in (*variants, "peer")}
            for _ in range(args.repeat):
                for name, run in variants.items():
                    start = time.process_time()
                    run()
                    cpu[name].append(time.process_time() - start)
                start_peer = _peer_cpu(peer)
                peer.query(sql)
                cpu["peer"].append(_peer_cpu(peer) - start_peer)
            med = {name: statistics.median(v) * 1e3 for name, v in cpu.items()}
            parts = [f"{name} {ms:.0f}" + ("" if name == "peer" else f" ({ms / max(med['peer'], 1):.2f}x)") for name, ms in med.items()]
            print(f"dv_{shape}_{query}: " + ", ".join(parts), flush=True)
    pool.shutdown()
    peer.close()
    con.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
