"""Producing a snapshot: manifests, manifest list and the `Snapshot` record for one commit attempt.

Given the table as it is now (the base), the files a change adds and the live entries it removes,
`produce_snapshot`:

* keeps every base manifest that holds none of the removed files (fast append); a manifest whose
  files were all removed by an earlier snapshot (no live entries, added by another snapshot) is
  dropped;
* rewrites each manifest holding a removed file: removed entries become DELETED (with this
  snapshot's id), the others EXISTING; both keep their data and file sequence numbers and (v3) their
  `first_row_id` explicitly, as inherited ("Sequence Number Inheritance", "First Row ID Inheritance");
* writes the added files into new manifests, one per partition spec and content, with null
  snapshot ids, sequence numbers and first row ids so that they inherit (these manifests do not
  depend on the base and are reused when a commit is retried with the same snapshot id);
* writes the manifest list, which assigns the snapshot's sequence number to new manifests and (v3)
  `first_row_id` to data manifests without one, starting at the table's `next-row-id`;
* computes the summary (see `iceduck.transaction.summary`).

A removed file that is not live in the base raises `CommitConflictError`: a concurrent commit
deleted or rewrote it, so this change no longer applies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from iceduck._version import __version__
from iceduck.errors import CommitConflictError, ValidationError
from iceduck.io.paths import join_path
from iceduck.spec.manifest import (
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
from iceduck.spec.partitioning import PartitionSpec, partition_fields_to_json
from iceduck.spec.snapshots import Snapshot
from iceduck.spec.types import UNKNOWN, Schema, StructType, schema_to_json
from iceduck.table import Table
from iceduck.transaction.summary import Totals, change_summary

ENGINE_NAME = "iceduck"


def entry_key(d: DataFile) -> tuple[str, int | None]:
    """Identity of a file inside a snapshot: path, plus the blob offset for DVs sharing a Puffin file."""
    return (d.file_path, d.content_offset)


@dataclass(slots=True)
class FileChanges:
    """What a commit changes: files it adds, live entries it removes."""

    added_data_files: list[DataFile] = field(default_factory=list)
    removed_data: list[ManifestEntry] = field(default_factory=list)
    added_delete_files: list[DataFile] = field(default_factory=list)
    removed_deletes: list[ManifestEntry] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (
            self.added_data_files or self.removed_data or self.added_delete_files or self.removed_deletes
        )


@dataclass(slots=True)
class AddedManifests:
    """Manifests of added files, written once per snapshot id and reused across commit retries."""

    snapshot_id: int | None = None
    manifests: list[ManifestFile] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    reusable: bool = True  # False when they hold one attempt's delete files


@dataclass(frozen=True, slots=True)
class ProducedSnapshot:
    """One attempt's snapshot: the record, the table's next row id after it, files written."""

    snapshot: Snapshot
    next_row_id: int | None
    written: tuple[str, ...]


def _partition_type(table: Table, spec: PartitionSpec, schema: Schema) -> StructType:
    """The partition struct of `spec`, from the newest schema that still has its source columns."""
    ptype = spec.partition_type(schema)
    if all(f.type != UNKNOWN for f in ptype.fields):
        return ptype
    for older in reversed(table.metadata.schemas):
        candidate = spec.partition_type(older)
        if all(f.type != UNKNOWN for f in candidate.fields):
            return candidate
    return ptype


def write_table_manifest(
    table: Table,
    entries: Sequence[ManifestEntry],
    *,
    spec_id: int,
    content: int,
    snapshot_id: int,
    schema: Schema,
    metadata_dir: str,
) -> tuple[ManifestFile, str]:
    """Write `entries` as a new manifest of spec `spec_id` under `metadata_dir`: its ManifestFile and path."""
    spec = table.metadata.spec_by_id(spec_id)
    if spec is None:
        raise ValidationError(f"{table.metadata_location}: partition spec {spec_id} does not exist")
    ptype = _partition_type(table, spec, schema)
    data = write_manifest(
        entries,
        format_version=table.metadata.format_version,
        schema_json=json.dumps(schema_to_json(schema), separators=(",", ":")),
        partition_spec_json=partition_fields_to_json(spec),
        partition_spec_id=spec_id,
        partition_type=ptype,
        content=content,
        snapshot_id=snapshot_id,
    )
    path = join_path(metadata_dir, f"{uuid.uuid4()}-m{content}.avro")
    table.io.write_new(path, data)
    summary = summarize_manifest(
        entries,
        manifest_path=path,
        manifest_length=len(data),
        partition_spec_id=spec_id,
        partition_type=ptype,
        content=content,
        added_snapshot_id=snapshot_id,
    )
    return summary, path


def _explicit(entry: ManifestEntry, status: int, snapshot_id: int | None) -> ManifestEntry:
    """An entry carried into a new manifest: inherited values written out."""
    return ManifestEntry(
        status,
        snapshot_id if snapshot_id is not None else entry.snapshot_id,
        entry.sequence_number,
        entry.file_sequence_number,
        entry.data_file,
    )


def write_added_manifests(
    table: Table,
    changes: FileChanges,
    *,
    snapshot_id: int,
    schema: Schema,
    metadata_dir: str,
    cache: AddedManifests | None = None,
) -> AddedManifests:
    """Manifests for the added files (reused from `cache` when written for the same snapshot id)."""
    if (
        cache is not None
        and cache.reusable
        and not changes.added_delete_files
        and cache.snapshot_id == snapshot_id
    ):
        return cache
    out = AddedManifests(snapshot_id, reusable=not changes.added_delete_files)
    groups: dict[tuple[int, int], list[ManifestEntry]] = {}
    for d in changes.added_data_files:
        groups.setdefault((MANIFEST_CONTENT_DATA, d.spec_id), []).append(
            ManifestEntry(STATUS_ADDED, None, None, None, dataclasses.replace(d, first_row_id=None))
        )
    for d in changes.added_delete_files:
        groups.setdefault((MANIFEST_CONTENT_DELETES, d.spec_id), []).append(
            ManifestEntry(STATUS_ADDED, None, None, None, d)
        )
    for (content, spec_id), entries in sorted(groups.items()):
        mf, path = write_table_manifest(
            table, entries, spec_id=spec_id, content=content, snapshot_id=snapshot_id, schema=schema,
            metadata_dir=metadata_dir,
        )  # fmt: skip
        out.manifests.append(mf)
        out.paths.append(path)
    return out


def produce_snapshot(
    table: Table,
    changes: FileChanges,
    *,
    snapshot_id: int,
    operation: str,
    timestamp_ms: int,
    schema: Schema,
    metadata_dir: str,
    added: AddedManifests,
    attempt: int = 0,
    extra_summary: Mapping[str, str] | None = None,
) -> ProducedSnapshot:
    """Write the manifests and manifest list of a new snapshot of `table` (the base) and return it."""
    md = table.metadata
    fv = md.format_version
    parent = md.current_snapshot()
    base_manifests = table.manifests(parent)
    removed_data = {entry_key(e.data_file) for e in changes.removed_data}
    removed_deletes = {entry_key(e.data_file) for e in changes.removed_deletes}
    found: set[tuple[str, int | None]] = set()
    written: list[str] = []
    manifests: list[ManifestFile] = []
    rewritten: list[ManifestFile] = []
    totals = Totals.from_summary(parent.summary) if parent is not None else Totals()
    recount = totals is None
    live_files: list[DataFile] = []
    try:
        for mf in base_manifests:
            removing = removed_data if mf.content == MANIFEST_CONTENT_DATA else removed_deletes
            needs_entries = recount or (removing and _may_hold(mf, removing))
            if not needs_entries:
                if _keep(mf):
                    manifests.append(mf)
                continue
            entries = table.manifest(mf).entries
            live = [e for e in entries if e.status != STATUS_DELETED]
            hit = [e for e in live if entry_key(e.data_file) in removing]
            if recount:
                live_files.extend(e.data_file for e in live)
            if not hit:
                if _keep(mf):
                    manifests.append(mf)
                continue
            found.update(entry_key(e.data_file) for e in hit)
            hit_keys = {entry_key(e.data_file) for e in hit}
            new_entries = [
                _explicit(e, STATUS_DELETED, snapshot_id)
                if entry_key(e.data_file) in hit_keys
                else _explicit(e, STATUS_EXISTING, None)
                for e in live
            ]
            new_mf, path = write_table_manifest(
                table, new_entries, spec_id=mf.partition_spec_id, content=mf.content, snapshot_id=snapshot_id,
                schema=schema, metadata_dir=metadata_dir,
            )  # fmt: skip
            written.append(path)
            rewritten.append(new_mf)
        missing = (removed_data | removed_deletes) - found
        if missing:
            path, offset = sorted(missing, key=lambda k: (k[0], k[1] or 0))[0]
            what = f"{path} (blob at {offset})" if offset is not None else path
            raise CommitConflictError(
                f"{table.name or table.metadata_location}: {what} is no longer live in the table: a concurrent "
                "commit deleted or rewrote it"
            )

        all_manifests = [*rewritten, *added.manifests, *manifests]
        sequence_number = md.last_sequence_number + 1
        first_row_id = md.next_row_id if fv >= 3 else None
        if fv >= 3 and first_row_id is None:
            first_row_id = 0
        result = write_manifest_list(
            all_manifests,
            format_version=fv,
            snapshot_id=snapshot_id,
            parent_snapshot_id=parent.snapshot_id if parent is not None else None,
            sequence_number=sequence_number,
            first_row_id=first_row_id,
        )
        list_path = join_path(metadata_dir, f"snap-{snapshot_id}-{attempt}-{uuid.uuid4()}.avro")
        table.io.write_new(list_path, result.data)
        written.append(list_path)

        removed_files = [e.data_file for e in (*changes.removed_data, *changes.removed_deletes)]
        added_files = [*changes.added_data_files, *changes.added_delete_files]
        if totals is None:
            totals = Totals.of(live_files)
        for d in added_files:
            totals.add(d)
        for d in removed_files:
            totals.add(d, -1)
        summary: dict[str, str] = {"operation": operation}
        summary.update(change_summary(added_files, removed_files))
        summary.update(totals.to_summary())
        summary["engine-name"] = ENGINE_NAME
        summary["engine-version"] = __version__
        if extra_summary:
            summary.update(extra_summary)
        next_row_id = result.next_row_id
        snapshot = Snapshot(
            snapshot_id=snapshot_id,
            parent_snapshot_id=parent.snapshot_id if parent is not None else None,
            sequence_number=sequence_number if fv >= 2 else 0,
            timestamp_ms=timestamp_ms,
            manifest_list=list_path,
            summary=summary,
            schema_id=schema.schema_id,
            first_row_id=first_row_id,
            added_rows=(next_row_id - first_row_id)
            if next_row_id is not None and first_row_id is not None
            else None,
        )
        return ProducedSnapshot(snapshot, next_row_id, tuple(written))
    except BaseException:
        for path in written:
            remove_quietly(table, path)
        raise


def _keep(mf: ManifestFile) -> bool:
    """Whether a carried-over manifest still has live entries (unknown counts: keep it)."""
    if mf.added_files_count is None or mf.existing_files_count is None:
        return True
    return mf.added_files_count + mf.existing_files_count > 0


def _may_hold(mf: ManifestFile, keys: set[tuple[str, int | None]]) -> bool:
    return bool(keys) and _keep(mf)


def remove_quietly(table: Table, path: str) -> None:
    """Delete a file this writer created, ignoring errors (cleanup after a failed attempt)."""
    with contextlib.suppress(Exception):
        table.io.delete(path)


def live_entries(table: Table, manifests: Iterable[ManifestFile]) -> list[ManifestEntry]:
    """Live (ADDED/EXISTING) entries of the given manifests."""
    out: list[ManifestEntry] = []
    for mf in manifests:
        out.extend(e for e in table.manifest(mf).entries if e.status != STATUS_DELETED)
    return out


def new_snapshot_id(existing: Iterable[int]) -> int:
    """A random positive 63-bit snapshot id not in `existing` (Appendix F: uuid4, xor halves)."""
    taken = set(existing)
    while True:
        u = uuid.uuid4().int
        sid = ((u >> 64) ^ (u & 0xFFFFFFFFFFFFFFFF)) & 0x7FFFFFFFFFFFFFFF
        if sid and sid not in taken:
            return sid
