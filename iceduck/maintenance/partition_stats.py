"""Partition statistics files (table spec, "Partition Statistics File"): one Parquet row per partition
tuple of a snapshot with its data, delete and record counts, registered with
`set-partition-statistics`. ANALYZE writes one beside the theta sketches on partitioned tables.

Counts come from the snapshot's live manifest entries (data files; position delete files and
deletion vectors apart; equality delete files). `total_record_count` is the rows after deletes when
the partition has no equality deletes and no v2 position delete files (the spec's advice: then the
manifests give it exactly: data records minus DV cardinalities), else NULL. The partition column
has the unified partition type: every partition field any spec ever had, by field id, a spec's
missing fields NULL; rows sorted by it ascending, NULLs first.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from iceduck.read.types import arrow_type
from iceduck.spec.snapshots import Snapshot
from iceduck.spec.types import FixedType, IcebergType, NestedField, PrimitiveType
from iceduck.table import Table

_ID = b"PARQUET:field_id"


def _field(name: str, t: pa.DataType, fid: int, nullable: bool) -> pa.Field:
    return pa.field(name, t, nullable=nullable, metadata={_ID: str(fid).encode()})


def _arrow(t: IcebergType) -> pa.DataType:
    if isinstance(t, FixedType):
        return pa.binary(t.length)
    if isinstance(t, PrimitiveType) and t.name == "uuid":
        return pa.binary(16)
    return arrow_type(t)


def unified_partition_fields(table: Table) -> list[NestedField]:
    """Every partition field of every spec, by field id (the spec's unified partition type)."""
    md = table.metadata
    seen: dict[int, NestedField] = {}
    for spec in md.partition_specs:
        try:
            ptype = spec.partition_type(md.schema)
        except Exception:
            continue
        for f in ptype.fields:
            seen.setdefault(f.id, f)
    return [seen[k] for k in sorted(seen)]


def partition_stats_schema(table: Table) -> pa.Schema:
    """The Arrow schema (with Parquet field ids) of the table's partition statistics files."""
    unified = unified_partition_fields(table)
    partition = pa.struct([_field(f.name, _arrow(f.type), f.id, True) for f in unified])
    fields = [
        _field("partition", partition, 1, False),
        _field("spec_id", pa.int32(), 2, False),
        _field("data_record_count", pa.int64(), 3, False),
        _field("data_file_count", pa.int32(), 4, False),
        _field("total_data_file_size_in_bytes", pa.int64(), 5, False),
        _field("position_delete_record_count", pa.int64(), 6, False),
        _field("position_delete_file_count", pa.int32(), 7, False),
        _field("equality_delete_record_count", pa.int64(), 8, False),
        _field("equality_delete_file_count", pa.int32(), 9, False),
        _field("total_record_count", pa.int64(), 10, True),
        _field("last_updated_at", pa.int64(), 11, True),
        _field("last_updated_snapshot_id", pa.int64(), 12, True),
    ]
    if table.metadata.format_version >= 3:
        fields.append(_field("dv_count", pa.int32(), 13, False))
    return pa.schema(fields)


def _sort_key(values: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    return tuple((v is not None, v if v is not None else 0) for v in values)


def partition_stats_table(table: Table, snapshot: Snapshot) -> pa.Table:
    """The rows of `snapshot`'s partition statistics file (see the module docstring)."""
    md = table.metadata
    unified = unified_partition_fields(table)
    position = {f.id: i for i, f in enumerate(unified)}
    spec_fields = {s.spec_id: [pf.field_id for pf in s.fields] for s in md.partition_specs}
    rows: dict[tuple[int, tuple[Any, ...]], dict[str, Any]] = {}
    for entry in table.entries(snapshot):
        df = entry.data_file
        values: list[Any] = [None] * len(unified)
        for fid, v in zip(spec_fields.get(df.spec_id, []), df.partition, strict=False):
            if fid in position:
                values[position[fid]] = v
        key = (df.spec_id, tuple(values))
        r = rows.get(key)
        if r is None:
            r = rows[key] = {
                "data_record_count": 0, "data_file_count": 0, "total_data_file_size_in_bytes": 0,
                "position_delete_record_count": 0, "position_delete_file_count": 0, "dv_count": 0,
                "dv_records": 0, "equality_delete_record_count": 0, "equality_delete_file_count": 0,
                "last": None,
            }  # fmt: skip
        if df.content == 0:
            r["data_record_count"] += df.record_count
            r["data_file_count"] += 1
            r["total_data_file_size_in_bytes"] += df.file_size_in_bytes
        elif df.content == 1:
            r["position_delete_record_count"] += df.record_count
            if df.is_deletion_vector:
                r["dv_count"] += 1
            else:
                r["position_delete_file_count"] += 1
        else:
            r["equality_delete_record_count"] += df.record_count
            r["equality_delete_file_count"] += 1
        snap = md.snapshot_by_id(entry.snapshot_id) if entry.snapshot_id is not None else None
        if snap is not None and (r["last"] is None or snap.timestamp_ms > r["last"].timestamp_ms):
            r["last"] = snap
    schema = partition_stats_schema(table)
    ordered = sorted(rows.items(), key=lambda kv: (_sort_key(kv[0][1]), kv[0][0]))
    partition_type = schema.field("partition").type
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    for (spec_id, part), r in ordered:
        columns["partition"].append({f.name: _value(f.type, v) for f, v in zip(unified, part, strict=True)})
        columns["spec_id"].append(spec_id)
        for name in (
            "data_record_count", "data_file_count", "total_data_file_size_in_bytes",
            "position_delete_record_count", "position_delete_file_count", "equality_delete_record_count",
            "equality_delete_file_count",
        ):  # fmt: skip
            columns[name].append(r[name])
        exact = not r["equality_delete_file_count"] and not r["position_delete_file_count"]
        columns["total_record_count"].append(
            r["data_record_count"] - r["position_delete_record_count"] if exact else None
        )
        last: Snapshot | None = r["last"]
        columns["last_updated_at"].append(last.timestamp_ms if last else None)
        columns["last_updated_snapshot_id"].append(last.snapshot_id if last else None)
        if "dv_count" in columns:
            columns["dv_count"].append(r["dv_count"])
    arrays = [
        pa.array(columns[f.name], type=partition_type if f.name == "partition" else f.type) for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def _value(t: IcebergType, v: Any) -> Any:
    if v is None:
        return None
    if isinstance(t, PrimitiveType) and t.name == "uuid":
        return v.bytes
    return v


def partition_stats_bytes(table: Table, snapshot: Snapshot) -> bytes:
    """The Parquet bytes of `snapshot`'s partition statistics file."""
    buf = io.BytesIO()
    pq.write_table(partition_stats_table(table, snapshot), buf)
    return buf.getvalue()


def read_partition_stats(data: bytes) -> list[Mapping[str, Any]]:
    """The rows of a partition statistics file (by column name), as Java or iceduck wrote it."""
    return pq.read_table(io.BytesIO(data)).to_pylist()
