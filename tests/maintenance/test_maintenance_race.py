"""A data file rewrite racing concurrent writers: appends survive, the group whose rows a concurrent
delete touched fails alone and is recorded, no row is lost or resurrected; and two maintenance
runs never pick the same files (the lease)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from iceduck.maintenance import Maintainer
from iceduck.maintenance.lease import MaintenanceBusyError
from tests.support import maintenance_helpers as mh
from tests.support.write_helpers import new_lake, table_files

COLUMNS = ["id", "part", "v"]


def _table(folder: Path) -> tuple[Any, Any]:
    lake = new_lake(folder)
    t = lake.create_table(
        "ns.r", [("id", "BIGINT"), ("part", "VARCHAR"), ("v", "VARCHAR")], partition_by=["part"]
    )
    for i in range(12):
        part = "a" if i % 2 == 0 else "b"
        ids = range(i * 5, i * 5 + 5)
        t.append(pa.table({"id": pa.array(ids, pa.int64()), "part": [part] * 5, "v": [f"v{x}" for x in ids]}))
    return lake, t


@pytest.mark.parametrize("partial_progress", [False, True])
def test_rewrite_racing_an_append_and_a_delete(tmp_path: Path, warehouse: str, partial_progress: bool) -> None:
    lake, t = _table(warehouse)
    m = Maintainer.for_lake(lake, "ns.r")
    start = mh.rows(t.metadata_location)
    raced: list[str] = []

    def race(groups: Sequence[Any]) -> None:
        # while the rewrite's files are written but not committed: append, and delete a row that one
        # of the groups being rewritten holds (id 0 is in partition a)
        t.append(
            pa.table({"id": pa.array([1000, 1001], pa.int64()), "part": ["a", "b"], "v": ["new", "new"]})
        )
        if any(any("part=a" in p for p in g.inputs) for g in groups) and not raced:
            t.delete("id = 0")
            raced.append("deleted")

    result = m.rewrite_data_files(
        min_input_files=2, partial_progress=partial_progress, dry_run=False, before_commit=race
    )
    assert raced == ["deleted"]
    assert result.status == "partial", result
    groups = {o.item: o for o in result.outcomes if o.kind == "file_group"}
    conflicted = [g for g, o in groups.items() if o.outcome == "conflict"]
    committed = [g for g, o in groups.items() if o.outcome == "committed"]
    assert len(conflicted) == 1 and len(committed) == 1
    assert "part=a" in (groups[conflicted[0]].detail or "")
    assert "deleted rows" in (groups[conflicted[0]].detail or "")

    # rows: the start, minus the concurrent delete, plus the concurrent appends; nothing else
    final = mh.rows(t.metadata_location)
    expected = [r for r in start if r["id"] != 0]
    appended = 2 if not partial_progress else 4  # the hook ran once per commit
    assert len(final) == len(expected) + appended
    assert mh.checksum([r for r in final if r["v"] != "new"], COLUMNS) == mh.checksum(expected, COLUMNS)
    assert sorted(r["id"] for r in final if r["v"] == "new") == sorted([1000, 1001] * (appended // 2))
    # row ids survive the rewrite of partition b
    ids = {r["id"]: r["_row_id"] for r in start}
    assert all(ids[r["id"]] == r["_row_id"] for r in final if r["v"] != "new")

    # the failed group's written files are gone, its inputs are still live (with the delete)
    live = {e["data_file"]["file_path"] for _, e in mh.live_entries(mh.metadata(t.metadata_location))}
    a_inputs = {o.item for o in result.outcomes if o.kind == "data" and o.detail == f"group {conflicted[0]}"}
    assert a_inputs and a_inputs <= live
    on_disk = {p for p in table_files(t.location) if p.endswith(".parquet")}
    referenced = set().union(
        *(
            mh.snapshot_files(t.metadata_location, s["snapshot-id"])
            for s in mh.metadata(t.metadata_location)["snapshots"]
        )
    )
    assert on_disk <= referenced, "the failed group left files behind"

    # and it is all in the log
    (run,) = m.log()
    assert run.status == "partial" and run.error and conflicted[0] in run.error
    assert {o.outcome for o in run.outcomes if o.kind == "file_group"} == {"committed", "conflict"}
    lake.close()


def test_two_planners_never_pick_the_same_files(tmp_path: Path, warehouse: str) -> None:
    lake, _ = _table(warehouse)
    m = Maintainer.for_lake(lake, "ns.r")
    seen: dict[str, Any] = {}

    def meanwhile(groups: Sequence[Any]) -> None:
        # a second planner while the first holds its claim
        other = Maintainer.for_lake(lake, "ns.r")
        seen["plan"] = other.rewrite_data_files(min_input_files=2)
        seen["run"] = other.rewrite_data_files(min_input_files=2, dry_run=False)
        with pytest.raises(MaintenanceBusyError, match="holds the table's maintenance lease"):
            other.remove_orphan_files(dry_run=False)
        seen["expire"] = other.expire_snapshots(dry_run=False)  # does not touch claimed files

    first = m.rewrite_data_files(min_input_files=2, dry_run=False, before_commit=meanwhile)
    assert first.status == "succeeded"
    claimed = set(first.plan.files)
    assert len(claimed) == 12
    assert not set(seen["plan"].plan.files) & claimed
    assert seen["plan"].plan.empty and {p for p, why in seen["plan"].plan.skipped} == claimed
    assert seen["run"].status == "nothing_to_do"
    assert seen["expire"].status in ("nothing_to_do", "succeeded")
    # the claim ends with the run: now orphan removal may run
    assert m.remove_orphan_files(dry_run=False).status == "nothing_to_do"
    assert not m.store().names("claims")
    lake.close()


def test_two_real_runs_at_once_commit_once(warehouse: str) -> None:
    import threading

    lake, t = _table(warehouse)
    before = len(t.load().metadata.snapshots)
    results: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(
                Maintainer.for_lake(lake, "ns.r").rewrite_data_files(min_input_files=2, dry_run=False)
            )
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert sorted(r.status for r in results) in (["nothing_to_do", "succeeded"], ["already_run", "succeeded"])
    assert len(t.load().metadata.snapshots) == before + 1
    lake.close()
