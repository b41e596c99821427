"""Benchmark data sets: built on first use under ``benchmarks/.data/`` (gitignored), then reused.

Each kind of data set is built by PyIceberg in a child process (``python -m benchmarks.datasets
build KIND --scale SCALE``) so that the harness process does not carry PyIceberg's memory into the
peak-RSS numbers of the in-process iceduck measurements. A finished build leaves ``dataset.json``
(parameters, current metadata location, counts, build time); anything else is rebuilt from scratch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import fastavro

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(__file__).resolve().parent / ".data"
SCALES = ("small", "full")

# Bump when a builder changes what it writes: cached data sets of an older format are rebuilt.
_FORMAT = 1


@dataclass(frozen=True, slots=True)
class Dataset:
    """A built data set: where it lives and what the builder recorded about it (``info``)."""

    kind: str
    name: str
    root: Path
    metadata_location: str  # plain absolute path of the current metadata.json
    info: dict[str, Any]
    build_seconds: float | None  # None when reused from an earlier run
    waited_seconds: float = 0.0  # time spent waiting for a concurrent run that was building it

    @property
    def reused(self) -> bool:
        """True when the data set came from the cache rather than being built now."""
        return self.build_seconds is None


@dataclass(frozen=True, slots=True)
class _Kind:
    params: Callable[[str], dict[str, int]]  # scale -> parameters
    name: Callable[[dict[str, int]], str]  # parameters -> directory name
    build: Callable[[Path, dict[str, int]], dict[str, Any]]  # (root, parameters) -> info


def _plain_path(location: str) -> str:
    return location.removeprefix("file://")


# -- "files": many tiny data files in exactly M manifests of F files -----------------------------------


def _files_params(scale: str) -> dict[str, int]:
    if scale == "small":
        return {"manifests": 10, "files_per_manifest": 10, "rows_per_file": 3}
    return {"manifests": 100, "files_per_manifest": 100, "rows_per_file": 3}


def _files_name(params: dict[str, int]) -> str:
    return f"files_{params['manifests']}x{params['files_per_manifest']}"


def _build_files(root: Path, params: dict[str, int]) -> dict[str, Any]:
    """A v2 table partitioned by identity(part) whose current snapshot has M manifests of F files.

    Each of the M fast appends writes F groups of ``rows_per_file`` rows, one group per distinct
    ``part`` value, so PyIceberg writes exactly one tiny data file per partition: F files in one new
    manifest. Manifest merging is disabled, so every append keeps the earlier manifests as they are.
    """
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import IntegerType, LongType, NestedField, StringType

    manifests, per_manifest, rows = params["manifests"], params["files_per_manifest"], params["rows_per_file"]
    catalog = SqlCatalog(
        "bench", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=(root / "warehouse").as_uri()
    )
    catalog.create_namespace("bench")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "part", IntegerType(), required=False),
        NestedField(3, "name", StringType(), required=False),
    )
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="part")
    )
    table = catalog.create_table(
        "bench.files",
        schema=schema,
        partition_spec=spec,
        properties={"format-version": "2", "commit.manifest-merge.enabled": "false"},
    )
    arrow_schema = pa.schema([("id", pa.int64()), ("part", pa.int32()), ("name", pa.string())])
    next_id = 0
    for _ in range(manifests):
        ids = list(range(next_id, next_id + per_manifest * rows))
        next_id += len(ids)
        batch = pa.table(
            {"id": ids, "part": [i // rows for i in range(len(ids))], "name": [f"row-{i}" for i in ids]},
            schema=arrow_schema,
        )
        table.append(batch)
    table = catalog.load_table("bench.files")
    metadata_location = _plain_path(table.metadata_location)
    counts = _verify_manifests(metadata_location, manifests, per_manifest)
    return {
        "metadata_location": metadata_location,
        "table_location": _plain_path(table.location()),
        "snapshots": len(table.metadata.snapshots),
        "manifests": counts["manifests"],
        "data_files": counts["data_files"],
        "records": counts["records"],
    }


def _verify_manifests(metadata_location: str, manifests: int, per_manifest: int) -> dict[str, int]:
    """Read the current manifest list and manifests with fastavro: M data manifests of F live files."""
    metadata = json.loads(Path(metadata_location).read_text())
    (snapshot,) = [s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"]]
    entries = _avro_records(snapshot["manifest-list"])
    if len(entries) != manifests:
        raise RuntimeError(
            f"{metadata_location}: manifest list has {len(entries)} manifests, wanted {manifests}"
        )
    data_files = records = 0
    for entry in entries:
        path = _plain_path(entry["manifest_path"])
        listed = entry["added_files_count"] + entry["existing_files_count"]
        live = [e for e in _avro_records(path) if e["status"] != 2]  # 2 = DELETED
        if entry["content"] != 0 or listed != per_manifest or len(live) != per_manifest:
            raise RuntimeError(
                f"{path}: content {entry['content']}, {listed} files in the manifest list, "
                f"{len(live)} live entries; wanted a data manifest of {per_manifest} files"
            )
        data_files += len(live)
        records += sum(e["data_file"]["record_count"] for e in live)
    return {"manifests": len(entries), "data_files": data_files, "records": records}


def _avro_records(location: str) -> list[dict[str, Any]]:
    with open(_plain_path(location), "rb") as handle:
        return [cast(dict[str, Any], record) for record in fastavro.reader(handle)]


# -- "files4k": 4,000 tiny files in 40 manifests (planning cost) ---------------------------------------


def _files4k_params(scale: str) -> dict[str, int]:
    if scale == "small":
        return {"manifests": 4, "files_per_manifest": 100, "rows_per_file": 3}
    return {"manifests": 40, "files_per_manifest": 100, "rows_per_file": 3}


# -- "scan": 20 M rows in 40 DuckDB-written files, partitioned by day; a v3 copy with DVs ----------------


def _scan_params(scale: str) -> dict[str, int]:
    rows = 200_000 if scale == "small" else 20_000_000
    return {"rows": rows, "files": 40, "days": 20, "deleted_percent": 30}


def _scan_name(params: dict[str, int]) -> str:
    return f"scan_{params['rows']}x{params['files']}"


SCAN_START = "2026-01-01"  # the first day; day k holds files 2k and 2k+1


def scan_source_sql(file_no: int, rows_per_file: int, files: int, days: int) -> str:
    """The rows of one data file: `id` sorted within the file (and spanning the whole range in every
    file), `v` a multiple of 1/8 (so sums are exact in any order), `s` a short string, `ts` within
    the file's day, ascending."""
    per_day = files // days
    day = file_no // per_day
    return (
        f"SELECT (r * {files} + {file_no})::BIGINT AS id, "
        f"((hash(r, {file_no}) % 8000) / 8.0)::DOUBLE AS v, "
        f"'s' || ((r * 7 + {file_no}) % 1000)::VARCHAR AS s, "
        f"TIMESTAMP '{SCAN_START}' + INTERVAL ({day}) DAY "
        f"+ to_microseconds((r * 86400000000 // {rows_per_file})::BIGINT) AS ts "
        f"FROM range({rows_per_file}) t(r)"
    )


def _build_scan(root: Path, params: dict[str, int]) -> dict[str, Any]:
    """Two tables over the same 40 Parquet files (written by DuckDB with field ids):

    * `bench.events`: format v2, partitioned by day(ts), files added with PyIceberg's `add_files`;
    * `bench.events_dv`: format v3, the same data files (one snapshot), then a second snapshot
      deleting `deleted_percent`% of the rows of every file with deletion vectors (one Puffin file),
      written with iceduck's manifest and Puffin writers (the peer and PyIceberg read it back).
    """
    import duckdb
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestampType

    rows, files, days = params["rows"], params["files"], params["days"]
    per_file = rows // files
    data = root / "data"
    data.mkdir(parents=True)
    con = duckdb.connect()
    paths = []
    for f in range(files):
        path = data / f"part-{f:03d}.parquet"
        con.execute(
            f"COPY ({scan_source_sql(f, per_file, files, days)}) TO '{path}' "
            "(FORMAT parquet, FIELD_IDS {id: 1, v: 2, s: 3, ts: 4})"
        )
        paths.append(str(path))
    con.close()
    catalog = SqlCatalog(
        "bench", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=(root / "warehouse").as_uri()
    )
    catalog.create_namespace("bench")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "v", DoubleType(), required=False),
        NestedField(3, "s", StringType(), required=False),
        NestedField(4, "ts", TimestampType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=4, field_id=1000, transform=DayTransform(), name="ts_day"))
    table = catalog.create_table(
        "bench.events", schema=schema, partition_spec=spec, properties={"format-version": "2"}
    )
    table.add_files(paths)
    table = catalog.load_table("bench.events")
    v2 = _plain_path(table.metadata_location)
    v3, deleted = _write_dv_table(root / "events_dv", v2, params["deleted_percent"])
    catalog.register_table("bench.events_dv", v3)
    return {
        "metadata_location": v2,
        "dv_metadata_location": v3,
        "table_location": _plain_path(table.location()),
        "snapshots": len(table.metadata.snapshots),
        "manifests": len(table.inspect.manifests()),
        "data_files": files,
        "records": rows,
        "deleted_records": deleted,
    }


def _write_dv_table(folder: Path, v2_metadata: str, percent: int) -> tuple[str, int]:
    """A v3 table over the data files of `v2_metadata` with `percent`% of every file's rows deleted by DVs."""
    import dataclasses
    import uuid

    import numpy as np

    from iceduck.puffin import Roaring64, write_deletion_vectors
    from iceduck.spec.manifest import (
        CONTENT_POSITION_DELETES,
        MANIFEST_CONTENT_DATA,
        MANIFEST_CONTENT_DELETES,
        STATUS_ADDED,
        DataFile,
        ManifestEntry,
        write_manifest_list,
    )
    from iceduck.spec.manifest_writer import summarize_manifest, write_manifest
    from iceduck.spec.partitioning import partition_fields_to_json
    from iceduck.spec.table_metadata import read_table_metadata
    from iceduck.spec.types import schema_to_json
    from iceduck.table import Table

    base = Table.load(v2_metadata)
    md = base.metadata
    spec = md.default_spec
    schema = md.schema
    ptype = spec.partition_type(schema)
    data_files = [e.data_file for e in base.entries(md.current_snapshot())]
    (folder / "metadata").mkdir(parents=True)
    schema_json = schema_to_json(schema)
    spec_json = partition_fields_to_json(spec)
    ids = (7_000_000_000_000_000_001, 7_000_000_000_000_000_002)
    now = int(time.time() * 1000)

    def manifest(name: str, entries: list[Any], content: int, snapshot_id: int, seq: int) -> Any:
        path = str(folder / "metadata" / name)
        blob = write_manifest(
            entries, format_version=3, schema_json=schema_json, partition_spec_json=spec_json,
            partition_spec_id=spec.spec_id, partition_type=ptype, content=content, snapshot_id=snapshot_id,
        )  # fmt: skip
        Path(path).write_bytes(blob)
        return summarize_manifest(
            entries, manifest_path=path, manifest_length=len(blob), partition_spec_id=spec.spec_id,
            partition_type=ptype, content=content, added_snapshot_id=snapshot_id, sequence_number=seq,
        )  # fmt: skip

    adds = [
        ManifestEntry(STATUS_ADDED, None, None, None, dataclasses.replace(d, first_row_id=None))
        for d in data_files
    ]
    data_manifest = manifest("data-m0.avro", adds, MANIFEST_CONTENT_DATA, ids[0], 1)
    first = write_manifest_list([data_manifest], format_version=3, snapshot_id=ids[0], parent_snapshot_id=None,
                                sequence_number=1, first_row_id=0)  # fmt: skip
    list1 = str(folder / "metadata" / f"snap-{ids[0]}.avro")
    Path(list1).write_bytes(first.data)
    assert first.next_row_id is not None

    vectors = []
    deleted = 0
    for i, d in enumerate(data_files):
        rng = np.random.default_rng(i)
        positions = np.nonzero(rng.random(d.record_count) < percent / 100)[0].astype(np.int64)
        deleted += len(positions)
        vectors.append((d.file_path, Roaring64.from_positions(positions)))
    puffin_bytes, blobs = write_deletion_vectors(vectors)
    puffin = str(folder / "metadata" / "deletes.puffin")
    Path(puffin).write_bytes(puffin_bytes)
    by_path = {d.file_path: d for d in data_files}
    dv_entries = [
        ManifestEntry(STATUS_ADDED, None, None, None, DataFile(
            CONTENT_POSITION_DELETES, puffin, "PUFFIN", spec.spec_id, by_path[b.referenced_data_file].partition,
            b.cardinality, len(puffin_bytes), referenced_data_file=b.referenced_data_file,
            content_offset=b.offset, content_size_in_bytes=b.length,
        ))
        for b in blobs
    ]  # fmt: skip
    delete_manifest = manifest("delete-m0.avro", dv_entries, MANIFEST_CONTENT_DELETES, ids[1], 2)
    second = write_manifest_list([*first.manifests, delete_manifest], format_version=3, snapshot_id=ids[1],
                                 parent_snapshot_id=ids[0], sequence_number=2, first_row_id=first.next_row_id)  # fmt: skip
    list2 = str(folder / "metadata" / f"snap-{ids[1]}.avro")
    Path(list2).write_bytes(second.data)
    snapshots = [
        {"snapshot-id": ids[0], "sequence-number": 1, "timestamp-ms": now, "manifest-list": list1,
         "summary": {"operation": "append"}, "schema-id": schema.schema_id, "first-row-id": 0,
         "added-rows": first.next_row_id},
        {"snapshot-id": ids[1], "parent-snapshot-id": ids[0], "sequence-number": 2, "timestamp-ms": now + 1,
         "manifest-list": list2, "summary": {"operation": "delete"}, "schema-id": schema.schema_id,
         "first-row-id": first.next_row_id, "added-rows": 0},
    ]  # fmt: skip
    metadata = {
        "format-version": 3, "table-uuid": str(uuid.uuid4()), "location": str(folder),
        "last-sequence-number": 2, "last-updated-ms": now + 1, "last-column-id": md.last_column_id,
        "current-schema-id": schema.schema_id, "schemas": [schema_json], "default-spec-id": spec.spec_id,
        "partition-specs": [{"spec-id": spec.spec_id, "fields": spec_json}],
        "last-partition-id": md.last_partition_id, "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}], "properties": dict(md.properties),
        "current-snapshot-id": ids[1], "refs": {"main": {"snapshot-id": ids[1], "type": "branch"}},
        "snapshots": snapshots,
        "snapshot-log": [{"snapshot-id": s["snapshot-id"], "timestamp-ms": s["timestamp-ms"]} for s in snapshots],
        "metadata-log": [], "next-row-id": first.next_row_id,
    }  # fmt: skip
    path = str(folder / "metadata" / "v1.metadata.json")
    text = json.dumps(metadata, indent=2).encode()
    read_table_metadata(text, path=path, strict=True)
    Path(path).write_bytes(text)
    (folder / "metadata" / "version-hint.text").write_text("1")
    return path, deleted


# -- "gen1k" / "gen10k" / "gen100k": generated metadata of 1k, 10k and 100k files (scale curve) --------


def _gen_params(manifests: int, snapshots: int) -> Callable[[str], dict[str, int]]:
    def params(scale: str) -> dict[str, int]:
        if scale == "small":
            small = {10: 2, 100: 4, 1000: 8}[manifests]
            return {"manifests": small, "files_per_manifest": 20, "snapshots": 20 if snapshots > manifests else 0}
        return {"manifests": manifests, "files_per_manifest": 100, "snapshots": snapshots}

    return params


def _gen_name(params: dict[str, int]) -> str:
    return f"gen_{params['manifests']}x{params['files_per_manifest']}_s{params['snapshots']}"


GEN_PART = 17  # the partition whose data files exist (one per manifest): what the planning cases read


def _build_generated(root: Path, params: dict[str, int]) -> dict[str, Any]:
    """A v2 table of M manifests x F data files written by iceduck's manifest writers (no data for
    most files: the metadata is the subject), partitioned by identity(part) like `files`.

    Snapshot k (k < M) appends manifest k (F files, partitions 0..F-1, 3 rows each, metrics for
    every column as Java writes them) with its own manifest list. The data files of partition
    GEN_PART exist (3-row Parquet files written by DuckDB with field ids), so scans of it read real
    rows. To reach `snapshots` (more than M) the remaining ones are empty appends (what
    `newAppend().commit()` without files makes); they share the last manifest list file, which
    keeps the data set small (a list per snapshot would add ~9,000 x 60 KB for 10,000 snapshots).
    """
    import struct
    import uuid

    import duckdb

    from iceduck.spec.manifest import STATUS_ADDED, DataFile, ManifestEntry
    from iceduck.spec.manifest_list import write_manifest_list
    from iceduck.spec.manifest_writer import summarize_manifest, write_manifest
    from iceduck.spec.partitioning import PartitionField, PartitionSpec, partition_fields_to_json
    from iceduck.spec.table_metadata import read_table_metadata
    from iceduck.spec.transforms import parse_transform
    from iceduck.spec.types import parse_schema, schema_to_json

    manifests, per_manifest = params["manifests"], params["files_per_manifest"]
    total_snapshots = max(params["snapshots"], manifests)
    rows = 3
    location = root / "table"
    (location / "metadata").mkdir(parents=True)
    (location / "data").mkdir()
    schema = parse_schema(
        {"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "id", "required": False, "type": "long"},
            {"id": 2, "name": "part", "required": False, "type": "int"},
            {"id": 3, "name": "name", "required": False, "type": "string"},
        ]}
    )  # fmt: skip
    spec = PartitionSpec(0, (PartitionField((2,), 1000, "part", parse_transform("identity")),))
    ptype = spec.partition_type(schema)
    schema_json = schema_to_json(schema)
    spec_json = partition_fields_to_json(spec)
    con = duckdb.connect()
    base_id = 5_000_000_000_000_000_000
    now = 1_767_225_600_000  # 2026-01-01, fixed: rebuilds write the same metadata
    written: list[Any] = []
    snapshots: list[dict[str, Any]] = []
    next_id = 0
    list_path = ""
    for k in range(total_snapshots):
        snapshot_id = base_id + k
        if k < manifests:
            entries = []
            for f in range(per_manifest):
                path = location / "data" / f"part={f}" / f"{k:05d}-{f:03d}-{uuid.UUID(int=k * 1000 + f)}.parquet"
                lo = next_id
                next_id += rows
                if f == GEN_PART:
                    path.parent.mkdir(exist_ok=True)
                    con.execute(
                        f"COPY (SELECT ({lo} + r)::BIGINT AS id, {f}::INT AS part, 'row-' || ({lo} + r) AS name "
                        f"FROM range({rows}) t(r)) TO '{path}' (FORMAT parquet, FIELD_IDS {{id: 1, part: 2, name: 3}})"
                    )
                    size = path.stat().st_size
                else:
                    size = 1100 + f
                hi = lo + rows - 1
                entries.append(ManifestEntry(STATUS_ADDED, snapshot_id, None, None, DataFile(
                    0, str(path), "PARQUET", 0, (f,), rows, size,
                    {1: 52, 2: 40, 3: 61}, {1: rows, 2: rows, 3: rows}, {1: 0, 2: 0, 3: 0}, {},
                    {1: struct.pack("<q", lo), 2: struct.pack("<i", f), 3: f"row-{lo}".encode()},
                    {1: struct.pack("<q", hi), 2: struct.pack("<i", f), 3: f"row-{hi}".encode()},
                    split_offsets=(4,), sort_order_id=0,
                )))  # fmt: skip
            manifest_path = location / "metadata" / f"{uuid.UUID(int=k)}-m0.avro"
            blob = write_manifest(
                entries, format_version=2, schema_json=schema_json, partition_spec_json=spec_json,
                partition_spec_id=0, partition_type=ptype, snapshot_id=snapshot_id,
            )  # fmt: skip
            manifest_path.write_bytes(blob)
            mf = summarize_manifest(
                entries, manifest_path=str(manifest_path), manifest_length=len(blob), partition_spec_id=0,
                partition_type=ptype, content=0, added_snapshot_id=snapshot_id,
            )  # fmt: skip
            result = write_manifest_list(
                [mf, *reversed(written)], format_version=2, snapshot_id=snapshot_id,
                parent_snapshot_id=snapshot_id - 1 if k else None, sequence_number=k + 1,
            )  # fmt: skip
            written.append(result.manifests[0])
            list_path = str(location / "metadata" / f"snap-{snapshot_id}-1-{uuid.UUID(int=k)}.avro")
            Path(list_path).write_bytes(result.data)
            summary = {"operation": "append", "added-data-files": str(per_manifest),
                       "added-records": str(per_manifest * rows)}  # fmt: skip
        else:
            summary = {"operation": "append", "added-data-files": "0", "added-records": "0"}
        total_files = min(k + 1, manifests) * per_manifest
        summary |= {"total-data-files": str(total_files), "total-records": str(total_files * rows)}
        snapshots.append({
            "snapshot-id": snapshot_id, "sequence-number": k + 1, "timestamp-ms": now + k * 1000,
            "manifest-list": list_path, "summary": summary, "schema-id": 0,
            **({"parent-snapshot-id": snapshot_id - 1} if k else {}),
        })  # fmt: skip
    con.close()
    current = snapshots[-1]["snapshot-id"]
    metadata = {
        "format-version": 2, "table-uuid": str(uuid.UUID(int=manifests)), "location": str(location),
        "last-sequence-number": total_snapshots, "last-updated-ms": now + total_snapshots * 1000,
        "last-column-id": 3, "current-schema-id": 0, "schemas": [schema_json], "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": spec_json}], "last-partition-id": 1000,
        "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}], "properties": {},
        "current-snapshot-id": current, "refs": {"main": {"snapshot-id": current, "type": "branch"}},
        "snapshots": snapshots,
        "snapshot-log": [{"snapshot-id": s["snapshot-id"], "timestamp-ms": s["timestamp-ms"]} for s in snapshots],
        "metadata-log": [],
    }  # fmt: skip
    md_path = str(location / "metadata" / "v1.metadata.json")
    text = json.dumps(metadata).encode()
    read_table_metadata(text, path=md_path, strict=True)
    Path(md_path).write_bytes(text)
    counts = _verify_manifests(md_path, manifests, per_manifest)
    return {
        "metadata_location": md_path,
        "table_location": str(location),
        "snapshots": total_snapshots,
        "manifests": counts["manifests"],
        "data_files": counts["data_files"],
        "records": counts["records"],
        "metadata_bytes": len(text),
    }


# -- "dv": v3 (and v2) tables written and deleted from by the reference peer (its extension via REST) -----

# (table, INSERT statements, DELETE predicate): id runs 0..rows-1 in insertion order, so a file's row
# positions follow id and `id`-based runs are runs of positions.
DV_SHAPES: tuple[tuple[str, int, str], ...] = (
    ("large_s30", 1, "hash(id) % 10 < 3"),  # issue 28's table: few large files, 30% scattered
    ("large_s01", 1, "hash(id) % 1000 = 0"),  # 0.1% scattered
    ("large_s90", 1, "hash(id) % 10 < 9"),  # 90% scattered
    ("large_c30", 1, "(id // 10000) % 10 < 3"),  # 30% in runs of 30,000 rows
    ("small_s30", 0, "hash(id) % 10 < 3"),  # many small files (0: `many` INSERTs, one file each), 30% scattered
    ("small_c30", 0, "(id // 10000) % 10 < 3"),
    ("v2_large_s30", 1, "hash(id) % 10 < 3"),  # v2: the same deletes as position-delete files
    ("v2_small_s30", 0, "hash(id) % 10 < 3"),
)


def _dv_params(scale: str) -> dict[str, int]:
    if scale == "small":
        return {"rows": 200_000, "many": 10, "shapes": len(DV_SHAPES)}
    return {"rows": 20_000_000, "many": 50, "shapes": len(DV_SHAPES)}


def _dv_name(params: dict[str, int]) -> str:
    return f"dv_{params['rows']}x{params['many']}"


def _build_dv(root: Path, params: dict[str, int]) -> dict[str, Any]:
    """The tables of `DV_SHAPES` (id BIGINT, val DOUBLE; `rows` rows each), each created, filled and
    deleted from by DuckDB 1.5.5's iceberg extension ATTACHed to `iceduck serve` on this folder's
    warehouse: deletion vectors as that writer lays them out (one Puffin file per data file). The
    peer counts each table's rows after its DELETE; iceduck reads them back as a check."""
    import duckdb

    from iceduck.serve.server import RestServer
    from tests.support.peer import Peer

    rows = params["rows"]
    warehouse = root / "warehouse"
    server = RestServer(str(warehouse), port=0).start()
    tables: dict[str, Any] = {}
    try:
        with Peer.ensure(quiet=True, extensions=("avro", "iceberg", "httpfs")) as peer:
            peer.execute(
                f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
            )
            peer.execute("CREATE SCHEMA cat.b")
            for name, inserts, predicate in DV_SHAPES:
                version = 2 if name.startswith("v2_") else 3
                peer.execute(
                    f"CREATE TABLE cat.b.{name} (id BIGINT, val DOUBLE) WITH ('format-version' = '{version}')"
                )
                inserts = inserts or params["many"]
                step = rows // inserts
                for k in range(inserts):
                    hi = rows if k == inserts - 1 else (k + 1) * step
                    # val: a multiple of 1/8 below 125, so sums are exact in any order
                    peer.execute(
                        f"INSERT INTO cat.b.{name} SELECT i::BIGINT, (hash(i) % 1000) / 8.0 "
                        f"FROM range({k * step}, {hi}) r(i)"
                    )
                peer.execute(f"DELETE FROM cat.b.{name} WHERE {predicate}")
                ((kept,),) = peer.query(f"SELECT count(*) FROM cat.b.{name}")
                folder = warehouse / "b" / name
                metadata = max((folder / "metadata").glob("*.metadata.json"), key=lambda p: int(p.name[:5]))
                data = list((folder / "data").iterdir())
                tables[name] = {
                    "metadata_location": str(metadata),
                    "predicate": predicate,
                    "data_files": sum(p.suffix == ".parquet" and not p.name.endswith("-deletes.parquet") for p in data),
                    # deletion vectors (Puffin) in v3, position-delete files in v2
                    "dv_files": sum(p.name.endswith(("-deletes.puffin", "-deletes.parquet")) for p in data),
                    "records": rows,
                    "deleted_records": rows - kept,
                }
    finally:
        server.stop()
    import iceduck

    con = duckdb.connect()
    iceduck.register(con)
    for name, _, predicate in DV_SHAPES:
        info = tables[name]
        if not info["dv_files"]:
            raise RuntimeError(f"dv data set: the peer wrote no position deletes for {name}")
        truth = con.execute(f"SELECT count(*) FROM range({rows}) r(id) WHERE NOT ({predicate})").fetchall()[0][0]
        ours = con.execute(f"SELECT count(*) FROM iceberg_scan('{info['metadata_location']}')").fetchall()[0][0]
        if rows - info["deleted_records"] != truth or ours != truth:
            raise RuntimeError(
                f"dv data set: {name} keeps {rows - info['deleted_records']} rows (iceduck reads {ours}), "
                f"expected {truth}"
            )
    return {
        "metadata_location": tables["large_s30"]["metadata_location"],
        "tables": tables,
        "data_files": sum(t["data_files"] for t in tables.values()),
        "snapshots": sum((n or params["many"]) + 1 for _, n, _ in DV_SHAPES),
    }


# -- "dvmore": deletion vectors merged across snapshots, and Spark-written ones ----------------------------

# (table, writer, DELETE predicates in order). `m30`: 30% deleted by six DELETEs of 5% each, so every data
# file's deletion vector was rewritten (merged with the one before) six times; `spark_*`: written and deleted
# from by Spark 3.5.7 with Java Iceberg 1.10.2 (merge-on-read), its own layout: one Puffin file per DELETE
# holding the vectors of every file it touched. Spark's `hash` is Murmur3, not DuckDB's `hash`.
DV_MORE_SHAPES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("large_m30", "peer", tuple(f"hash(id) % 20 = {k}" for k in range(6))),
    ("spark_large_s30", "spark", ("pmod(hash(id), 10) < 3",)),
    ("spark_multi_s30", "spark", tuple(f"pmod(hash(id), 20) = {k}" for k in range(6))),
)


def _dv_more_params(scale: str) -> dict[str, int]:
    rows = 200_000 if scale == "small" else 20_000_000
    # Spark's tables are smaller at full scale: a 2-core Spark over 20 M rows and seven DELETEs ran
    # for many minutes on the shared machine, and lost its JVM midway twice.
    # At small scale (the CI smoke run) no Spark: a JVM and fourteen statements cost minutes.
    spark_rows = 0 if scale == "small" else 4_000_000
    return {"rows": rows, "spark_rows": spark_rows, "spark_files": 8, "shapes": len(DV_MORE_SHAPES)}


def _dv_more_name(params: dict[str, int]) -> str:
    return f"dvmore_{params['rows']}x{params['spark_rows']}x{params['spark_files']}"


def _spark_ref() -> Any:
    """The Java reference's `spark_ref` module (shared/reference/java-iceberg), or None when it is not
    installed: the Spark-written shapes are then left out of the data set."""
    import sys

    for parent in REPO_ROOT.resolve().parents:
        folder = parent / "shared" / "reference" / "java-iceberg"
        if (folder / "spark_ref.py").exists():
            if str(folder) not in sys.path:
                sys.path.insert(0, str(folder))
            import spark_ref

            return spark_ref if spark_ref.available() else None
    return None


def _table_entry(folder: Path, rows: int, kept: int, predicates: tuple[str, ...], writer: str) -> dict[str, Any]:
    metadata = max(
        (folder / "metadata").glob("*.metadata.json"),
        key=lambda p: int("".join(ch for ch in p.name.split(".")[0].split("-")[0] if ch.isdigit()) or 0),
    )
    data = [p for p in (folder / "data").rglob("*") if p.is_file()]
    return {
        "metadata_location": str(metadata),
        "predicate": " OR ".join(f"({p})" for p in predicates),
        "writer": writer,
        "deletes": len(predicates),
        "data_files": sum(p.suffix == ".parquet" and "delete" not in p.name for p in data),
        "dv_files": sum(p.suffix == ".puffin" for p in data),
        "records": rows,
        "deleted_records": rows - kept,
    }


def _build_dv_more(root: Path, params: dict[str, int]) -> dict[str, Any]:
    """The tables of `DV_MORE_SHAPES` (id BIGINT, val DOUBLE; `rows` rows, Spark's `spark_rows`, one
    INSERT each): the peer's
    through `iceduck serve` as in `dv`, Spark's in a Hadoop catalog under `spark/` (left out when the Java
    reference is not installed). Each table's count after its DELETEs is its writer's; iceduck's count
    and sum are checked against the writer's."""
    import duckdb

    from iceduck.serve.server import RestServer
    from tests.support.peer import Peer

    rows = params["rows"]
    tables: dict[str, Any] = {}
    truth: dict[str, tuple[int, float]] = {}
    values = "(hash(i) % 1000) / 8.0"  # a multiple of 1/8 below 125: sums are exact in any order
    warehouse = root / "warehouse"
    server = RestServer(str(warehouse), port=0).start()
    try:
        with Peer.ensure(quiet=True, extensions=("avro", "iceberg", "httpfs")) as peer:
            peer.execute(
                f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
            )
            peer.execute("CREATE SCHEMA cat.b")
            for name, writer, predicates in DV_MORE_SHAPES:
                if writer != "peer":
                    continue
                t = f"cat.b.{name}"
                peer.execute(f"CREATE TABLE {t} (id BIGINT, val DOUBLE) WITH ('format-version' = '3')")
                peer.execute(f"INSERT INTO {t} SELECT i::BIGINT, {values} FROM range({rows}) r(i)")
                for predicate in predicates:
                    peer.execute(f"DELETE FROM {t} WHERE {predicate}")
                ((kept, total),) = peer.query(f"SELECT count(*), sum(val) FROM {t}")
                truth[name] = (int(kept), float(total))
                tables[name] = _table_entry(warehouse / "b" / name, rows, int(kept), predicates, "DuckDB 1.5.5")
    finally:
        server.stop()
    spark = _spark_ref() if params["spark_rows"] else None
    if spark is not None:
        spark_tables = [(n, p) for n, w, p in DV_MORE_SHAPES if w == "spark"]
        for name, predicates in spark_tables:  # one Spark per table: a JVM lost to the machine costs one
            t = f"local.b.{name}"
            statements = [
                f"DROP TABLE IF EXISTS {t} PURGE",
                f"CREATE TABLE {t} (id bigint, val double) USING iceberg TBLPROPERTIES ('format-version'='3', "
                "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
                "'write.merge.mode'='merge-on-read')",
                f"INSERT INTO {t} SELECT id, CAST(pmod(xxhash64(id), 1000) AS DOUBLE) / 8 "
                f"FROM range(0, {params['spark_rows']}, 1, {params['spark_files']})",
                *(f"DELETE FROM {t} WHERE {p}" for p in predicates),
                f"SELECT count(*), sum(val) FROM {t}",
            ]
            for attempt in (1, 2):
                try:
                    ((kept, total),) = spark.spark_sql(statements, warehouse=root / "spark", timeout=1800)
                    truth[name] = (int(kept), float(total))
                    break
                except RuntimeError as e:  # twice: the shape is left out (its cases show n/a)
                    if attempt == 2:
                        print(f"dvmore data set: Spark failed on {name}, left out: {str(e)[:300]}")
        for name, predicates in spark_tables:
            if name not in truth:
                continue
            tables[name] = _table_entry(
                root / "spark" / "b" / name,
                params["spark_rows"],
                truth[name][0],
                predicates,
                "Spark 3.5.7 + Java Iceberg 1.10.2",
            )
    import iceduck

    con = duckdb.connect()
    iceduck.register(con)
    for name, info in tables.items():
        if not info["dv_files"]:
            raise RuntimeError(f"dvmore data set: {name} has no deletion vectors")
        ours = con.execute(f"SELECT count(*), sum(val) FROM iceberg_scan('{info['metadata_location']}')").fetchall()
        if tuple(ours[0]) != truth[name]:
            raise RuntimeError(f"dvmore data set: iceduck reads {ours[0]} of {name}, its writer {truth[name]}")
    first = next(iter(tables.values()))
    return {
        "metadata_location": first["metadata_location"],
        "tables": tables,
        "data_files": sum(t["data_files"] for t in tables.values()),
    }

KINDS: dict[str, _Kind] = {
    "gen1k": _Kind(_gen_params(10, 10), _gen_name, _build_generated),
    "gen10k": _Kind(_gen_params(100, 100), _gen_name, _build_generated),
    "gen100k": _Kind(_gen_params(1000, 10_000), _gen_name, _build_generated),
    "files": _Kind(_files_params, _files_name, _build_files),
    "files4k": _Kind(_files4k_params, _files_name, _build_files),
    "scan": _Kind(_scan_params, _scan_name, _build_scan),
    "dv": _Kind(_dv_params, _dv_name, _build_dv),
    "dvmore": _Kind(_dv_more_params, _dv_more_name, _build_dv_more),
}


# -- cache --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialize builds of one data set across concurrent harness runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _cached(kind: str, root: Path, params: dict[str, int]) -> dict[str, Any] | None:
    try:
        info: dict[str, Any] = json.loads((root / "dataset.json").read_text())
    except (OSError, ValueError):
        return None
    valid = (
        info.get("format") == _FORMAT
        and info.get("kind") == kind
        and info.get("params") == params
        # absolute paths inside the metadata must still hold (a symlinked copy of a built set is valid)
        and Path(info.get("root", "")).resolve() == root.resolve()
        and Path(info.get("metadata_location", "")).is_file()
    )
    return info if valid else None


def dataset(kind: str, scale: str) -> Dataset:
    """The data set ``kind`` at ``scale``, built (in a child process) unless a valid cached copy exists."""
    spec = KINDS[kind]
    params = spec.params(scale)
    name = spec.name(params)
    root = DATA_DIR / name
    asked = time.perf_counter()
    with _locked(DATA_DIR / f".{name}.lock"):
        waited = time.perf_counter() - asked
        info = _cached(kind, root, params)
        built: float | None = None
        if info is None:
            started = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "benchmarks.datasets", "build", kind, "--scale", scale],
                cwd=REPO_ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
            built = time.perf_counter() - started
            info = _cached(kind, root, params)
            if proc.returncode != 0 or info is None:
                raise RuntimeError(
                    f"building data set {name} in {root} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
                )
    return Dataset(kind, name, root, info["metadata_location"], info, built, round(waited, 1))


def build(kind: str, scale: str) -> dict[str, Any]:
    """Build ``kind`` at ``scale`` in this process, replacing whatever is at its directory."""
    spec = KINDS[kind]
    params = spec.params(scale)
    root = DATA_DIR / spec.name(params)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    started = time.perf_counter()
    info = spec.build(root, params)
    import pyiceberg

    info.update(
        format=_FORMAT,
        kind=kind,
        params=params,
        root=str(root),
        build_seconds=round(time.perf_counter() - started, 3),
        built_with=f"pyiceberg {pyiceberg.__version__}",
    )
    # written last: its presence marks a complete, verified build
    (root / "dataset.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.datasets build KIND [--scale small|full]`` (used by :func:`dataset`)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.datasets")
    parser.add_argument("command", choices=["build"])
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("--scale", choices=SCALES, default="full")
    args = parser.parse_args(argv)
    info = build(args.kind, args.scale)
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
