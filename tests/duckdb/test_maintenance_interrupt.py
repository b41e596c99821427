"""An interrupted maintenance statement changes nothing (issue 15, faults: Ctrl-C).

The shell turns Ctrl-C into `functions.request_cancel()` (its pty test is the shell's); here the
request arrives at the run's first progress report, as a Ctrl-C typed while it works would. The
statement then fails with one line, commits nothing (the same metadata file, every file still
there), and the same statement run again afterwards does the work."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

import iceduck.duckdb.maintenance as sql_maintenance
from iceduck.duckdb.functions import clear_cancel, request_cancel
from tests.support import maintenance_helpers as mh
from tests.support.write_helpers import new_lake

STATEMENTS = {
    "rewrite": "SELECT * FROM iceberg_rewrite_data_files('ns.t', min_input_files := 2, dry_run := false)",
    "expire": "SELECT * FROM iceberg_expire_snapshots('ns.t', older_than := now() + INTERVAL 1 DAY, "
    "retain_last := 1, dry_run := false)",
    "orphans": "SELECT * FROM iceberg_remove_orphan_files('ns.t', older_than := now() - INTERVAL 1 HOUR, "
    "dry_run := false)",
}


def _files(folder: Path) -> set[str]:
    return {str(p) for p in folder.rglob("*") if p.is_file()}


@pytest.mark.local_only("ages files with os.utime: S3 objects have no settable modification time (the S3 orphan twin: tests/io/test_s3.py)")
@pytest.mark.parametrize("action", sorted(STATEMENTS))
def test_a_maintenance_statement_interrupted_by_ctrl_c_commits_nothing(
    warehouse: str, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    lake = new_lake(warehouse)
    t = lake.create_table("ns.t", [("id", "BIGINT"), ("v", "VARCHAR")])
    for i in range(6):
        t.append(pa.table({"id": pa.array(range(i * 3, i * 3 + 3), pa.int64()), "v": ["x"] * 3}))
    folder = Path(t.location)
    old = time.time() - 3 * 24 * 3600
    for k in range(4):
        orphan = folder / "data" / f"orphan-{k}.parquet"
        orphan.write_bytes(b"not referenced")
        os.utime(orphan, (old, old))
    before_md = t.load().metadata_location
    before_files = _files(folder)
    rows = mh.checksum(mh.rows(before_md), ["id", "v"])
    reports: list[Any] = []
    real = sql_maintenance.report_progress

    def ctrl_c_at_first_report(done: int, total: int, what: str) -> None:
        reports.append((done, total, what))
        request_cancel()
        real(done, total, what)

    monkeypatch.setattr(sql_maintenance, "report_progress", ctrl_c_at_first_report)
    clear_cancel()
    try:
        with pytest.raises(duckdb.Error, match="interrupted, nothing more was committed") as e:
            lake.con.execute(STATEMENTS[action]).fetchall()
    finally:
        clear_cancel()
    assert reports, "the run reported no progress before it ended: the interrupt was never seen"
    assert "Traceback" not in str(e.value)
    after_md = lake.table("ns.t").load().metadata_location
    assert after_md == before_md, "an interrupted run committed"
    gone = before_files - _files(folder)
    assert not gone, sorted(gone)  # not even an orphan: the request came before the first deletion
    assert mh.checksum(mh.rows(after_md), ["id", "v"]) == rows

    monkeypatch.setattr(sql_maintenance, "report_progress", real)
    lake.con.execute(STATEMENTS[action]).fetchall()  # run again, uninterrupted: it does the work
    if action == "orphans":
        assert not any("orphan-" in f for f in _files(folder))
    else:
        assert lake.table("ns.t").load().metadata_location != before_md
    assert mh.checksum(mh.rows(lake.table("ns.t").load().metadata_location), ["id", "v"]) == rows
    lake.close()
