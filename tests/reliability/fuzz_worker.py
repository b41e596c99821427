"""The fuzzer's scan process: reads one JSON task per line ({"target": path, "allow_bare": bool}),
scans it with iceberg_scan on a fresh connection after emptying every cache, and answers one JSON
line: {"rows": [...sorted row reprs...]} or {"error": message}. Runs apart from pytest so a hang or
a memory blow-up kills only this process (`tests/reliability/test_fuzz.py` restarts it).

The scan runs where users meet errors: through `Lake.sql` (the shell's path: its front door names
the file behind DuckDB's unnamed Parquet decoding errors), or with `ICEDUCK_FUZZ_DOOR=plain` on a
plain DuckDB connection with `iceduck.register(con)`."""

from __future__ import annotations

import json
import os
import sys
import tempfile

import duckdb

import iceduck
from iceduck.duckdb.scan import clear_scan_caches
from iceduck.lake import connect


def main() -> None:
    plain = os.environ.get("ICEDUCK_FUZZ_DOOR") == "plain"
    # beside the copies cache: the test's temporary folder, removed with it (this process is killed)
    parent = os.environ.get("ICEDUCK_CACHE_DIR")
    if parent:
        os.makedirs(parent, exist_ok=True)
    warehouse = tempfile.mkdtemp(prefix="lake-", dir=parent)
    for line in sys.stdin:
        task = json.loads(line)
        clear_scan_caches()
        bare = "true" if task.get("allow_bare") else "false"
        query = f"SELECT * FROM iceberg_scan(?, allow_bare_deletion_vectors := {bare})"
        con = duckdb.connect() if plain else None
        lake = None if plain else connect(warehouse)
        try:
            if con is not None:
                iceduck.register(con)
                rows = con.execute(query, [task["target"]]).fetchall()
            else:
                assert lake is not None
                rel = lake.sql(query, [task["target"]])
                assert rel is not None
                rows = rel.fetchall()
            out: dict[str, object] = {"rows": sorted(repr(r) for r in rows)}
        except Exception as e:  # the outcome is what is classified: every exception is an answer
            out = {"error": f"{type(e).__module__}.{type(e).__name__}: {e}"}
        finally:
            if con is not None:
                con.close()
            if lake is not None:
                lake.close()
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
