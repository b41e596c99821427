"""A small writer of real Iceberg tables for tests: Parquet data files, deletes, manifests, metadata.

`TableBuilder(folder, format_version=3)` makes an unpartitioned table with schema
`id long (required, field 1), data string (field 2)`. Each `commit(...)` writes one snapshot: new
data files (ids numbered consecutively across the table), deletion vectors (v3: one Puffin file per
commit; a DV for a data file that already has one is merged with it and replaces it, as the spec
requires) and position-delete files (v2: one Parquet file per commit), plus optionally a Puffin
statistics file. Data manifests are carried over unchanged; every commit that changes deletes
rewrites the delete manifest with EXISTING, DELETED and ADDED entries.

The builder keeps its own truth, independent of iceduck's readers: `deleted(snapshot_id)` (the
positions deleted per data file) and `live_ids(snapshot_id)` (the ids a scan must return).

It writes with iceduck's spec writers (`write_manifest`, `write_manifest_list`,
`write_deletion_vectors`, `PuffinWriter`) and pyarrow; the metadata JSON is built by hand and
checked with `read_table_metadata`. Tests confirm the tables are valid with independent readers
(PyIceberg, the reference peer).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from iceduck.puffin import PuffinWriter, Roaring64, write_deletion_vectors
from iceduck.spec.manifest import (
    CONTENT_DATA,
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
from iceduck.spec.table_metadata import read_table_metadata
from iceduck.spec.types import StructType

SCHEMA_JSON: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "identifier-field-ids": [],
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "data", "type": "string", "required": False},
    ],
}
UNPARTITIONED = StructType(())
FIELD_ID_FILE_PATH = 2147483546
FIELD_ID_POS = 2147483545
_FIRST_SNAPSHOT_ID = 4_812_345_678_901_234_000
_FIRST_TIMESTAMP_MS = 1_700_000_000_000


def _field(name: str, t: pa.DataType, field_id: int, nullable: bool) -> pa.Field:
    return pa.field(name, t, nullable=nullable, metadata={b"PARQUET:field_id": str(field_id).encode()})


DATA_SCHEMA = pa.schema([_field("id", pa.int64(), 1, False), _field("data", pa.string(), 2, True)])
POSITION_DELETE_SCHEMA = pa.schema(
    [
        _field("file_path", pa.string(), FIELD_ID_FILE_PATH, False),
        _field("pos", pa.int64(), FIELD_ID_POS, False),
    ]
)


@dataclass
class Commit:
    """What one commit did: its snapshot, files written, and the Puffin/delete files it added."""

    snapshot_id: int
    sequence_number: int
    metadata_path: str
    manifest_list: str
    puffin_path: str | None = None
    position_delete_path: str | None = None
    statistics_path: str | None = None
    dv_entries: tuple[DataFile, ...] = ()


@dataclass
class _Data:
    path: str
    first_id: int
    rows: int


@dataclass
class TableBuilder:
    """Writes an Iceberg table into `folder` snapshot by snapshot (see the module docstring)."""

    folder: Path
    format_version: int = 3
    commits: list[Commit] = field(default_factory=list)
    data_files: dict[str, _Data] = field(default_factory=dict)
    _pending: list[str] = field(default_factory=list)
    _next_id: int = 0
    _next_row_id: int = 0
    _data_manifests: list[ManifestFile] = field(default_factory=list)
    _delete_manifests: list[ManifestFile] = field(default_factory=list)
    _live_deletes: list[ManifestEntry] = field(default_factory=list)
    _deleted: dict[int, dict[str, frozenset[int]]] = field(default_factory=dict)
    _live_data: dict[int, tuple[str, ...]] = field(default_factory=dict)
    _snapshots: list[dict[str, Any]] = field(default_factory=list)
    _statistics: list[dict[str, Any]] = field(default_factory=list)
    _metadata_log: list[dict[str, Any]] = field(default_factory=list)
    _uuid: str = field(default_factory=lambda: str(uuid.uuid4()))

    def __post_init__(self) -> None:
        self.folder = Path(self.folder).resolve()
        (self.folder / "data").mkdir(parents=True, exist_ok=True)
        (self.folder / "metadata").mkdir(parents=True, exist_ok=True)

    @property
    def location(self) -> str:
        return str(self.folder)

    @property
    def metadata_path(self) -> str:
        """The current metadata file."""
        return self.commits[-1].metadata_path

    # -- truth -----------------------------------------------------------------------------------

    def deleted(self, snapshot_id: int | None = None) -> dict[str, frozenset[int]]:
        """Positions deleted per data file in a snapshot (default: the last), as the builder wrote them."""
        return dict(self._deleted[snapshot_id if snapshot_id is not None else self.commits[-1].snapshot_id])

    def live_ids(self, snapshot_id: int | None = None) -> list[int]:
        """The ids a scan of the snapshot must return, sorted."""
        sid = snapshot_id if snapshot_id is not None else self.commits[-1].snapshot_id
        deleted = self._deleted[sid]
        out: list[int] = []
        for path in self._live_data[sid]:
            d = self.data_files[path]
            gone = deleted.get(path, frozenset())
            out.extend(d.first_id + p for p in range(d.rows) if p not in gone)
        return sorted(out)

    # -- writing ---------------------------------------------------------------------------------

    def add_data_file(self, rows: int, name: str | None = None) -> str:
        """Write a Parquet data file of `rows` rows (ids continue from the previous file); returns its path.

        The file joins the table at the next `commit`.
        """
        path = str(self.folder / "data" / f"{name or f'{len(self.data_files):05d}-data'}.parquet")
        ids = np.arange(self._next_id, self._next_id + rows, dtype=np.int64)
        table = pa.table(
            {"id": ids, "data": pa.array([f"row-{i}" for i in ids.tolist()])}, schema=DATA_SCHEMA
        )
        pq.write_table(table, path)
        self.data_files[path] = _Data(path, self._next_id, rows)
        self._next_id += rows
        self._pending.append(path)
        return path

    def commit(
        self,
        *,
        dvs: Mapping[str, Iterable[int] | Any] | None = None,
        position_deletes: Mapping[str, Iterable[int]] | None = None,
        statistics: bool = False,
        tamper: Callable[[DataFile], DataFile] | None = None,
    ) -> Commit:
        """Write one snapshot with the pending data files and the given deletes.

        `dvs` maps a data file to positions to delete with a deletion vector (merged with the file's
        current DV, which the new one replaces); `position_deletes` maps data files to positions for a
        v2 position-delete file. `statistics` adds a Puffin statistics file for the snapshot.
        `tamper` may alter each new delete entry before it is written (to build broken tables).
        """
        dvs = dvs or {}
        position_deletes = position_deletes or {}
        fv = self.format_version
        if dvs and fv < 3:
            raise ValueError("deletion vectors need format version 3")
        k = len(self.commits)
        snapshot_id = _FIRST_SNAPSHOT_ID + 7919 * k
        parent = self.commits[-1].snapshot_id if self.commits else None
        seq = k + 1
        meta = self.folder / "metadata"
        prev_deleted = dict(self._deleted[parent]) if parent is not None else {}
        commit = Commit(snapshot_id, seq, "", "")

        # data
        new_manifests: list[ManifestFile] = []
        if self._pending:
            entries = [
                ManifestEntry(STATUS_ADDED, None, None, None, self._data_file(p)) for p in self._pending
            ]
            new_manifests.append(
                self._write_manifest(
                    f"{snapshot_id}-m0.avro", entries, MANIFEST_CONTENT_DATA, snapshot_id, seq
                )
            )
        live_data = (
            (*self._live_data.get(parent, ()), *self._pending) if parent is not None else tuple(self._pending)
        )
        self._pending = []

        # deletes
        added: list[DataFile] = []
        replaced: set[str] = set()
        if dvs:
            merged = []
            for data_path, positions in dvs.items():
                new = Roaring64.from_positions(positions)
                old = prev_deleted.get(data_path)
                if old is not None:
                    new = new.union(Roaring64.from_positions(sorted(old)))
                    replaced.add(data_path)
                merged.append((data_path, new))
                prev_deleted[data_path] = frozenset(int(p) for p in new.to_arrow().to_pylist())
            puffin_path = str(self.folder / "data" / f"{snapshot_id}-deletes.puffin")
            data, blobs = write_deletion_vectors(merged)
            Path(puffin_path).write_bytes(data)
            commit.puffin_path = puffin_path
            for blob in blobs:
                added.append(
                    DataFile(
                        CONTENT_POSITION_DELETES, puffin_path, "PUFFIN", 0, (), blob.cardinality, len(data),
                        referenced_data_file=blob.referenced_data_file,
                        content_offset=blob.offset,
                        content_size_in_bytes=blob.length,
                    )
                )  # fmt: skip
        if position_deletes:
            path = str(self.folder / "data" / f"{snapshot_id}-pos-deletes.parquet")
            rows = sorted((p, int(pos)) for p, positions in position_deletes.items() for pos in positions)
            table = pa.table(
                {"file_path": [r[0] for r in rows], "pos": [r[1] for r in rows]},
                schema=POSITION_DELETE_SCHEMA,
            )
            pq.write_table(table, path)
            commit.position_delete_path = path
            single = position_deletes.keys() if len(position_deletes) == 1 else ()
            added.append(
                DataFile(
                    CONTENT_POSITION_DELETES, path, "PARQUET", 0, (), len(rows), Path(path).stat().st_size,
                    referenced_data_file=next(iter(single), None),
                )
            )  # fmt: skip
            for p, positions in position_deletes.items():
                prev_deleted[p] = prev_deleted.get(p, frozenset()) | frozenset(int(x) for x in positions)
        if tamper is not None:
            added = [tamper(d) for d in added]
        commit.dv_entries = tuple(d for d in added if d.file_format == "PUFFIN")

        if added:
            kept = [
                e
                for e in self._live_deletes
                if not (e.data_file.file_format == "PUFFIN" and e.data_file.referenced_data_file in replaced)
            ]
            gone = [e for e in self._live_deletes if e not in kept]
            entries = [
                *(dataclasses.replace(e, status=STATUS_EXISTING) for e in kept),
                *(dataclasses.replace(e, status=STATUS_DELETED, snapshot_id=snapshot_id) for e in gone),
                *(ManifestEntry(STATUS_ADDED, None, None, None, d) for d in added),
            ]
            delete_manifest = self._write_manifest(
                f"{snapshot_id}-m1.avro", entries, MANIFEST_CONTENT_DELETES, snapshot_id, seq
            )
            self._delete_manifests = [delete_manifest]
            self._live_deletes = [
                *kept,
                *(ManifestEntry(STATUS_EXISTING, snapshot_id, seq, seq, d) for d in added),
            ]

        # manifest list
        written = write_manifest_list(
            [*self._data_manifests, *new_manifests, *self._delete_manifests],
            format_version=fv,
            snapshot_id=snapshot_id,
            parent_snapshot_id=parent,
            sequence_number=seq,
            first_row_id=self._next_row_id if fv >= 3 else None,
        )
        list_path = str(meta / f"snap-{snapshot_id}.avro")
        Path(list_path).write_bytes(written.data)
        commit.manifest_list = list_path
        self._data_manifests = [m for m in written.manifests if m.content == MANIFEST_CONTENT_DATA]
        self._delete_manifests = [m for m in written.manifests if m.content == MANIFEST_CONTENT_DELETES]

        snapshot: dict[str, Any] = {
            "snapshot-id": snapshot_id,
            "sequence-number": seq,
            "timestamp-ms": _FIRST_TIMESTAMP_MS + 1000 * k,
            "manifest-list": list_path,
            "summary": {
                "operation": "append"
                if new_manifests and not added
                else "overwrite"
                if new_manifests
                else "delete"
            },
            "schema-id": 0,
        }
        if parent is not None:
            snapshot["parent-snapshot-id"] = parent
        if fv >= 3:
            assert written.next_row_id is not None
            snapshot["first-row-id"] = self._next_row_id
            snapshot["added-rows"] = written.next_row_id - self._next_row_id
            self._next_row_id = written.next_row_id
        self._snapshots.append(snapshot)

        if statistics:
            commit.statistics_path = self._write_statistics(snapshot_id, seq)

        self._deleted[snapshot_id] = prev_deleted
        self._live_data[snapshot_id] = live_data
        self.commits.append(commit)
        commit.metadata_path = self._write_metadata(k + 1)
        return commit

    # -- pieces ----------------------------------------------------------------------------------

    def _data_file(self, path: str) -> DataFile:
        d = self.data_files[path]
        first, last = d.first_id, d.first_id + d.rows - 1
        return DataFile(
            CONTENT_DATA, path, "PARQUET", 0, (), d.rows, Path(path).stat().st_size,
            value_counts={1: d.rows, 2: d.rows},
            null_value_counts={1: 0, 2: 0},
            lower_bounds={1: first.to_bytes(8, "little", signed=True)},
            upper_bounds={1: last.to_bytes(8, "little", signed=True)},
        )  # fmt: skip

    def _write_manifest(
        self, name: str, entries: list[ManifestEntry], content: int, snapshot_id: int, seq: int
    ) -> ManifestFile:
        path = str(self.folder / "metadata" / name)
        data = write_manifest(
            entries,
            format_version=self.format_version,
            schema_json=SCHEMA_JSON,
            partition_spec_json=[],
            partition_spec_id=0,
            partition_type=UNPARTITIONED,
            content=content,
            snapshot_id=snapshot_id,
        )
        Path(path).write_bytes(data)
        return summarize_manifest(
            entries,
            manifest_path=path,
            manifest_length=len(data),
            partition_spec_id=0,
            partition_type=UNPARTITIONED,
            content=content,
            added_snapshot_id=snapshot_id,
            sequence_number=seq,
        )

    def _write_statistics(self, snapshot_id: int, seq: int) -> str:
        path = str(self.folder / "metadata" / f"{snapshot_id}-stats.puffin")
        writer = PuffinWriter(properties={"created-by": "iceduck tests"})
        blobs = [
            writer.add_blob(
                "apache-datasketches-theta-v1", b"not a real sketch", fields=[1],
                snapshot_id=snapshot_id, sequence_number=seq, compression_codec="zstd", properties={"ndv": "42"},
            ),
            writer.add_blob(
                "apache-datasketches-theta-v1", b"\x00\x01\x02", fields=[2], snapshot_id=snapshot_id, sequence_number=seq,
            ),
        ]  # fmt: skip
        data = writer.finish()
        Path(path).write_bytes(data)
        self._statistics.append(
            {
                "snapshot-id": snapshot_id,
                "statistics-path": path,
                "file-size-in-bytes": len(data),
                "file-footer-size-in-bytes": writer.footer_size,
                "blob-metadata": [
                    {
                        "type": b.type,
                        "snapshot-id": b.snapshot_id,
                        "sequence-number": b.sequence_number,
                        "fields": list(b.fields),
                        **({"properties": dict(b.properties)} if b.properties else {}),
                    }
                    for b in blobs
                ],
            }
        )
        return path

    def _write_metadata(self, version: int) -> str:
        last = self._snapshots[-1]
        md: dict[str, Any] = {
            "format-version": self.format_version,
            "table-uuid": self._uuid,
            "location": self.location,
            "last-sequence-number": last["sequence-number"],
            "last-updated-ms": last["timestamp-ms"],
            "last-column-id": 2,
            "current-schema-id": 0,
            "schemas": [SCHEMA_JSON],
            "default-spec-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": []}],
            "last-partition-id": 999,
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": {},
            "current-snapshot-id": last["snapshot-id"],
            "refs": {"main": {"snapshot-id": last["snapshot-id"], "type": "branch"}},
            "snapshots": self._snapshots,
            "snapshot-log": [
                {"snapshot-id": s["snapshot-id"], "timestamp-ms": s["timestamp-ms"]} for s in self._snapshots
            ],
            "metadata-log": list(self._metadata_log),
            "statistics": self._statistics,
            "partition-statistics": [],
        }
        if self.format_version >= 3:
            md["next-row-id"] = self._next_row_id
        path = str(self.folder / "metadata" / f"v{version}.metadata.json")
        data = json.dumps(md, indent=2).encode()
        read_table_metadata(data, path=path, strict=True)  # the builder must write valid metadata
        Path(path).write_bytes(data)
        (self.folder / "metadata" / "version-hint.text").write_text(str(version))
        self._metadata_log.append({"metadata-file": path, "timestamp-ms": last["timestamp-ms"]})
        return path
