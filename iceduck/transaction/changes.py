"""The changes iceduck commits: snapshots that add and remove files, and metadata-only updates.

* `SnapshotChange`: appends (data files written once, then rebased on whatever is current),
  deletes, updates and overwrites. Row-level parts are re-checked on every attempt against the
  current snapshot:
  - a data file this change deletes from, rewrites or removes must still be live, else
    `CommitConflictError` (a concurrent commit deleted or rewrote it);
  - deletion vectors are merged on every attempt with the file's current DV and position deletes,
    so there is at most one DV per data file. When a concurrent commit added deletes to a file
    this change deletes from: a DELETE merges them (deleting a row twice is harmless: the spec's
    "Delete operations based on expressions can always be applied"); an UPDATE merges them only
    if they touch none of the rows it rewrote, else it fails (the row would be resurrected or
    duplicated); a copy-on-write rewrite fails (the rewritten file would bring those rows back);
  - rewrites also fail if equality deletes were added concurrently (a rewritten row would escape
    them) and if the schema changed (the rows were read and written with the old one).
  - a row-level change whose deletes cover every row of a data file removes the file instead.
* `MetadataChange`: schema, partition spec, sort order, properties and format version updates,
  planned on the current metadata; schema and spec changes fail if the schema (or the default
  spec) changed since they were planned (spec "Commit Conflict Resolution and Retry").

Each attempt returns updates and requirements (`iceduck.transaction.commit`): a snapshot change
adds its snapshot and moves `main`, asserting the table UUID and the `main` head it was planned on
(and the schema, for changes that rewrite rows); a metadata change asserts what its updates build
on (`iceduck.spec.updates.requirements_for`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from iceduck.errors import CommitConflictError, ValidationError
from iceduck.io.fileio import FileIO
from iceduck.puffin import Roaring64
from iceduck.read.live import TableState, live_state
from iceduck.spec.manifest import CONTENT_EQUALITY_DELETES, DataFile
from iceduck.spec.table_metadata import TableMetadata
from iceduck.spec.transforms import partition_path
from iceduck.spec.updates import AssertCurrentSchemaId, TableUpdate, requirements_for
from iceduck.table import Table
from iceduck.transaction.commit import Attempt, Change, CommitResult, crash_point
from iceduck.transaction.metadata import now_ms, snapshot_updates
from iceduck.transaction.snapshot import (
    AddedManifests,
    FileChanges,
    new_snapshot_id,
    produce_snapshot,
    remove_quietly,
    write_added_manifests,
)
from iceduck.write.deletes import write_deletion_vectors_file, write_position_delete_files
from iceduck.write.parquet import WriteTarget, remove_files

KIND_APPEND = "append"
KIND_DELETE = "delete"
KIND_UPDATE = "update"
KIND_REWRITE = "rewrite"  # copy-on-write delete/update, overwrite


class RowsMovedError(CommitConflictError):
    """A concurrent commit deleted rows this delete also deletes and added data files: an UPDATE
    (or an upsert's equality delete) may have moved those rows, changed, into the new files, where
    the positions planned on the old snapshot cannot reach them. Merging would leave the moved rows
    alive although this delete matched them (no serial order gives that), so the delete must be
    planned again on the current snapshot (`iceduck.transaction.row_level.delete` does)."""


def write_target(table: Table) -> WriteTarget:
    """Where and how new data files of `table` are written (its current schema, spec and order)."""
    md = table.metadata
    return WriteTarget(
        table.resolver.actual_location, md.schema, md.default_spec, md.default_sort_order, md.properties, table.io
    )


def partition_folder(table: Table) -> Callable[[DataFile], str]:
    """Partition sub-folder (as data files use) for a file's spec and partition values."""
    md = table.metadata

    def folder(d: DataFile) -> str:
        spec = md.spec_by_id(d.spec_id)
        if spec is None or spec.is_unpartitioned:
            return ""
        fields = []
        for pf, value in zip(spec.fields, d.partition, strict=True):
            source = md.schema.find_type(pf.source_ids[0]) if pf.source_ids else None
            if source is None:
                continue
            fields.append((pf.name, pf.transform, source, value))
        return partition_path(fields)

    return folder


@dataclass(slots=True)
class RowDeletes:
    """Row-level deletes planned on one snapshot: positions per data file path, and what each
    file's deletes were when planned (to detect concurrent deletes)."""

    positions: dict[str, np.ndarray] = field(default_factory=dict)
    planned_deleted: dict[str, Roaring64] = field(default_factory=dict)


class SnapshotChange(Change):
    """Add data files and (optionally) delete rows or remove/rewrite files, as one snapshot."""

    def __init__(
        self,
        *,
        kind: str,
        operation: str,
        added_data_files: Iterable[DataFile] = (),
        row_deletes: RowDeletes | None = None,
        rewritten: Mapping[str, Roaring64] | None = None,
        removed: Iterable[str] = (),
        planned_schema_id: int | None = None,
        planned_data_files: Iterable[str] | None = None,
        rewrite_deleted_rows: int = 0,
        remove_all_deletes: bool = False,
        planned_state: TableState | None = None,
    ) -> None:
        self.kind = kind
        # the view the change was planned on: each attempt reads only what commits added since
        self.planned_state = planned_state
        self.operation = operation
        self.added_data_files = list(added_data_files)
        self.row_deletes = row_deletes or RowDeletes()
        # copy-on-write: data file path -> its deletes when planned (must be unchanged at commit)
        self.rewritten = dict(rewritten or {})
        self.removed = set(removed)  # data files removed as a whole (e.g. overwrite of everything)
        self.planned_schema_id = planned_schema_id
        # files live when an overwrite-everything was planned: files added since are a conflict
        self.planned_data_files = set(planned_data_files) if planned_data_files is not None else None
        self.rewrite_deleted_rows = rewrite_deleted_rows
        self.remove_all_deletes = remove_all_deletes
        self._snapshot_id: int | None = None
        self._added = AddedManifests()
        self._io: FileIO | None = None  # the table's, seen at apply: abort deletes through it
        self._attempt_files: list[str] = []
        self.merged: list[str] = []
        self.deleted_rows = 0
        self.counts: dict[str, int] = {}

    @property
    def _row_level(self) -> bool:
        """Whether the change deletes or removes anything (and so depends on the current files)."""
        return bool(
            self.row_deletes.positions or self.rewritten or self.removed or self.remove_all_deletes
            or self.planned_data_files is not None
        )  # fmt: skip

    # -- attempt ------------------------------------------------------------------------------------

    def apply(self, current: Table, attempt: int) -> Attempt:
        self._io = current.io
        md = current.metadata
        if self._snapshot_id is None or md.snapshot_by_id(self._snapshot_id) is not None:
            self._snapshot_id = new_snapshot_id(s.snapshot_id for s in md.snapshots)
        snapshot_id = self._snapshot_id
        written: list[str] = []
        try:
            if self._row_level:
                state = live_state(current, since=self.planned_state)
                self._validate(current, state)
                changes = self._file_changes(current, state, written)
            else:  # a plain append does not look at the table's files
                changes = FileChanges(added_data_files=list(self.added_data_files))
            metadata_dir = current.metadata_location.rsplit("/", 1)[0]
            self._added = write_added_manifests(
                current, changes, snapshot_id=snapshot_id, schema=md.schema, metadata_dir=metadata_dir,
                cache=self._added,
            )  # fmt: skip
            if not self._added.reusable:
                written.extend(self._added.paths)  # they hold this attempt's delete files: not reusable
            produced = produce_snapshot(
                current,
                changes,
                snapshot_id=snapshot_id,
                operation=self._operation_name(changes),
                timestamp_ms=now_ms(),
                schema=md.schema,
                metadata_dir=metadata_dir,
                added=self._added,
                attempt=attempt,
            )
            written.extend(produced.written)
        except BaseException:
            for path in written:
                remove_quietly(current, path)
            raise
        self._record(changes)
        updates = snapshot_updates(md, produced.snapshot)
        requirements = requirements_for(md, updates)
        if self.kind in (KIND_UPDATE, KIND_REWRITE) and self.planned_schema_id is not None:
            requirements.append(AssertCurrentSchemaId(md.current_schema_id))  # rows read with it
        return Attempt(updates, requirements, written)

    def _operation_name(self, changes: FileChanges) -> str:
        if self.operation != "auto":
            return self.operation
        if changes.added_data_files:
            return "overwrite" if (changes.removed_data or changes.added_delete_files) else "append"
        return "delete"

    def _record(self, changes: FileChanges) -> None:
        self.counts = {
            "added_data_files": len(changes.added_data_files),
            "removed_data_files": len(changes.removed_data),
            "added_delete_files": len(changes.added_delete_files),
            "removed_delete_files": len(changes.removed_deletes),
            "added_rows": sum(d.record_count for d in changes.added_data_files),
        }

    def _validate(self, current: Table, state: TableState) -> None:
        who = current.name or current.metadata_location
        touched = set(self.row_deletes.positions) | set(self.rewritten) | self.removed
        gone = sorted(p for p in touched if p not in state.files)
        if gone:
            raise CommitConflictError(
                f"{who}: data file {gone[0]} is no longer in the table: a concurrent commit deleted or rewrote it; "
                "nothing was committed"
            )
        if self.kind in (KIND_UPDATE, KIND_REWRITE):
            if (
                self.planned_schema_id is not None
                and current.metadata.current_schema_id != self.planned_schema_id
            ):
                raise CommitConflictError(
                    f"{who}: the schema changed since the rows were read (schema {self.planned_schema_id} -> "
                    f"{current.metadata.current_schema_id}); nothing was committed"
                )
            rewritten_files = set(self.rewritten) | set(self.row_deletes.positions)
            for path in rewritten_files:
                eq = state.files[path].equality_deletes
                if eq:
                    raise CommitConflictError(
                        f"{who}: equality deletes apply to {path}; rewriting its rows would undo them; nothing "
                        "was committed"
                    )
        for path, planned in self.rewritten.items():
            now = state.deleted(path)
            if now != planned:
                raise CommitConflictError(
                    f"{who}: a concurrent commit deleted rows of {path}, which this change rewrites (copy-on-write); "
                    "nothing was committed"
                )
        if self.planned_data_files is not None:
            new = sorted(set(state.files) - self.planned_data_files)
            if new:
                raise CommitConflictError(
                    f"{who}: a concurrent commit added data file {new[0]} while this overwrite replaced every row; "
                    "nothing was committed"
                )

    def _file_changes(self, current: Table, state: TableState, written: list[str]) -> FileChanges:
        md = current.metadata
        changes = FileChanges(added_data_files=list(self.added_data_files))
        removed_data: set[str] = set(self.removed) | set(self.rewritten)
        vectors: list[tuple[DataFile, Roaring64]] = []
        v2_deletes: dict[str, np.ndarray] = {}
        self.merged = []
        deleted_rows = 0
        state.preload_deleted(self.row_deletes.positions)
        planned_files = self.planned_state.files if self.planned_state is not None else {}
        # data files concurrent commits added since planning (all files when planned without a state)
        added_since = sorted(set(state.files) - set(planned_files))
        planned_eq = {p: f.equality_deletes for p, f in planned_files.items()}
        for path, positions in sorted(self.row_deletes.positions.items()):
            lf = state.files[path]
            existing = state.deleted(path)
            planned = self.row_deletes.planned_deleted.get(path, Roaring64.empty())
            ours = Roaring64.from_positions(positions)
            if existing != planned:
                concurrent = _difference(existing, planned)
                overlap = bool(len(concurrent)) and bool(np.isin(concurrent, positions).any())
                if self.kind == KIND_UPDATE and overlap:
                    raise CommitConflictError(
                        f"{current.name}: a concurrent commit deleted rows of {path} that this update rewrote; "
                        "nothing was committed"
                    )
                if overlap and added_since:
                    raise RowsMovedError(
                        f"{current.name}: a concurrent commit deleted rows of {path} that this change deletes and "
                        f"added data file {added_since[0]}, where those rows may live on (an UPDATE moves them); "
                        "nothing was committed"
                    )
                self.merged.append(path)
            if added_since and len(lf.equality_deletes) > len(planned_eq.get(path, ())):
                raise RowsMovedError(
                    f"{current.name}: a concurrent commit added equality deletes for {path} and data file "
                    f"{added_since[0]} (an upsert may have moved rows this change deletes); nothing was committed"
                )
            merged = ours.union(existing)
            new_rows = merged.cardinality - existing.cardinality
            deleted_rows += new_rows
            if merged.cardinality >= lf.record_count:
                removed_data.add(path)
                continue
            if md.format_version >= 3:
                vectors.append((lf.file, merged))
            else:
                new = _difference(ours, existing)
                if len(new):
                    v2_deletes[path] = new
        for path in sorted(removed_data):
            lf = state.files[path]
            if path in self.removed:
                deleted_rows += lf.record_count - state.deleted(path).cardinality
            changes.removed_data.append(lf.entry)
        self.deleted_rows = deleted_rows + self.rewrite_deleted_rows
        # deletes that die with their data file, or that a new DV replaces
        # (by match key: a delete may spell its data file differently from the manifest)
        replaced = {state.key(p) for p in removed_data} | {state.key(d.file_path) for d, _ in vectors}
        for e in state.delete_entries:
            d = e.data_file
            if self.remove_all_deletes:
                changes.removed_deletes.append(e)
            elif d.is_deletion_vector:
                if d.referenced_data_file is not None and state.key(d.referenced_data_file) in replaced:
                    changes.removed_deletes.append(e)
            elif (
                d.content != CONTENT_EQUALITY_DELETES
                and d.referenced_data_file is not None
                and state.key(d.referenced_data_file) in replaced
            ):
                # a position delete file for a single data file: replaced by the DV or moot
                changes.removed_deletes.append(e)
        target = write_target(current)
        if vectors:
            path, entries = write_deletion_vectors_file(current.io, target.data_path, vectors)
            written.append(path)
            changes.added_delete_files.extend(entries)
        if v2_deletes:
            files = {p: state.files[p].entry.data_file for p in v2_deletes}
            entries = write_position_delete_files(
                target.data_path, v2_deletes, files, partition_folder(current)
            )
            written.extend(d.file_path for d in entries)
            changes.added_delete_files.extend(entries)
        if vectors or v2_deletes:
            crash_point("data-written")
        return changes

    def abort(self) -> None:
        remove_files([d.file_path for d in self.added_data_files], self._io)
        remove_files(self._added.paths, self._io)

    def result(self, table: str, metadata: TableMetadata, location: str, attempts: int) -> CommitResult:
        base = super().result(table, metadata, location, attempts)
        snap = metadata.current_snapshot()
        operation = snap.operation if snap is not None and snap.operation else self.operation
        notes: tuple[str, ...] = ()
        if self.merged:
            notes = (
                f"merged concurrent deletes into the deletion vectors of {len(self.merged)} data file(s)",
            )
        return dataclasses.replace(
            base,
            operation=operation,
            added_data_files=self.counts.get("added_data_files", 0),
            removed_data_files=self.counts.get("removed_data_files", 0),
            added_delete_files=self.counts.get("added_delete_files", 0),
            removed_delete_files=self.counts.get("removed_delete_files", 0),
            added_rows=self.counts.get("added_rows", 0),
            deleted_rows=self.deleted_rows,
            merged=tuple(self.merged),
            notes=notes,
        )


def _difference(a: Roaring64, b: Roaring64) -> np.ndarray:
    """Positions in `a` and not in `b`, sorted."""
    if not b.cardinality:
        return a.to_numpy()
    return np.setdiff1d(a.to_numpy(), b.to_numpy(), assume_unique=True)


class MetadataChange(Change):
    """A metadata-only change: `plan(current metadata) -> updates`, checked for conflicts."""

    def __init__(
        self,
        operation: str,
        plan: Callable[[TableMetadata], list[TableUpdate]],
        *,
        planned_schema_id: int | None = None,
        planned_spec_id: int | None = None,
    ) -> None:
        self.operation = operation
        self.plan = plan
        self.planned_schema_id = planned_schema_id
        self.planned_spec_id = planned_spec_id

    def apply(self, current: Table, attempt: int) -> Attempt:
        md = current.metadata
        who = current.name or current.metadata_location
        if self.planned_schema_id is not None and md.current_schema_id != self.planned_schema_id:
            raise CommitConflictError(
                f"{who}: the schema changed concurrently (schema {self.planned_schema_id} -> {md.current_schema_id}); "
                f"{self.operation} not committed: reload and try again"
            )
        if self.planned_spec_id is not None and md.default_spec_id != self.planned_spec_id:
            raise CommitConflictError(
                f"{who}: the partition spec changed concurrently (spec {self.planned_spec_id} -> "
                f"{md.default_spec_id}); {self.operation} not committed: reload and try again"
            )
        updates = self.plan(md)
        requirements = requirements_for(md, updates)
        planned_on = AssertCurrentSchemaId(md.current_schema_id)
        if self.planned_schema_id is not None and planned_on not in requirements:
            requirements.append(planned_on)
        return Attempt(updates, requirements)


def check_rewritable(state: TableState, what: str) -> None:
    """`ValidationError` if equality deletes apply: rows rewritten into new files would escape them."""
    if state.has_equality_deletes:
        raise ValidationError(
            f"{state.table.name}: cannot {what}: the table has equality delete files, and rewriting rows would "
            "undo them (iceduck only rewrites tables whose deletes are deletion vectors or position deletes)"
        )
