"""The Arrow rows of `iceberg_health`, `iceberg_health_partitions` and `iceberg_health_history`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from iceduck.maintenance.health.metrics import METRIC_NAMES, METRICS
from iceduck.maintenance.health.model import Health
from iceduck.maintenance.health.recommend import RecommendedAction

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
