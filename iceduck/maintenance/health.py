"""Table health from metadata alone: metrics, a state, the concrete reasons, and what to do.

`compute_health(table)` reads the metadata file, manifest lists and manifests (never a data file)
and reports, for the current snapshot: snapshots and commits in the last 24 h and the operation
mix; data and delete files (count, bytes); data file size distribution (p10/p50/p90) and the share
below the target size; delete-to-data ratios (files and rows) and the deleted-row share per data
file (DV cardinality / record count); manifests (count, bytes, entries per manifest); the
metadata.json size and previous versions kept; the oldest snapshot and refs; and, across every
snapshot (`all_*`), each physical file counted once. Per partition: the same where it applies.

State (most severe wins), each with reasons naming the check, the value and the threshold:

* `AT_RISK`: a check passed its risk threshold (reads or commits are in danger), or metadata that
  a retained snapshot needs cannot be read;
* `MAINTENANCE_BLOCKED`: maintenance is due but the action that fixes it cannot run (equality
  deletes apply to the files to rewrite; a partition transform iceduck cannot write);
* `MAINTENANCE_DUE`: a check passed its due threshold;
* `DEBT_GROWING`: nothing is due yet, but the recorded health history (`health_log`) shows a check
  heading for its due threshold within the trend horizon;
* `HEALTHY`.

Checks and thresholds (table properties, else the defaults in `THRESHOLDS`):

| check | metric | due | at risk |
|---|---|---|---|
| small_files | compactable_files | >= max-compactable-files, or share >= max-compactable-share | x risk-factor |
| deleted_rows | deleted_row_share | >= max-deleted-row-share | >= 0.5 |
| delete_files | delete_file_ratio | >= max-delete-file-ratio | >= 1.0 |
| manifests | excess_manifests | >= commit.manifest.min-count-to-merge | x risk-factor |
| snapshots | expirable_snapshots | >= 1 (older than max age x (1 + expire-grace)) | - |
| metadata_size | metadata_json_bytes | >= max-metadata-json-bytes | x risk-factor |

A partition's *compactable files* are its files below the minimum size (75% of
`write.target-file-size-bytes`) minus the files they would pack into, counted only where a
rewrite would pick them (at least `min-input-files` of them, or enough bytes for a target-size
file): exactly what `rewrite_data_files` bin-packs.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from iceduck.errors import IcebergError
from iceduck.maintenance.expire import (
    DEFAULT_MAX_SNAPSHOT_AGE_MS,
    DEFAULT_MIN_SNAPSHOTS,
    MAX_SNAPSHOT_AGE_PROPERTY,
    MIN_SNAPSHOTS_PROPERTY,
    retention,
)
from iceduck.maintenance.reachability import file_kind
from iceduck.maintenance.store import now_ms as _now_ms
from iceduck.maintenance.store import table_key
from iceduck.scan.deletes import KIND_DV, KIND_EQUALITY, KIND_POSITION, referenced_path
from iceduck.scan.planner import ScanPlan, plan_scan
from iceduck.spec.manifest import CONTENT_DATA, STATUS_DELETED, DataFile, ManifestEntry
from iceduck.spec.table_metadata import TableMetadata
from iceduck.table import Table
from iceduck.vocabulary import quote_str

HEALTHY = "HEALTHY"
DEBT_GROWING = "DEBT_GROWING"
MAINTENANCE_DUE = "MAINTENANCE_DUE"
MAINTENANCE_BLOCKED = "MAINTENANCE_BLOCKED"
AT_RISK = "AT_RISK"
STATES = (HEALTHY, DEBT_GROWING, MAINTENANCE_DUE, MAINTENANCE_BLOCKED, AT_RISK)  # by severity
SEVERITY = {s: i for i, s in enumerate(STATES)}

DAY_MS = 24 * 60 * 60 * 1000
TARGET_FILE_SIZE_PROPERTY = "write.target-file-size-bytes"
DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024

# (attribute, table property, default, meaning). Defaults: Java's where Java has the setting.
THRESHOLDS: tuple[tuple[str, str, float, str], ...] = (
    ("target_file_size", TARGET_FILE_SIZE_PROPERTY, DEFAULT_TARGET_FILE_SIZE, "data file target size, bytes"),
    (
        "min_file_size",
        "iceduck.health.min-file-size-bytes",
        -1,
        "files below are small (default 75% of the target)",
    ),
    (
        "min_input_files",
        "iceduck.health.min-input-files",
        5,
        "small files a partition needs before compacting",
    ),
    ("max_compactable_files", "iceduck.health.max-compactable-files", 100, "compactable files: due at"),
    (
        "max_compactable_share",
        "iceduck.health.max-compactable-share",
        0.5,
        "compactable share of files: due at",
    ),
    (
        "delete_ratio_threshold",
        "iceduck.health.delete-ratio-threshold",
        0.3,
        "deleted share making a file worth rewriting",
    ),
    ("max_deleted_row_share", "iceduck.health.max-deleted-row-share", 0.1, "deleted rows / rows: due at"),
    (
        "max_delete_file_ratio",
        "iceduck.health.max-delete-file-ratio",
        0.25,
        "delete files / data files: due at",
    ),
    (
        "manifest_target_size",
        "commit.manifest.target-size-bytes",
        8 * 1024 * 1024,
        "manifest target size, bytes",
    ),
    (
        "max_excess_manifests",
        "commit.manifest.min-count-to-merge",
        100,
        "manifests above the packed count: due at",
    ),
    ("max_snapshot_age_ms", MAX_SNAPSHOT_AGE_PROPERTY, DEFAULT_MAX_SNAPSHOT_AGE_MS, "snapshot retention, ms"),
    (
        "min_snapshots_to_keep",
        MIN_SNAPSHOTS_PROPERTY,
        DEFAULT_MIN_SNAPSHOTS,
        "snapshots kept whatever their age",
    ),
    ("expire_grace", "iceduck.health.expire-grace", 0.2, "expiry is due this fraction past the retention"),
    (
        "max_metadata_bytes",
        "iceduck.health.max-metadata-json-bytes",
        8 * 1024 * 1024,
        "metadata.json size: due at",
    ),
    ("risk_factor", "iceduck.health.risk-factor", 10, "count thresholds times this: at risk"),
    ("trend_window_ms", "iceduck.health.trend-window-ms", 7 * DAY_MS, "history used for trends, ms"),
    ("trend_horizon_ms", "iceduck.health.trend-horizon-ms", 7 * DAY_MS, "debt growing if due within, ms"),
)


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The thresholds health uses for one table (see `THRESHOLDS`)."""

    target_file_size: int
    min_file_size: int
    min_input_files: int
    max_compactable_files: int
    max_compactable_share: float
    delete_ratio_threshold: float
    max_deleted_row_share: float
    max_delete_file_ratio: float
    manifest_target_size: int
    max_excess_manifests: int
    max_snapshot_age_ms: int
    min_snapshots_to_keep: int
    expire_grace: float
    max_metadata_bytes: int
    risk_factor: float
    trend_window_ms: int
    trend_horizon_ms: int

    @classmethod
    def of(cls, md: TableMetadata) -> Thresholds:
        values: dict[str, Any] = {}
        for attr, key, default, _ in THRESHOLDS:
            text = md.properties.get(key)
            kind = float if isinstance(default, float) else int
            try:
                values[attr] = kind(text) if text is not None else kind(default)
            except ValueError:
                values[attr] = kind(default)  # a bad property must not hide the health report
        if values["min_file_size"] < 0:
            values["min_file_size"] = int(values["target_file_size"] * 0.75)
        return cls(**values)


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a table is in its state: which check, which value, which threshold."""

    state: str
    check: str
    metric: str
    value: float
    threshold: float
    message: str

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "check": self.check,
            "metric": self.metric,
            "value": self.value,
            "threshold": self.threshold,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class RecommendedAction:
    """A maintenance action that addresses some reasons, with the parameters to run it with."""

    action: str  # rewrite_data_files, rewrite_manifests, expire_snapshots
    parameters: Mapping[str, Any]
    because: tuple[str, ...]

    def sql(self, table: str) -> str:
        """The SQL that runs it (a real run)."""
        args = "".join(f", {k} := {_sql_value(v)}" for k, v in self.parameters.items())
        return f"SELECT * FROM iceberg_{self.action}({_sql_value(table)}{args}, dry_run := false)"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "parameters": dict(self.parameters), "because": list(self.because)}


def _sql_value(v: Any) -> str:
    if isinstance(v, str):
        return quote_str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v)


@dataclass(frozen=True, slots=True)
class PartitionHealth:
    """Health metrics of one partition (of one spec)."""

    spec_id: int
    partition: tuple[tuple[str, str | None], ...]
    data_files: int
    data_bytes: int
    records: int
    file_size_p10: float | None
    file_size_p50: float | None
    file_size_p90: float | None
    small_files: int
    compactable_files: int
    delete_files: int
    dv_count: int
    deleted_rows: int
    deleted_row_share: float
    deleted_share_max: float
    files_over_delete_threshold: int
    last_updated_ms: int | None
    state: str
    reasons: tuple[str, ...]

    @property
    def debt(self) -> int:
        """Files a rewrite would touch here (the worst partitions first)."""
        return self.compactable_files + self.files_over_delete_threshold


@dataclass(frozen=True, slots=True)
class Health:
    """A table's health at one instant."""

    table: str | None
    table_uuid: str
    metadata_location: str
    computed_ms: int
    state: str
    reasons: tuple[Reason, ...]
    actions: tuple[RecommendedAction, ...]
    metrics: Mapping[str, Any]
    partitions: tuple[PartitionHealth, ...] = ()
    thresholds: Thresholds | None = None

    def to_json(self) -> dict[str, Any]:
        """The record kept in the health log and the audit log (partitions left out)."""
        return {
            "table": self.table,
            "table_uuid": self.table_uuid,
            "metadata_location": self.metadata_location,
            "computed_ms": self.computed_ms,
            "state": self.state,
            "reasons": [r.to_json() for r in self.reasons],
            "actions": [a.to_json() for a in self.actions],
            "metrics": dict(self.metrics),
        }


# -- metrics ----------------------------------------------------------------------------------------

# (name, Arrow type, meaning): the columns of iceberg_health after the fixed ones, in order.
METRICS: tuple[tuple[str, pa.DataType, str], ...] = (
    ("format_version", pa.int32(), "table format version"),
    ("current_snapshot_id", pa.int64(), "head of main"),
    ("current_snapshot_age_s", pa.float64(), "seconds since the current snapshot was committed"),
    ("snapshots", pa.int64(), "snapshots in the metadata"),
    ("snapshots_last_24h", pa.int64(), "snapshots committed in the last 24 hours"),
    ("commits_last_24h", pa.int64(), "metadata files written in the last 24 hours (any change)"),
    ("operations", pa.map_(pa.string(), pa.int64()), "snapshot operations, all snapshots"),
    ("operations_last_24h", pa.map_(pa.string(), pa.int64()), "snapshot operations, last 24 hours"),
    ("oldest_snapshot_id", pa.int64(), "oldest snapshot kept"),
    ("oldest_snapshot_age_s", pa.float64(), "its age in seconds"),
    ("expirable_snapshots", pa.int64(), "snapshots past retention (with the grace) that expiry would remove"),
    ("branches", pa.int64(), "branches (main included)"),
    ("tags", pa.int64(), "tags"),
    ("metadata_json_bytes", pa.int64(), "size of the current metadata file"),
    ("previous_metadata_versions", pa.int64(), "metadata files kept in the metadata log"),
    ("data_files", pa.int64(), "live data files"),
    ("data_bytes", pa.int64(), "their bytes"),
    ("records", pa.int64(), "rows in live data files (before deletes)"),
    ("delete_files", pa.int64(), "live delete files (DVs, position and equality delete files)"),
    ("delete_bytes", pa.int64(), "their bytes (a DV counts its blob)"),
    ("dv_count", pa.int64(), "deletion vectors"),
    ("position_delete_files", pa.int64(), "position delete files (not DVs)"),
    ("equality_delete_files", pa.int64(), "equality delete files"),
    ("deleted_rows", pa.int64(), "rows deleted by DVs and position deletes (equality deletes not counted)"),
    ("file_size_min", pa.int64(), "smallest data file"),
    ("file_size_p10", pa.float64(), "10th percentile data file size"),
    ("file_size_p50", pa.float64(), "median data file size"),
    ("file_size_p90", pa.float64(), "90th percentile data file size"),
    ("file_size_max", pa.int64(), "largest data file"),
    ("target_file_size", pa.int64(), "write.target-file-size-bytes"),
    ("small_file_share", pa.float64(), "share of data files below the target size"),
    ("small_files", pa.int64(), "data files below the minimum size (75% of target)"),
    ("compactable_files", pa.int64(), "files a bin-pack rewrite would remove"),
    ("oversized_files", pa.int64(), "data files above 180% of the target size"),
    ("delete_file_ratio", pa.float64(), "delete files / data files"),
    ("deleted_row_share", pa.float64(), "deleted rows / rows"),
    ("deleted_share_p50", pa.float64(), "median per-file deleted share (DV cardinality / record count)"),
    ("deleted_share_p90", pa.float64(), "90th percentile per-file deleted share"),
    ("deleted_share_max", pa.float64(), "highest per-file deleted share"),
    ("files_over_delete_threshold", pa.int64(), "data files whose deleted share reaches the threshold"),
    ("files_with_equality_deletes", pa.int64(), "data files equality deletes apply to"),
    ("manifests", pa.int64(), "manifests of the current snapshot"),
    ("data_manifests", pa.int64(), "data manifests"),
    ("delete_manifests", pa.int64(), "delete manifests"),
    ("manifest_bytes", pa.int64(), "their bytes"),
    ("manifest_size_p50", pa.float64(), "median manifest size"),
    ("manifest_size_p90", pa.float64(), "90th percentile manifest size"),
    ("entries_per_manifest_p10", pa.float64(), "10th percentile entries per manifest"),
    ("entries_per_manifest_p50", pa.float64(), "median entries per manifest"),
    ("entries_per_manifest_p90", pa.float64(), "90th percentile entries per manifest"),
    ("empty_manifests", pa.int64(), "manifests without live entries"),
    ("excess_manifests", pa.int64(), "manifests above what packing by target size would need"),
    ("partitions", pa.int64(), "partitions with live data files"),
    ("all_data_files", pa.int64(), "data files any snapshot reaches (each counted once)"),
    ("all_data_bytes", pa.int64(), "their bytes"),
    ("all_delete_files", pa.int64(), "delete files any snapshot reaches"),
    ("all_delete_bytes", pa.int64(), "their bytes"),
    ("all_manifests", pa.int64(), "manifests any snapshot reaches"),
    ("all_manifest_bytes", pa.int64(), "their bytes"),
    ("storage_amplification", pa.float64(), "all_data_bytes / data_bytes"),
)
METRIC_NAMES = tuple(m[0] for m in METRICS)


def _pct(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if len(values) else None


def _partition_text(table: Table, d: DataFile) -> tuple[tuple[str, str | None], ...]:
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
class _Part:
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


def _deleted_rows(plan: ScanPlan | None) -> tuple[dict[str, int], int]:
    """Deleted rows per data file path, from the deletes the planner applies to each file (a DV,
    else the position-delete files that name it alone: their record counts); plus the rows of the
    position-delete files scoped by partition that apply somewhere (they name several files, so
    their rows cannot be attributed from metadata; each such file counts once)."""
    out: dict[str, int] = {}
    shared: dict[tuple[str, int | None], int] = {}
    for task in plan.tasks if plan is not None else ():
        n = 0
        for d in task.deletes:
            if d.kind == KIND_DV or (d.kind == KIND_POSITION and referenced_path(d.file) is not None):
                n += d.file.record_count
            elif d.kind == KIND_POSITION:
                shared[(d.path, d.file.content_offset)] = d.file.record_count
        if n:
            out[task.path] = min(n, task.record_count)
    return out, sum(shared.values())


def _equality_targets(plan: ScanPlan | None) -> int:
    """Data files an equality delete applies to (by the planner's rules)."""
    tasks = plan.tasks if plan is not None else ()
    return sum(1 for t in tasks if any(d.kind == KIND_EQUALITY for d in t.deletes))


def compute_health(
    table: Table,
    *,
    now_ms: int | None = None,
    history: Sequence[Mapping[str, Any]] = (),
    with_partitions: bool = True,
) -> Health:
    """The health of `table` now (see the module docstring). `history`: earlier health records of
    the same table (`health_log.HealthLog.records()`), for trends."""
    now = _now_ms() if now_ms is None else now_ms
    md = table.metadata
    th = Thresholds.of(md)
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
    deleted_by_file, unattributed = _deleted_rows(plan)
    deleted_rows = sum(deleted_by_file.values()) + unattributed
    m["data_files"] = len(data)
    m["data_bytes"] = sum(sizes)
    m["records"] = records
    m["delete_files"] = len(deletes)
    m["delete_bytes"] = sum(_content_size(e.data_file) for e in deletes)
    kinds = [file_kind(e.data_file) for e in deletes]
    m["dv_count"] = kinds.count("deletion_vectors")
    m["position_delete_files"] = kinds.count("position_deletes")
    m["equality_delete_files"] = kinds.count("equality_deletes")
    m["deleted_rows"] = deleted_rows
    m["file_size_min"] = min(sizes) if sizes else None
    m["file_size_max"] = max(sizes) if sizes else None
    m["file_size_p10"] = _pct(sizes, 10)
    m["file_size_p50"] = _pct(sizes, 50)
    m["file_size_p90"] = _pct(sizes, 90)
    m["small_file_share"] = (sum(1 for s in sizes if s < th.target_file_size) / len(sizes)) if sizes else 0.0
    m["small_files"] = sum(1 for s in sizes if s < th.min_file_size)
    m["oversized_files"] = sum(1 for s in sizes if s > th.target_file_size * 1.8)
    m["delete_file_ratio"] = len(deletes) / len(data) if data else (float(len(deletes)) if deletes else 0.0)
    m["deleted_row_share"] = deleted_rows / records if records else 0.0
    shares = [
        deleted_by_file.get(e.data_file.file_path, 0) / e.data_file.record_count
        for e in data
        if e.data_file.record_count
    ]
    m["deleted_share_p50"] = _pct(shares, 50)
    m["deleted_share_p90"] = _pct(shares, 90)
    m["deleted_share_max"] = max(shares) if shares else None
    m["files_over_delete_threshold"] = sum(1 for s in shares if s >= th.delete_ratio_threshold and s > 0)
    m["files_with_equality_deletes"] = _equality_targets(plan)

    # -- partitions
    parts: dict[tuple[int, tuple[Any, ...]], _Part] = {}
    for e in data:
        d = e.data_file
        key = (d.spec_id, tuple(repr(v) for v in d.partition))
        p = parts.get(key)
        if p is None:
            p = parts[key] = _Part(d.spec_id, d.partition, sample=d)
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
    m["manifest_size_p50"] = _pct(mbytes, 50)
    m["manifest_size_p90"] = _pct(mbytes, 90)
    m["entries_per_manifest_p10"] = _pct(manifest_live, 10)
    m["entries_per_manifest_p50"] = _pct(manifest_live, 50)
    m["entries_per_manifest_p90"] = _pct(manifest_live, 90)
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

    reasons, actions = _judge(table, m, th, risks, history, now)
    state = max((r.state for r in reasons), key=SEVERITY.__getitem__, default=HEALTHY)
    partitions = _partition_health(table, parts, th) if with_partitions else ()
    return Health(
        table.name, table_key(table), table.metadata_location, now, state, tuple(reasons), tuple(actions), m,
        partitions, th,
    )  # fmt: skip


def _content_size(d: DataFile) -> int:
    if file_kind(d) == "deletion_vectors" and d.content_size_in_bytes is not None:
        return d.content_size_in_bytes
    return d.file_size_in_bytes


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
    files: dict[str, tuple[bool, int]] = {}  # path -> (is data, bytes)
    for snap in table.metadata.snapshots:
        for mf in table.manifests(snap):
            if mf.manifest_path in seen_manifests:
                continue
            seen_manifests[mf.manifest_path] = mf.manifest_length
            for e in table.manifest(mf).entries:
                if e.status == STATUS_DELETED:
                    continue
                d = e.data_file
                files[d.file_path] = (d.content == CONTENT_DATA, d.file_size_in_bytes)
    m["all_data_files"] = sum(1 for is_data, _ in files.values() if is_data)
    m["all_data_bytes"] = sum(n for is_data, n in files.values() if is_data)
    m["all_delete_files"] = sum(1 for is_data, _ in files.values() if not is_data)
    m["all_delete_bytes"] = sum(n for is_data, n in files.values() if not is_data)
    m["all_manifests"] = len(seen_manifests)
    m["all_manifest_bytes"] = sum(seen_manifests.values())


# -- judging -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Check:
    name: str
    metric: str
    due: float
    risk: float | None
    action: str | None
    describe: str


def _checks(th: Thresholds) -> list[_Check]:
    return [
        _Check("small_files", "compactable_files", th.max_compactable_files, th.max_compactable_files * th.risk_factor,
               "rewrite_data_files", "small data files a bin-pack would merge"),
        _Check("deleted_rows", "deleted_row_share", th.max_deleted_row_share, 0.5, "rewrite_data_files",
               "share of rows deleted but still stored"),
        _Check("delete_files", "delete_file_ratio", th.max_delete_file_ratio, 1.0, "rewrite_data_files",
               "delete files per data file"),
        _Check("manifests", "excess_manifests", th.max_excess_manifests, th.max_excess_manifests * th.risk_factor,
               "rewrite_manifests", "manifests above what packing by partition would need"),
        _Check("snapshots", "expirable_snapshots", 1, None, "expire_snapshots", "snapshots past their retention"),
        _Check("metadata_size", "metadata_json_bytes", th.max_metadata_bytes, th.max_metadata_bytes * th.risk_factor,
               "expire_snapshots", "bytes of the current metadata.json"),
    ]  # fmt: skip


def _fmt(metric: str, value: float) -> str:
    if metric.endswith(("share", "ratio")):
        return f"{value:.3f}"
    return f"{value:,.0f}"


def _blocked(table: Table, m: Mapping[str, Any]) -> dict[str, str]:
    """Actions that cannot run on this table, with why."""
    out: dict[str, str] = {}
    if m.get("files_with_equality_deletes"):
        out["rewrite_data_files"] = (
            f"equality deletes apply to {m['files_with_equality_deletes']} data file(s), and rewriting their rows "
            "would undo those deletes"
        )
    from iceduck.write.partition import partition_columns

    try:
        partition_columns(table.metadata.default_spec, table.metadata.schema)
    except IcebergError as e:
        out.setdefault("rewrite_data_files", f"the partition spec cannot be written by iceduck: {e}")
    return out


def _judge(
    table: Table,
    m: Mapping[str, Any],
    th: Thresholds,
    risks: list[Reason],
    history: Sequence[Mapping[str, Any]],
    now: int,
) -> tuple[list[Reason], list[RecommendedAction]]:
    reasons = list(risks)
    blocked = _blocked(table, m)
    needed: dict[str, list[str]] = {}
    for c in _checks(th):
        value = m.get(c.metric)
        if value is None:
            continue
        v = float(value)
        due = v >= c.due
        if c.name == "small_files" and not due and m["data_files"]:
            share = v / m["data_files"]
            if share >= th.max_compactable_share and v >= th.min_input_files:
                reasons.append(
                    Reason(
                        MAINTENANCE_DUE if c.action not in blocked else MAINTENANCE_BLOCKED,
                        c.name,
                        "compactable_file_share",
                        share,
                        th.max_compactable_share,
                        f"{share:.0%} of the data files ({v:.0f} of {m['data_files']}) are small files a bin-pack "
                        f"would merge (due at {th.max_compactable_share:.0%})"
                        + (f"; blocked: {blocked[c.action]}" if c.action in blocked else ""),
                    )
                )
                if c.action is not None:
                    needed.setdefault(c.action, []).append(c.name)
                continue
        if c.risk is not None and v >= c.risk:
            reasons.append(
                Reason(AT_RISK, c.name, c.metric, v, c.risk,
                       f"{c.metric} = {_fmt(c.metric, v)} reached the risk threshold {_fmt(c.metric, c.risk)} ({c.describe})")
            )  # fmt: skip
        elif due:
            state = MAINTENANCE_BLOCKED if c.action in blocked else MAINTENANCE_DUE
            msg = f"{c.metric} = {_fmt(c.metric, v)} reached {_fmt(c.metric, c.due)} ({c.describe})"
            if c.action in blocked:
                msg += f"; {c.action} is blocked: {blocked[c.action]}"
            reasons.append(Reason(state, c.name, c.metric, v, c.due, msg))
        else:
            trend = _trend(c, v, history, now, th)
            if trend is not None:
                reasons.append(trend)
            continue
        if c.action is not None:
            needed.setdefault(c.action, []).append(c.name)
    return reasons, _recommend(needed, blocked, th, m)


def _trend(
    c: _Check, value: float, history: Sequence[Mapping[str, Any]], now: int, th: Thresholds
) -> Reason | None:
    """A DEBT_GROWING reason when the recorded history puts `c` at its due threshold within the horizon."""
    window = [
        h for h in history
        if isinstance(h.get("metrics"), Mapping) and h["metrics"].get(c.metric) is not None
        and now - th.trend_window_ms <= int(h.get("computed_ms", 0)) < now
    ]  # fmt: skip
    if not window:
        return None
    first = min(window, key=lambda h: int(h["computed_ms"]))
    v0, t0 = float(first["metrics"][c.metric]), int(first["computed_ms"])
    if value <= v0 or now <= t0:
        return None
    rate = (value - v0) / (now - t0)  # per ms
    eta = (c.due - value) / rate
    if eta > th.trend_horizon_ms:
        return None
    when = dt.datetime.fromtimestamp(t0 / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return Reason(
        DEBT_GROWING, c.name, c.metric, value, c.due,
        f"{c.metric} grew from {_fmt(c.metric, v0)} to {_fmt(c.metric, value)} since {when}; at this rate it "
        f"reaches {_fmt(c.metric, c.due)} in {eta / DAY_MS:.1f} days ({c.describe})",
    )  # fmt: skip


def _recommend(
    needed: Mapping[str, list[str]], blocked: Mapping[str, str], th: Thresholds, m: Mapping[str, Any]
) -> list[RecommendedAction]:
    out: list[RecommendedAction] = []
    if "rewrite_data_files" in needed and "rewrite_data_files" not in blocked:
        because = needed["rewrite_data_files"]
        params: dict[str, Any] = {"strategy": "binpack"}
        if "deleted_rows" in because:
            params["delete_ratio_threshold"] = min(th.delete_ratio_threshold, th.max_deleted_row_share)
        if "delete_files" in because:
            params["delete_file_threshold"] = 1
        out.append(RecommendedAction("rewrite_data_files", params, tuple(because)))
    if "rewrite_manifests" in needed or out:
        # a data rewrite leaves every manifest it touched rewritten with removed entries
        out.append(
            RecommendedAction(
                "rewrite_manifests", {}, tuple(needed.get("rewrite_manifests", ["after rewrite"]))
            )
        )
    if "expire_snapshots" in needed:
        out.append(RecommendedAction("expire_snapshots", {}, tuple(needed["expire_snapshots"])))
    return out


def _partition_health(
    table: Table, parts: Mapping[Any, _Part], th: Thresholds
) -> tuple[PartitionHealth, ...]:
    out = []
    for p in parts.values():
        n = len(p.sizes)
        comp = compactable(p.sizes, th)
        over = sum(1 for s in p.shares if s >= th.delete_ratio_threshold and s > 0)
        share = p.deleted / p.records if p.records else 0.0
        reasons = []
        if comp:
            reasons.append(f"{comp} of {n} files are small files a bin-pack would merge")
        if over:
            reasons.append(
                f"{over} file(s) have at least {th.delete_ratio_threshold:.0%} of their rows deleted"
            )
        if share >= th.max_deleted_row_share:
            reasons.append(f"{share:.1%} of the rows are deleted (due at {th.max_deleted_row_share:.0%})")
        assert p.sample is not None
        out.append(
            PartitionHealth(
                p.spec_id,
                _partition_text(table, p.sample),
                n,
                sum(p.sizes),
                p.records,
                _pct(p.sizes, 10),
                _pct(p.sizes, 50),
                _pct(p.sizes, 90),
                sum(1 for s in p.sizes if s < th.min_file_size),
                comp,
                p.delete_files,
                p.dvs,
                p.deleted,
                share,
                max(p.shares) if p.shares else 0.0,
                over,
                p.last_ms,
                MAINTENANCE_DUE if reasons else HEALTHY,
                tuple(reasons),
            )
        )
    out.sort(key=lambda h: (-h.debt, -h.deleted_row_share, -h.data_files, h.spec_id, str(h.partition)))
    return tuple(out)


# -- Arrow -------------------------------------------------------------------------------------------

REASON_TYPE = pa.struct(
    [
        ("state", pa.string()),
        ("check", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("threshold", pa.float64()),
        ("message", pa.string()),
    ]
)
ACTION_TYPE = pa.struct(
    [
        ("action", pa.string()),
        ("parameters", pa.string()),
        ("because", pa.list_(pa.string())),
        ("sql", pa.string()),
    ]
)
HEALTH = pa.schema(
    [
        ("table_name", pa.string()),
        ("table_uuid", pa.string()),
        ("metadata_location", pa.string()),
        ("computed_at", pa.timestamp("ms", tz="UTC")),
        ("state", pa.string()),
        ("reasons", pa.list_(REASON_TYPE)),
        ("recommended_actions", pa.list_(ACTION_TYPE)),
        *[(name, t) for name, t, _ in METRICS],
    ]
)
HEALTH_PARTITIONS = pa.schema(
    [
        ("spec_id", pa.int32()),
        ("partition", pa.map_(pa.string(), pa.string())),
        ("state", pa.string()),
        ("reasons", pa.list_(pa.string())),
        ("debt_files", pa.int64()),
        ("data_files", pa.int64()),
        ("data_bytes", pa.int64()),
        ("records", pa.int64()),
        ("file_size_p10", pa.float64()),
        ("file_size_p50", pa.float64()),
        ("file_size_p90", pa.float64()),
        ("small_files", pa.int64()),
        ("compactable_files", pa.int64()),
        ("delete_files", pa.int64()),
        ("dv_count", pa.int64()),
        ("deleted_rows", pa.int64()),
        ("deleted_row_share", pa.float64()),
        ("deleted_share_max", pa.float64()),
        ("files_over_delete_threshold", pa.int64()),
        ("last_updated_at", pa.timestamp("ms", tz="UTC")),
    ]
)


def health_row(h: Health | Mapping[str, Any], table_label: str | None = None) -> dict[str, Any]:
    """One `iceberg_health` row of a `Health` (or of its JSON record, for the history)."""
    rec = h.to_json() if isinstance(h, Health) else h
    label = table_label or rec.get("table") or rec.get("metadata_location") or ""
    metrics = rec.get("metrics") or {}
    row: dict[str, Any] = {
        "table_name": rec.get("table"),
        "table_uuid": rec.get("table_uuid"),
        "metadata_location": rec.get("metadata_location"),
        "computed_at": rec.get("computed_ms"),
        "state": rec.get("state"),
        "reasons": [dict(r) for r in rec.get("reasons") or ()],
        "recommended_actions": [
            {
                "action": a["action"],
                "parameters": json.dumps(a.get("parameters") or {}, sort_keys=True),
                "because": list(a.get("because") or ()),
                "sql": RecommendedAction(a["action"], a.get("parameters") or {}, ()).sql(str(label)),
            }
            for a in rec.get("actions") or ()
        ],
    }
    for name in METRIC_NAMES:
        value = metrics.get(name)
        if name.startswith("operations") and value is not None:
            value = [tuple(x) for x in value]
        row[name] = value
    return row


def health_table(rows: Iterable[dict[str, Any]]) -> pa.Table:
    """`iceberg_health` rows as Arrow."""
    return pa.Table.from_pylist(list(rows), schema=HEALTH)


def partitions_table(h: Health) -> pa.Table:
    """`iceberg_health_partitions` rows, worst partitions first."""
    rows = [
        {
            "spec_id": p.spec_id,
            "partition": list(p.partition),
            "state": p.state,
            "reasons": list(p.reasons),
            "debt_files": p.debt,
            "data_files": p.data_files,
            "data_bytes": p.data_bytes,
            "records": p.records,
            "file_size_p10": p.file_size_p10,
            "file_size_p50": p.file_size_p50,
            "file_size_p90": p.file_size_p90,
            "small_files": p.small_files,
            "compactable_files": p.compactable_files,
            "delete_files": p.delete_files,
            "dv_count": p.dv_count,
            "deleted_rows": p.deleted_rows,
            "deleted_row_share": p.deleted_row_share,
            "deleted_share_max": p.deleted_share_max,
            "files_over_delete_threshold": p.files_over_delete_threshold,
            "last_updated_at": p.last_updated_ms,
        }
        for p in h.partitions
    ]
    return pa.Table.from_pylist(rows, schema=HEALTH_PARTITIONS)
