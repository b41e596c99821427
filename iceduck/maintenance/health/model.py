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
