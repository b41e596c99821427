"""Scan planning: data files to read, the deletes each needs, and what pruning skipped and why."""

from __future__ import annotations

from iceduck.scan.deletes import KIND_DV, KIND_EQUALITY, KIND_POSITION, DeleteFile, DeleteIndex
from iceduck.scan.planner import (
    LEVEL_BOUNDS,
    LEVEL_MANIFEST,
    LEVEL_PARTITION,
    FileScanTask,
    ScanPlan,
    ScanReport,
    SkippedFile,
    plan_scan,
    plan_since,
    scan_schema,
)

__all__ = [
    "KIND_DV",
    "KIND_EQUALITY",
    "KIND_POSITION",
    "LEVEL_BOUNDS",
    "LEVEL_MANIFEST",
    "LEVEL_PARTITION",
    "DeleteFile",
    "DeleteIndex",
    "FileScanTask",
    "ScanPlan",
    "ScanReport",
    "SkippedFile",
    "plan_scan",
    "plan_since",
    "scan_schema",
]
