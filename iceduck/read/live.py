"""The writer's view of a snapshot: the live data files of a scan plan and their deleted positions.

DELETE/UPDATE matching, commit validation and compaction ask "which files are live, which deletes
apply to each, which positions are already deleted". They all take the answer from one scan plan
(`iceduck.scan.plan_scan`, with the statement's predicate so it prunes like a read) and its
`DeleteIndex`; this module adds no rule of its own. Deleted positions are read lazily, per file,
through the scan's own readers (`iceduck.read.deletes`), only for the files a caller asks about.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from iceduck.expr import Predicate
from iceduck.io.storage import duckdb_path
from iceduck.puffin.roaring64 import Roaring64
from iceduck.read.deletes import file_deletes, position_file_keys, positions_of
from iceduck.scan.deletes import DeleteFile
from iceduck.scan.planner import FileScanTask, ScanPlan, plan_scan, plan_since
from iceduck.spec.manifest import ManifestEntry
from iceduck.spec.snapshots import Snapshot
from iceduck.table import Table

# A live data file of the writer's view is the plan's task: its entry, match key and deletes.
LiveFile = FileScanTask


@dataclass(slots=True)
class TableState:
    """The live data files of one plan (keyed by recorded path) and their deleted positions."""

    plan: ScanPlan
    files: dict[str, LiveFile]
    _deleted: dict[str, Roaring64] = field(default_factory=dict)
    _local: dict[str, str] = field(default_factory=dict)

    @property
    def table(self) -> Table:
        return self.plan.table

    @property
    def snapshot(self) -> Snapshot | None:
        return self.plan.snapshot

    @property
    def delete_files(self) -> list[DeleteFile]:
        """Every live delete file the plan considered."""
        return list(self.plan.deletes.deletes) if self.plan.deletes is not None else []

    @property
    def delete_entries(self) -> list[ManifestEntry]:
        return [d.entry for d in self.delete_files if d.entry is not None]

    @property
    def has_equality_deletes(self) -> bool:
        return self.plan.deletes is not None and self.plan.deletes.has_equality_deletes

    def key(self, path: str) -> str:
        """The match key of a recorded path (the one rule for "same file")."""
        return self.table.resolver.match_key(path)

    def targets(self, delete: ManifestEntry) -> frozenset[str]:
        """The match keys of the data files a position-delete file or DV names."""
        d = delete.data_file
        if d.referenced_data_file is not None:
            return frozenset((self.key(d.referenced_data_file),))
        return position_file_keys(self.table.resolve(d.file_path), self.key, self.table.io)

    def local_path(self, path: str) -> str:
        """Where data file `path` (as recorded) is now, as the path DuckDB reads (a local path, or
        `s3://bucket/key` for any S3 spelling)."""
        found = self._local.get(path)
        if found is None:
            found = self._local[path] = duckdb_path(self.table.resolve(path))
        return found

    def deleted(self, path: str) -> Roaring64:
        """Positions of data file `path` deleted by the DV or position-delete files that apply to it."""
        found = self._deleted.get(path)
        if found is None:
            lf = self.files[path]
            fd = file_deletes(lf.key, lf.record_count, lf.deletes, self.table.resolve)
            found = (
                Roaring64.empty()
                if fd is None
                else Roaring64.from_positions(positions_of(fd, key=self.table.resolver.match_key, io=self.table.io))
            )
            self._deleted[path] = found
        return found

    def preload_deleted(self, paths: Iterable[str]) -> None:
        """Read the deletes of many files (position-delete files are parsed once per process)."""
        for p in paths:
            self.deleted(p)


def live_state(
    table: Table,
    snapshot: Snapshot | None = None,
    predicate: Predicate | None = None,
    *,
    since: TableState | None = None,
) -> TableState:
    """The writer's view of `snapshot` (default: current): the files a row matching `predicate`
    (an unbound iceduck predicate; None: every file) can be in, with their deletes.

    `since`: the state a change was planned on (an ancestor of `snapshot`); only what the commits
    after it added is read (`plan_since`), and the files it left out stay out (commit validation
    asks only about the files a change touches)."""
    snap = snapshot if snapshot is not None else table.metadata.current_snapshot()
    if since is not None:
        plan = plan_since(table, snap, since.plan)
    else:
        plan = plan_scan(table, snap, predicate, schema=table.metadata.schema)
    return TableState(plan, {t.path: t for t in plan.tasks})
