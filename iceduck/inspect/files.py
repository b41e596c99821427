"""Metadata tables read from manifest lists and manifests: manifests, entries, files, partitions
and column statistics of a snapshot.

Partition values and column bounds are decoded for every type and shown as text (the form DuckDB
prints), because one SQL function serves tables of every schema: `partition` is a
MAP(VARCHAR, VARCHAR) of partition field name to value, and `readable_metrics` maps column names
to their decoded statistics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from iceduck.inspect.metadata import Column, columns_schema, columns_table
from iceduck.spec import values
from iceduck.spec.manifest import STATUS_DELETED, DataFile, Manifest
from iceduck.spec.manifest_list import ManifestFile
from iceduck.spec.partitioning import PartitionField, PartitionSpec
from iceduck.spec.snapshots import Snapshot
from iceduck.spec.types import IcebergType, Schema, StructType, is_primitive
from iceduck.table import Table

CONTENT_NAMES = {0: "DATA", 1: "POSITION_DELETES", 2: "EQUALITY_DELETES"}
MANIFEST_CONTENT_NAMES = {0: "DATA", 1: "DELETES"}
STATUS_NAMES = {0: "EXISTING", 1: "ADDED", 2: "DELETED"}
STR_MAP = pa.map_(pa.string(), pa.string())
INT_LONG_MAP = pa.map_(pa.int32(), pa.int64())
INT_BIN_MAP = pa.map_(pa.int32(), pa.binary())
METRIC = pa.struct(
    [
        ("column_size", pa.int64()),
        ("value_count", pa.int64()),
        ("null_value_count", pa.int64()),
        ("nan_value_count", pa.int64()),
        ("lower_bound", pa.string()),
        ("upper_bound", pa.string()),
    ]
)
READABLE_METRICS = pa.map_(pa.string(), METRIC)
SUMMARY = pa.struct(
    [
        ("contains_null", pa.bool_()),
        ("contains_nan", pa.bool_()),
        ("lower_bound", pa.string()),
        ("upper_bound", pa.string()),
    ]
)


# -- decoding helpers -------------------------------------------------------------------------


@dataclass(slots=True)
class StatsDecoder:
    """Decodes partition tuples and bounds of one table, caching per-spec work."""

    table: Table
    schema: Schema
    _specs: dict[int, tuple[PartitionSpec, StructType, list[IcebergType | None]]]

    @classmethod
    def of(cls, table: Table) -> StatsDecoder:
        return cls(table, table.metadata.schema, {})

    def spec(self, spec_id: int) -> tuple[PartitionSpec, StructType, list[IcebergType | None]]:
        cached = self._specs.get(spec_id)
        if cached is None:
            spec = self.table.metadata.spec_by_id(spec_id) or PartitionSpec(spec_id)
            schema = self._schema_with(spec)
            ptype = spec.partition_type(schema)
            sources = [
                schema.find_type(f.source_ids[0]) if len(f.source_ids) == 1 else None for f in spec.fields
            ]
            cached = self._specs[spec_id] = (spec, ptype, sources)
        return cached

    def _schema_with(self, spec: PartitionSpec) -> Schema:
        # A partition source column may have been dropped from the current schema since.
        for f in spec.fields:
            if any(self.schema.find_field(i) is None for i in f.source_ids):
                for s in reversed(self.table.metadata.schemas):
                    if all(s.find_field(i) is not None for pf in spec.fields for i in pf.source_ids):
                        return s
        return self.schema

    def partition(self, spec_id: int, partition: Sequence[Any]) -> list[tuple[str, str | None]]:
        spec, _, sources = self.spec(spec_id)
        out: list[tuple[str, str | None]] = []
        for pf, source, value in zip(spec.fields, sources, partition, strict=False):
            out.append((pf.name, None if value is None else partition_text(pf, source, value)))
        return out

    def summaries(self, mf: ManifestFile) -> list[dict[str, Any]] | None:
        if mf.partitions is None:
            return None
        _, ptype, _ = self.spec(mf.partition_spec_id)
        out = []
        for s, f in zip(mf.partitions, ptype.fields, strict=False):
            out.append(
                {
                    "contains_null": s.contains_null,
                    "contains_nan": s.contains_nan,
                    "lower_bound": bound_text(f.type, s.lower_bound),
                    "upper_bound": bound_text(f.type, s.upper_bound),
                }
            )
        return out

    def metrics(self, df: DataFile) -> list[tuple[str, dict[str, Any]]]:
        """`readable_metrics`: column name to decoded statistics."""
        return [(name, m) for _, name, m in self.column_metrics(df)]

    def column_metrics(self, df: DataFile) -> list[tuple[int, str, dict[str, Any]]]:
        """Per column field id with statistics: (field id, column name, decoded statistics)."""
        ids = sorted(
            set(df.column_sizes)
            | set(df.value_counts)
            | set(df.null_value_counts)
            | set(df.nan_value_counts)
            | set(df.lower_bounds)
            | set(df.upper_bounds)
        )
        out: list[tuple[int, str, dict[str, Any]]] = []
        for fid in ids:
            name = self.schema.column_name(fid) or f"field_{fid}"
            t = self.schema.find_type(fid)
            out.append(
                (
                    fid,
                    name,
                    {
                        "column_size": df.column_sizes.get(fid),
                        "value_count": df.value_counts.get(fid),
                        "null_value_count": df.null_value_counts.get(fid),
                        "nan_value_count": df.nan_value_counts.get(fid),
                        "lower_bound": bound_text(t, df.lower_bounds.get(fid)),
                        "upper_bound": bound_text(t, df.upper_bounds.get(fid)),
                    },
                )
            )
        return out


def partition_text(pf: PartitionField, source: IcebergType | None, value: Any) -> str:
    if source is None:
        return str(value)
    try:
        return pf.transform.to_human(source, value)
    except Exception:  # an oddly encoded value must not hide every other row
        return str(value)


def bound_text(t: IcebergType | None, data: bytes | None) -> str | None:
    """A bound's bytes as DuckDB prints the value (hex for types without a readable form)."""
    if data is None:
        return None
    if t is None or not is_primitive(t):
        return "0x" + data.hex()
    try:
        return values.to_human(t, values.from_bytes(t, data))
    except Exception:  # a bound an old writer encoded oddly must not hide every other row
        return "0x" + data.hex()


def _manifests_of(table: Table, snapshots: Iterable[Snapshot]) -> Iterable[tuple[Snapshot, ManifestFile]]:
    for snap in snapshots:
        for mf in table.manifests(snap):
            yield snap, mf


# -- iceberg_manifests ------------------------------------------------------------------------

def _entry_field(name: str) -> Callable[[tuple[Snapshot, ManifestFile], Any], Any]:
    return lambda row, _: getattr(row[1], name)


# rows: (snapshot, manifest list entry); context: the table's decoder. The count and id columns
# are the entry's fields of the same name.
_MANIFEST_COLUMNS: list[Column] = [
    ("content", pa.string(), lambda r, _: MANIFEST_CONTENT_NAMES.get(r[1].content, str(r[1].content))),
    ("path", pa.string(), lambda r, _: r[1].manifest_path),
    ("length", pa.int64(), lambda r, _: r[1].manifest_length),
    *(
        (name, t, _entry_field(name))
        for name, t in [
            ("partition_spec_id", pa.int32()),
            ("added_snapshot_id", pa.int64()),
            ("sequence_number", pa.int64()),
            ("min_sequence_number", pa.int64()),
            ("added_files_count", pa.int32()),
            ("existing_files_count", pa.int32()),
            ("deleted_files_count", pa.int32()),
            ("added_rows_count", pa.int64()),
            ("existing_rows_count", pa.int64()),
            ("deleted_rows_count", pa.int64()),
            ("first_row_id", pa.int64()),
        ]
    ),
    ("partition_summaries", pa.list_(SUMMARY), lambda r, dec: dec.summaries(r[1])),
    ("reference_snapshot_id", pa.int64(), lambda r, _: r[0].snapshot_id),
]
MANIFESTS = columns_schema(_MANIFEST_COLUMNS)


def manifests(table: Table, snapshot: Snapshot | None, *, all_snapshots: bool = False) -> pa.Table:
    """The manifests of a snapshot, or of every snapshot (`all_snapshots`, one row per snapshot and manifest)."""
    snaps = list(table.metadata.snapshots) if all_snapshots else ([snapshot] if snapshot else [])
    return columns_table(_MANIFEST_COLUMNS, MANIFESTS, _manifests_of(table, snaps), StatsDecoder.of(table))


# -- iceberg_files / iceberg_entries ----------------------------------------------------------

DATA_FILE_FIELDS: list[tuple[str, pa.DataType]] = [
    ("content", pa.string()),
    ("file_path", pa.string()),
    ("file_format", pa.string()),
    ("spec_id", pa.int32()),
    ("partition", STR_MAP),
    ("record_count", pa.int64()),
    ("file_size_in_bytes", pa.int64()),
    ("column_sizes", INT_LONG_MAP),
    ("value_counts", INT_LONG_MAP),
    ("null_value_counts", INT_LONG_MAP),
    ("nan_value_counts", INT_LONG_MAP),
    ("lower_bounds", INT_BIN_MAP),
    ("upper_bounds", INT_BIN_MAP),
    ("key_metadata", pa.binary()),
    ("split_offsets", pa.list_(pa.int64())),
    ("equality_ids", pa.list_(pa.int32())),
    ("sort_order_id", pa.int32()),
    ("first_row_id", pa.int64()),
    ("referenced_data_file", pa.string()),
    ("content_offset", pa.int64()),
    ("content_size_in_bytes", pa.int64()),
]
ENTRY_FIELDS: list[tuple[str, pa.DataType]] = [
    ("status", pa.string()),
    ("snapshot_id", pa.int64()),
    ("sequence_number", pa.int64()),
    ("file_sequence_number", pa.int64()),
]
FILES = pa.schema([*DATA_FILE_FIELDS, ("manifest_path", pa.string()), ("readable_metrics", READABLE_METRICS)])
ENTRIES = pa.schema(
    [*ENTRY_FIELDS, *DATA_FILE_FIELDS, ("manifest_path", pa.string()), ("readable_metrics", READABLE_METRICS)]
)

_CONTENT_FILTER = {"data": (0,), "delete": (1, 2), "deletes": (1, 2), "all": (0, 1, 2), None: (0, 1, 2)}


def _file_rows(
    table: Table,
    snapshot: Snapshot | None,
    schema: pa.Schema,
    *,
    content: tuple[int, ...],
    include_deleted: bool,
    columns: Sequence[str] | None,
) -> pa.RecordBatchReader:
    """One batch per manifest, streamed: memory holds one manifest's rows at a time, not the
    snapshot's. Every manifest is read (and validated) first, so a bad one fails the call
    with its own message rather than part-way through the stream; that pass keeps no more than
    a chunk of decoded manifests and what the byte-bounded manifest cache holds (what it could
    not keep is decoded again while streaming)."""
    wanted = set(columns) if columns else set(schema.names)
    mfs = table.manifests(snapshot)
    for _ in table.iter_manifests(mfs):
        pass
    dec = StatsDecoder.of(table)

    def batches() -> Iterator[pa.RecordBatch]:
        for mf in mfs:
            m = table.manifest(mf)
            statuses, contents = m.statuses, m.contents
            rows = [
                i
                for i in range(len(m))
                if contents[i] in content and (include_deleted or statuses[i] != STATUS_DELETED)
            ]
            if not rows:
                continue
            # Column by column from the manifest's columns, and only the columns the query reads
            # (e.g. count(*) needs none): no entry objects unless readable_metrics is read.
            arrays = [
                pa.array(_column(name, m, mf, rows, dec), type=schema.field(name).type)
                if name in wanted
                else pa.nulls(len(rows), schema.field(name).type)
                for name in schema.names
            ]
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


def _column(name: str, m: Manifest, mf: ManifestFile, rows: list[int], dec: StatsDecoder) -> list[Any]:
    if name == "readable_metrics":
        return [dec.metrics(m.entry(i).data_file) for i in rows]
    if name == "manifest_path":
        return [mf.manifest_path] * len(rows)
    values = m.column(name)
    if name == "status":
        return [STATUS_NAMES.get(values[i], str(values[i])) for i in rows]
    if name == "content":
        return [CONTENT_NAMES.get(values[i], str(values[i])) for i in rows]
    if name == "partition":
        spec_id = mf.partition_spec_id
        texts: dict[tuple[Any, ...], list[tuple[str, str | None]]] = {}
        out = []
        for i in rows:
            part = values[i]
            text = texts.get(part)
            if text is None:
                text = texts[part] = dec.partition(spec_id, part)
            out.append(text)
        return out
    if name in _MAP_COLUMNS:
        return [list(values[i].items()) for i in rows]
    return [values[i] for i in rows]


_MAP_COLUMNS = frozenset(
    ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds", "upper_bounds")
)


def files(
    table: Table,
    snapshot: Snapshot | None,
    *,
    content: str | None = "all",
    columns: Sequence[str] | None = None,
) -> pa.RecordBatchReader:
    """Live data and/or delete files of a snapshot (`content`: 'data', 'delete' or 'all')."""
    key = content.lower() if content else None
    if key not in _CONTENT_FILTER:
        raise ValueError(f"content must be 'data', 'delete' or 'all', not {content!r}")
    return _file_rows(
        table, snapshot, FILES, content=_CONTENT_FILTER[key], include_deleted=False, columns=columns
    )


def entries(
    table: Table, snapshot: Snapshot | None, *, columns: Sequence[str] | None = None
) -> pa.RecordBatchReader:
    """Every manifest entry of a snapshot, DELETED ones included, with their tracking columns."""
    return _file_rows(table, snapshot, ENTRIES, content=(0, 1, 2), include_deleted=True, columns=columns)


# -- iceberg_partitions -----------------------------------------------------------------------

# The counts and sizes iceberg_partitions adds up per partition.
_PARTITION_TOTALS = (
    "record_count",
    "file_count",
    "total_data_file_size_in_bytes",
    "position_delete_record_count",
    "position_delete_file_count",
    "dv_count",
    "equality_delete_record_count",
    "equality_delete_file_count",
)


def _total(name: str) -> Callable[[Any, Any], Any]:
    return lambda row, _: row[2][name]


# rows: (spec id, partition tuple, totals by name, the last snapshot that changed it); context: the decoder
_PARTITION_COLUMNS: list[Column] = [
    ("partition", STR_MAP, lambda r, dec: dec.partition(r[0], r[1])),
    ("spec_id", pa.int32(), lambda r, _: r[0]),
    *((name, pa.int64(), _total(name)) for name in _PARTITION_TOTALS),
    ("last_updated_at", pa.timestamp("ms", tz="UTC"), lambda r, _: r[3].timestamp_ms if r[3] else None),
    ("last_updated_snapshot_id", pa.int64(), lambda r, _: r[3].snapshot_id if r[3] else None),
]
PARTITIONS = columns_schema(_PARTITION_COLUMNS)


class _NaN:
    """Stands for NaN in a partition's grouping key: NaN != NaN in Python, yet files of a NaN
    partition value are one partition (as in Spark's `partitions` metadata table)."""

    def __repr__(self) -> str:
        return "NaN"


_NAN = _NaN()


def _grouping_key(partition: Any) -> tuple[Any, ...]:
    return tuple(_NAN if isinstance(v, float) and math.isnan(v) else v for v in partition)


def partitions(table: Table, snapshot: Snapshot | None) -> pa.Table:
    """Per partition: record, file and delete counts, sizes, and the last update.

    A partition is a value of the table's unified partition type (every partition field of every
    spec, by field id; a field a spec lacks is null), as in Java Iceberg's `partitions` table: after
    partition evolution, files of two specs whose values agree there are one partition (e.g. `x` null
    in a spec of `(x)` and `ts_day` null in a later spec of `(ts_day)`). Its `spec_id` and `partition`
    are those of its newest data file (by commit time)."""
    ids_of = {spec.spec_id: [pf.field_id for pf in spec.fields] for spec in table.metadata.partition_specs}
    unified_ids = sorted({i for ids in ids_of.values() for i in ids})

    def grouping(spec_id: int, partition: Any) -> tuple[Any, ...]:
        values = _grouping_key(partition)
        ids = ids_of.get(spec_id)
        if ids is None or len(ids) != len(values):  # a spec the metadata lacks: by itself
            return (spec_id, values)
        by_id = dict(zip(ids, values, strict=True))
        return tuple(by_id.get(i) for i in unified_ids)

    totals: dict[tuple[Any, ...], dict[str, int]] = {}
    last: dict[tuple[Any, ...], Snapshot | None] = {}
    # the file that names the partition: (its data file's commit time or -1, spec id, partition)
    shown: dict[tuple[Any, ...], tuple[int, int, tuple[Any, ...]]] = {}
    for entry in table.entries(snapshot):
        df = entry.data_file
        key = grouping(df.spec_id, df.partition)
        s = totals.get(key)
        snap = table.metadata.snapshot_by_id(entry.snapshot_id) if entry.snapshot_id is not None else None
        if s is None:
            s = totals[key] = dict.fromkeys(_PARTITION_TOTALS, 0)
            last[key] = None
            shown[key] = (-2, df.spec_id, tuple(df.partition))
        if df.content == 0:
            s["record_count"] += df.record_count
            s["file_count"] += 1
            s["total_data_file_size_in_bytes"] += df.file_size_in_bytes
            at = snap.timestamp_ms if snap is not None else -1
            if at > shown[key][0]:
                shown[key] = (at, df.spec_id, tuple(df.partition))
        elif df.content == 1:
            s["position_delete_record_count"] += df.record_count
            s["position_delete_file_count"] += 1
            s["dv_count"] += df.is_deletion_vector
        else:
            s["equality_delete_record_count"] += df.record_count
            s["equality_delete_file_count"] += 1
        newest = last[key]
        if snap is not None and (newest is None or snap.timestamp_ms > newest.timestamp_ms):
            last[key] = snap
    rows = [(shown[key][1], shown[key][2], s, last[key]) for key, s in totals.items()]
    return columns_table(_PARTITION_COLUMNS, PARTITIONS, rows, StatsDecoder.of(table))
