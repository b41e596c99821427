"""Branches and tags: name a snapshot (`create_tag`, `create_branch`) or drop the name (`drop_ref`).

Each is one metadata-only commit of the spec's `set-snapshot-ref` / `remove-snapshot-ref` update, with
the requirement that the ref is where it was planned (absent, for a new one): two writers creating
the same name cannot both win. Writing to a branch other than `main` is not supported yet; reading
any ref is (`iceberg_scan(..., ref := 'name')`).
"""

from __future__ import annotations

from iceduck.errors import AlreadyExistsError, ValidationError
from iceduck.spec.snapshots import MAIN_BRANCH, SnapshotRef, SnapshotRefType
from iceduck.spec.table_metadata import TableMetadata
from iceduck.spec.updates import RemoveSnapshotRef, SetSnapshotRef, TableUpdate
from iceduck.transaction.changes import MetadataChange
from iceduck.transaction.commit import CommitResult, TableCommitter


def create_ref(
    committer: TableCommitter,
    name: str,
    kind: SnapshotRefType,
    snapshot_id: int | None = None,
    *,
    max_ref_age_ms: int | None = None,
    max_snapshot_age_ms: int | None = None,
    min_snapshots_to_keep: int | None = None,
) -> CommitResult:
    """Name snapshot `snapshot_id` (default: the current one) as a new branch or tag `name`."""
    if not name or name == MAIN_BRANCH:
        raise ValidationError(f"{committer.identifier}: {name!r} cannot be created as a {kind.value}")
    if kind == SnapshotRefType.TAG and (max_snapshot_age_ms is not None or min_snapshots_to_keep is not None):
        raise ValidationError(f"{committer.identifier}: a tag keeps no snapshots: only max_ref_age_ms applies")

    def plan(md: TableMetadata) -> list[TableUpdate]:
        if name in md.refs:
            raise AlreadyExistsError(f"{committer.identifier}: a branch or tag named {name!r} exists")
        target = snapshot_id if snapshot_id is not None else md.current_snapshot_id
        if target is None:
            raise ValidationError(f"{committer.identifier}: the table has no snapshot to name {name!r}")
        if all(s.snapshot_id != target for s in md.snapshots):
            raise ValidationError(f"{committer.identifier}: no snapshot {target} to name {name!r}")
        ref = SnapshotRef(target, kind, max_ref_age_ms, max_snapshot_age_ms, min_snapshots_to_keep)
        return [SetSnapshotRef(name, ref)]

    return committer.commit(MetadataChange(f"create-{kind.value}", plan), committer.load())


def drop_ref(committer: TableCommitter, name: str) -> CommitResult:
    """Remove branch or tag `name` (not `main`); its snapshots stay until expiry."""
    if name == MAIN_BRANCH:
        raise ValidationError(f"{committer.identifier}: the main branch cannot be dropped")

    def plan(md: TableMetadata) -> list[TableUpdate]:
        if name not in md.refs:
            raise ValidationError(f"{committer.identifier}: no branch or tag named {name!r}")
        return [RemoveSnapshotRef(name)]

    return committer.commit(MetadataChange("drop-ref", plan), committer.load())
