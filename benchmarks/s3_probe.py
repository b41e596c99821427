"""Where the S3 scans' time goes against the peer (issue 29): ``python -m benchmarks.s3_probe [--dv]
[--realtime]``.

On the `bench_s3` table (4 M rows, 10 files, on a local s3rver), warm, at 1 and 2 threads:
- iceduck's `iceberg_scan` (what the benchmark times),
- the scan SQL it returns, read through the registered filesystem,
- the same SQL over local copies of the files (DuckDB 2.0.1 reading natively),
- the peer (DuckDB 1.5.5 + httpfs) on the same table,
then, at 2 threads: the same with `validate_external_file_cache = 'NO_VALIDATION'`, the bind alone
(`EXPLAIN`), and one HEAD of the metadata file.

`--realtime` runs the timed part at real-time priority (`chrt -r 10`, this process and its children
only, back to normal after): the other processes of a loaded machine then wait, which gives
quiet-machine times. Results and their reading: benchmarks/README.md, "S3".
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def _tree(pid: int) -> list[int]:
    found = [pid]
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        except OSError:
            continue
        for child in children:
            found += _tree(int(child))
    return found


@contextlib.contextmanager
def _realtime(on: bool) -> Iterator[None]:
    if not on:
        yield
        return
    for pid in _tree(os.getpid()):
        subprocess.run(["chrt", "-a", "-r", "-p", "10", str(pid)], check=False, capture_output=True)
    try:
        yield
    finally:
        for pid in _tree(os.getpid()):
            subprocess.run(["chrt", "-a", "-o", "-p", "0", str(pid)], check=False, capture_output=True)


def _median_ms(run: Callable[[], object], n: int) -> float:
    run()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return sorted(times)[n // 2] * 1e3


def _query(con: Any, sql: str, params: list[Any]) -> Callable[[], object]:
    return lambda: con.execute(sql, params).fetchall()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.s3_probe")
    parser.add_argument("--dv", action="store_true", help="the table with deletion vectors")
    parser.add_argument("--realtime", action="store_true", help="time at real-time priority")
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args(argv)

    import duckdb

    import iceduck
    from benchmarks import Context
    from benchmarks import bench_s3 as bench
    from iceduck.duckdb import capture as scan_module  # iceberg_scan's UDF asks capture.scan_sql_for
    from iceduck.io import s3_clients, s3_settings
    from tests.support.peer import Peer, sql_string

    env = bench._environment(Context("full", 1))
    metadata = env.dv if args.dv else env.events
    returned: list[str] = []
    scan_sql = scan_module.scan_sql_for

    def capture(*a: Any, **k: Any) -> str:
        returned.append(scan_sql(*a, **k))
        return returned[-1]

    scan_module.scan_sql_for = capture
    con = duckdb.connect()
    iceduck.register(con)
    select = "SELECT count(*), sum(id), min(s)"
    macro = f"{select} FROM iceberg_scan(?, filter := ?)"
    con.execute(macro, [metadata, None]).fetchall()
    scan_module.scan_sql_for = scan_sql
    through_fs = f"{select} FROM ({returned[-1]})"
    local = Path(tempfile.mkdtemp(prefix="iceduck-s3-probe-"))
    for path in re.findall(r"'(s3://[^']+\.parquet)'", through_fs):
        blob = con.execute("SELECT content FROM read_blob(?)", [path]).fetchone()
        assert blob is not None
        (local / path.replace("/", "_")).write_bytes(blob[0])
    native = re.sub(
        r"'(s3://[^']+\.parquet)'", lambda m: f"'{local / m.group(1).replace('/', '_')}'", through_fs
    )
    peer_sql = f"{select} FROM iceberg_scan({sql_string(metadata)})"
    settings = s3_settings.REGISTRY.settings_for(metadata)
    reader = s3_clients.reader(settings)
    n = args.runs
    with Peer.ensure(quiet=True) as peer:
        peer.execute(f"LOAD {sql_string(env.httpfs)}")
        peer.execute(env.secret_sql())
        print(f"load average before: {os.getloadavg()[0]:.1f}")
        with _realtime(args.realtime):
            for threads in (1, 2):
                con.execute(f"SET threads = {threads}")
                peer.execute(f"SET threads = {threads}")
                cases: list[tuple[str, Callable[[], object]]] = [
                    ("iceberg_scan", lambda: con.execute(macro, [metadata, None]).fetchall()),
                    ("scan SQL through the filesystem", lambda: con.execute(through_fs).fetchall()),
                    ("scan SQL over local copies", lambda: con.execute(native).fetchall()),
                    ("peer", lambda: peer.query(peer_sql)),
                ]
                for name, run in cases:
                    print(f"threads={threads}  {name:34} {_median_ms(run, n):6.1f} ms", flush=True)
            con.execute("SET validate_external_file_cache = 'NO_VALIDATION'")
            for name, sql, params in (
                ("iceberg_scan, NO_VALIDATION", macro, [metadata, None]),
                ("scan SQL through fs, NO_VALIDATION", through_fs, []),
            ):
                print(f"threads=2  {name:34} {_median_ms(_query(con, sql, params), n):6.1f} ms")
            con.execute("RESET validate_external_file_cache")
            for name, sql, params in (
                ("EXPLAIN iceberg_scan (the bind)", macro, [metadata, None]),
                ("EXPLAIN scan SQL", through_fs, []),
            ):
                ms = _median_ms(_query(con, f"EXPLAIN {sql}", params), n)
                print(f"threads=2  {name:34} {ms:6.2f} ms")
            key = metadata.removeprefix("s3://")
            print(
                f"           {'HEAD of the metadata file':34} {_median_ms(lambda: reader.info(key), n):6.2f} ms"
            )
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    con.close()
    shutil.rmtree(local, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
