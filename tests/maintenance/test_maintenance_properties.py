"""Property: over random histories of appends, deletes, tags, rewrites, manifest rewrites, expiries
and orphan removals (with a crashed writer's files lying around, a table nested in the data folder
and a clone sharing the location, both written and maintained too), expiry and orphan removal never
delete a file any retained snapshot of any of the tables references, every retained snapshot reads exactly the rows it
had when it was committed, a file shared by expired and kept snapshots survives, and what only
expired snapshots (or nothing at all) reached is gone. Truth: `tests/support/maintenance_helpers.py`."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iceduck.catalog.locations import ALLOW_NESTED_PROPERTY
from iceduck.maintenance import Maintainer
from iceduck.spec.snapshots import SnapshotRef, SnapshotRefType
from iceduck.spec.updates import SetSnapshotRef
from iceduck.transaction.changes import MetadataChange
from iceduck.transaction.commit import TableCommitter
from tests.support import maintenance_helpers as mh
from tests.support.write_helpers import new_lake

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
    # neighbours: a table nested in ns.p's data folder, a clone registered on ns.p's metadata (the
    # same location, shared files), writes to them and maintenance of them
    st.tuples(st.just("nest"), st.just(0)),
    st.tuples(st.just("clone"), st.just(0)),
    st.tuples(st.just("other_write"), st.integers(0, 7)),
    st.tuples(st.just("other_maintain"), st.integers(0, 3)),
)
NESTED = "ns.n"
CLONE = "ns.c"


class Tracked:
    """One table and what every snapshot of it held when it was committed."""

    def __init__(self, lake: Any, identifier: str) -> None:
        self.lake = lake
        self.identifier = identifier
        self.m = Maintainer.for_lake(lake, identifier)
        self.rows_at: dict[int, list[tuple[Any, ...]]] = {}
        self.files_at: dict[int, set[str]] = {}

    @property
    def metadata_location(self) -> str:
        return str(self.lake.table(self.identifier).metadata_location)

    def note(self) -> None:
        """Remember the rows and files of snapshots not seen yet (as committed)."""
        location = self.metadata_location
        for s in mh.metadata(location).get("snapshots", []):
            sid = s["snapshot-id"]
            if sid not in self.rows_at:
                self.rows_at[sid] = mh.checksum(mh.rows(location, sid), COLUMNS)
                self.files_at[sid] = mh.snapshot_files(location, sid)

    def retained(self) -> set[int]:
        md = mh.metadata(self.metadata_location)
        kept = {s["snapshot-id"] for s in md.get("snapshots", [])}
        for name, ref in md.get("refs", {}).items():
            assert ref["snapshot-id"] in kept, f"{self.identifier}: ref {name} lost its snapshot"
        return kept

    def check_retained(self) -> set[str]:
        """Every retained snapshot has its files and its rows; returns the files they reach."""
        location = self.metadata_location
        kept_files: set[str] = set()
        for sid in self.retained():
            for path in self.files_at[sid]:
                assert os.path.exists(path), f"{self.identifier}: retained snapshot {sid} lost {path}"
            kept_files |= self.files_at[sid]
            assert mh.checksum(mh.rows(location, sid), COLUMNS) == self.rows_at[sid], (
                f"{self.identifier}: snapshot {sid} changed"
            )
        return kept_files

    def files_ever(self) -> set[str]:
        return set().union(*self.files_at.values()) if self.files_at else set()


class History:
    """A table `ns.p`, maybe neighbours sharing its folders, and what every snapshot held."""

    def __init__(self, folder: Path, format_version: int) -> None:
        self.folder = folder
        self.format_version = format_version
        self.lake = new_lake(folder / "wh")
        self.t = self.lake.create_table(
            "ns.p", [("id", "BIGINT"), ("part", "VARCHAR"), ("v", "VARCHAR")], partition_by=["part"],
            format_version=format_version,
        )  # fmt: skip
        self.main = Tracked(self.lake, "ns.p")
        self.m = self.main.m
        self.others: dict[str, Tracked] = {}
        self.junk: list[Path] = []
        self.others_junk: dict[str, list[Path]] = {}
        self.next_id = 0
        self.shared_survivors = 0

    @property
    def rows_at(self) -> dict[int, list[tuple[Any, ...]]]:
        return self.main.rows_at

    @property
    def files_at(self) -> dict[int, set[str]]:
        return self.main.files_at

    def note(self) -> None:
        for t in (self.main, *self.others.values()):
            t.note()

    def _rows(self, n: int) -> pa.Table:
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        return pa.table(
            {"id": pa.array(ids, pa.int64()), "part": [f"p{i % 2}" for i in ids], "v": [f"v{i}" for i in ids]}
        )

    def apply(self, op: str, arg: Any) -> None:
        if op == "append":
            self.t.append(self._rows(arg))
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
                self._junk(root / rel, self.junk)
            if NESTED in self.others:  # the nested table's own junk: only its own orphan removal takes it
                nested_root = Path(self.lake.table(NESTED).location)
                self._junk(nested_root / "data" / f"dead-{len(self.junk)}.parquet", self.others_junk[NESTED])
        elif op == "orphans":
            time.sleep(0.002)
            self.m.remove_orphan_files(older_than=int(time.time() * 1000), allow_recent=True, dry_run=False)
            assert not any(p.exists() for p in self.junk), "orphan removal left a dead writer's file"
            for name, junk in self.others_junk.items():
                assert all(p.exists() for p in junk), f"orphan removal of ns.p deleted a file of {name}"
            self.check()
        elif op == "nest" and NESTED not in self.others:
            location = f"{self.t.location}/data/nested"
            self.lake.create_table(
                NESTED, [("id", "BIGINT"), ("part", "VARCHAR"), ("v", "VARCHAR")], format_version=self.format_version,
                location=location, properties={ALLOW_NESTED_PROPERTY: "true"},
            )  # fmt: skip
            self.lake.table(NESTED).append(self._rows(3))
            self._add_other(NESTED)
        elif op == "clone" and CLONE not in self.others and self.t.current_snapshot() is not None:
            self.lake.catalog.register_table("ns", "c", self.t.metadata_location)
            self._add_other(CLONE)
        elif op == "other_write" and self.others:
            name = sorted(self.others)[arg % len(self.others)]
            handle = self.lake.table(name)
            if arg < 4:
                handle.append(self._rows(arg + 1))
            else:
                handle.delete(f"id % 5 = {arg - 4}")
        elif op == "other_maintain" and self.others:
            name = sorted(self.others)[arg % len(self.others)]
            other = self.others[name]
            time.sleep(0.002)
            now = int(time.time() * 1000)
            if arg < 2:
                other.m.expire_snapshots(older_than=now, retain_last=1, dry_run=False)
            else:
                other.m.remove_orphan_files(older_than=now, allow_recent=True, dry_run=False)
                junk = self.others_junk.get(name, [])
                assert not any(p.exists() for p in junk), (
                    f"orphan removal of {name} left its dead writer's file"
                )
                junk.clear()
            self.check()
        self.note()

    @staticmethod
    def _junk(p: Path, into: list[Path]) -> None:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"partial")
        into.append(p)

    def _add_other(self, name: str) -> None:
        self.others[name] = Tracked(self.lake, name)
        self.others_junk[name] = []

    def _tag(self, name: str, snapshot_id: int) -> None:
        committer = TableCommitter(self.lake.catalog, "ns", "p", self.lake.io)

        def update(md: Any) -> Any:

            return [SetSnapshotRef(name, SnapshotRef(snapshot_id, SnapshotRefType.TAG))]

        committer.commit(MetadataChange("set-ref", update), committer.load())

    def check(self) -> None:
        """Every table's retained snapshots read as committed; what only ns.p's expired snapshots
        reached (and no neighbour ever did) is gone."""
        kept_files = self.main.check_retained()
        neighbours_files: set[str] = set()
        for other in self.others.values():
            kept_files |= other.check_retained()
            neighbours_files |= other.files_ever()
        expired = set(self.rows_at) - self.main.retained()
        expired_files = set().union(*(self.files_at[s] for s in expired)) if expired else set()
        self.shared_survivors += len(expired_files & kept_files)
        for path in expired_files - kept_files - neighbours_files:
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
