"""Orphan files: files under the table location that no metadata reaches.

Planning lists the table location (`FileIO.list_prefix`, with sizes and modification times) and
subtracts everything reachable from any metadata (`reachability.reachable_from_all_metadata`: every
metadata file in the log, manifest lists, manifests, data, delete and Puffin files, statistics
files, the version hint), and Hadoop's checksum files of those (`.<name>.crc` beside `<name>`). What is left and older than `older_than` (default: 3 days ago) is an
orphan candidate; younger files may belong to a commit in flight and are never candidates.

Anomalies stop the whole run before anything is deleted:

* a listed file whose path equals a referenced path except for scheme or authority (the metadata
  may name it differently: `s3a://` against `s3://`, another bucket alias);
* a candidate whose real path (symlinks resolved) is outside the table location;
* a file named like table metadata (`*.metadata.json`) that describes another table (another table
  uuid): a table inside this one's folder that the catalog does not know (`neighbours`);
* a metadata file in the log that cannot be parsed (what it references is unknown);
* the current metadata file not found by the listing (the wrong folder was listed);
* at execution: a candidate that became referenced, or was modified after the window.

Files of other tables the catalog knows are never candidates (`neighbours`: a table whose location
is inside this one's, or one sharing the location and reaching the file); the plan counts them.

Execution re-plans on the current metadata, checks every candidate again (age, location,
reference), and only then deletes, recording each file as deleted, not_found, permission_denied
or other. A window shorter than one hour is refused unless `allow_recent` is given.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from iceduck.catalog.locate import is_metadata_file_name, table_folder_of
from iceduck.catalog.locations import key_is_under, location_key
from iceduck.errors import IcebergError, ValidationError
from iceduck.io.fileio import FileInfo, local_path
from iceduck.io.paths import base_name, is_under, normalize_path, split_scheme
from iceduck.io.storage import is_remote
from iceduck.maintenance.audit import Outcome
from iceduck.maintenance.expire import delete_files
from iceduck.maintenance.neighbours import Neighbours, foreign_metadata
from iceduck.maintenance.reachability import reachable_from_all_metadata
from iceduck.table import Table

DEFAULT_WINDOW_MS = 3 * 24 * 60 * 60 * 1000
_DELETE_BATCH = 1000  # S3's DeleteObjects limit; every file still gets its own outcome
MIN_WINDOW_MS = 60 * 60 * 1000


class OrphanAnomalyError(IcebergError):
    """Something about the listing or the metadata makes deleting unsafe; nothing was deleted."""


def _reach_key(path: str) -> str:
    """How a path is compared with the listing: normalised, and a local absolute path with its `..`
    segments taken as the file system takes them (`<t>/data/../data/f` is the listed `<t>/data/f`;
    an object key keeps its `..`, a literal segment on S3)."""
    norm = normalize_path(path)
    if split_scheme(norm)[0] is None and norm.startswith("/"):
        return posixpath.normpath(norm)
    return norm


def _path_part(path: str) -> str:
    """A path without scheme and authority (`s3://bucket/a/b` -> `/a/b`)."""
    scheme, rest = split_scheme(path)
    if scheme is None or scheme == "file":
        return _reach_key(path)
    if rest.startswith("//"):
        rest = "/" + rest[2:].partition("/")[2]
    return rest


def _inside(path: str, root: str) -> bool:
    return is_under(path, root, strict=True)  # the location guard: symlinks resolved, `..` and %2e%2e too


@dataclass(frozen=True, slots=True)
class OrphanPlan:
    """What orphan removal would delete."""

    plan_id: str
    location: str
    older_than_ms: int
    candidates: tuple[FileInfo, ...]  # as listed, the path normalised
    anomalies: tuple[str, ...]
    listed: int
    reachable: int
    recent: int  # unreferenced files too young to be candidates
    parameters: Mapping[str, Any] = field(default_factory=dict)
    other_tables: int = 0  # files left alone because another table owns them (see `neighbours`)

    @property
    def empty(self) -> bool:
        return not self.candidates

    def candidates_list(self) -> list[str]:
        return [c.path for c in self.candidates]


def plan_orphans(
    table: Table,
    *,
    now_ms: int,
    older_than_ms: int | None = None,
    allow_recent: bool = False,
    neighbours: Neighbours | None = None,
) -> OrphanPlan:
    """List orphan candidates of `table` (nothing is changed). `neighbours`: the other tables of the
    catalog; files they own are never candidates."""
    older = older_than_ms if older_than_ms is not None else now_ms - DEFAULT_WINDOW_MS
    if older > now_ms - MIN_WINDOW_MS and not allow_recent:
        raise ValidationError(
            f"{table.name or table.metadata_location}: older_than is less than an hour ago; files that young may "
            "belong to commits in flight (pass allow_recent to override)"
        )
    root = normalize_path(table.resolver.actual_location)
    reach = reachable_from_all_metadata(table)
    anomalies = [
        f"metadata file {p} cannot be parsed: what it references is unknown" for p in reach.unreadable
    ]
    by_part: dict[str, str] = {}
    reached = {_reach_key(p) for p in reach.files}
    for p in reach.files:
        by_part.setdefault(_path_part(p), p)
    candidates: list[FileInfo] = []
    listed = reachable = recent = other_tables = 0
    strangers: dict[str, list[str]] = {}
    current = normalize_path(table.metadata_location)
    seen_current = False
    unreferenced = []
    for info in table.io.list_prefix(root):
        listed += 1
        path = normalize_path(info.path)
        seen_current = seen_current or path == current
        if path in reach.files or _reach_key(path) in reached:
            reachable += 1
            continue
        live = checksum_sidecar_of(path)
        if live is not None and (live in reach.files or _reach_key(live) in reached):
            reachable += 1  # Hadoop's checksum of a live file (Spark, Java on a local or HDFS path)
            continue
        owner = neighbours.owner(path) if neighbours is not None else None
        if owner is not None:
            other_tables += 1
            continue
        foreign = _foreign_metadata(table, path)
        if foreign is not None:
            strangers.setdefault(foreign, []).append(path)
            continue
        unreferenced.append((path, info))
    # An unknown table's folder (where its metadata files are) is its own: nothing there is a candidate.
    stranger_roots = {location_key(table_folder_of(p)) for paths in strangers.values() for p in paths}
    for path, info in unreferenced:
        if stranger_roots and any(key_is_under(location_key(path), k) for k in stranger_roots):
            other_tables += 1
            continue
        twin = by_part.get(_path_part(path))
        if twin is not None:
            anomalies.append(f"{path} is referenced by the metadata as {twin} (scheme or authority differ)")
            continue
        if info.mtime_ms >= older:
            recent += 1
            continue
        if not _inside(path, root):
            anomalies.append(f"{path} resolves outside the table location {root}")
            continue
        candidates.append(FileInfo(path, info.size, info.mtime_ms))
    for what, paths in strangers.items():
        more = f" and {len(paths) - 1} more metadata file(s) of it" if len(paths) > 1 else ""
        anomalies.append(
            f"{paths[0]}{more} is the metadata of another table ({what}) that the catalog does not know: "
            "its files cannot be told from orphans"
        )
    if current.startswith(root + "/") and not seen_current:
        anomalies.append(f"the current metadata file {current} was not found under {root}")
    if listed and not reachable and reach.files:
        anomalies.append(f"none of the {len(reach.files)} files the metadata reaches were found under {root}")
    content = {
        "action": "remove_orphan_files",
        "table_uuid": str(table.metadata.table_uuid),
        "metadata": table.metadata_location,
        "candidates": [c.path for c in candidates],
    }
    plan_id = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]
    parameters = {"older_than_ms": older, "allow_recent": allow_recent, "location": root}
    return OrphanPlan(
        plan_id, root, older, tuple(candidates), tuple(anomalies), listed, reachable, recent, parameters,
        other_tables,
    )  # fmt: skip


def checksum_sidecar_of(path: str) -> str | None:
    """The file whose Hadoop checksum `path` is (`<dir>/.<name>.crc` -> `<dir>/<name>`), else None.
    Hadoop's local and HDFS file systems write one beside every file; Java's orphan removal never sees
    them (its listing hides them), so the checksum of a live file stays with it."""
    folder, _, name = path.rpartition("/")
    if not (name.startswith(".") and name.endswith(".crc")) or len(name) <= 5:
        return None
    return f"{folder}/{name[1:-4]}"


def _foreign_metadata(table: Table, path: str) -> str | None:
    if not is_metadata_file_name(base_name(path)):
        return None
    try:
        data = table.io.read(path)
    except (IcebergError, OSError):
        return None  # gone meanwhile
    return foreign_metadata(table, path, data)


@dataclass(slots=True)
class OrphanResult:
    """What orphan removal did."""

    outcomes: list[Outcome] = field(default_factory=list)
    anomalies: tuple[str, ...] = ()


def execute_orphans(
    load: Callable[[], Table],
    plan: OrphanPlan,
    *,
    now_ms: int,
    progress: Callable[[int, int, str], None] | None = None,
    neighbours: Callable[[Table], Neighbours] | None = None,
) -> OrphanResult:
    """Check every candidate of `plan` again on the current metadata (and, with `neighbours`, the
    other tables of the catalog as they are now), then delete them.

    Raises `OrphanAnomalyError` (nothing deleted) on any anomaly."""
    table = load()
    near = neighbours(table) if neighbours is not None else None
    fresh = plan_orphans(
        table, now_ms=now_ms, older_than_ms=plan.older_than_ms, allow_recent=True, neighbours=near
    )
    problems = list(fresh.anomalies)
    still = {c.path: c for c in fresh.candidates}
    reach = {_reach_key(p) for p in reachable_from_all_metadata(table).files}
    for c in plan.candidates:
        if _reach_key(c.path) in reach:
            problems.append(f"{c.path} is referenced by the table's metadata now")
            continue
        if not (table.io.exists(c.path) if is_remote(c.path) else os.path.lexists(local_path(c.path))):
            continue  # gone already: recorded as not_found below
        if c.path not in still:
            problems.append(f"{c.path} changed since it was planned (modified after the window?)")
            continue
        if not _inside(c.path, plan.location):
            problems.append(f"{c.path} resolves outside the table location {plan.location}")
            continue
        owner = near.owner(c.path) if near is not None else None
        if owner is not None:
            problems.append(f"{c.path} belongs to table {owner}")
    if problems:
        raise OrphanAnomalyError(
            f"{table.name or table.metadata_location}: orphan removal stopped, nothing deleted: "
            + "; ".join(problems)
        )
    result = OrphanResult()
    total = len(plan.candidates)
    if progress is not None:
        progress(0, total, "deleting orphan files")  # an interrupt seen here deletes nothing
    for start in range(0, total, _DELETE_BATCH):
        batch = [c.path for c in plan.candidates[start : start + _DELETE_BATCH]]
        for i, (path, (outcome, detail)) in enumerate(zip(batch, delete_files(table, batch), strict=True)):
            result.outcomes.append(Outcome(path, "orphan", outcome, detail))
            if progress is not None:
                progress(start + i + 1, total, "deleting orphan files")
    return result
