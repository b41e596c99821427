"""Table health from metadata alone: metrics, a state, the concrete reasons, and what to do.

`compute_health(table)` reads the metadata file, manifest lists and manifests (never a data file)
and reports, for the current snapshot: snapshots and commits in the last 24 h and the operation
mix; data and delete files (count, bytes); data file size distribution (p10/p50/p90) and the share
below the target size; delete-to-data ratios (files and rows) and the deleted-row share per data
file (DV cardinality / record count); manifests (count, bytes, entries per manifest); the
metadata.json size and previous versions kept; the oldest snapshot and refs; and, across every
snapshot (`all_*`), each physical file counted once. Per partition: the same where it applies.

State (most severe wins), each with reasons naming the check, the value and the threshold:

* `AT_RISK`: the table or its readers are in danger, never for debt however high: metadata that a
  retained snapshot needs cannot be read, or (with the maintenance store's evidence, `danger`) a
  reader lease outlives the snapshot retention, failed or conflicting maintenance runs are
  climbing, or the last orphan scan found an anomalous share of unreferenced files;
* `MAINTENANCE_BLOCKED`: maintenance is due but the action that fixes it cannot run (equality
  deletes apply to the files to rewrite; a partition transform iceduck cannot write);
* `MAINTENANCE_DUE`: a check passed its due threshold;
* `DEBT_GROWING`: nothing is due yet, but the recorded health history (`health_log`) shows a check
  heading for its due threshold within the trend horizon;
* `HEALTHY`.

Checks and thresholds (table properties, else the defaults in `THRESHOLDS`):

| check | metric | due |
|---|---|---|
| small_files | compactable_files | >= max-compactable-files, or share >= max-compactable-share |
| deleted_rows | deleted_row_share | >= max-deleted-row-share |
| delete_files | delete_file_ratio | >= max-delete-file-ratio |
| manifests | excess_manifests | >= commit.manifest.min-count-to-merge |
| snapshots | expirable_snapshots | >= 1 (older than max age x (1 + expire-grace)) |
| metadata_size | metadata_json_bytes | >= max-metadata-json-bytes |
| statistics | statistics_stale_share | >= max-stale-statistics-share (tables with statistics only) |

Past due, each is MAINTENANCE_DUE with the action that pays it (a bin-pack or delete rewrite,
a manifest rewrite, expiry, `analyze`), or MAINTENANCE_BLOCKED when that action cannot run.

A partition's *compactable files* are its files below the minimum size (75% of
`write.target-file-size-bytes`) minus the files they would pack into, counted only where a
rewrite would pick them (at least `min-input-files` of them, or enough bytes for a target-size
file): exactly what `rewrite_data_files` bin-packs.

The package: `thresholds` (the table properties and their defaults), `model` (states, reasons,
`Health`), `metrics` (what is measured, over the shared scan plan), `rules` (checks, trends,
blocked actions, partition states) and `recommend` (the actions and the SQL that runs them). The
Arrow rows of `iceberg_health` live with the other SQL functions in `iceduck.duckdb.health_rows`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from iceduck._lazy import lazy_attribute

if TYPE_CHECKING:
    from iceduck.maintenance.health.danger import Evidence, ReaderNeed, RunFact
    from iceduck.maintenance.health.metrics import compactable
    from iceduck.maintenance.health.model import (
        AT_RISK,
        DEBT_GROWING,
        HEALTHY,
        MAINTENANCE_BLOCKED,
        MAINTENANCE_DUE,
        METRIC_NAMES,
        METRICS,
        SEVERITY,
        STATES,
        Health,
        PartitionHealth,
        Reason,
    )
    from iceduck.maintenance.health.recommend import RecommendedAction
    from iceduck.maintenance.health.thresholds import THRESHOLDS, Thresholds
    from iceduck.table import Table

# The names load on first use (PEP 562): the SQL functions declare health's columns from `model` at
# startup, and `metrics`/`rules` (the scan planner, delete files, percentiles) load when health is
# computed.
_LAZY = {
    **dict.fromkeys(
        (
            "AT_RISK",
            "DEBT_GROWING",
            "HEALTHY",
            "MAINTENANCE_BLOCKED",
            "MAINTENANCE_DUE",
            "METRIC_NAMES",
            "METRICS",
            "SEVERITY",
            "STATES",
            "Health",
            "PartitionHealth",
            "Reason",
        ),
        "iceduck.maintenance.health.model",
    ),
    "compactable": "iceduck.maintenance.health.metrics",
    **dict.fromkeys(("Evidence", "ReaderNeed", "RunFact"), "iceduck.maintenance.health.danger"),
    "RecommendedAction": "iceduck.maintenance.health.recommend",
    "THRESHOLDS": "iceduck.maintenance.health.thresholds",
    "Thresholds": "iceduck.maintenance.health.thresholds",
}

__all__ = [
    "AT_RISK",
    "DEBT_GROWING",
    "HEALTHY",
    "MAINTENANCE_BLOCKED",
    "MAINTENANCE_DUE",
    "METRICS",
    "METRIC_NAMES",
    "SEVERITY",
    "STATES",
    "THRESHOLDS",
    "Evidence",
    "Health",
    "PartitionHealth",
    "ReaderNeed",
    "Reason",
    "RecommendedAction",
    "RunFact",
    "Thresholds",
    "compactable",
    "compute_health",
]


def compute_health(
    table: Table,
    *,
    now_ms: int | None = None,
    history: Sequence[Mapping[str, Any]] = (),
    with_partitions: bool = True,
    evidence: Evidence | None = None,
) -> Health:
    """The health of `table` now (see the module docstring). `history`: earlier health records of
    the same table (`health_log.HealthLog.records()`), for trends; `evidence`: its readers and
    maintenance runs from the maintenance store, for the dangers `danger` judges."""
    from iceduck.maintenance.health.danger import dangers
    from iceduck.maintenance.health.metrics import measure
    from iceduck.maintenance.health.model import HEALTHY, SEVERITY, Health
    from iceduck.maintenance.health.rules import judge, partition_health
    from iceduck.maintenance.health.thresholds import Thresholds
    from iceduck.maintenance.store import now_ms as _now_ms
    from iceduck.maintenance.store import table_key

    now = _now_ms() if now_ms is None else now_ms
    th = Thresholds.of(table.metadata)
    measured = measure(table, th, now)
    m = measured.metrics
    reasons, actions = judge(table, m, th, list(measured.risks), history, now)
    if evidence is not None:
        reasons = dangers(m, th, evidence, now) + reasons
    state = max((r.state for r in reasons), key=SEVERITY.__getitem__, default=HEALTHY)
    partitions = partition_health(table, measured.parts, th) if with_partitions else ()
    return Health(
        table.name, table_key(table), table.metadata_location, now, state, tuple(reasons), tuple(actions), m,
        partitions, th,
    )  # fmt: skip


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, globals(), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
