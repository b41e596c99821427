"""The four health and change-feed figures issue 14 found wrong, each recomputed here from the files
themselves (pyarrow over the data and delete files, fastavro over the manifests via
`tests.support.maintenance_helpers`), not from iceduck's readers:

1. a v2 compaction (`replace`) changes no rows, so `iceberg_changes` lists nothing for it;
2. per-file deleted shares on v2 tables whose position-delete files name several data files;
3. `all_delete_files`/`all_delete_bytes` count DVs as `delete_files`/`delete_bytes` do;
4. one DV per data file (the normal state of a v3 table after a DELETE) is not AT_RISK.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from iceduck.maintenance import Maintainer
from iceduck.maintenance.health import AT_RISK, compute_health
from iceduck.table import Table
from tests.support import maintenance_helpers as mh
from tests.support.tablebuilder import TableBuilder
from tests.support.write_helpers import new_lake


def _lake_table(folder: Path, format_version: int) -> tuple[Any, Any]:
    lake = new_lake(folder)
    t = lake.create_table(
        "ns.t",
        [("id", "BIGINT"), ("part", "VARCHAR")],
        partition_by=["part"],
        format_version=format_version,
    )
    for i in range(6):
        ids = range(i * 10, i * 10 + 10)
        t.append(pa.table({"id": pa.array(ids, pa.int64()), "part": ["a" if i % 2 else "b"] * 10}))
    return lake, t


def _feed(lake: Any, since: int | None = None) -> list[tuple[Any, ...]]:
    arg = f", from_snapshot := {since}" if since is not None else ""
    return lake.con.execute(
        f"SELECT change_type, snapshot_id, id, part FROM iceberg_changes('ns.t'{arg}) ORDER BY ALL"
    ).fetchall()


def test_a_v2_compaction_lists_no_changed_rows(warehouse: str) -> None:
    lake, t = _lake_table(warehouse, format_version=2)
    t.delete("id % 4 = 0")
    before = t.current_snapshot().snapshot_id
    result = Maintainer.for_lake(lake, "ns.t").rewrite_data_files(rewrite_all=True, dry_run=False)
    assert result.status == "succeeded"
    md = mh.metadata(t.metadata_location)
    current = next(s for s in md["snapshots"] if s["snapshot-id"] == md["current-snapshot-id"])
    assert current["summary"]["operation"] == "replace"
    assert _feed(lake, since=before) == []
    # the whole feed still nets out to the rows the files hold now (read with pyarrow)
    net: Counter[tuple[Any, ...]] = Counter()
    for change, _, id_, part in _feed(lake):
        net[(id_, part)] += 1 if change == "insert" else -1
    live = Counter(
        (r["id"], r["part"])
        for e in (e for mf, e in mh.live_entries(md) if mf["content"] == 0)
        for r in mh.read_parquet(e["data_file"]["file_path"]).to_pylist()
    )
    assert +net == live and len(live) == 60 - 15
    lake.close()


def test_v2_deleted_shares_read_position_deletes_that_name_several_files(tmp_path: Path) -> None:
    b = TableBuilder(tmp_path / "t", format_version=2)
    files = [b.add_data_file(100) for _ in range(4)]
    b.commit()
    # one position-delete file naming three data files (no referenced_data_file), then an
    # overlapping one: positions 0-9 of files[0] are deleted twice
    b.commit(position_deletes={files[0]: range(0, 50), files[1]: range(0, 10), files[2]: [7]})
    b.commit(position_deletes={files[0]: range(0, 10), files[3]: range(90, 100)})
    md = mh.metadata(b.metadata_path)
    deletes = [e["data_file"] for mf, e in mh.live_entries(md) if mf["content"] == 1]
    assert all(d.get("referenced_data_file") is None for d in deletes)
    truth: dict[str, set[int]] = {f: set() for f in files}
    for d in deletes:
        for r in mh.read_parquet(d["file_path"]).to_pylist():
            truth[r["file_path"]].add(r["pos"])
    shares = [len(truth[f]) / 100 for f in files]
    m = compute_health(Table.load(b.metadata_path)).metrics
    assert m["deleted_rows"] == sum(len(v) for v in truth.values()) == 50 + 10 + 1 + 10
    assert m["deleted_share_max"] == pytest.approx(max(shares)) == 0.5
    assert m["deleted_share_p50"] == pytest.approx(np.percentile(shares, 50))
    assert m["deleted_share_p90"] == pytest.approx(np.percentile(shares, 90))
    assert m["files_over_delete_threshold"] == sum(1 for s in shares if s >= 0.3) == 1


def test_every_snapshot_counts_dvs_as_the_current_one_does(warehouse: str) -> None:
    lake, t = _lake_table(warehouse, format_version=3)
    t.delete("id % 3 = 0")  # one DELETE: one Puffin file holding a DV per data file
    t.delete("id % 5 = 0")  # DVs merged and replaced: the old ones stay reachable from history
    m = compute_health(Table.load(t.metadata_location)).metrics
    md = mh.metadata(t.metadata_location)
    current = [e["data_file"] for mf, e in mh.live_entries(md) if mf["content"] == 1]
    every: dict[tuple[str, int], int] = {}
    for s in md["snapshots"]:
        for mf, e in mh.live_entries(md, s["snapshot-id"]):
            if mf["content"] == 1:
                d = e["data_file"]
                every[(d["file_path"], d["content_offset"])] = d["content_size_in_bytes"]
    assert m["delete_files"] == len(current) == 6
    assert m["delete_bytes"] == sum(d["content_size_in_bytes"] for d in current)
    assert m["all_delete_files"] == len(every) == 12
    assert m["all_delete_bytes"] == sum(every.values())
    assert m["all_delete_files"] >= m["delete_files"] and m["all_delete_bytes"] >= m["delete_bytes"]
    lake.close()


def test_one_dv_per_data_file_is_not_at_risk(warehouse: str) -> None:
    lake, t = _lake_table(warehouse, format_version=3)
    t.delete("id % 10 = 0")  # a DV on every data file, 10% of the rows
    h = compute_health(Table.load(t.metadata_location))
    assert h.metrics["dv_count"] == h.metrics["data_files"] == 6
    assert h.metrics["delete_file_ratio"] == 0.0
    assert h.state != AT_RISK
    assert not [r for r in h.reasons if r.metric == "delete_file_ratio"]
    lake.close()


def test_position_delete_files_still_count_in_the_delete_file_ratio(warehouse: str) -> None:
    lake, t = _lake_table(warehouse, format_version=2)
    for k in range(3):
        t.delete(f"id % 10 = {k}")  # v2: position-delete files pile up, several per data file
    h = compute_health(Table.load(t.metadata_location))
    md = mh.metadata(t.metadata_location)
    deletes = [e for mf, e in mh.live_entries(md) if mf["content"] == 1]
    assert h.metrics["delete_file_ratio"] == pytest.approx(len(deletes) / 6) and len(deletes) >= 3
    assert any(r.metric == "delete_file_ratio" for r in h.reasons)
    lake.close()
