"""Snapshot expiry: retention by the spec's rules, then deleting only files nothing retained reaches.

Retention ("Snapshot Retention Policy" of the table spec), evaluated at one instant `now`:

1. refs other than `main` whose snapshot is older than their `max-ref-age-ms` (default: table
   property `history.expire.max-ref-age-ms`, unset = forever) are removed;
2. every remaining branch and tag keeps its snapshot;
3. every branch keeps its ancestors until one is both older than the branch's `max-snapshot-age-ms`
   and not among its first `min-snapshots-to-keep` (defaults: the `older_than` / `retain_last`
   arguments, else `history.expire.max-snapshot-age-ms` (5 days) and
   `history.expire.min-snapshots-to-keep` (1));
4. every other snapshot expires, except (as Java's `ExpireSnapshots` does) snapshots no ref reaches
   that are newer than the age cut-off: staged (write-audit-publish) snapshots survive until then.

Expiry removes the snapshots, the refs of step 1, their statistics entries and the snapshot-log
entries up to the last one naming an expired snapshot (an older entry would otherwise answer an
`as_of` query with the wrong snapshot). Then it deletes the files the expired snapshots reached
(manifest lists, manifests, data, delete, Puffin and statistics files) minus every file any retained
snapshot reaches, computed again from the metadata that was actually committed: a file shared by an
expired and a kept snapshot survives. A file of another table (`neighbours`: under the location of a
table nested inside this one, or reached by a table sharing the location) is never deleted; it is
recorded as `kept`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from iceduck.errors import IcebergError, ValidationError
from iceduck.io.paths import is_under
from iceduck.spec.snapshots import MAIN_BRANCH, Snapshot
from iceduck.spec.table_metadata import TableMetadata
from iceduck.table import Table

if TYPE_CHECKING:
    from iceduck.maintenance.audit import Outcome
    from iceduck.maintenance.neighbours import Neighbours

# The retention rule and the property names above are what health's thresholds read at startup
# (the SQL functions declare health's columns): the expiry's own machinery (reachability, the audit
# log's outcomes, the commit) is imported by the functions that run it.

MAX_SNAPSHOT_AGE_PROPERTY = "history.expire.max-snapshot-age-ms"
MIN_SNAPSHOTS_PROPERTY = "history.expire.min-snapshots-to-keep"
MAX_REF_AGE_PROPERTY = "history.expire.max-ref-age-ms"
DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 24 * 60 * 60 * 1000
DEFAULT_MIN_SNAPSHOTS = 1


def _int_property(md: TableMetadata, key: str, default: int | None) -> int | None:
    text = md.properties.get(key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValidationError(
            f"table {md.location}: property {key} must be an integer, not {text!r}"
        ) from None
    if value <= 0:
        raise ValidationError(f"table {md.location}: property {key} must be positive, not {value}")
    return value


@dataclass(frozen=True, slots=True)
class Retention:
    """Which snapshots and refs a table keeps at one instant."""

    retained: frozenset[int]
    expired: tuple[int, ...]  # oldest first
    removed_refs: tuple[str, ...]


def retention(
    md: TableMetadata, *, now_ms: int, older_than_ms: int | None = None, retain_last: int | None = None
) -> Retention:
    """Evaluate the retention policy (see the module docstring) at `now_ms`.

    `older_than_ms` (a timestamp) and `retain_last` replace the table-level defaults of
    `max-snapshot-age-ms` and `min-snapshots-to-keep`; refs with their own settings keep them.
    """
    if retain_last is not None and retain_last < 1:
        raise ValidationError(f"retain_last must be at least 1, not {retain_last}")
    default_age = _int_property(md, MAX_SNAPSHOT_AGE_PROPERTY, DEFAULT_MAX_SNAPSHOT_AGE_MS)
    assert default_age is not None
    default_cutoff = older_than_ms if older_than_ms is not None else now_ms - default_age
    default_min = (
        retain_last
        if retain_last is not None
        else _int_property(md, MIN_SNAPSHOTS_PROPERTY, DEFAULT_MIN_SNAPSHOTS)
    )
    assert default_min is not None
    default_ref_age = _int_property(md, MAX_REF_AGE_PROPERTY, None)
    retained: set[int] = set()
    removed: list[str] = []
    for name, ref in sorted(md.refs.items()):
        head = md.snapshot_by_id(ref.snapshot_id)
        if head is None:
            continue
        if name != MAIN_BRANCH:
            max_ref_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else default_ref_age
            if max_ref_age is not None and now_ms - head.timestamp_ms > max_ref_age:
                removed.append(name)
                continue
        retained.add(head.snapshot_id)
        if not ref.is_branch:
            continue
        cutoff = now_ms - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else default_cutoff
        keep = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else default_min
        for i, snap in enumerate(md.ancestors_of(head.snapshot_id)):
            if snap.timestamp_ms < cutoff and i >= keep:
                break
            retained.add(snap.snapshot_id)
    # Snapshots no ref reaches at all: kept while newer than the cut-off (staged snapshots).
    reachable: set[int] = set()
    for name, ref in md.refs.items():
        if name not in removed:
            reachable.update(s.snapshot_id for s in md.ancestors_of(ref.snapshot_id))
    for snap in md.snapshots:
        if snap.snapshot_id not in reachable and snap.timestamp_ms >= default_cutoff:
            retained.add(snap.snapshot_id)
    expired = tuple(
        s.snapshot_id
        for s in sorted(md.snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number))
        if s.snapshot_id not in retained
    )
    return Retention(frozenset(retained), expired, tuple(removed))


@dataclass(frozen=True, slots=True)
class ExpiredSnapshot:
    snapshot_id: int
    timestamp_ms: int
    operation: str | None


@dataclass(frozen=True, slots=True)
class ExpirePlan:
    """What an expiry would do, planned on one metadata file."""

    plan_id: str
    now_ms: int
    older_than_ms: int | None
    retain_last: int | None
    expired: tuple[ExpiredSnapshot, ...]
    removed_refs: tuple[str, ...]
    kept: int
    oldest_kept: ExpiredSnapshot | None
    files: tuple[tuple[str, str], ...]  # (path, kind) that become unreachable
    parameters: Mapping[str, Any] = field(default_factory=dict)
    others_files: tuple[tuple[str, str, str], ...] = ()  # (path, kind, table): unreachable, another table's

    @property
    def empty(self) -> bool:
        return not self.expired and not self.removed_refs

    @property
    def time_range(self) -> tuple[int, int] | None:
        if not self.expired:
            return None
        return min(s.timestamp_ms for s in self.expired), max(s.timestamp_ms for s in self.expired)

    def candidates(self) -> list[str]:
        return [f"snapshot:{s.snapshot_id}" for s in self.expired] + [f"ref:{r}" for r in self.removed_refs]


def unreachable_files(table: Table, expired: set[int], kept: set[int]) -> dict[str, str]:
    """Path -> kind of files the `expired` snapshots reach and no `kept` snapshot does, inside the
    table's location only (the location guard, `iceduck.io.paths.is_under`): metadata may name a
    manifest list, a manifest, a data or a statistics file anywhere, and what lies elsewhere is not
    this table's to delete."""
    from iceduck.maintenance.reachability import Reachability, statistics_files

    md = table.metadata
    snaps = {s.snapshot_id: s for s in md.snapshots}
    kept_reach = Reachability(table)  # a retained snapshot we cannot read stops everything
    gone_reach = Reachability(table, missing_ok=True)
    live = kept_reach.of_snapshots(snaps[i] for i in kept if i in snaps)
    dead = gone_reach.of_snapshots(snaps[i] for i in expired if i in snaps)
    kept_stats = {kept_reach.path(p) for p in statistics_files(md, kept)}
    for recorded, (kind, _sid) in statistics_files(md, expired).items():
        dead[gone_reach.path(recorded)] = kind
    root = table.resolver.actual_location
    return {
        p: k
        for p, k in dead.items()
        if p not in live and p not in kept_stats and is_under(p, root, strict=True)
    }


def plan_expire(
    table: Table,
    *,
    now_ms: int,
    older_than_ms: int | None = None,
    retain_last: int | None = None,
    neighbours: Neighbours | None = None,
) -> ExpirePlan:
    """Plan an expiry of `table` at `now_ms` (nothing is changed); files `neighbours` says are
    another table's are listed apart (they will be kept)."""
    md = table.metadata
    r = retention(md, now_ms=now_ms, older_than_ms=older_than_ms, retain_last=retain_last)
    by_id = {s.snapshot_id: s for s in md.snapshots}
    expired = tuple(_describe(by_id[i]) for i in r.expired)
    kept_snaps = sorted((by_id[i] for i in r.retained), key=lambda s: (s.timestamp_ms, s.sequence_number))
    files = unreachable_files(table, set(r.expired), set(r.retained)) if r.expired else {}
    others: list[tuple[str, str, str]] = []
    if neighbours is not None:
        for path, kind in list(files.items()):
            owner = neighbours.owner(path)
            if owner is not None:
                others.append((path, kind, owner))
                del files[path]
    parameters = {"older_than_ms": older_than_ms, "retain_last": retain_last, "now_ms": now_ms}
    content = {
        "action": "expire_snapshots",
        "table_uuid": str(md.table_uuid),
        "metadata": table.metadata_location,
        "expired": list(r.expired),
        "refs": list(r.removed_refs),
    }
    plan_id = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]
    return ExpirePlan(
        plan_id, now_ms, older_than_ms, retain_last, expired, r.removed_refs, len(kept_snaps),
        _describe(kept_snaps[0]) if kept_snaps else None, tuple(sorted(files.items())), parameters,
        tuple(sorted(others)),
    )  # fmt: skip


def _describe(s: Snapshot) -> ExpiredSnapshot:
    return ExpiredSnapshot(s.snapshot_id, s.timestamp_ms, s.operation)


@dataclass(slots=True)
class ExpireResult:
    """What an expiry did."""

    expired: tuple[int, ...] = ()
    removed_refs: tuple[str, ...] = ()
    metadata_location: str | None = None
    outcomes: list[Outcome] = field(default_factory=list)


def execute_expire(
    load: Callable[[], Table],
    commit: Callable[[Any, Table], Any],
    plan: ExpirePlan,
    *,
    progress: Callable[[int, int, str], None] | None = None,
    neighbours: Callable[[Table], Neighbours] | None = None,
) -> ExpireResult:
    """Commit the expiry of `plan` and delete the files that became unreachable, except files of
    other tables (`neighbours`: the catalog's other tables as they are after the commit).

    `load()` gives the table as it is now; `commit(change, base)` commits a change (a
    `TableCommitter.commit`). The snapshots expired are the planned ones that the policy still
    expires on the metadata being replaced (a ref created meanwhile protects its snapshots).
    """
    from iceduck.maintenance.audit import Outcome
    from iceduck.maintenance.commits import ExpireSnapshotsChange

    base = load()
    planned = {s.snapshot_id for s in plan.expired}

    def choose(md: TableMetadata) -> tuple[set[int], set[str]]:
        now = retention(
            md, now_ms=plan.now_ms, older_than_ms=plan.older_than_ms, retain_last=plan.retain_last
        )
        return planned & set(now.expired), set(plan.removed_refs) & set(now.removed_refs)

    change = ExpireSnapshotsChange(choose)
    result = ExpireResult()
    if progress is not None:
        # a step before the commit: an interrupt (Ctrl-C in SQL) seen here leaves the table as it was
        progress(0, 1, "expiring snapshots")
    commit_result = commit(change, base)
    result.expired = tuple(sorted(change.expired))
    result.removed_refs = tuple(sorted(change.removed_refs))
    result.metadata_location = commit_result.metadata_location
    for sid in result.expired:
        result.outcomes.append(Outcome(str(sid), "snapshot", "expired"))
    for name in result.removed_refs:
        result.outcomes.append(Outcome(name, "ref", "removed"))
    # Files: reached by what was expired, minus what the committed table (and anything newer) keeps.
    try:
        after = load()
        kept = {s.snapshot_id for s in after.metadata.snapshots}
        doomed = unreachable_files(_with_snapshots(base, after), set(result.expired), kept)
        near = neighbours(after) if neighbours is not None else None
    except IcebergError as e:
        # the expiry is committed; what cannot be proven unreachable stays (orphan removal finds it later)
        result.outcomes.append(Outcome("unreachable files", "files", "other", f"not deleted: {e}"))
        return result
    total = len(doomed)
    for i, (path, kind) in enumerate(sorted(doomed.items(), key=_deletion_order)):
        owner = near.owner(path) if near is not None else None
        if owner is not None:
            result.outcomes.append(Outcome(path, kind, "kept", f"belongs to table {owner}"))
        else:
            result.outcomes.append(Outcome(path, kind, *delete_file(after, path)))
        if progress is not None:
            progress(i + 1, total, "deleting files")
    return result


def _deletion_order(item: tuple[str, str]) -> tuple[int, str]:
    # Data first, then manifests, then manifest lists: a crash leaves the upper layers, which a
    # later orphan scan still follows down to anything left below them.
    rank = {"manifest_list": 3, "manifest": 2}.get(item[1], 1)
    return rank, item[0]


def _with_snapshots(base: Table, after: Table) -> Table:
    """`after`, with the expired snapshots of `base` still listed, so their files can be followed."""
    from iceduck.maintenance.commits import replace_metadata

    known = {s.snapshot_id for s in after.metadata.snapshots}
    extra = tuple(s for s in base.metadata.snapshots if s.snapshot_id not in known)
    stats = tuple(s for s in base.metadata.statistics if s.snapshot_id not in known)
    pstats = tuple(p for p in base.metadata.partition_statistics if p.snapshot_id not in known)
    md = replace_metadata(
        after.metadata,
        snapshots=(*after.metadata.snapshots, *extra),
        statistics=after.metadata.statistics + stats,
        partition_statistics=after.metadata.partition_statistics + pstats,
    )
    return Table(md, after.metadata_location, after.io, after.resolver, after.name)


_STATUS = {"deleted": "deleted", "not_found": "not_found", "denied": "permission_denied", "other": "other"}


def delete_files(table: Table, paths: list[str]) -> list[tuple[str, str | None]]:
    """Delete files in one batch (an object store's batch delete); (outcome, detail) per path, as
    `delete_file` words them: a batch that succeeded in part reports each file on its own."""
    try:
        found = table.io.delete_many(paths)
    except (OSError, IcebergError):
        return [delete_file(table, p) for p in paths]  # the batch call itself failed: one by one
    return [(_STATUS.get(o.status, "other"), o.detail or None) for o in found]


def delete_file(table: Table, path: str) -> tuple[str, str | None]:
    """Delete one file; (outcome, detail): deleted, not_found, permission_denied or other."""
    try:
        table.io.delete(path)
    except FileNotFoundError:
        return "not_found", None
    except PermissionError as e:
        return "permission_denied", str(e)
    except OSError as e:
        return "other", f"{type(e).__name__}: {e}"
    return "deleted", None
