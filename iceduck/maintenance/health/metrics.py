"""Health metrics: what `measure` reads from a table's metadata (never a data file).

The current snapshot's files, and which deletes apply to each, come from the shared scan plan
(`scan.planner.plan_scan`), so health counts by the rules a read applies. `METRICS` (in
`model`) names the metrics in the order `iceberg_health` shows them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iceduck.errors import IcebergError
from iceduck.maintenance.expire import retention
from iceduck.maintenance.health.model import AT_RISK, METRIC_NAMES, Reason
from iceduck.maintenance.health.thresholds import DAY_MS, Thresholds
from iceduck.maintenance.reachability import file_kind
from iceduck.read.deletes import file_deletes, positions_of
from iceduck.scan.deletes import KIND_DV, KIND_EQUALITY, KIND_POSITION
from iceduck.scan.planner import ScanPlan, plan_scan
from iceduck.spec.manifest import CONTENT_DATA, STATUS_DELETED, DataFile, ManifestEntry
from iceduck.table import Table
from iceduck.transaction import content_size


def percentile(values: Sequence[float], q: float) -> float | None:
    """The `q`th percentile of `values` (None when empty)."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if len(values) else None


def partition_text(table: Table, d: DataFile) -> tuple[tuple[str, str | None], ...]:
    """The partition of `d` as (field name, human-readable value) pairs."""
    md = table.metadata
    spec = md.spec_by_id(d.spec_id)
    if spec is None:
        return tuple((f"field_{i}", None if v is None else str(v)) for i, v in enumerate(d.partition))
    out = []
    for pf, value in zip(spec.fields, d.partition, strict=False):
        text: str | None = None
        if value is not None:
            source = md.schema.find_type(pf.source_ids[0]) if len(pf.source_ids) == 1 else None
            try:
                text = pf.transform.to_human(source, value) if source is not None else str(value)
            except Exception:  # an oddly encoded value must not hide the report
                text = str(value)
        out.append((pf.name, text))
    return tuple(out)


@dataclass(slots=True)
class Part:
    """The live data files of one partition, as health counts them."""

    spec_id: int
    partition: tuple[Any, ...]
    sizes: list[int] = field(default_factory=list)
    records: int = 0
    deleted: int = 0
    shares: list[float] = field(default_factory=list)
    delete_files: int = 0
    dvs: int = 0
    last_ms: int | None = None
    sample: DataFile | None = None


def compactable(sizes: Sequence[int], th: Thresholds) -> int:
    """Files a bin-pack rewrite removes in a partition with these data file sizes."""
    small = [s for s in sizes if s < th.min_file_size]
    total = sum(small)
    if len(small) < 2 or (len(small) < th.min_input_files and total < th.target_file_size):
        return 0
    return max(0, len(small) - max(1, math.ceil(total / th.target_file_size)))


def _deleted_rows(table: Table, plan: ScanPlan | None) -> dict[str, int]:
    """Deleted rows per data file path, from the deletes the planner applies to each file.

    A file with only a DV takes the DV's cardinality (checked against the Puffin blob when read).
    A file with position-delete files takes the positions those files really name for it, read
    through the scan's own reader: a v2 position-delete file without `referenced_data_file` names
    several files, and its record count says nothing about any one of them (Java and PyIceberg
    writers leave the field unset), and two files may delete the same position."""
    out: dict[str, int] = {}
    match_key = table.resolver.match_key
    for task in plan.tasks if plan is not None else ():
        if any(d.kind == KIND_POSITION for d in task.deletes):
            fd = file_deletes(
                task.key, task.record_count, task.deletes, table.resolve, table.resolve(task.path)
            )
            n = 0 if fd is None else len(positions_of(fd, key=match_key, io=table.io))
        else:
            n = sum(d.file.record_count for d in task.deletes if d.kind == KIND_DV)
        if n:
            out[task.path] = min(n, task.record_count)
    return out


def _equality_targets(plan: ScanPlan | None) -> int:
    """Data files an equality delete applies to (by the planner's rules)."""
    tasks = plan.tasks if plan is not None else ()
    return sum(1 for t in tasks if any(d.kind == KIND_EQUALITY for d in t.deletes))


@dataclass(frozen=True, slots=True)
class Measured:
    """What `measure` found: the metrics (`METRIC_NAMES`, None where unknown), the AT_RISK reasons
    met while reading (metadata that cannot be read), and the live data files by partition."""

    metrics: dict[str, Any]
    risks: tuple[Reason, ...]
    parts: Mapping[tuple[int, tuple[Any, ...]], Part]


def measure(table: Table, th: Thresholds, now: int) -> Measured:
    """The metrics of `table` at `now` from its metadata alone. The current snapshot's files and
    the deletes each one needs come from the planner (`plan_scan`: the rules a read applies)."""
    md = table.metadata
    m: dict[str, Any] = dict.fromkeys(METRIC_NAMES)
    risks: list[Reason] = []
    snap = md.current_snapshot()
    m["format_version"] = md.format_version
    m["target_file_size"] = th.target_file_size

    # -- snapshots, commits, refs, metadata file
    m["current_snapshot_id"] = snap.snapshot_id if snap else None
    m["current_snapshot_age_s"] = (now - snap.timestamp_ms) / 1000 if snap else None
    m["snapshots"] = len(md.snapshots)
    recent = [s for s in md.snapshots if s.timestamp_ms >= now - DAY_MS]
    m["snapshots_last_24h"] = len(recent)
    m["commits_last_24h"] = sum(1 for e in md.metadata_log if e.timestamp_ms >= now - DAY_MS) + (
        1 if md.last_updated_ms >= now - DAY_MS else 0
    )
    m["operations"] = _ops(md.snapshots)
    m["operations_last_24h"] = _ops(recent)
    if md.snapshots:
        oldest = min(md.snapshots, key=lambda s: s.timestamp_ms)
        m["oldest_snapshot_id"] = oldest.snapshot_id
        m["oldest_snapshot_age_s"] = (now - oldest.timestamp_ms) / 1000
    try:
        grace_cutoff = now - int(th.max_snapshot_age_ms * (1 + th.expire_grace))
        m["expirable_snapshots"] = len(retention(md, now_ms=now, older_than_ms=grace_cutoff).expired)
    except IcebergError as err:
        risks.append(
            Reason(AT_RISK, "snapshots", "expirable_snapshots", 0, 0, f"retention cannot be evaluated: {err}")
        )
    m["branches"] = sum(1 for r in md.refs.values() if r.is_branch)
    m["tags"] = sum(1 for r in md.refs.values() if not r.is_branch)
    try:
        m["metadata_json_bytes"] = table.io.size(table.metadata_location)
    except (IcebergError, OSError):
        m["metadata_json_bytes"] = None
    m["previous_metadata_versions"] = len(md.metadata_log)

    # -- files of the current snapshot
    # The files and the deletes each one needs come from the planner (the rules a read applies).
    data: list[ManifestEntry] = []
    deletes: list[ManifestEntry] = []
    manifests = []
    manifest_live: list[int] = []
    plan: ScanPlan | None = None
    try:
        manifests = list(table.manifests(snap))
        for mf in manifests:
            manifest_live.append(sum(1 for e in table.manifest(mf).entries if e.status != STATUS_DELETED))
        plan = plan_scan(table, snap, schema=md.schema)
        data = [t.entry for t in plan.tasks]
        deletes = [d.entry for d in (plan.deletes.deletes if plan.deletes else ()) if d.entry is not None]
    except IcebergError as err:
        risks.append(
            Reason(AT_RISK, "metadata", "readable", 0, 1, f"the current snapshot cannot be read: {err}")
        )
        manifests = manifests[: len(manifest_live)]  # the ones that could be read
    sizes = [e.data_file.file_size_in_bytes for e in data]
    records = sum(e.data_file.record_count for e in data)
    deleted_by_file: dict[str, int] = {}
    try:
        deleted_by_file = _deleted_rows(table, plan)
    except IcebergError as err:
        risks.append(
            Reason(
                AT_RISK, "metadata", "readable", 0, 1, f"the current snapshot's deletes cannot be read: {err}"
            )
        )
    deleted_rows = sum(deleted_by_file.values())
    m["data_files"] = len(data)
    m["data_bytes"] = sum(sizes)
    m["records"] = records
    m["delete_files"] = len(deletes)
    m["delete_bytes"] = sum(content_size(e.data_file) for e in deletes)
    kinds = [file_kind(e.data_file) for e in deletes]
    m["dv_count"] = kinds.count("deletion_vectors")
    m["position_delete_files"] = kinds.count("position_deletes")
    m["equality_delete_files"] = kinds.count("equality_deletes")
    m["deleted_rows"] = deleted_rows
    m["file_size_min"] = min(sizes) if sizes else None
    m["file_size_max"] = max(sizes) if sizes else None
    m["file_size_p10"] = percentile(sizes, 10)
    m["file_size_p50"] = percentile(sizes, 50)
    m["file_size_p90"] = percentile(sizes, 90)
    m["small_file_share"] = (sum(1 for s in sizes if s < th.target_file_size) / len(sizes)) if sizes else 0.0
    m["small_files"] = sum(1 for s in sizes if s < th.min_file_size)
    m["oversized_files"] = sum(1 for s in sizes if s > th.target_file_size * 1.8)
    # A v3 table's DVs are at most one per data file (the spec's rule), so one DV per file is the
    # normal state after a DELETE, not debt: their cost is the deleted share, measured below. What
    # piles up and slows reads is position and equality delete files, several per data file.
    merged = len(deletes) - m["dv_count"]
    m["delete_file_ratio"] = merged / len(data) if data else float(merged)
    m["deleted_row_share"] = deleted_rows / records if records else 0.0
    shares = [
        deleted_by_file.get(e.data_file.file_path, 0) / e.data_file.record_count
        for e in data
        if e.data_file.record_count
    ]
    m["deleted_share_p50"] = percentile(shares, 50)
    m["deleted_share_p90"] = percentile(shares, 90)
    m["deleted_share_max"] = max(shares) if shares else None
    m["files_over_delete_threshold"] = sum(1 for s in shares if s >= th.delete_ratio_threshold and s > 0)
    m["files_with_equality_deletes"] = _equality_targets(plan)

    # -- partitions
    parts: dict[tuple[int, tuple[Any, ...]], Part] = {}
    for e in data:
        d = e.data_file
        key = (d.spec_id, tuple(repr(v) for v in d.partition))
        p = parts.get(key)
        if p is None:
            p = parts[key] = Part(d.spec_id, d.partition, sample=d)
        p.sizes.append(d.file_size_in_bytes)
        p.records += d.record_count
        n = deleted_by_file.get(d.file_path, 0)
        p.deleted += n
        p.shares.append(n / d.record_count if d.record_count else 0.0)
        snap_of = md.snapshot_by_id(e.snapshot_id) if e.snapshot_id is not None else None
        if snap_of is not None and (p.last_ms is None or snap_of.timestamp_ms > p.last_ms):
            p.last_ms = snap_of.timestamp_ms
    for e in deletes:
        d = e.data_file
        p = parts.get((d.spec_id, tuple(repr(v) for v in d.partition)))
        if p is not None:
            p.delete_files += 1
            p.dvs += file_kind(d) == "deletion_vectors"
    m["compactable_files"] = sum(compactable(p.sizes, th) for p in parts.values())
    m["partitions"] = len(parts)

    # -- manifests
    mbytes = [mf.manifest_length for mf in manifests]
    m["manifests"] = len(manifests)
    m["data_manifests"] = sum(1 for mf in manifests if mf.content == 0)
    m["delete_manifests"] = sum(1 for mf in manifests if mf.content != 0)
    m["manifest_bytes"] = sum(mbytes)
    m["manifest_size_p50"] = percentile(mbytes, 50)
    m["manifest_size_p90"] = percentile(mbytes, 90)
    m["entries_per_manifest_p10"] = percentile(manifest_live, 10)
    m["entries_per_manifest_p50"] = percentile(manifest_live, 50)
    m["entries_per_manifest_p90"] = percentile(manifest_live, 90)
    m["empty_manifests"] = sum(1 for n in manifest_live if n == 0)
    m["excess_manifests"] = _excess_manifests(manifests, manifest_live, th)

    # -- across every snapshot, each file once
    try:
        _all_files(table, m)
    except IcebergError as err:
        risks.append(
            Reason(AT_RISK, "metadata", "readable", 0, 1, f"a snapshot's metadata cannot be read: {err}")
        )
    m["storage_amplification"] = (
        (m["all_data_bytes"] / m["data_bytes"]) if m["data_bytes"] and m["all_data_bytes"] else None
    )

    m["statistics_snapshot_id"], m["statistics_stale_share"] = statistics_staleness(table, snap)
    return Measured(m, tuple(risks), parts)


def _summary_int(summary: Mapping[str, str], key: str) -> int:
    try:
        return int(summary.get(key, 0))
    except ValueError:
        return 0


def statistics_staleness(table: Table, snap: Any) -> tuple[int | None, float | None]:
    """The snapshot the current snapshot's newest statistics describe (itself or an ancestor) and the
    share of rows changed since (rows the commits after it added, removed with their files or deleted
    by position or equality deletes, from their summaries, over the rows it had); (None, None) for a table without statistics."""
    if snap is None:
        return None, None
    by_snapshot = {s.snapshot_id for s in table.metadata.statistics}
    changed = 0
    for s in table.metadata.ancestors_of(snap.snapshot_id):
        if s.snapshot_id in by_snapshot:
            base = _summary_int(s.summary, "total-records")
            return s.snapshot_id, changed / base if base else float(changed > 0)
        changed += sum(
            _summary_int(s.summary, k)
            for k in ("added-records", "deleted-records", "added-position-deletes", "added-equality-deletes")
        )
    return None, None


def _ops(snapshots: Iterable[Any]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for s in snapshots:
        op = s.operation or "unknown"
        counts[op] = counts.get(op, 0) + 1
    return sorted(counts.items())


def _excess_manifests(manifests: Sequence[Any], live: Sequence[int], th: Thresholds) -> int:
    groups: dict[tuple[int, int], list[int]] = {}
    empty = 0
    for mf, n in zip(manifests, live, strict=True):
        if n == 0:
            empty += 1
            continue
        groups.setdefault((mf.content, mf.partition_spec_id), []).append(mf.manifest_length)
    excess = empty
    for lengths in groups.values():
        excess += max(0, len(lengths) - max(1, math.ceil(sum(lengths) / th.manifest_target_size)))
    return excess


def _all_files(table: Table, m: dict[str, Any]) -> None:
    seen_manifests: dict[str, int] = {}
    # Counted as `delete_files`/`delete_bytes` count the current snapshot's: a DV is one delete
    # file (its blob's bytes), however many share a Puffin file, so "every snapshot" >= "current".
    files: dict[tuple[str, int | None], tuple[bool, int]] = {}  # (path, DV offset) -> (is data, bytes)
    for snap in table.metadata.snapshots:
        for mf in table.manifests(snap):
            if mf.manifest_path in seen_manifests:
                continue
            seen_manifests[mf.manifest_path] = mf.manifest_length
            for e in table.manifest(mf).entries:
                if e.status == STATUS_DELETED:
                    continue
                d = e.data_file
                if d.content == CONTENT_DATA:
                    files[(d.file_path, None)] = (True, d.file_size_in_bytes)
                else:
                    files[(d.file_path, d.content_offset)] = (False, content_size(d))
    m["all_data_files"] = sum(1 for is_data, _ in files.values() if is_data)
    m["all_data_bytes"] = sum(n for is_data, n in files.values() if is_data)
    m["all_delete_files"] = sum(1 for is_data, _ in files.values() if not is_data)
    m["all_delete_bytes"] = sum(n for is_data, n in files.values() if not is_data)
    m["all_manifests"] = len(seen_manifests)
    m["all_manifest_bytes"] = sum(seen_manifests.values())
