"""The fuzzer's scan process: reads one JSON task per line ({"target": path, "allow_bare": bool}),
scans it with iceberg_scan on a fresh connection after emptying every cache, and answers one JSON
line: {"rows": [...sorted row reprs...]} or {"error": message}. Runs apart from pytest so a hang or
a memory blow-up kills only this process (`tests/reliability/test_fuzz.py` restarts it)."""

from __future__ import annotations

import json
import sys

import duckdb

import iceduck
from iceduck.duckdb.scan import clear_scan_caches


def main() -> None:
    for line in sys.stdin:
        task = json.loads(line)
        clear_scan_caches()
        con = duckdb.connect()
        try:
            iceduck.register(con)
            bare = "true" if task.get("allow_bare") else "false"
            rows = con.execute(
                f"SELECT * FROM iceberg_scan(?, allow_bare_deletion_vectors := {bare})", [task["target"]]
            ).fetchall()
            out: dict[str, object] = {"rows": sorted(repr(r) for r in rows)}
        except Exception as e:  # the outcome is what is classified: every exception is an answer
            out = {"error": f"{type(e).__module__}.{type(e).__name__}: {e}"}
        finally:
            con.close()
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
