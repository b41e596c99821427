"""Table health: metrics equal what the metadata files say (read here with fastavro and numpy),
states and reasons follow the thresholds (table properties or defaults), history makes
DEBT_GROWING, equality deletes block rewrites, unreadable metadata puts a table at risk; and the
`iceduck health` / `iceduck maintain` commands."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from iceduck.cli import main
from iceduck.maintenance import Maintainer
from iceduck.maintenance.health import (
    AT_RISK,
    DEBT_GROWING,
    HEALTHY,
    MAINTENANCE_BLOCKED,
    MAINTENANCE_DUE,
    compute_health,
)
from iceduck.maintenance.health_log import HealthLog
from iceduck.spec.manifest import CONTENT_EQUALITY_DELETES, DataFile
from iceduck.spec.updates import requirements_for
from iceduck.table import Table
from iceduck.transaction.commit import Attempt, Change, TableCommitter
from iceduck.transaction.metadata import now_ms, snapshot_updates
from iceduck.transaction.snapshot import FileChanges, new_snapshot_id, produce_snapshot, write_added_manifests
from tests.support import maintenance_helpers as mh
from tests.support.write_helpers import new_lake

DAY_MS = 24 * 3600 * 1000


def _table(folder: Path, appends: int, deletes: int = 0, **properties: str) -> tuple[Any, Any]:
    lake = new_lake(folder)
    t = lake.create_table(
        "ns.h", [("id", "BIGINT"), ("part", "VARCHAR")], partition_by=["part"], properties=properties or None
    )
    for i in range(appends):
        ids = range(i * 4, i * 4 + 4)
        t.append(pa.table({"id": pa.array(ids, pa.int64()), "part": ["a" if i % 3 else "b"] * 4}))
    for k in range(deletes):
        t.delete(f"id % 9 = {k}")
    return lake, t


def test_metrics_are_what_the_metadata_says(warehouse: str) -> None:
    lake, t = _table(warehouse, appends=12, deletes=3)
    h = Maintainer.for_lake(lake, "ns.h").health()
    md = mh.metadata(t.metadata_location)
    entries = mh.live_entries(md)
    data = [e["data_file"] for mf, e in entries if mf["content"] == 0]
    dvs = [e["data_file"] for mf, e in entries if mf["content"] == 1]
    sizes = np.array([d["file_size_in_bytes"] for d in data], dtype=float)
    m = h.metrics
    assert m["data_files"] == len(data) == 12
    assert m["data_bytes"] == int(sizes.sum())
    assert m["records"] == sum(d["record_count"] for d in data) == 48
    assert m["delete_files"] == m["dv_count"] == len(dvs)
    assert m["deleted_rows"] == sum(d["record_count"] for d in dvs) == 48 - len(mh.rows(t.metadata_location))
    for q in (10, 50, 90):
        assert m[f"file_size_p{q}"] == pytest.approx(np.percentile(sizes, q))
    assert m["deleted_row_share"] == pytest.approx(m["deleted_rows"] / 48)
    shares = []
    for d in data:
        dv = next((x for x in dvs if x["referenced_data_file"] == d["file_path"]), None)
        shares.append(dv["record_count"] / d["record_count"] if dv else 0.0)
    assert m["deleted_share_max"] == pytest.approx(max(shares))
    assert m["deleted_share_p90"] == pytest.approx(np.percentile(shares, 90))
    snap = next(s for s in md["snapshots"] if s["snapshot-id"] == md["current-snapshot-id"])
    listed = mh.avro(snap["manifest-list"])
    assert m["manifests"] == len(listed)
    assert m["manifest_bytes"] == sum(x["manifest_length"] for x in listed)
    assert m["snapshots"] == m["snapshots_last_24h"] == len(md["snapshots"]) == 15
    assert dict(m["operations"]) == {"append": 12, "delete": 3}
    assert m["metadata_json_bytes"] == len(mh.file_bytes(t.metadata_location))
    assert m["previous_metadata_versions"] == len(md["metadata-log"])
    all_data = {
        e["data_file"]["file_path"]
        for s in md["snapshots"]
        for mf, e in mh.live_entries(md, s["snapshot-id"])
        if mf["content"] == 0
    }
    assert m["all_data_files"] == len(all_data) == 12
    # partition a: 8 small files pack into one; b: 4, fewer than min-input-files, so a rewrite leaves them
    assert m["compactable_files"] == 8 - 1
    assert m["partitions"] == 2
    parts = {dict(p.partition)["part"]: p for p in h.partitions}
    assert parts["a"].data_files == 8 and parts["b"].data_files == 4
    assert [p.debt for p in h.partitions] == sorted((p.debt for p in h.partitions), reverse=True)
    lake.close()


def test_states_follow_thresholds(warehouse: str) -> None:
    lake, t = _table(warehouse, appends=3)
    m = Maintainer.for_lake(lake, "ns.h")
    assert m.health().state == HEALTHY
    t.set_properties({"iceduck.health.max-compactable-files": "1", "iceduck.health.min-input-files": "2"})
    h = m.health()
    assert h.state == MAINTENANCE_DUE
    (reason,) = h.reasons
    assert (reason.check, reason.metric, reason.value, reason.threshold) == (
        "small_files",
        "compactable_files",
        1,
        1,
    )
    assert [a.action for a in h.actions] == ["rewrite_data_files", "rewrite_manifests"]
    # debt far past due is still debt (AT_RISK is for danger: tests/maintenance/test_health_states.py)
    t.set_properties({"iceduck.health.max-compactable-files": "0"})
    assert m.health().state == MAINTENANCE_DUE
    empty = lake.create_table("ns.empty", [("id", "BIGINT")])
    assert Maintainer.for_lake(lake, "ns.empty").health().state == HEALTHY
    assert empty.current_snapshot() is None
    lake.close()


def test_history_shows_debt_growing(tmp_path: Path) -> None:
    lake, t = _table(
        tmp_path / "wh",
        appends=6,
        **{"iceduck.health.max-compactable-files": "40", "iceduck.health.max-compactable-share": "2"},
    )
    m = Maintainer.for_lake(lake, "ns.h")
    table = m.load()
    log = HealthLog(m.store(table))
    # a snapshot of health taken a day ago (4 small files in partition a: not compactable yet)
    log.record(compute_health(table, now_ms=now_ms() - DAY_MS))
    assert m.health().state == HEALTHY  # nothing grew yet
    for i in range(12):
        t.append(pa.table({"id": pa.array([1000 + i], pa.int64()), "part": ["a"]}))
    h = m.health(record=True)
    assert h.state == DEBT_GROWING, h.reasons
    reasons = {r.check: r for r in h.reasons}
    assert set(reasons) == {"small_files", "manifests"}  # 12 commits in a day: both head for due
    small = reasons["small_files"]
    assert (small.value, small.threshold) == (15, 40)
    assert "grew from 0 to 15" in small.message and "reaches 40 in 1.7 days" in small.message
    assert [r["metrics"]["compactable_files"] for r in m.health_history()] == [0, 15]
    lake.close()


class _AddEqualityDelete(Change):
    """Commit an equality delete file on `id` for partition 'a' (what other engines write)."""

    operation = "delete"

    def __init__(self, path: str, ids: list[int]) -> None:
        self.path = path
        self.ids = ids

    def apply(self, current: Table, attempt: int) -> Attempt:
        md = current.metadata
        f = pa.field("id", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"1"})
        data = mh.parquet_bytes(pa.table({"id": pa.array(self.ids, pa.int64())}, schema=pa.schema([f])))
        mh.write_file(self.path, data)
        d = DataFile(
            CONTENT_EQUALITY_DELETES, self.path, "PARQUET", md.default_spec_id, ("a",), len(self.ids),
            len(data), equality_ids=(1,),
        )  # fmt: skip
        changes = FileChanges(added_delete_files=[d])
        sid = new_snapshot_id(s.snapshot_id for s in md.snapshots)
        folder = current.metadata_location.rsplit("/", 1)[0]
        added = write_added_manifests(
            current, changes, snapshot_id=sid, schema=md.schema, metadata_dir=folder
        )
        produced = produce_snapshot(
            current, changes, snapshot_id=sid, operation="delete", timestamp_ms=now_ms(), schema=md.schema,
            metadata_dir=folder, added=added,
        )  # fmt: skip
        updates = snapshot_updates(md, produced.snapshot)
        return Attempt(updates, requirements_for(md, updates), [*added.paths, *produced.written])


def test_equality_deletes_block_rewrites(warehouse: str) -> None:
    lake, _ = _table(warehouse, appends=9, **{"iceduck.health.max-compactable-files": "2"})
    committer = TableCommitter(lake.catalog, "ns", "h", lake.io)
    committer.commit(
        _AddEqualityDelete(f"{lake.table('ns.h').location}/data/eq.parquet", [1, 5]),
        committer.load(),
    )
    m = Maintainer.for_lake(lake, "ns.h")
    h = m.health()
    assert h.state == MAINTENANCE_BLOCKED
    assert h.metrics["equality_delete_files"] == 1 and h.metrics["files_with_equality_deletes"] == 6
    assert any("equality deletes apply to 6 data file(s)" in r.message for r in h.reasons)
    assert "rewrite_data_files" not in [a.action for a in h.actions]
    plan = m.rewrite_data_files(min_input_files=2).plan
    assert {why for _, why in plan.skipped} == {"equality deletes apply to it"} and len(plan.skipped) == 6
    assert all("part=b" in g.partition_text for g in plan.groups)
    lake.close()


def test_unreadable_metadata_puts_the_table_at_risk(warehouse: str) -> None:
    lake, t = _table(warehouse, appends=3)
    md = mh.metadata(t.metadata_location)
    snap = next(s for s in md["snapshots"] if s["snapshot-id"] == md["current-snapshot-id"])
    mh.remove(mh.avro(snap["manifest-list"])[0]["manifest_path"])
    h = Maintainer.for_lake(lake, "ns.h").health()
    assert h.state == AT_RISK
    assert any("cannot be read" in r.message and "not found" in r.message for r in h.reasons)
    lake.close()


def test_health_and_maintain_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wh = tmp_path / "wh"
    lake, _t = _table(
        wh, appends=8, deletes=2,
        **{"history.expire.max-snapshot-age-ms": "100", "history.expire.min-snapshots-to-keep": "2"},
    )  # fmt: skip
    lake.close()
    time.sleep(0.2)
    assert main(["--warehouse", str(wh), "health", "ns.h", "--check"]) in (1, 2)
    out = capsys.readouterr().out
    assert "ns.h: " in out and "recommended actions:" in out and "iceberg_rewrite_data_files('ns.h'" in out
    assert main(["--warehouse", str(wh), "health", "ns.h", "--json", "--record"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["state"] in (MAINTENANCE_DUE, AT_RISK) and record["metrics"]["data_files"] == 8
    assert main(["--warehouse", str(wh), "maintain", "ns.h", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "rewrite_data_files: planned (dry run, plan " in out and "expire_snapshots: planned" in out
    assert main(["--warehouse", str(wh), "maintain", "ns.h", "--run", "--orphans"]) == 0
    captured = capsys.readouterr()
    assert "rewrite_data_files: succeeded" in captured.out and captured.out.rstrip().endswith("ns.h: HEALTHY")
    assert "[rewrite_data_files] 100%" in captured.err  # the progress line
    assert main(["--warehouse", str(wh), "health", "ns.h", "--check"]) == 0
    assert (
        main(
            [
                "--warehouse",
                str(wh),
                "-c",
                "SELECT count(*) FROM iceberg_maintenance_log('ns.h')",
                "--mode",
                "csv",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.strip().splitlines()[-1] == "4"
