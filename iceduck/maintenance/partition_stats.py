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
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from iceduck.errors import CorruptFileError
from iceduck.inspect.files import StatsDecoder, partition_text
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


# -- reading: iceberg_partition_statistics ----------------------------------------------------------

# The spec's columns every partition statistics file holds (`total_record_count`, `last_updated_*`
# and `dv_count` are optional: NULL when a writer left them out).
_REQUIRED = (
    "partition",
    "spec_id",
    "data_record_count",
    "data_file_count",
    "total_data_file_size_in_bytes",
    "position_delete_record_count",
    "position_delete_file_count",
    "equality_delete_record_count",
    "equality_delete_file_count",
)
_OPTIONAL = ("total_record_count", "last_updated_at", "last_updated_snapshot_id", "dv_count")
_STR_MAP = pa.map_(pa.string(), pa.string())
PARTITION_STATISTICS = pa.schema(
    [
        ("partition", _STR_MAP),
        ("spec_id", pa.int32()),
        *((name, pa.int64()) for name in _REQUIRED[2:]),
        ("total_record_count", pa.int64()),
        ("last_updated_at", pa.timestamp("ms", tz="UTC")),
        ("last_updated_snapshot_id", pa.int64()),
        ("dv_count", pa.int64()),
        ("statistics_file", pa.string()),
    ]
)


def registered_partition_statistics(table: Table, snapshot: Snapshot) -> tuple[pa.Table, str] | None:
    """The rows and path of the partition statistics file registered for `snapshot` (Java's, Spark's
    or iceduck's), None when it has none. A file that is not what its registration says (size, a
    spec column missing, not Parquet) is an error naming it."""
    found = next(
        (p for p in table.metadata.partition_statistics if p.snapshot_id == snapshot.snapshot_id), None
    )
    if found is None:
        return None
    path = found.statistics_path
    data = table.io.read(table.resolve(path))
    if len(data) != found.file_size_in_bytes:
        raise CorruptFileError(
            path, f"holds {len(data)} bytes, but the table metadata says file-size-in-bytes {found.file_size_in_bytes}"
        )
    try:
        rows = pq.read_table(io.BytesIO(data))
    except Exception as e:  # pyarrow names a damaged footer many ways
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CorruptFileError(path, f"not a readable partition statistics file: {first}") from None
    missing = [name for name in _REQUIRED if name not in rows.column_names]
    if missing or not pa.types.is_struct(rows.schema.field("partition").type):
        what = f"no {', '.join(missing)} column" if missing else "its partition column is no struct"
        raise CorruptFileError(path, f"not a partition statistics file: {what}")
    return rows, path


def _internal(array: pa.Array) -> list[Any]:
    """A partition value column as the internal representation the transforms print (days,
    microseconds, ...), whatever Arrow type the writer chose."""
    t = array.type
    if pa.types.is_date(t):
        return array.cast(pa.int32()).to_pylist()
    if pa.types.is_timestamp(t) or pa.types.is_time(t):
        return array.cast(pa.int64()).to_pylist()
    return array.to_pylist()


def _partition_maps(table: Table, column: pa.StructArray) -> list[list[tuple[str, str | None]]]:
    """Each row's partition struct as (field name, text) pairs, the way iceberg_partitions prints them."""
    decoder = StatsDecoder.of(table)
    fields: dict[int, tuple[Any, Any]] = {}  # partition field id -> (PartitionField, source type)
    for spec in table.metadata.partition_specs:
        s, _, sources = decoder.spec(spec.spec_id)
        for pf, source in zip(s.fields, sources, strict=False):
            fields.setdefault(pf.field_id, (pf, source))
    out: list[list[tuple[str, str | None]]] = [[] for _ in range(len(column))]
    struct_type = column.type
    for i in range(struct_type.num_fields):
        child = struct_type.field(i)
        raw = (child.metadata or {}).get(_ID)
        known = fields.get(int(raw)) if raw is not None and raw.isdigit() else None
        values = _internal(column.field(i))
        for row, value in enumerate(values):
            if value is None or known is None:
                out[row].append((child.name, None if value is None else str(value)))
                continue
            pf, source = known
            if isinstance(value, bytes) and source is not None and getattr(source, "name", "") == "uuid":
                value = uuid.UUID(bytes=value)
            out[row].append((child.name, partition_text(pf, source, value)))
    return out


def partition_statistics_rows(table: Table, snapshot: Snapshot | None) -> pa.Table:
    """`iceberg_partition_statistics`: a snapshot's partition statistics, read from its registered
    file when it has one (`statistics_file` names it), else computed from its manifests as ANALYZE
    would write them (`statistics_file` NULL)."""
    if snapshot is None:
        return PARTITION_STATISTICS.empty_table()
    registered = registered_partition_statistics(table, snapshot)
    rows = partition_stats_table(table, snapshot) if registered is None else registered[0]
    path = None if registered is None else registered[1]
    n = rows.num_rows
    partition = rows.column("partition").combine_chunks()
    arrays: list[pa.Array] = [pa.array(_partition_maps(table, partition), type=_STR_MAP)]
    for field in PARTITION_STATISTICS:
        if field.name in ("partition", "statistics_file"):
            continue
        if field.name not in rows.column_names:
            arrays.append(pa.nulls(n, field.type))
            continue
        column = rows.column(field.name).combine_chunks()
        if field.name == "last_updated_at":  # epoch milliseconds in the file
            column = column.cast(pa.int64())
        arrays.append(column.cast(field.type))
    arrays.append(pa.array([path] * n, type=pa.string()))
    return pa.Table.from_arrays(arrays, schema=PARTITION_STATISTICS)
