"""Register existing data files (any format, written by the test as another engine would) as a
one-snapshot Iceberg table, the way `add_files` does: one manifest, one manifest list, metadata by
hand (checked with `read_table_metadata`). For reader fixtures whose files iceduck's writer cannot
produce: variant columns, v3-only types, ORC and Avro files, data outside the table folder.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iceduck.spec.manifest import (
    CONTENT_DATA,
    MANIFEST_CONTENT_DATA,
    STATUS_ADDED,
    DataFile,
    ManifestEntry,
    write_manifest_list,
)
from iceduck.spec.manifest_writer import summarize_manifest, write_manifest
from iceduck.spec.table_metadata import read_table_metadata
from iceduck.spec.types import StructType


@dataclass(frozen=True, slots=True)
class FileToAdd:
    """A data file as the manifest should record it: its path (as written into the metadata), its
    local size source, format and row count."""

    recorded_path: str
    local_path: Path
    file_format: str
    record_count: int


def _max_id(fields: Sequence[Mapping[str, Any]]) -> int:
    best = 0
    for f in fields:
        best = max(best, int(f["id"]))
        t = f["type"]
        if isinstance(t, dict):
            if t.get("type") == "struct":
                best = max(best, _max_id(t["fields"]))
            elif t.get("type") == "list":
                best = max(best, int(t["element-id"]))
            elif t.get("type") == "map":
                best = max(best, int(t["key-id"]), int(t["value-id"]))
    return best


def register_files(
    folder: Path,
    schema_fields: Sequence[Mapping[str, Any]],
    files: Sequence[FileToAdd],
    *,
    format_version: int = 3,
    location: str | None = None,
    properties: Mapping[str, str] | None = None,
) -> str:
    """Write metadata/ for a table over `files`; returns the metadata file path. `location` is the
    table location recorded in the metadata (default: the folder itself)."""
    meta = folder / "metadata"
    meta.mkdir(parents=True, exist_ok=True)
    loc = location or str(folder)
    schema = {"type": "struct", "schema-id": 0, "fields": list(schema_fields)}
    snapshot_id, seq = 7001, 1
    entries = [
        ManifestEntry(
            STATUS_ADDED,
            snapshot_id,
            None,
            None,
            DataFile(
                CONTENT_DATA,
                f.recorded_path,
                f.file_format,
                0,
                (),
                f.record_count,
                f.local_path.stat().st_size,
            ),
        )
        for f in files
    ]
    manifest_name = f"{uuid.uuid4()}-m0.avro"
    data = write_manifest(
        entries,
        format_version=format_version,
        schema_json=schema,
        partition_spec_json=[],
        partition_spec_id=0,
        partition_type=StructType(()),
        content=MANIFEST_CONTENT_DATA,
        snapshot_id=snapshot_id,
    )
    (meta / manifest_name).write_bytes(data)
    mf = summarize_manifest(
        entries,
        manifest_path=f"{loc}/metadata/{manifest_name}",
        manifest_length=len(data),
        partition_spec_id=0,
        partition_type=StructType(()),
        content=MANIFEST_CONTENT_DATA,
        added_snapshot_id=snapshot_id,
        sequence_number=seq,
    )
    list_name = f"snap-{snapshot_id}-1-{uuid.uuid4()}.avro"
    written = write_manifest_list(
        [mf],
        format_version=format_version,
        snapshot_id=snapshot_id,
        parent_snapshot_id=None,
        sequence_number=seq,
        first_row_id=0 if format_version >= 3 else None,
    )
    (meta / list_name).write_bytes(written.data)
    snapshot: dict[str, Any] = {
        "snapshot-id": snapshot_id,
        "sequence-number": seq,
        "timestamp-ms": 1_760_000_000_000,
        "manifest-list": f"{loc}/metadata/{list_name}",
        "summary": {"operation": "append"},
        "schema-id": 0,
    }
    md: dict[str, Any] = {
        "format-version": format_version,
        "table-uuid": str(uuid.uuid4()),
        "location": loc,
        "last-sequence-number": seq,
        "last-updated-ms": snapshot["timestamp-ms"],
        "last-column-id": _max_id(schema_fields),
        "current-schema-id": 0,
        "schemas": [schema],
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "last-partition-id": 999,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": dict(properties or {}),
        "current-snapshot-id": snapshot_id,
        "refs": {"main": {"snapshot-id": snapshot_id, "type": "branch"}},
        "snapshots": [snapshot],
        "snapshot-log": [{"snapshot-id": snapshot_id, "timestamp-ms": snapshot["timestamp-ms"]}],
        "metadata-log": [],
    }
    if format_version >= 3:
        assert written.next_row_id is not None
        snapshot["first-row-id"] = 0
        snapshot["added-rows"] = written.next_row_id
        md["next-row-id"] = written.next_row_id
    path = meta / "00001-registered.metadata.json"
    text = json.dumps(md, indent=2).encode()
    read_table_metadata(text, path=str(path))
    path.write_bytes(text)
    return str(path)
