"""`matching_positions`: the rows a DELETE or UPDATE predicate touches, per data file.

Checked against positions read independently (pyarrow.parquet: a row's position is its index in
the file), on a table whose files already carry deletion vectors; and for what the step costs a
process: no per-row Arrow data (issue 11, the S3 cases' memory). A (file path, position) row per
match made ~100 bytes per deleted row in pyarrow's memory pool, which its allocator (mimalloc)
keeps from the OS until pyarrow next allocates: a process that deleted 1.2 M rows and then only
scanned held ~115 MB more for good.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from iceduck.lake import connect
from iceduck.read.live import live_state
from iceduck.write.matching import matching_positions


def test_positions_are_the_live_matching_rows_of_each_file_in_order(warehouse: str) -> None:
    lake = connect(warehouse)
    try:
        lake.sql("CREATE SCHEMA s")
        lake.sql("CREATE TABLE s.t (id BIGINT, p INTEGER) PARTITIONED BY (p)")
        for k in range(2):  # 2 appends x 3 partitions: 6 data files
            lake.sql(f"INSERT INTO s.t SELECT i, i % 3 FROM range({k * 3000}, {k * 3000 + 3000}) r(i)")
        lake.sql("DELETE FROM s.t WHERE id % 5 = 0")  # deletion vectors the second match must skip
        table = lake.table("s.t").load()
        state = live_state(table)
        got = matching_positions(lake.con, state, table.metadata.schema, "id % 3 = 0 OR id % 7 = 1")
        expected: dict[str, list[int]] = {}
        for path in state.files:
            ids = pq.read_table(table.io.open_stream(path), columns=["id"]).column("id").to_pylist()
            kept = [pos for pos, i in enumerate(ids) if (i % 3 == 0 or i % 7 == 1) and i % 5 != 0]
            if kept:
                expected[path] = kept
        assert len(expected) == 6
        assert {p: v.tolist() for p, v in got.items()} == expected
        assert all(v.dtype == np.int64 for v in got.values())
        assert matching_positions(lake.con, state, table.metadata.schema, "id < 0") == {}
    finally:
        lake.close()


_DELETE = """
import sys
import pyarrow as pa
from iceduck.lake import connect
from iceduck.transaction import row_level

pool = pa.default_memory_pool()
grown = []
original = row_level.matching_positions

def measured(*args, **kwargs):
    before = pool.max_memory()
    result = original(*args, **kwargs)
    grown.append(pool.max_memory() - before)
    return result

row_level.matching_positions = measured
lake = connect(sys.argv[1])
lake.sql("CREATE SCHEMA s")
lake.sql("CREATE TABLE s.t (id BIGINT, p INTEGER) PARTITIONED BY (p)")
lake.sql("INSERT INTO s.t SELECT i, i % 4 FROM range(400000) r(i)")
print(lake.table("s.t").delete("id % 10 < 4").deleted_rows, grown[0])
"""


@pytest.mark.local_only("counts pyarrow's pool in a fresh process; the path lengths are what matter")
def test_matching_positions_puts_no_per_row_data_in_pyarrows_memory_pool(tmp_path: Path) -> None:
    # A fresh process, so that the pool's peak before the step is low and any growth shows.
    out = subprocess.run(
        [sys.executable, "-c", _DELETE, str(tmp_path / "a-warehouse-with-a-path-of-ordinary-length")],
        capture_output=True,
        text=True,
        check=True,
    )
    deleted, grown = (int(x) for x in out.stdout.split())
    assert deleted == 160_000
    # Positions arrive as views of DuckDB's buffers: nothing per row (on main: 13.3 MB here).
    assert grown < 64 * 1024
