"""Property: over random histories of appends, deletes, tags, rewrites, manifest rewrites, expiries
and orphan removals (with a crashed writer's files lying around), expiry and orphan removal never
delete a file any retained snapshot references, every retained snapshot reads exactly the rows it
had when it was committed, a file shared by expired and kept snapshots survives, and what only
expired snapshots (or nothing at all) reached is gone. Truth: `tests/maintenance_helpers.py`."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iceduck.maintenance import Maintainer
from iceduck.spec.snapshots import SnapshotRef, SnapshotRefType
from iceduck.transaction.changes import MetadataChange
from iceduck.transaction.commit import TableCommitter
from iceduck.transaction.maintenance_ops import replace_metadata
from tests import maintenance_helpers as mh
from tests.write_helpers import new_lake

COLUMNS = ["id", "part", "v"]

OPS = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 6)),
    st.tuples(st.just("delete"), st.integers(0, 6)),
    st.tuples(st.just("tag"), st.integers(0, 50)),
    st.tuples(st.just("rewrite"), st.booleans()),
    st.tuples(st.just("manifests"), st.just(0)),
    st.tuples(st.just("expire"), st.integers(1, 3)),
    st.tuples(st.just("junk"), st.just(0)),
    st.tuples(st.just("orphans"), st.just(0)),
)


class History:
    """A table and what every snapshot held when it was committed."""

    def __init__(self, folder: Path, format_version: int) -> None:
        self.folder = folder
        self.lake = new_lake(folder / "wh")
        self.t = self.lake.create_table(
            "ns.p", [("id", "BIGINT"), ("part", "VARCHAR"), ("v", "VARCHAR")], partition_by=["part"],
            format_version=format_version,
        )  # fmt: skip
        self.m = Maintainer.for_lake(self.lake, "ns.p")
        self.rows_at: dict[int, list[tuple[Any, ...]]] = {}
        self.files_at: dict[int, set[str]] = {}
        self.junk: list[Path] = []
        self.next_id = 0
        self.shared_survivors = 0

    def note(self) -> None:
        """Remember the current snapshot's rows and files (as committed)."""
        location = self.t.metadata_location
        md = mh.metadata(location)
        for s in md.get("snapshots", []):
            sid = s["snapshot-id"]
            if sid not in self.rows_at:
                self.rows_at[sid] = mh.checksum(mh.rows(location, sid), COLUMNS)
                self.files_at[sid] = mh.snapshot_files(location, sid)

    def apply(self, op: str, arg: Any) -> None:
        if op == "append":
            ids = list(range(self.next_id, self.next_id + arg))
            self.next_id += arg
            self.t.append(
                pa.table(
                    {
                        "id": pa.array(ids, pa.int64()),
                        "part": [f"p{i % 2}" for i in ids],
                        "v": [f"v{i}" for i in ids],
                    }
                )
            )
        elif op == "delete":
            self.t.delete(f"id % 7 = {arg}")
        elif op == "tag":
            snaps = self.t.load().metadata.snapshots
            if snaps:
                self._tag(f"tag{len(self.rows_at)}-{arg}", snaps[arg % len(snaps)].snapshot_id)
        elif op == "rewrite":
            self.m.rewrite_data_files(rewrite_all=arg, min_input_files=2, dry_run=False)
        elif op == "manifests":
            self.m.rewrite_manifests(dry_run=False)
        elif op == "expire":
            time.sleep(0.002)
            self.m.expire_snapshots(older_than=int(time.time() * 1000), retain_last=arg, dry_run=False)
            self.check()
        elif op == "junk":  # what a writer that died before committing leaves behind
            root = self.folder / "wh" / "ns" / "p"
            for rel in (
                f"data/part=p0/dead-{len(self.junk)}.parquet",
                f"metadata/dead-{len(self.junk)}-m0.avro",
            ):
                p = root / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(b"partial")
                self.junk.append(p)
        elif op == "orphans":
            time.sleep(0.002)
            self.m.remove_orphan_files(older_than=int(time.time() * 1000), allow_recent=True, dry_run=False)
            assert not any(p.exists() for p in self.junk), "orphan removal left a dead writer's file"
            self.check()
        self.note()

    def _tag(self, name: str, snapshot_id: int) -> None:
        committer = TableCommitter(self.lake.catalog, "ns", "p", self.lake.io)

        def update(md: Any) -> Any:
            refs = dict(md.refs)
            refs[name] = SnapshotRef(snapshot_id, SnapshotRefType.TAG)
            return replace_metadata(md, refs=refs)

        committer.commit(MetadataChange("set-ref", update), committer.load())

    def check(self) -> None:
        location = self.t.metadata_location
        md = mh.metadata(location)
        kept = {s["snapshot-id"] for s in md.get("snapshots", [])}
        for name, ref in md.get("refs", {}).items():
            assert ref["snapshot-id"] in kept, f"ref {name} lost its snapshot"
        kept_files: set[str] = set()
        for sid in kept:
            for path in self.files_at[sid]:
                assert os.path.exists(path), f"retained snapshot {sid} lost {path}"
            kept_files |= self.files_at[sid]
            assert mh.checksum(mh.rows(location, sid), COLUMNS) == self.rows_at[sid], (
                f"snapshot {sid} changed"
            )
        expired = set(self.rows_at) - kept
        expired_files = set().union(*(self.files_at[s] for s in expired)) if expired else set()
        self.shared_survivors += len(expired_files & kept_files)
        for path in expired_files - kept_files:
            assert not os.path.exists(path), f"{path} only expired snapshots reached, and it is still there"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    format_version=st.sampled_from([2, 3]),
    ops=st.lists(OPS, min_size=4, max_size=12),
)
def test_expiry_and_orphan_removal_keep_what_retained_snapshots_need(
    format_version: int, ops: list[Any]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        h = History(Path(folder), format_version)
        try:
            h.apply("append", 3)
            for op, arg in ops:
                h.apply(op, arg)
            h.apply("expire", 1)
            h.apply("orphans", 0)
        finally:
            h.lake.close()


def test_a_file_shared_by_expired_and_kept_snapshots_survives(tmp_path: Path) -> None:
    h = History(tmp_path, 3)
    for op, arg in [
        ("append", 4),
        ("append", 4),
        ("delete", 1),
        ("append", 2),
        ("expire", 1),
    ]:
        h.apply(op, arg)
    assert h.shared_survivors > 0  # appends carry earlier files forward: each was shared, and survived
    h.lake.close()
