"""The Arrow rows of `iceberg_health`, `iceberg_health_partitions` and `iceberg_health_history`."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from iceduck.maintenance.health.model import METRIC_NAMES, METRICS, Health, PartitionHealth, Reason
from iceduck.maintenance.health.recommend import RecommendedAction

_ARROW_TYPES = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
# The Arrow types of the metrics' Iceberg type names (`model.METRICS`).
_METRIC_TYPES = {
    "int": pa.int32(),
    "long": pa.int64(),
    "double": pa.float64(),
    "map<string, long>": pa.map_(pa.string(), pa.int64()),
}


def _arrow_type(hint: Any) -> pa.DataType:
    """The Arrow type of a record field's annotation: str/int/float/bool, optional, tuple[X, ...]."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType) and len(args) == 1:
        return _arrow_type(args[0])
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:
        return pa.list_(_arrow_type(args[0]))
    return _ARROW_TYPES[hint]


def _columns(record: type, names: Iterable[str] | None = None) -> list[tuple[str, pa.DataType]]:
    """Arrow columns for fields of a record dataclass (all, or `names`), typed from its annotations:
    the record declares its fields once, and the rows keep its names."""
    hints = typing.get_type_hints(record)
    wanted = [f.name for f in dataclasses.fields(record)] if names is None else list(names)
    return [(name, _arrow_type(hints[name])) for name in wanted]


REASON_TYPE = pa.struct(_columns(Reason))
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
        *[(name, _METRIC_TYPES[t]) for name, t, _ in METRICS],
    ]
)
# The per-partition metrics of `PartitionHealth`, in its order, between its key and its time.
_PARTITION_METRICS = [
    f.name
    for f in dataclasses.fields(PartitionHealth)
    if f.name not in ("spec_id", "partition", "last_updated_ms", "state", "reasons")
]
HEALTH_PARTITIONS = pa.schema(
    [
        ("spec_id", pa.int32()),
        ("partition", pa.map_(pa.string(), pa.string())),
        *_columns(PartitionHealth, ["state", "reasons"]),
        ("debt_files", pa.int64()),
        *_columns(PartitionHealth, _PARTITION_METRICS),
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
            **{name: getattr(p, name) for name in _PARTITION_METRICS},
            "last_updated_at": p.last_updated_ms,
        }
        for p in h.partitions
    ]
    return pa.Table.from_pylist(rows, schema=HEALTH_PARTITIONS)
