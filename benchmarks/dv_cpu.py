"""CPU time of the `dv` cases on both sides, for a loaded machine (issue 28).

    .venv/bin/python -m benchmarks.dv_cpu [--scale full] [--repeat 5] [--shapes large_s30,...]

On a 2-core machine shared with other work, wall times mostly measure the scheduler: both sides wait
for a core. This runs the `bench_dv` queries alternately on iceduck (this process) and the peer (its
runner process, one statement per request) and reports, per case, the median wall time and the
median CPU time (user + system of all threads: `time.process_time()` here, `/proc/<pid>/stat` of
the peer's process) with their ratios iceduck / peer. Results are compared first; on a quiet
machine the wall ratio approaches the CPU ratio (both sides use every core).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_dv import QUERIES
from benchmarks.datasets import DV_SHAPES, dataset
from tests.support.peer import Peer, sql_string


def _peer_cpu(peer: Peer) -> float:
    proc: Any = peer._proc  # the runner process the peer's statements run in
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    """Print one line per (shape, query): wall and CPU medians of both sides and their ratios."""
    import duckdb

    import iceduck

    parser = argparse.ArgumentParser(prog="python -m benchmarks.dv_cpu")
    parser.add_argument("--scale", choices=("small", "full"), default="full")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--shapes", default=",".join(s for s, *_ in DV_SHAPES))
    parser.add_argument("--queries", default=",".join(QUERIES))
    args = parser.parse_args(argv)
    tables = dataset("dv", args.scale).info["tables"]
    con = duckdb.connect()
    iceduck.register(con)
    peer = Peer.ensure(quiet=True)
    peer.query("SELECT 1")
    print(f"{'case':26s} {'iceduck s':>9s} {'peer s':>8s} {'wall':>6s} {'iceduck cpu':>11s} {'peer cpu':>8s} {'cpu':>6s}")
    for shape in args.shapes.split(","):
        info = tables[shape]
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
            print(
                f"{'dv_' + shape + '_' + query:26s} {w[0]:9.3f} {w[1]:8.3f} {w[0] / w[1]:5.2f}x "
                f"{c[0]:11.3f} {c[1]:8.3f} {c[0] / max(c[1], 1e-3):5.2f}x",
                flush=True,
            )
    peer.close()
    con.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
