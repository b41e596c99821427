"""Commits made by table maintenance: rewriting data files, rewriting manifests, expiring snapshots.

Each is a `Change` for `TableCommitter.commit`, built from the public API of `iceduck.transaction`
only (as any writer's change), so maintenance commits get the writer's compare-and-swap, retries
and cleanup. Each re-validates on every attempt against the table as it
is then:

* `RewriteGroupsChange` replaces the data files of one or more file groups (compaction) in one
  `replace` snapshot. A group conflicts when any of its files is no longer live, when rows of them
  were deleted since they were read (the new files would bring those rows back), when equality
  deletes apply to them, or when the schema changed; a conflicting group is dropped from the commit
  (its new files deleted, the reason kept in `failed`) and the others still commit. Deletion
  vectors and position delete files that only referenced replaced files go with them.
* `RewriteManifestsChange` regroups the live entries of the current snapshot's manifests by
  partition into manifests of a target size (a `replace` snapshot; entries keep their snapshot ids,
  sequence numbers and first row ids, written out explicitly).
* `ExpireSnapshotsChange` removes snapshots and refs chosen on the current metadata.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from iceduck.errors import CommitConflictError, IcebergError
from iceduck.io.fileio import FileIO
from iceduck.io.paths import join_path
from iceduck.puffin import Roaring64
from iceduck.read.live import TableState, live_state
from iceduck.spec.json_fields import frozen_map
from iceduck.spec.manifest import (
    CONTENT_EQUALITY_DELETES,
    CONTENT_POSITION_DELETES,
    STATUS_DELETED,
    STATUS_EXISTING,
    DataFile,
    ManifestEntry,
)
from iceduck.spec.manifest_list import ManifestFile, write_manifest_list
from iceduck.spec.snapshots import Snapshot
from iceduck.spec.table_metadata import TableMetadata
from iceduck.spec.updates import AssertCurrentSchemaId, requirements_for
from iceduck.table import Table
from iceduck.transaction import (
    ENGINE_NAME,
    AddedManifests,
    Attempt,
    Change,
    CommitResult,
    FileChanges,
    Totals,
    expire_updates,
    new_snapshot_id,
    now_ms,
    produce_snapshot,
    remove_quietly,
    snapshot_updates,
    write_added_manifests,
    write_table_manifest,
)
from iceduck.write.parquet import remove_files

REPLACE = "replace"


class NothingToCommit(IcebergError):
    """The change has nothing left to do on the current table (no commit is made)."""


def replace_metadata(md: TableMetadata, **changes: Any) -> TableMetadata:
    """`dataclasses.replace` for table metadata with fresh lookup indexes (the base's must not be shared)."""
    if "refs" in changes:
        changes["refs"] = frozen_map(changes["refs"])
    return dataclasses.replace(
        md, **changes, _schemas_by_id={}, _specs_by_id={}, _orders_by_id={}, _snapshot_index={}
    )


# -- expiring snapshots -----------------------------------------------------------------------------


class ExpireSnapshotsChange(Change):
    """Remove the snapshots and refs `choose(current metadata)` names (remove-snapshot-ref,
    remove-snapshots), asserting every ref of the metadata they were chosen on."""

    operation = "expire-snapshots"

    def __init__(self, choose: Callable[[TableMetadata], tuple[set[int], set[str]]]) -> None:
        self.choose = choose
        self.expired: set[int] = set()
        self.removed_refs: set[str] = set()

    def apply(self, current: Table, attempt: int) -> Attempt:
        expired, refs = self.choose(current.metadata)
        if not expired and not refs:
            raise NothingToCommit(f"{current.name or current.metadata_location}: no snapshot left to expire")
        self.expired, self.removed_refs = expired, refs
        updates = expire_updates(expired, refs)
        return Attempt(updates, requirements_for(current.metadata, updates))


# -- rewriting data files -----------------------------------------------------------------------------


@dataclass(slots=True)
class RewrittenGroup:
    """One file group's rewrite: the files read (with their deletes as read) and the files written."""

    group_id: str
    inputs: dict[str, Roaring64]  # recorded data file path -> deleted positions when read
    outputs: list[DataFile] = field(default_factory=list)

    @property
    def output_paths(self) -> list[str]:
        return [d.file_path for d in self.outputs]


class RewriteGroupsChange(Change):
    """Replace the input files of `groups` by their outputs in one `replace` snapshot."""

    operation = REPLACE

    def __init__(
        self,
        groups: Sequence[RewrittenGroup],
        *,
        planned_schema_id: int | None,
        extra_summary: Mapping[str, str] | None = None,
        planned_state: TableState | None = None,
    ) -> None:
        self.groups = list(groups)
        # the view the groups were read from: each attempt reads only what commits added since
        self.planned_state = planned_state
        self.planned_schema_id = planned_schema_id
        self.extra_summary = dict(extra_summary or {})
        self.failed: dict[str, str] = {}  # group id -> why it was dropped
        self.committed: list[str] = []
        self.removed_delete_files = 0
        self._snapshot_id: int | None = None
        self._added = AddedManifests()
        self._io: FileIO | None = None  # the table's, seen at apply: removals go through it
        self._added_for: frozenset[str] = frozenset()

    def _conflict(self, current: Table, state: TableState, group: RewrittenGroup) -> str | None:
        md = current.metadata
        if self.planned_schema_id is not None and md.current_schema_id != self.planned_schema_id:
            return f"the schema changed since the rows were read ({self.planned_schema_id} -> {md.current_schema_id})"
        for path, planned in sorted(group.inputs.items()):
            lf = state.files.get(path)
            if lf is None:
                return f"{path} is no longer live: a concurrent commit deleted or rewrote it"
            if lf.equality_deletes:
                return f"equality deletes apply to {path}: rewriting its rows would undo them"
            if state.deleted(path) != planned:
                return f"a concurrent commit deleted rows of {path} after they were read"
        return None

    def apply(self, current: Table, attempt: int) -> Attempt:
        self._io = current.io
        md = current.metadata
        state = live_state(current, since=self.planned_state)
        state.preload_deleted([p for g in self.groups for p in g.inputs if p in state.files])
        valid = []
        for g in self.groups:
            if g.group_id in self.failed:
                continue
            why = self._conflict(current, state, g)
            if why is not None:
                self.failed[g.group_id] = why
                remove_files(g.output_paths, self._io)
                continue
            valid.append(g)
        if not valid:
            reasons = "; ".join(f"group {k}: {v}" for k, v in self.failed.items())
            raise CommitConflictError(
                f"{current.name or current.metadata_location}: every file group conflicts with concurrent commits "
                f"({reasons}); nothing was committed"
            )
        if self._snapshot_id is None or md.snapshot_by_id(self._snapshot_id) is not None:
            self._snapshot_id = new_snapshot_id(s.snapshot_id for s in md.snapshots)
        removed = {p for g in valid for p in g.inputs}
        changes = FileChanges(
            added_data_files=[d for g in valid for d in g.outputs],
            removed_data=[state.files[p].entry for p in sorted(removed)],
            removed_deletes=self._dead_deletes(current, state, removed),
        )
        metadata_dir = current.metadata_location.rsplit("/", 1)[0]
        ids = frozenset(g.group_id for g in valid)
        if ids != self._added_for:
            remove_files(self._added.paths, self._io)  # written for another set of groups
            self._added = AddedManifests()
            self._added_for = ids
        self._added = write_added_manifests(
            current, changes, snapshot_id=self._snapshot_id, schema=md.schema, metadata_dir=metadata_dir,
            cache=self._added,
        )  # fmt: skip
        summary = dict(self.extra_summary)
        summary["rewritten-file-groups"] = str(len(valid))
        produced = produce_snapshot(
            current, changes, snapshot_id=self._snapshot_id, operation=REPLACE, timestamp_ms=now_ms(),
            schema=md.schema, metadata_dir=metadata_dir, added=self._added, attempt=attempt,
            extra_summary=summary,
        )  # fmt: skip
        self.committed = [g.group_id for g in valid]
        self.removed_delete_files = len(changes.removed_deletes)
        updates = snapshot_updates(md, produced.snapshot)
        requirements = requirements_for(md, updates)
        if self.planned_schema_id is not None:
            requirements.append(AssertCurrentSchemaId(md.current_schema_id))  # rows read with it
        return Attempt(updates, requirements, list(produced.written))

    def _dead_deletes(self, current: Table, state: TableState, removed: set[str]) -> list[ManifestEntry]:
        """Delete files that apply to no live data file once `removed` are gone."""
        # Compared by match key: a delete may spell its data file differently from the manifest.
        remaining = {state.key(p) for p in set(state.files) - removed}
        out = []
        for e in state.delete_entries:
            d = e.data_file
            if d.content == CONTENT_EQUALITY_DELETES:
                continue
            if d.is_deletion_vector or d.referenced_data_file is not None:
                if d.referenced_data_file is not None and state.key(d.referenced_data_file) not in remaining:
                    out.append(e)
                continue
            if d.content == CONTENT_POSITION_DELETES and not (state.targets(e) & remaining):
                out.append(e)
        return out

    def abort(self) -> None:
        for g in self.groups:
            remove_files(g.output_paths, self._io)
        remove_files(self._added.paths, self._io)

    def result(self, table: str, metadata: TableMetadata, location: str, attempts: int) -> CommitResult:
        base = super().result(table, metadata, location, attempts)
        valid = [g for g in self.groups if g.group_id in self.committed]
        return dataclasses.replace(
            base,
            operation=REPLACE,
            added_data_files=sum(len(g.outputs) for g in valid),
            removed_data_files=sum(len(g.inputs) for g in valid),
            removed_delete_files=self.removed_delete_files,
            added_rows=sum(d.record_count for g in valid for d in g.outputs),
            notes=tuple(f"group {k} not committed: {v}" for k, v in self.failed.items()),
        )


# -- rewriting manifests ------------------------------------------------------------------------------


def _partition_key(d: DataFile) -> tuple[Any, ...]:
    return tuple((v is None, repr(type(v)), v if v is not None else 0) for v in d.partition)


@dataclass(frozen=True, slots=True)
class ManifestRewrite:
    """What a manifest rewrite replaced: manifests read and written, entries moved."""

    replaced: tuple[str, ...]
    created: tuple[str, ...]
    kept: int
    entries: int


class RewriteManifestsChange(Change):
    """Regroup the live entries of the chosen manifests of the current snapshot by partition.

    `select(manifest)` chooses the manifests to rewrite (re-evaluated on every attempt, so manifests
    a concurrent commit added are simply kept); manifests without live entries are dropped. New
    manifests hold entries of one content and partition spec, sorted by partition, split at
    `target_size_bytes` (estimated from the bytes per entry of the manifests read).
    """

    operation = REPLACE

    def __init__(self, select: Callable[[ManifestFile], bool], target_size_bytes: int) -> None:
        self.select = select
        self.target_size_bytes = max(1, target_size_bytes)
        self.outcome: ManifestRewrite | None = None
        self._written: list[str] = []

    def apply(self, current: Table, attempt: int) -> Attempt:
        md = current.metadata
        parent = md.current_snapshot()
        who = current.name or current.metadata_location
        if parent is None:
            raise NothingToCommit(f"{who}: the table has no snapshot")
        manifests = current.manifests(parent)
        chosen = [m for m in manifests if self.select(m)]
        kept = [m for m in manifests if not self.select(m)]
        if not chosen:
            raise NothingToCommit(f"{who}: no manifest to rewrite")
        snapshot_id = new_snapshot_id(s.snapshot_id for s in md.snapshots)
        metadata_dir = current.metadata_location.rsplit("/", 1)[0]
        written: list[str] = []
        groups: dict[tuple[int, int], list[ManifestEntry]] = {}
        sizes: dict[tuple[int, int], list[int]] = {}
        entries_read = 0
        for mf in chosen:
            entries = current.manifest(mf).entries
            live = [e for e in entries if e.status != STATUS_DELETED]
            entries_read += len(live)
            key = (mf.content, mf.partition_spec_id)
            groups.setdefault(key, []).extend(live)
            s = sizes.setdefault(key, [0, 0])
            s[0] += mf.manifest_length
            s[1] += max(1, len(entries))
        created: list[ManifestFile] = []
        try:
            for (content, spec_id), group in sorted(groups.items()):
                if not group:
                    continue
                per_entry = max(1, sizes[(content, spec_id)][0] // sizes[(content, spec_id)][1])
                per_manifest = max(1, self.target_size_bytes // per_entry)
                group.sort(key=lambda e: (_partition_key(e.data_file), e.data_file.file_path))
                for start in range(0, len(group), per_manifest):
                    chunk = [
                        ManifestEntry(
                            STATUS_EXISTING,
                            e.snapshot_id,
                            e.sequence_number,
                            e.file_sequence_number,
                            e.data_file,
                        )
                        for e in group[start : start + per_manifest]
                    ]
                    mf, path = write_table_manifest(
                        current, chunk, spec_id=spec_id, content=content, snapshot_id=snapshot_id,
                        schema=md.schema, metadata_dir=metadata_dir,
                    )  # fmt: skip
                    written.append(path)
                    created.append(mf)
            snapshot, list_path = self._snapshot(
                current, parent, [*created, *kept], snapshot_id, metadata_dir, attempt,
                replaced=len(chosen), created=len(created), kept=len(kept), entries=entries_read,
            )  # fmt: skip
            written.append(list_path)
        except BaseException:
            for path in written:
                remove_quietly(current, path)
            raise
        self.outcome = ManifestRewrite(
            tuple(m.manifest_path for m in chosen),
            tuple(m.manifest_path for m in created),
            len(kept),
            entries_read,
        )
        updates = snapshot_updates(md, snapshot)
        return Attempt(updates, requirements_for(md, updates), written)

    def _snapshot(
        self,
        table: Table,
        parent: Snapshot,
        manifests: list[ManifestFile],
        snapshot_id: int,
        metadata_dir: str,
        attempt: int,
        **counts: int,
    ) -> tuple[Snapshot, str]:
        md = table.metadata
        fv = md.format_version
        sequence_number = md.last_sequence_number + 1
        first_row_id = (md.next_row_id or 0) if fv >= 3 else None
        result = write_manifest_list(
            manifests, format_version=fv, snapshot_id=snapshot_id, parent_snapshot_id=parent.snapshot_id,
            sequence_number=sequence_number, first_row_id=first_row_id,
        )  # fmt: skip
        path = join_path(metadata_dir, f"snap-{snapshot_id}-{attempt}-{uuid.uuid4()}.avro")
        table.io.write_new(path, result.data)
        summary: dict[str, str] = {"operation": REPLACE}
        totals = Totals.from_summary(parent.summary)
        if totals is None:
            totals = Totals.of(
                e.data_file
                for mf in manifests
                for e in table.manifest(mf).entries
                if e.status != STATUS_DELETED
            )
        summary.update(totals.to_summary())
        summary["manifests-created"] = str(counts["created"])
        summary["manifests-replaced"] = str(counts["replaced"])
        summary["manifests-kept"] = str(counts["kept"])
        summary["entries-processed"] = str(counts["entries"])
        summary["engine-name"] = ENGINE_NAME
        snapshot = Snapshot(
            snapshot_id=snapshot_id,
            parent_snapshot_id=parent.snapshot_id,
            sequence_number=sequence_number if fv >= 2 else 0,
            timestamp_ms=now_ms(),
            manifest_list=path,
            summary=summary,
            schema_id=md.current_schema_id,
            first_row_id=first_row_id,
            added_rows=(result.next_row_id - first_row_id)
            if result.next_row_id is not None and first_row_id is not None
            else None,
        )
        return snapshot, path
