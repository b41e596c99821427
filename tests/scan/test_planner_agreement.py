"""Reads, DELETE/UPDATE matching, commit validation and compaction agree on which rows are live.

Hypothesis draws table histories: data files in two partition specs (unpartitioned, and identity
on `p` with three values), v2 position-delete files that name one data file or several (the latter
scoped by partition, as Spark writes them, and sometimes naming files of other partitions, which
the spec says they must not delete from), v3 deletion vectors (each one holding every earlier
position delete of its file, as the spec requires, and replacing the file's previous DV), and
equality deletes on `id`, partitioned or global. The tables are written by hand with iceduck's
spec codecs (manifests, manifest lists, Puffin) and pyarrow.

The truth is an oracle written here from the spec's "Scan Planning" rules, independent of
iceduck's planner. Checked against it:
- `iceberg_scan` (reads);
- the writer's view (`live_state`): deleted positions and equality-delete flags per file, and the
  live positions DELETE/UPDATE matching finds;
- commit validation's incremental planning (`plan_since` from every earlier snapshot) against a
  full plan of the current snapshot;
- a DELETE and an UPDATE through the write API, then a compaction (rewrite of every file), each
  read back.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import iceduck
from iceduck.lake import connect
from iceduck.maintenance.actions import Maintainer
from iceduck.puffin import write_deletion_vectors
from iceduck.read.live import live_state
from iceduck.scan.planner import plan_scan, plan_since
from iceduck.spec.manifest import (
    CONTENT_DATA,
    CONTENT_EQUALITY_DELETES,
    CONTENT_POSITION_DELETES,
    MANIFEST_CONTENT_DATA,
    MANIFEST_CONTENT_DELETES,
    STATUS_ADDED,
    STATUS_DELETED,
    STATUS_EXISTING,
    DataFile,
    ManifestEntry,
    ManifestFile,
    write_manifest_list,
)
from iceduck.spec.manifest_writer import summarize_manifest, write_manifest
from iceduck.spec.partitioning import PartitionField, PartitionSpec
from iceduck.spec.table_metadata import read_table_metadata
from iceduck.spec.transforms import IdentityTransform
from iceduck.spec.types import parse_schema
from iceduck.table import Table
from iceduck.write.matching import matching_positions

SCHEMA_JSON: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "p", "type": "long", "required": False},
    ],
}
SCHEMA = parse_schema(SCHEMA_JSON)
SPECS = {
    0: PartitionSpec(0, ()),
    1: PartitionSpec(1, (PartitionField((2,), 1000, "p", IdentityTransform()),)),
}
SPEC_JSON = {0: [], 1: [{"source-id": 2, "field-id": 1000, "name": "p", "transform": "identity"}]}
DATA_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
        pa.field("p", pa.int64(), metadata={b"PARQUET:field_id": b"2"}),
    ]
)
POS_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), False, metadata={b"PARQUET:field_id": b"2147483546"}),
        pa.field("pos", pa.int64(), False, metadata={b"PARQUET:field_id": b"2147483545"}),
    ]
)
EQ_SCHEMA = pa.schema([pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"})])


# -- histories -------------------------------------------------------------------------------------

positions = st.lists(st.integers(0, 7), min_size=1, max_size=5, unique=True)
data_step = st.tuples(st.just("data"), st.sampled_from([0, 1]), st.integers(0, 2), st.integers(1, 8))
pos_step = st.tuples(
    st.just("pos"), st.booleans(), st.lists(st.tuples(st.integers(0, 50), positions), min_size=1, max_size=3)
)
dv_step = st.tuples(st.just("dv"), st.integers(0, 50), positions)
drop_step = st.tuples(st.just("drop"), st.integers(0, 50))
eq_step = st.tuples(
    st.just("eq"), st.sampled_from([0, 1]), st.integers(0, 2), st.lists(st.integers(0, 60), max_size=6)
)


@st.composite
def histories(draw: Any) -> tuple[int, list[Any]]:
    version = draw(st.sampled_from([2, 3]))
    kinds = [pos_step, eq_step, drop_step] + ([dv_step] if version == 3 else [])
    steps = [draw(data_step)]
    steps += draw(st.lists(st.one_of(data_step, *kinds), min_size=1, max_size=9))
    return version, steps


# -- the hand-written table and the oracle ------------------------------------------------------------


@dataclass
class _Data:
    path: str
    spec: int
    partition: tuple[Any, ...]
    seq: int
    ids: list[int]
    manifest: ManifestFile | None = None
    file: DataFile | None = None


@dataclass
class _Delete:
    entry_file: DataFile
    seq: int
    snapshot_id: int
    kind: str  # "pos", "dv", "eq"
    rows: dict[str, set[int]] = field(default_factory=dict)  # pos/dv: data path -> positions
    ids: set[int] = field(default_factory=set)  # eq


class _Builder:
    def __init__(self, folder: Path, version: int) -> None:
        self.folder = folder
        self.version = version
        (folder / "data").mkdir(parents=True)
        (folder / "metadata").mkdir(parents=True)
        self.data: list[_Data] = []
        self.deletes: list[_Delete] = []
        self.next_id = 0
        self.snapshots: list[dict[str, Any]] = []
        self.data_manifests: list[ManifestFile] = []
        self.delete_manifests: dict[int, ManifestFile] = {}
        self.next_row_id = 0
        self.uuid = str(uuid.uuid4())
        self.metadata_path = ""
        self.history: list[tuple[int, list[int]]] = []  # (snapshot id, live ids) after each step

    # the oracle, from the spec's rules
    def deleted_positions(self, f: _Data) -> set[int]:
        dvs = [d for d in self.deletes if d.kind == "dv" and f.path in d.rows and d.seq >= f.seq]
        if dvs:
            return set().union(*(d.rows[f.path] for d in dvs))
        out: set[int] = set()
        for d in self.deletes:
            if d.kind != "pos" or d.seq < f.seq or f.path not in d.rows:
                continue
            scoped = d.entry_file.referenced_data_file is not None
            if scoped or (d.entry_file.spec_id == f.spec and tuple(d.entry_file.partition) == f.partition):
                out |= d.rows[f.path]
        return out

    def equality_deletes(self, f: _Data) -> list[_Delete]:
        return [
            d
            for d in self.deletes
            if d.kind == "eq"
            and d.seq > f.seq
            and (
                d.entry_file.spec_id == 0
                or (d.entry_file.spec_id == f.spec and tuple(d.entry_file.partition) == f.partition)
            )
        ]

    def live_ids(self) -> list[int]:
        out = []
        for f in self.data:
            gone = self.deleted_positions(f)
            eq = set().union(*(d.ids for d in self.equality_deletes(f)))
            out += [i for pos, i in enumerate(f.ids) if pos not in gone and i not in eq]
        return sorted(out)

    # writing
    def step(self, step: tuple[Any, ...]) -> None:
        k = len(self.snapshots)
        snapshot_id, seq = 1000 + k, k + 1
        added_data: dict[int, list[DataFile]] = {}
        added: list[_Delete] = []
        replaced: list[_Delete] = []
        dropped: list[ManifestFile] = []
        kind = step[0]
        if kind == "drop":
            if len(self.data) > 1:  # a delete of a whole file (or a compaction): a DELETED entry
                f = self.data.pop(step[1] % len(self.data))
                assert f.manifest is not None and f.file is not None
                self.data_manifests = [
                    m for m in self.data_manifests if m.manifest_path != f.manifest.manifest_path
                ]
                gone = ManifestEntry(STATUS_DELETED, snapshot_id, f.seq, f.seq, f.file)
                # the spec removes a data file's deletion vector with it (iceduck refuses a DV left
                # pointing at a file that is gone: a damaged reference would resurrect rows)
                replaced = [d for d in self.deletes if d.kind == "dv" and f.path in d.rows]
                dropped.append(
                    self._manifest(f"m{k}-drop.avro", [gone], MANIFEST_CONTENT_DATA, f.spec, snapshot_id, seq)
                )
        elif kind == "data":
            _, spec, p, n = step
            ids = list(range(self.next_id, self.next_id + n))
            self.next_id += n
            ps = [p if spec == 1 else i % 3 for i in ids]
            path = str(self.folder / "data" / f"d{k}.parquet")
            pq.write_table(pa.table({"id": ids, "p": ps}, schema=DATA_SCHEMA), path)
            part = (p,) if spec == 1 else ()
            lo, hi = min(ids), max(ids)
            written = DataFile(
                CONTENT_DATA, path, "PARQUET", spec, part, n, Path(path).stat().st_size,
                value_counts={1: n, 2: n}, null_value_counts={1: 0, 2: 0},
                lower_bounds={1: lo.to_bytes(8, "little", signed=True)},
                upper_bounds={1: hi.to_bytes(8, "little", signed=True)},
            )  # fmt: skip
            added_data[spec] = [written]
            self.data.append(_Data(path, spec, part, seq, ids, file=added_data[spec][0]))
        elif kind == "pos":
            _, scoped, picks = step
            rows: dict[str, set[int]] = {}
            for index, pos in picks[:1] if scoped else picks:
                f = self.data[index % len(self.data)]
                rows.setdefault(f.path, set()).update(x for x in pos if x < len(f.ids))
            rows = {p: r for p, r in rows.items() if r}
            if rows:
                first = next(f for f in self.data if f.path in rows)
                path = str(self.folder / "data" / f"pos{k}.parquet")
                flat = sorted((p, x) for p, r in rows.items() for x in r)
                pq.write_table(
                    pa.table(
                        {"file_path": [a for a, _ in flat], "pos": [b for _, b in flat]}, schema=POS_SCHEMA
                    ),
                    path,
                )
                d = DataFile(
                    CONTENT_POSITION_DELETES, path, "PARQUET", first.spec, first.partition, len(flat),
                    Path(path).stat().st_size, referenced_data_file=first.path if scoped else None,
                )  # fmt: skip
                added.append(_Delete(d, seq, snapshot_id, "pos", rows))
        elif kind == "dv":
            _, index, pos = step
            f = self.data[index % len(self.data)]
            new = {x for x in pos if x < len(f.ids)} | self.deleted_positions(f)
            if new:
                replaced = [d for d in self.deletes if d.kind == "dv" and f.path in d.rows]
                path = str(self.folder / "data" / f"dv{k}.puffin")
                body, blobs = write_deletion_vectors([(f.path, sorted(new))])
                Path(path).write_bytes(body)
                (blob,) = blobs
                d = DataFile(
                    CONTENT_POSITION_DELETES, path, "PUFFIN", f.spec, f.partition, blob.cardinality, len(body),
                    referenced_data_file=f.path, content_offset=blob.offset, content_size_in_bytes=blob.length,
                )  # fmt: skip
                added.append(_Delete(d, seq, snapshot_id, "dv", {f.path: new}))
        else:
            _, spec, p, ids = step
            path = str(self.folder / "data" / f"eq{k}.parquet")
            pq.write_table(pa.table({"id": ids}, schema=EQ_SCHEMA), path)
            part = (p,) if spec == 1 else ()
            d = DataFile(
                CONTENT_EQUALITY_DELETES, path, "PARQUET", spec, part, len(ids), Path(path).stat().st_size,
                equality_ids=(1,),
            )  # fmt: skip
            added.append(_Delete(d, seq, snapshot_id, "eq", ids=set(ids)))
        new_manifests = [
            self._manifest(f"m{k}-{spec}.avro", [ManifestEntry(STATUS_ADDED, None, None, None, d) for d in files],
                           MANIFEST_CONTENT_DATA, spec, snapshot_id, seq)
            for spec, files in added_data.items()
        ]  # fmt: skip
        if kind == "data":
            self.data[-1].manifest = new_manifests[0]
        self.data_manifests += new_manifests
        for spec in {d.entry_file.spec_id for d in added + replaced}:
            entries = []
            for d in self.deletes:
                if d.entry_file.spec_id != spec:
                    continue
                status, sid = (
                    (STATUS_DELETED, snapshot_id) if d in replaced else (STATUS_EXISTING, d.snapshot_id)
                )
                entries.append(ManifestEntry(status, sid, d.seq, d.seq, d.entry_file))
            entries += [
                ManifestEntry(STATUS_ADDED, None, None, None, d.entry_file)
                for d in added
                if d.entry_file.spec_id == spec
            ]
            self.delete_manifests[spec] = self._manifest(
                f"m{k}-del{spec}.avro", entries, MANIFEST_CONTENT_DELETES, spec, snapshot_id, seq
            )
        self.deletes = [d for d in self.deletes if d not in replaced] + added
        written = write_manifest_list(
            [*self.data_manifests, *dropped, *self.delete_manifests.values()], format_version=self.version,
            snapshot_id=snapshot_id, parent_snapshot_id=snapshot_id - 1 if k else None, sequence_number=seq,
            first_row_id=self.next_row_id if self.version >= 3 else None,
        )  # fmt: skip
        # the deleted-entries manifest lives in this snapshot only (as writers drop such manifests)
        dropped_paths = {m.manifest_path for m in dropped}
        self.data_manifests = [
            m
            for m in written.manifests
            if m.content == MANIFEST_CONTENT_DATA and m.manifest_path not in dropped_paths
        ]
        by_path = {m.manifest_path: m for m in written.manifests}
        for f in self.data:
            if f.manifest is not None and f.manifest.manifest_path in by_path:
                f.manifest = by_path[f.manifest.manifest_path]
        list_path = self.folder / "metadata" / f"snap-{snapshot_id}.avro"
        list_path.write_bytes(written.data)
        snap: dict[str, Any] = {
            "snapshot-id": snapshot_id, "sequence-number": seq, "timestamp-ms": 1_700_000_000_000 + k,
            "manifest-list": str(list_path), "summary": {"operation": "overwrite"}, "schema-id": 0,
        }  # fmt: skip
        if k:
            snap["parent-snapshot-id"] = snapshot_id - 1
        if self.version >= 3:
            assert written.next_row_id is not None
            snap["first-row-id"] = self.next_row_id
            snap["added-rows"] = written.next_row_id - self.next_row_id
            self.next_row_id = written.next_row_id
        self.snapshots.append(snap)
        self._metadata(k + 1)
        self.history.append((snapshot_id, self.live_ids()))

    def _manifest(
        self, name: str, entries: list[ManifestEntry], content: int, spec: int, snapshot_id: int, seq: int
    ) -> ManifestFile:
        path = str(self.folder / "metadata" / name)
        ptype = SPECS[spec].partition_type(SCHEMA)
        body = write_manifest(
            entries, format_version=self.version, schema_json=SCHEMA_JSON, partition_spec_json=SPEC_JSON[spec],
            partition_spec_id=spec, partition_type=ptype, content=content, snapshot_id=snapshot_id,
        )  # fmt: skip
        Path(path).write_bytes(body)
        return summarize_manifest(
            entries, manifest_path=path, manifest_length=len(body), partition_spec_id=spec,
            partition_type=ptype, content=content, added_snapshot_id=snapshot_id, sequence_number=seq,
        )  # fmt: skip

    def _metadata(self, version: int) -> None:
        last = self.snapshots[-1]
        md: dict[str, Any] = {
            "format-version": self.version, "table-uuid": self.uuid, "location": str(self.folder),
            "last-sequence-number": last["sequence-number"], "last-updated-ms": last["timestamp-ms"],
            "last-column-id": 2, "current-schema-id": 0, "schemas": [SCHEMA_JSON], "default-spec-id": 1,
            "partition-specs": [{"spec-id": s, "fields": f} for s, f in SPEC_JSON.items()],
            "last-partition-id": 1000, "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": {}, "current-snapshot-id": last["snapshot-id"],
            "refs": {"main": {"snapshot-id": last["snapshot-id"], "type": "branch"}},
            "snapshots": self.snapshots,
            "snapshot-log": [{"snapshot-id": s["snapshot-id"], "timestamp-ms": s["timestamp-ms"]} for s in self.snapshots],
            "metadata-log": [],
        }  # fmt: skip
        if self.version >= 3:
            md["next-row-id"] = self.next_row_id
        path = self.folder / "metadata" / f"v{version}.metadata.json"
        data = json.dumps(md).encode()
        read_table_metadata(data, path=str(path), strict=True)
        path.write_bytes(data)
        (self.folder / "metadata" / "version-hint.text").write_text(str(version))
        self.metadata_path = str(path)


def _deletes_by_file(plan: Any) -> dict[str, list[tuple[str, int | None]]]:
    return {t.path: sorted((d.path, d.file.content_offset) for d in t.deletes) for t in plan.tasks}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(history=(3, [("data", 0, 0, 1), ("data", 0, 0, 1), ("dv", 0, [0]), ("drop", 0)]))
@given(history=histories())
def test_every_reader_of_the_plan_agrees_with_the_spec(
    tmp_path_factory: pytest.TempPathFactory, history: Any
) -> None:
    version, steps = history
    warehouse = tmp_path_factory.mktemp("wh")
    b = _Builder(warehouse / "ns" / "t", version)
    for s in steps:
        b.step(s)
    truth = b.live_ids()
    con = duckdb.connect()
    iceduck.register(con)
    try:
        # reads
        assert (
            sorted(r[0] for r in con.execute(f"SELECT id FROM iceberg_scan('{b.metadata_path}')").fetchall())
            == truth
        )
        # iceberg_changes: per snapshot, the ids that appeared and disappeared
        expected = set()
        previous: set[int] = set()
        for sid, ids in b.history:
            expected |= {("insert", sid, i) for i in set(ids) - previous}
            expected |= {("delete", sid, i) for i in previous - set(ids)}
            previous = set(ids)
        changes = con.execute(f"SELECT change_type, snapshot_id, id FROM iceberg_changes('{b.metadata_path}')")
        assert sorted(changes.fetchall()) == sorted(expected)
        table = Table.load(b.metadata_path)
        # the writer's view: deleted positions, equality-delete flags, matched live positions
        state = live_state(table)
        by_path = {f.path: f for f in b.data}
        assert set(state.files) == set(by_path)
        for path, lf in state.files.items():
            f = by_path[path]
            assert set(state.deleted(path).to_numpy().tolist()) == b.deleted_positions(f), path
            assert sorted(e.data_file.file_path for e in lf.equality_deletes) == sorted(
                d.entry_file.file_path for d in b.equality_deletes(f)
            )
        matched = matching_positions(con, state, table.metadata.schema, None)
        for path, f in by_path.items():
            live = [i for i, _ in enumerate(f.ids) if i not in b.deleted_positions(f)]
            found = matched[path].tolist() if path in matched else []
            assert found == live, path
        # commit validation's incremental plan, from every earlier snapshot
        full = _deletes_by_file(plan_scan(table, table.metadata.current_snapshot()))
        for snap in table.metadata.snapshots:
            base = plan_scan(table, snap, schema=table.metadata.schema)
            assert _deletes_by_file(plan_since(table, table.metadata.current_snapshot(), base)) == full
    finally:
        con.close()
    # the write API on the same table: DELETE, UPDATE (refused with equality deletes), compaction
    lake = connect(warehouse, catalog="folder")
    try:
        t = lake.table("ns.t")
        t.delete("id % 3 = 0")
        truth = [i for i in truth if i % 3]
        scan = "SELECT id, p FROM lake.ns.t"
        assert sorted(r[0] for r in lake.sql(scan).fetchall()) == truth
        if not any(d.kind == "eq" for d in b.deletes):
            t.update({"id": "id + 1000"}, "p = 1 AND id % 2 = 0")
            truth = sorted(i + 1000 if (i % 2 == 0 and _p(b, i) == 1) else i for i in truth)
            assert sorted(r[0] for r in lake.sql(scan).fetchall()) == truth
        Maintainer.for_lake(lake, "ns.t").rewrite_data_files(rewrite_all=True, dry_run=False)
        assert sorted(r[0] for r in lake.sql(scan).fetchall()) == truth
    finally:
        lake.close()


def _p(b: _Builder, i: int) -> int:
    """The p value row `i` was written with."""
    f = next(f for f in b.data if i in f.ids)
    return f.partition[0] if f.spec == 1 else i % 3
