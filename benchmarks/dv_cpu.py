"""CPU time and peak memory of the `dv` cases on both sides, for a loaded machine (issue 28).

    .venv/bin/python -m benchmarks.dv_cpu [--scale full] [--repeat 5] [--shapes large_s30,...] [--memory 3]

On a 2-core machine shared with other work, wall times mostly measure the scheduler: both sides wait
for a core. This runs the `bench_dv` queries alternately on iceduck (this process) and the peer (its
runner process, one statement per request) and reports, per case, the median wall time and the
median CPU time (user + system of all threads: `time.process_time()` here, `/proc/<pid>/stat` of
the peer's process) with their ratios iceduck / peer. Results are compared first; on a quiet
machine the wall ratio approaches the CPU ratio (both sides use every core).

`--memory N` (N > 0) adds each side's peak RSS in MB for the case: the median of N fresh processes
per side, each importing DuckDB, making the Iceberg functions available and running the query once
(`harness.fresh_peak`, the `FreshMemory` measurement of benchmarks/README.md), and their ratio.
Shapes come from the `dv` and `dvmore` data sets (`bench_dv.shape_kind`); a Spark-written shape the
data set lacks (no Java reference) is skipped with a note.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_dv import QUERIES, shape_kind
from benchmarks.datasets import DV_MORE_SHAPES, DV_SHAPES, dataset
from benchmarks.harness import fresh_peak
from tests.support.peer import Peer, sql_string


def _peer_cpu(peer: Peer) -> float:
    proc: Any = peer._proc  # the runner process the peer's statements run in
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _memory(sql: str, peer: Peer, runs: int) -> str:
    """' <iceduck MB> <peer MB> <ratio>x': median peaks of `runs` fresh processes per side."""
    ours = statistics.median(fresh_peak("iceduck", sql)[1] for _ in range(runs)) / 2**20
    theirs = statistics.median(fresh_peak("peer", sql, peer)[1] for _ in range(runs)) / 2**20
    return f" {ours:7.0f} {theirs:7.0f} {ours / theirs:5.2f}x"


def main(argv: list[str] | None = None) -> int:
    """Print one line per (shape, query): wall and CPU medians of both sides and their ratios."""
    import duckdb

    import iceduck

    shapes = [s for s, *_ in DV_SHAPES] + [s for s, *_ in DV_MORE_SHAPES]
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dv_cpu")
    parser.add_argument("--scale", choices=("small", "full"), default="full")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--shapes", default=",".join(shapes))
    parser.add_argument("--queries", default=",".join(QUERIES))
    parser.add_argument("--memory", type=int, default=0, help="fresh processes per side for the peak MB columns")
    args = parser.parse_args(argv)
    tables: dict[str, dict[str, Any]] = {}
    con = duckdb.connect()
    iceduck.register(con)
    peer = Peer.ensure(quiet=True)
    peer.query("SELECT 1")
    header = f"{'case':28s} {'iceduck s':>9s} {'peer s':>8s} {'wall':>6s} {'iceduck cpu':>11s} {'peer cpu':>8s} {'cpu':>6s}"
    if args.memory > 0:
        header += f" {'ice MB':>7s} {'peer MB':>7s} {'MB':>6s}"
    print(header)
    for shape in args.shapes.split(","):
        kind = shape_kind(shape)
        if kind not in tables:
            tables[kind] = dataset(kind, args.scale).info["tables"]
        info = tables[kind].get(shape)
        if info is None:
            print(f"{'dv_' + shape:28s} not in the {kind} data set (Spark-written: full scale with the Java reference only)", flush=True)
            continue
        rows = int(info["records"])
        lo = rows * 2 // 5
        for query in args.queries.split(","):
            table = f"iceberg_scan({sql_string(info['metadata_location'])})"
            sql = QUERIES[query].format(t=table, lo=lo, hi=lo + rows // 100 - 1)
            ours = [tuple(r) for r in con.execute(sql).fetchall()]  # also the warm-up
            theirs = [tuple(r) for r in peer.query(sql)]
            if ours != theirs:
                raise SystemExit(f"dv_{shape}_{query}: iceduck {ours} != peer {theirs}")
            walls: tuple[list[float], list[float]] = ([], [])
            cpus: tuple[list[float], list[float]] = ([], [])
            for _ in range(args.repeat):
                cpu, wall = time.process_time(), time.perf_counter()
                con.execute(sql).fetchall()
                walls[0].append(time.perf_counter() - wall)
                cpus[0].append(time.process_time() - cpu)
                cpu = _peer_cpu(peer)
                (timing,) = peer.time(sql, repeat=1, warmup=0)
                cpus[1].append(_peer_cpu(peer) - cpu)
                walls[1].append(timing.runs[0])
            w = [statistics.median(x) for x in walls]
            c = [statistics.median(x) for x in cpus]
            line = (
                f"{'dv_' + shape + '_' + query:28s} {w[0]:9.3f} {w[1]:8.3f} {w[0] / w[1]:5.2f}x "
                f"{c[0]:11.3f} {c[1]:8.3f} {c[0] / max(c[1], 1e-3):5.2f}x"
            )
            if args.memory > 0:
                line += _memory(sql, peer, args.memory)
            print(line, flush=True)
    peer.close()
    con.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
