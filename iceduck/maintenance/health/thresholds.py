"""The thresholds health judges a table by: table properties, else the defaults in `THRESHOLDS`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from iceduck.maintenance.expire import (
    DEFAULT_MAX_SNAPSHOT_AGE_MS,
    DEFAULT_MIN_SNAPSHOTS,
    MAX_SNAPSHOT_AGE_PROPERTY,
    MIN_SNAPSHOTS_PROPERTY,
)
from iceduck.spec.table_metadata import TableMetadata

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
    (
        "max_stale_statistics_share",
        "iceduck.health.max-stale-statistics-share",
        0.2,
        "rows changed since the newest statistics / their rows: analyze due at",
    ),
    (
        "max_run_failures",
        "iceduck.health.max-failed-runs-24h",
        3,
        "maintenance runs failed or conflicted in 24 h, more than the 24 h before: at risk",
    ),
    (
        "max_unreferenced_share",
        "iceduck.health.max-unreferenced-file-share",
        0.5,
        "unreferenced files / (them + data files) at the last orphan scan: at risk",
    ),
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
    max_stale_statistics_share: float
    max_run_failures: int
    max_unreferenced_share: float
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
