"""One test per maintenance rule that the rest of the suite did not pin down (issue 15, item 6).

Each test fails when its rule is removed by hand; `tests/MUTATIONS.md` lists the hand mutations
(re-run them before a release). Truth: the files on disk, the independent readers of
`tests/support/maintenance_helpers.py`, and the sequence numbers the commits reported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from iceduck.io.fileio import FileInfo, LocalFileIO
from iceduck.maintenance import Maintainer
from iceduck.maintenance.orphans import OrphanAnomalyError, execute_orphans, plan_orphans
from iceduck.spec.manifest import DataFile
from iceduck.spec.snapshots import SnapshotRef, SnapshotRefType, StatisticsFile
from iceduck.spec.updates import SetSnapshotRef, SetStatistics
from iceduck.table import Table
from iceduck.transaction.changes import MetadataChange
from iceduck.transaction.commit import TableCommitter
from tests.support import maintenance_helpers as mh
from tests.support.tablebuilder import TableBuilder
from tests.support.write_helpers import new_lake

DAY_MS = 24 * 3600 * 1000
LINEAGE = ["id", "_row_id", "_last_updated_sequence_number"]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _age(path: Path | str, days: float = 5) -> None:
    old = time.time() - days * DAY_MS / 1000
    os.utime(path, (old, old))


def _lake_table(tmp_path: Path, appends: int = 3) -> tuple[Any, Any]:
    lake = new_lake(tmp_path / "wh")
    t = lake.create_table("ns.t", [("id", "BIGINT")], format_version=3)
    for i in range(appends):
        t.append(pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64())}))
    return lake, t


# -- the reader: `_last_updated_sequence_number` as stored after a compaction ----------------------


def test_compaction_keeps_the_last_updated_sequence_numbers_the_reader_reports(tmp_path: Path) -> None:
    lake, t = _lake_table(tmp_path)
    seqs = sorted({r["_last_updated_sequence_number"] for r in mh.rows(t.metadata_location)})
    assert seqs == [1, 2, 3]
    query = "SELECT id, _row_id, _last_updated_sequence_number FROM iceberg_scan(?, row_lineage := true) ORDER BY id"
    before = lake.con.execute(query, [t.metadata_location]).fetchall()
    r = Maintainer.for_lake(lake, "ns.t").rewrite_data_files(rewrite_all=True, dry_run=False)
    assert r.status == "succeeded"
    snap = t.current_snapshot()
    assert snap is not None and snap.sequence_number == 4 and snap.operation == "replace"
    after = lake.con.execute(query, [t.metadata_location]).fetchall()
    # the compacted files store every row's lineage: the reader takes it, not the compaction's number
    truth = mh.checksum(mh.rows(t.metadata_location), LINEAGE)
    assert sorted(after) == sorted(truth) == sorted(before)
    assert {row[2] for row in after} == {1, 2, 3}
    lake.close()


# -- orphan removal ------------------------------------------------------------------------------------


class _AliasedPaths(TableBuilder):
    """A table whose manifests name data files through another scheme and bucket alias (as a Spark
    job writing through `s3a://` with a bucket alias would), while the files are listed locally."""

    def _data_file(self, path: str) -> DataFile:
        d = super()._data_file(path)
        return dataclasses.replace(d, file_path="s3a://alias-bucket" + path)


def test_orphans_a_file_referenced_under_another_scheme_or_bucket_stops_the_run(tmp_path: Path) -> None:
    b = _AliasedPaths(tmp_path / "t")
    data = b.add_data_file(5)
    b.commit()
    for root, _dirs, files in os.walk(b.folder):
        for name in files:
            _age(os.path.join(root, name))
    table = Table.load(b.metadata_path)
    plan = plan_orphans(table, now_ms=_now_ms(), older_than_ms=_now_ms() - DAY_MS)
    assert plan.candidates_list() == []
    assert [a for a in plan.anomalies if "scheme or authority differ" in a] == [
        f"{data} is referenced by the metadata as s3a://alias-bucket{data} (scheme or authority differ)"
    ]
    m = Maintainer.locate(b.metadata_path)
    with pytest.raises(OrphanAnomalyError, match="scheme or authority differ"):
        m.remove_orphan_files(older_than=_now_ms() - DAY_MS, dry_run=False)
    assert os.path.exists(data)


class _DottedPaths(TableBuilder):
    """A table whose manifests spell a local data file with a `..` segment (`<t>/data/../data/f`):
    the same file on disk as the listing's `<t>/data/f`."""

    def _data_file(self, path: str) -> DataFile:
        d = super()._data_file(path)
        folder, name = path.rsplit("/", 1)
        return dataclasses.replace(d, file_path=f"{folder}/../{folder.rsplit('/', 1)[1]}/{name}")


def test_orphans_a_live_file_spelled_with_dot_dot_is_never_deleted(tmp_path: Path) -> None:
    # the redteam review's suspicion, confirmed: the reachable spelling kept its `..`, so the
    # listed file did not match it and was deleted as an orphan while the table still reads it
    b = _DottedPaths(tmp_path / "t")
    data = b.add_data_file(5)
    b.commit()
    for root, _dirs, files in os.walk(b.folder):
        for name in files:
            _age(os.path.join(root, name))
    table = Table.load(b.metadata_path)
    plan = plan_orphans(table, now_ms=_now_ms(), older_than_ms=_now_ms() - DAY_MS)
    assert data not in plan.candidates_list()
    m = Maintainer.locate(b.metadata_path)
    with contextlib.suppress(OrphanAnomalyError):  # stopping the run is safe too
        m.remove_orphan_files(older_than=_now_ms() - DAY_MS, dry_run=False)
    assert os.path.exists(data)


class _ListingWithoutMetadata(LocalFileIO):
    """A listing that misses the metadata folder (a partial or stale listing of an object store)."""

    def list_prefix(self, prefix: str) -> Iterator[FileInfo]:
        return (i for i in super().list_prefix(prefix) if "/metadata/" not in i.path)


def test_orphans_a_listing_without_the_current_metadata_file_stops_the_run(tmp_path: Path) -> None:
    lake, t = _lake_table(tmp_path)
    junk = Path(t.location) / "data" / "left-behind.parquet"
    junk.write_bytes(b"x")
    _age(junk)
    loaded = t.load()
    table = Table(
        loaded.metadata, loaded.metadata_location, _ListingWithoutMetadata(), loaded.resolver, loaded.name
    )
    plan = plan_orphans(table, now_ms=_now_ms())
    assert plan.candidates_list() == [str(junk)]
    assert plan.anomalies == (
        f"the current metadata file {loaded.metadata_location} was not found under {t.location}",
    )
    with pytest.raises(OrphanAnomalyError, match="current metadata file"):
        execute_orphans(lambda: table, plan, now_ms=_now_ms())
    assert junk.exists()
    lake.close()


def test_orphans_a_candidate_referenced_after_planning_is_not_deleted(tmp_path: Path) -> None:
    lake, t = _lake_table(tmp_path)
    stats = Path(t.location) / "metadata" / "stats-left-behind.puffin"
    stats.write_bytes(b"PFA1")
    _age(stats)
    m = Maintainer.for_lake(lake, "ns.t")
    plan = plan_orphans(m.load(), now_ms=_now_ms())
    assert plan.candidates_list() == [str(stats)]
    # meanwhile a writer registers that file as the current snapshot's statistics
    committer = TableCommitter(lake.catalog, "ns", "t", lake.io)
    sid = t.current_snapshot().snapshot_id

    def update(md: Any) -> Any:
        return [SetStatistics(StatisticsFile(sid, str(stats), 4, 0))]

    committer.commit(MetadataChange("set-statistics", update), committer.load())
    with pytest.raises(OrphanAnomalyError, match="is referenced by the table's metadata now"):
        execute_orphans(m.load, plan, now_ms=_now_ms())
    assert stats.exists()
    lake.close()


def test_orphans_a_candidate_rewritten_after_planning_is_not_deleted(tmp_path: Path) -> None:
    lake, t = _lake_table(tmp_path)
    junk = Path(t.location) / "data" / "slow-writer.parquet"
    junk.write_bytes(b"old")
    _age(junk)
    m = Maintainer.for_lake(lake, "ns.t")
    plan = plan_orphans(m.load(), now_ms=_now_ms())
    assert plan.candidates_list() == [str(junk)]
    junk.write_bytes(b"a writer is using this name again")  # modified after the window
    with pytest.raises(OrphanAnomalyError, match="changed since it was planned"):
        execute_orphans(m.load, plan, now_ms=_now_ms())
    assert junk.read_bytes() == b"a writer is using this name again"
    lake.close()


# -- expiry --------------------------------------------------------------------------------------------


def test_expiry_keeps_unreferenced_snapshots_newer_than_the_cutoff(tmp_path: Path) -> None:
    """A snapshot no ref reaches (staged, or rolled back) survives while newer than the cut-off."""
    lake, t = _lake_table(tmp_path, appends=2)
    first, second = (s.snapshot_id for s in t.load().metadata.snapshots)
    time.sleep(0.01)
    cutoff = _now_ms()
    time.sleep(0.01)
    t.append(pa.table({"id": pa.array([100], pa.int64())}))
    staged = t.current_snapshot().snapshot_id
    staged_files = mh.snapshot_files(t.metadata_location, staged)
    committer = TableCommitter(lake.catalog, "ns", "t", lake.io)

    def rollback(md: Any) -> Any:  # main goes back to `second`: `staged` is referenced by nothing
        return [SetSnapshotRef("main", SnapshotRef(second, SnapshotRefType.BRANCH))]

    committer.commit(MetadataChange("rollback", rollback), committer.load())
    r = Maintainer.for_lake(lake, "ns.t").expire_snapshots(older_than=cutoff, retain_last=1, dry_run=False)
    assert [o.item for o in r.outcomes if o.kind == "snapshot"] == [str(first)]
    kept = {s.snapshot_id for s in t.load().metadata.snapshots}
    assert kept == {second, staged}
    assert all(os.path.exists(p) for p in staged_files)
    assert sorted(x["id"] for x in mh.rows(t.metadata_location, staged))[-1] == 100
    lake.close()
