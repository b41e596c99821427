"""The health model: the states (by severity), the reasons for one, and a table's and a partition's health."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from iceduck.maintenance.health.recommend import RecommendedAction
from iceduck.maintenance.health.thresholds import Thresholds

HEALTHY = "HEALTHY"
DEBT_GROWING = "DEBT_GROWING"
MAINTENANCE_DUE = "MAINTENANCE_DUE"
MAINTENANCE_BLOCKED = "MAINTENANCE_BLOCKED"
AT_RISK = "AT_RISK"
STATES = (HEALTHY, DEBT_GROWING, MAINTENANCE_DUE, MAINTENANCE_BLOCKED, AT_RISK)  # by severity
SEVERITY = {s: i for i, s in enumerate(STATES)}

# (name, Iceberg type, meaning): the metrics a `Health` holds, in the order of iceberg_health's columns
# after the fixed ones (`iceduck.duckdb.health_rows` gives them their Arrow types).
METRICS: tuple[tuple[str, str, str], ...] = (
    ("format_version", "int", "table format version"),
    ("current_snapshot_id", "long", "head of main"),
    ("current_snapshot_age_s", "double", "seconds since the current snapshot was committed"),
    ("snapshots", "long", "snapshots in the metadata"),
    ("snapshots_last_24h", "long", "snapshots committed in the last 24 hours"),
    ("commits_last_24h", "long", "metadata files written in the last 24 hours (any change)"),
    ("operations", "map<string, long>", "snapshot operations, all snapshots"),
    ("operations_last_24h", "map<string, long>", "snapshot operations, last 24 hours"),
    ("oldest_snapshot_id", "long", "oldest snapshot kept"),
    ("oldest_snapshot_age_s", "double", "its age in seconds"),
    ("expirable_snapshots", "long", "snapshots past retention (with the grace) that expiry would remove"),
    ("branches", "long", "branches (main included)"),
    ("tags", "long", "tags"),
    ("metadata_json_bytes", "long", "size of the current metadata file"),
    ("previous_metadata_versions", "long", "metadata files kept in the metadata log"),
    ("data_files", "long", "live data files"),
    ("data_bytes", "long", "their bytes"),
    ("records", "long", "rows in live data files (before deletes)"),
    ("delete_files", "long", "live delete files (DVs, position and equality delete files)"),
    ("delete_bytes", "long", "their bytes (a DV counts its blob)"),
    ("dv_count", "long", "deletion vectors"),
    ("position_delete_files", "long", "position delete files (not DVs)"),
    ("equality_delete_files", "long", "equality delete files"),
    ("deleted_rows", "long", "rows deleted by DVs and position deletes (equality deletes not counted)"),
    ("file_size_min", "long", "smallest data file"),
    ("file_size_p10", "double", "10th percentile data file size"),
    ("file_size_p50", "double", "median data file size"),
    ("file_size_p90", "double", "90th percentile data file size"),
    ("file_size_max", "long", "largest data file"),
    ("target_file_size", "long", "write.target-file-size-bytes"),
    ("small_file_share", "double", "share of data files below the target size"),
    ("small_files", "long", "data files below the minimum size (75% of target)"),
    ("compactable_files", "long", "files a bin-pack rewrite would remove"),
    ("oversized_files", "long", "data files above 180% of the target size"),
    ("delete_file_ratio", "double", "position and equality delete files / data files (DVs not counted)"),
    ("deleted_row_share", "double", "deleted rows / rows"),
    ("deleted_share_p50", "double", "median per-file deleted share (DV cardinality / record count)"),
    ("deleted_share_p90", "double", "90th percentile per-file deleted share"),
    ("deleted_share_max", "double", "highest per-file deleted share"),
    ("files_over_delete_threshold", "long", "data files whose deleted share reaches the threshold"),
    ("files_with_equality_deletes", "long", "data files equality deletes apply to"),
    ("manifests", "long", "manifests of the current snapshot"),
    ("data_manifests", "long", "data manifests"),
    ("delete_manifests", "long", "delete manifests"),
    ("manifest_bytes", "long", "their bytes"),
    ("manifest_size_p50", "double", "median manifest size"),
    ("manifest_size_p90", "double", "90th percentile manifest size"),
    ("entries_per_manifest_p10", "double", "10th percentile entries per manifest"),
    ("entries_per_manifest_p50", "double", "median entries per manifest"),
    ("entries_per_manifest_p90", "double", "90th percentile entries per manifest"),
    ("empty_manifests", "long", "manifests without live entries"),
    ("excess_manifests", "long", "manifests above what packing by target size would need"),
    ("partitions", "long", "partitions with live data files"),
    ("all_data_files", "long", "data files any snapshot reaches (each counted once)"),
    ("all_data_bytes", "long", "their bytes"),
    ("all_delete_files", "long", "delete files any snapshot reaches"),
    ("all_delete_bytes", "long", "their bytes"),
    ("all_manifests", "long", "manifests any snapshot reaches"),
    ("all_manifest_bytes", "long", "their bytes"),
    ("storage_amplification", "double", "all_data_bytes / data_bytes"),
    ("statistics_snapshot_id", "long", "the snapshot the newest statistics file describes (itself or an ancestor)"),
    ("statistics_stale_share", "double", "rows added and deleted since that snapshot / its rows"),
)
METRIC_NAMES = tuple(m[0] for m in METRICS)


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
        return dataclasses.asdict(self)


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
