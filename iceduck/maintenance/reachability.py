"""Which files a table's metadata reaches: the ground truth of expiry and orphan removal.

A snapshot reaches its manifest list, the manifests listed there, and the data and delete files of
their live entries (ADDED / EXISTING; DELETED entries only say a file left the snapshot). Table
statistics and partition statistics files belong to the snapshot they describe. Orphan removal is
more conservative and also counts files named by DELETED entries, every snapshot of every metadata
file in the metadata log, and the version hint.

Paths are compared in one form: resolved to where the table really is (`Table.resolve`, for moved
tables) and normalised (`iceduck.io.paths.normalize_path`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from iceduck.errors import FileNotFoundInTableError, IcebergError
from iceduck.io.paths import join_path, normalize_path
from iceduck.spec.manifest import CONTENT_DATA, CONTENT_EQUALITY_DELETES, STATUS_DELETED, DataFile
from iceduck.spec.snapshots import Snapshot
from iceduck.spec.table_metadata import TableMetadata, read_table_metadata
from iceduck.table import Table

MANIFEST_LIST = "manifest_list"
MANIFEST = "manifest"
DATA = "data"
POSITION_DELETES = "position_deletes"
DELETION_VECTORS = "deletion_vectors"
EQUALITY_DELETES = "equality_deletes"
STATISTICS = "statistics"
PARTITION_STATISTICS = "partition_statistics"
METADATA = "metadata"
VERSION_HINT = "version_hint"


def file_kind(d: DataFile) -> str:
    """The kind of a data or delete file (deletion vectors live in Puffin files)."""
    if d.content == CONTENT_DATA:
        return DATA
    if d.content == CONTENT_EQUALITY_DELETES:
        return EQUALITY_DELETES
    if d.is_deletion_vector:
        return DELETION_VECTORS
    return POSITION_DELETES


@dataclass(slots=True)
class Reachability:
    """Files reached from snapshots of one table, with manifests read once however often they are shared.

    `include_deleted`: count files of DELETED entries too. `missing_ok`: a manifest list or manifest
    that is gone is recorded in `missing` and skipped, instead of raising.
    """

    table: Table
    include_deleted: bool = False
    missing_ok: bool = False
    missing: list[str] = field(default_factory=list)
    _by_manifest: dict[str, dict[str, str]] = field(default_factory=dict)

    def path(self, recorded: str) -> str:
        """The normalised actual path of a path recorded in the metadata."""
        return normalize_path(self.table.resolve(recorded))

    def of_snapshot(self, snapshot: Snapshot) -> dict[str, str]:
        """Path -> kind of every file `snapshot` reaches."""
        out: dict[str, str] = {}
        if snapshot.manifest_list:
            out[self.path(snapshot.manifest_list)] = MANIFEST_LIST
        try:
            manifests = self.table.manifests(snapshot)
        except FileNotFoundInTableError:
            if not self.missing_ok:
                raise
            self.missing.append(self.path(snapshot.manifest_list or ""))
            return out
        for mf in manifests:
            key = self.path(mf.manifest_path)
            files = self._by_manifest.get(key)
            if files is None:
                files = self._manifest_files(mf, key)
                self._by_manifest[key] = files
            out[key] = MANIFEST
            out.update(files)
        return out

    def _manifest_files(self, mf: object, key: str) -> dict[str, str]:
        try:
            entries = self.table.manifest(mf).entries  # type: ignore[arg-type]
        except FileNotFoundInTableError:
            if not self.missing_ok:
                raise
            self.missing.append(key)
            return {}
        files: dict[str, str] = {}
        for e in entries:
            if e.status == STATUS_DELETED and not self.include_deleted:
                continue
            files[self.path(e.data_file.file_path)] = file_kind(e.data_file)
        return files

    def of_snapshots(self, snapshots: Iterable[Snapshot]) -> dict[str, str]:
        """Path -> kind of every file any of `snapshots` reaches."""
        out: dict[str, str] = {}
        for snap in snapshots:
            out.update(self.of_snapshot(snap))
        return out


def statistics_files(
    md: TableMetadata, snapshot_ids: Iterable[int] | None = None
) -> dict[str, tuple[str, int]]:
    """Recorded statistics paths -> (kind, snapshot id), for the given snapshots (all when None)."""
    wanted = None if snapshot_ids is None else set(snapshot_ids)
    out: dict[str, tuple[str, int]] = {}
    for s in md.statistics:
        if wanted is None or s.snapshot_id in wanted:
            out[s.statistics_path] = (STATISTICS, s.snapshot_id)
    for p in md.partition_statistics:
        if wanted is None or p.snapshot_id in wanted:
            out[p.statistics_path] = (PARTITION_STATISTICS, p.snapshot_id)
    return out


@dataclass(frozen=True, slots=True)
class MetadataReach:
    """Everything any metadata file of the table reaches (for orphan removal)."""

    files: dict[str, str]  # normalised actual path -> kind
    metadata_files: tuple[str, ...]
    missing: tuple[str, ...]  # referenced files that do not exist (skipped)
    unreadable: tuple[str, ...] = ()  # metadata files that exist but cannot be parsed


def reachable_from_all_metadata(table: Table) -> MetadataReach:
    """Every file reachable from the current metadata file and every metadata file in its log:
    metadata files, manifest lists, manifests, data, delete and Puffin files (DELETED entries
    included), statistics files, and the version hint. Missing files are skipped and listed."""
    reach = Reachability(table, include_deleted=True, missing_ok=True)
    files: dict[str, str] = {}
    missing: list[str] = []
    unreadable: list[str] = []
    metadatas: list[tuple[str, TableMetadata]] = [(reach.path(table.metadata_location), table.metadata)]
    for entry in table.metadata.metadata_log:
        path = reach.path(entry.metadata_file)
        try:
            data = table.io.read(path)
        except FileNotFoundInTableError:
            missing.append(path)
            continue
        try:
            metadatas.append((path, read_table_metadata(data, path=path)))
        except IcebergError:
            # It still counts as reached, but what it reaches is unknown: callers must stop.
            unreadable.append(path)
            files[path] = METADATA
    seen: set[int] = set()
    for path, md in metadatas:
        files[path] = METADATA
        for recorded, (kind, _sid) in statistics_files(md).items():
            files[reach.path(recorded)] = kind
        for snap in md.snapshots:
            if snap.snapshot_id in seen:
                continue
            seen.add(snap.snapshot_id)
            files.update(reach.of_snapshot(snap))
    hint = normalize_path(
        join_path(join_path(table.resolver.actual_location, "metadata"), "version-hint.text")
    )
    if table.io.exists(hint):
        files[hint] = VERSION_HINT
    missing.extend(reach.missing)
    return MetadataReach(
        files, tuple(p for p, _ in metadatas), tuple(sorted(set(missing))), tuple(unreadable)
    )
