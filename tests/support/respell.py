"""Rewrite the paths a table records the way other engines spell them (test fixtures).

Engines record one file in several spellings: Hive and Spark on HDFS put `/warehouse/db/t/data/f`
into manifests while their position-delete files say `hdfs://namenode:20500/warehouse/db/t/data/f`
(or the reverse); Hadoop's S3 connectors write `s3a://` next to `s3://`; Java writes `file:/x` where
others write `file:///x` or `/x`. `respell(folder, ...)` takes a table written by iceduck's writer
and rewrites, in place and in every snapshot of its newest metadata file, the table location, the
manifest-list and manifest paths, the data file paths in manifests, the delete files' paths, the
DVs' `referenced_data_file` and the `file_path` column of every position-delete Parquet file, each
through its own function of the path relative to the table folder. Sizes and lengths recorded in
manifests and manifest lists are updated to the rewritten files, so the table stays valid.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from iceduck.spec.manifest import (
    CONTENT_POSITION_DELETES,
    DataFile,
    read_manifest,
    read_manifest_list,
    write_manifest_list,
)
from iceduck.spec.manifest_writer import write_manifest
from iceduck.spec.partitioning import PartitionSpec
from iceduck.spec.table_metadata import read_table_metadata

Spell = Callable[[str], str]  # relative path inside the table folder -> recorded path


def _is_dv(d: DataFile) -> bool:
    return d.content == CONTENT_POSITION_DELETES and d.file_format.upper() == "PUFFIN"


def newest_metadata(folder: Path) -> Path:
    """The highest-numbered metadata file (`v3.metadata.json` or `00003-<uuid>.metadata.json`)."""

    def version(p: Path) -> int:
        m = re.match(r"v?(\d+)", p.name)
        return int(m.group(1)) if m else -1

    return max((folder / "metadata").glob("*.metadata.json"), key=version)


def respell(
    folder: Path,
    *,
    location: str,
    metadata: Spell,
    data: Spell,
    deletes: Spell,
    references: Spell,
    unscoped: bool = False,
) -> Path:
    """Respell the table in `folder` (see the module docstring); returns its newest metadata file.

    `location` is the table location to record; `metadata` spells manifest lists and manifests,
    `data` the data files in manifests, `deletes` the delete files in manifests, `references` the
    data files as delete files name them (position-delete `file_path` values, DV references).
    `unscoped`: drop position-delete files' `referenced_data_file` (as Spark writes them: scoped by
    partition only).
    """
    folder = folder.resolve()
    md_path = newest_metadata(folder)
    md = read_table_metadata(md_path.read_bytes(), path=str(md_path))
    root = str(folder)

    def rel(p: str) -> str:
        p = p.removeprefix("file://").removeprefix("file:")
        assert p.startswith(root + "/"), p
        return p[len(root) + 1 :]

    specs: dict[int, PartitionSpec] = {s.spec_id: s for s in md.partition_specs}
    delete_sizes: dict[str, int] = {}
    manifests_done: dict[str, int] = {}

    def fix_delete_file(d: DataFile) -> DataFile:
        local = rel(d.file_path)
        if d.content == CONTENT_POSITION_DELETES and not _is_dv(d) and local not in delete_sizes:
            path = folder / local
            table = pq.read_table(path)
            schema = table.schema
            i = schema.get_field_index("file_path")
            column = pa.array([references(rel(v)) for v in table.column(i).to_pylist()], pa.string())
            table = table.set_column(i, schema.field(i), column)
            pq.write_table(table, path)
            delete_sizes[local] = path.stat().st_size
        changes: dict[str, object] = {"file_path": deletes(local)}
        if local in delete_sizes:
            changes["file_size_in_bytes"] = delete_sizes[local]
            # file_path bounds would name the old spelling: drop them (writers may omit bounds)
            changes["lower_bounds"] = {k: v for k, v in d.lower_bounds.items() if k != 2147483546}
            changes["upper_bounds"] = {k: v for k, v in d.upper_bounds.items() if k != 2147483546}
        if d.referenced_data_file is not None:
            changes["referenced_data_file"] = references(rel(d.referenced_data_file))
            if unscoped and not _is_dv(d):
                changes["referenced_data_file"] = None
        return dataclasses.replace(d, **changes)  # type: ignore[arg-type]

    def fix_manifest(recorded: str) -> int:
        local = rel(recorded)
        if local in manifests_done:
            return manifests_done[local]
        path = folder / local
        m = read_manifest(path.read_bytes(), path=str(path))
        entries = []
        for e in m.entries:
            d = e.data_file
            d = (
                dataclasses.replace(d, file_path=data(rel(d.file_path)))
                if d.content == 0
                else fix_delete_file(d)
            )
            entries.append(dataclasses.replace(e, data_file=d))
        spec = specs[m.metadata.partition_spec_id]
        schema = md.schema_by_id(m.metadata.schema_id) if m.metadata.schema_id is not None else md.schema
        body = write_manifest(
            entries, format_version=m.metadata.format_version, schema_json=m.metadata.schema or "{}",
            partition_spec_json=m.metadata.partition_spec or "[]", partition_spec_id=spec.spec_id,
            partition_type=spec.partition_type(schema or md.schema), content=m.metadata.content,
        )  # fmt: skip
        path.write_bytes(body)
        manifests_done[local] = len(body)
        return len(body)

    doc = json.loads(md_path.read_text())
    doc["location"] = location
    for snap_doc, snap in zip(doc.get("snapshots", []), md.snapshots, strict=True):
        local = rel(snap.manifest_list)
        path = folder / local
        rows = read_manifest_list(path.read_bytes(), path=str(path))
        fixed = [
            dataclasses.replace(
                r, manifest_path=metadata(rel(r.manifest_path)), manifest_length=fix_manifest(r.manifest_path)
            )
            for r in rows
        ]
        result = write_manifest_list(
            fixed, format_version=md.format_version, snapshot_id=snap.snapshot_id,
            parent_snapshot_id=snap.parent_snapshot_id, sequence_number=snap.sequence_number,
            first_row_id=snap.first_row_id if md.format_version >= 3 else None,
        )  # fmt: skip
        path.write_bytes(result.data)
        snap_doc["manifest-list"] = metadata(local)
    for entry in doc.get("metadata-log", []):
        entry["metadata-file"] = metadata(rel(entry["metadata-file"]))
    md_path.write_text(json.dumps(doc))
    read_table_metadata(md_path.read_bytes(), path=str(md_path))  # still valid
    return md_path
