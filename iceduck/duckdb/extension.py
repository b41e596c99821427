"""The DuckDB iceberg extension's metadata functions, under its names and with its columns.

Someone coming from the extension can keep their queries: `iceberg_metadata` (one row per
manifest entry, DELETED ones included), `iceberg_partition_stats` (one row per manifest and
partition field, from the manifest list's partition summaries) and `iceberg_column_stats` (one
row per live file and column) take the extension's parameters (`snapshot_from_id`,
`snapshot_from_timestamp`, `version`, `version_name_format`, `metadata_compression_codec`,
`allow_moved_paths`) and return its column names, types and texts (upper-case status and content
names, paths as the metadata records them, bounds as DuckDB prints the values). iceduck's own
functions (`iceberg_entries`, `iceberg_files`, `iceberg_manifests`) remain the richer view.

`allow_moved_paths` is accepted and changes nothing: iceduck always resolves a moved table's files
against where the table is now.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from iceduck.catalog.locate import locate_table
from iceduck.duckdb.context import SNAPSHOT_PARAMS, TABLE, VERSION, Context
from iceduck.duckdb.functions import Args, Param, TableFunction
from iceduck.inspect.files import _bound, _Decoder
from iceduck.spec.snapshots import Snapshot
from iceduck.table import Table
from iceduck.vocabulary import duck_type

EXTENSION_PARAMS = (
    TABLE,
    Param("snapshot_from_id", "BIGINT", doc="read this snapshot (the extension's name for snapshot_id)"),
    Param("snapshot_from_timestamp", "TIMESTAMPTZ", doc="read the snapshot current at this time"),
    VERSION,
    Param(
        "version_name_format", doc="metadata file name patterns of a table folder (v%s%s.metadata.json,...)"
    ),
    Param("metadata_compression_codec", doc="'gzip' for a folder of gzip metadata files"),
    Param("allow_moved_paths", "BOOLEAN", "false", doc="accepted; moved tables are always resolved"),
    *SNAPSHOT_PARAMS,  # iceduck's names for the same choices (snapshot_id, as_of, ref)
)

STATUS = {0: "EXISTING", 1: "ADDED", 2: "DELETED"}
CONTENT = {0: "DATA", 1: "POSITION_DELETES", 2: "EQUALITY_DELETES"}
MANIFEST_CONTENT = {0: "DATA", 1: "DELETE"}

METADATA = pa.schema(
    [
        ("manifest_path", pa.string()),
        ("manifest_sequence_number", pa.int64()),
        ("manifest_content", pa.string()),
        ("status", pa.string()),
        ("content", pa.string()),
        ("file_path", pa.string()),
        ("file_format", pa.string()),
        ("record_count", pa.int64()),
        ("data_sequence_number", pa.int64()),
        ("file_sequence_number", pa.int64()),
    ]
)
PARTITION_STATS = pa.schema(
    [
        ("manifest_path", pa.string()),
        ("added_snapshot_id", pa.int64()),
        ("partition_spec_id", pa.int32()),
        ("partition_field_id", pa.uint64()),
        ("partition_field_name", pa.string()),
        ("partition_source_columns", pa.list_(pa.string())),
        ("partition_field_transform", pa.string()),
        ("partition_field_type", pa.string()),
        ("lower_bound", pa.string()),
        ("upper_bound", pa.string()),
        ("contains_null", pa.bool_()),
        ("contains_nan", pa.bool_()),
    ]
)
COLUMN_STATS = pa.schema(
    [
        ("status", pa.string()),
        ("content", pa.string()),
        ("file_path", pa.string()),
        ("partition", pa.string()),
        ("column_name", pa.string()),
        ("column_type", pa.string()),
        ("lower_bound", pa.string()),
        ("upper_bound", pa.string()),
        ("column_size", pa.int64()),
        ("value_count", pa.int64()),
        ("null_value_count", pa.int64()),
        ("nan_value_count", pa.int64()),
        ("file_sequence_number", pa.int64()),
        ("field_id", pa.int32()),  # iceduck's addition, after the extension's columns
    ]
)


def _load(ctx: Context, args: Args) -> tuple[Table, Snapshot | None]:
    location = locate_table(
        str(args["tbl"]),
        version=args.get("version"),
        catalog=ctx.catalog,
        version_name_format=args.get("version_name_format"),
        metadata_compression_codec=args.get("metadata_compression_codec"),
    )
    table = Table.from_location(location)
    snapshot_id = args.get("snapshot_from_id")
    as_of = args.get("snapshot_from_timestamp")
    snapshot = table.snapshot(
        snapshot_id=snapshot_id if snapshot_id is not None else args.get("snapshot_id"),
        as_of=as_of if as_of is not None else args.get("as_of"),
        ref=args.get("ref"),
    )
    return table, snapshot


def metadata_rows(table: Table, snapshot: Snapshot | None) -> pa.Table:
    """`iceberg_metadata`: every manifest entry of the snapshot, with its manifest."""
    rows: dict[str, list[Any]] = {n: [] for n in METADATA.names}
    for mf in table.manifests(snapshot):
        for e in table.manifest(mf).entries:
            df = e.data_file
            for name, value in (
                ("manifest_path", mf.manifest_path),
                ("manifest_sequence_number", mf.sequence_number),
                ("manifest_content", MANIFEST_CONTENT.get(mf.content, str(mf.content))),
                ("status", STATUS.get(e.status, str(e.status))),
                ("content", CONTENT.get(df.content, str(df.content))),
                ("file_path", df.file_path),
                ("file_format", df.file_format.upper()),
                ("record_count", df.record_count),
                ("data_sequence_number", e.sequence_number),
                ("file_sequence_number", e.file_sequence_number),
            ):
                rows[name].append(value)
    return pa.table(rows, schema=METADATA)


def partition_stats_rows(table: Table, snapshot: Snapshot | None) -> pa.Table:
    """`iceberg_partition_stats`: per manifest and partition field, the manifest list's summary."""
    rows: dict[str, list[Any]] = {n: [] for n in PARTITION_STATS.names}
    dec = _Decoder.of(table)
    for mf in table.manifests(snapshot):
        if not mf.partitions:
            continue
        spec, ptype, _ = dec.spec(mf.partition_spec_id)
        schema = dec.schema
        for pf, field, summary in zip(spec.fields, ptype.fields, mf.partitions, strict=False):
            sources = [schema.column_name(i) or f"field_{i}" for i in pf.source_ids]
            for name, value in (
                ("manifest_path", mf.manifest_path),
                ("added_snapshot_id", mf.added_snapshot_id),
                ("partition_spec_id", mf.partition_spec_id),
                ("partition_field_id", pf.field_id),
                ("partition_field_name", pf.name),
                ("partition_source_columns", sources),
                ("partition_field_transform", str(pf.transform)),
                ("partition_field_type", duck_type(field.type)),
                ("lower_bound", _bound(field.type, summary.lower_bound)),
                ("upper_bound", _bound(field.type, summary.upper_bound)),
                ("contains_null", summary.contains_null),
                ("contains_nan", bool(summary.contains_nan)),
            ):
                rows[name].append(value)
    return pa.table(rows, schema=PARTITION_STATS)


def _partition_struct(dec: _Decoder, spec_id: int, partition: Any) -> str:
    # The extension prints the partition as a struct with positional field names r0, r1, ...
    parts = dec.partition(spec_id, partition)
    return "{" + ", ".join(f"'r{i}': {'NULL' if v is None else v}" for i, (_, v) in enumerate(parts)) + "}"


def column_stats_rows(table: Table, snapshot: Snapshot | None) -> pa.Table:
    """`iceberg_column_stats`: per live file and column of the schema with statistics."""
    rows: dict[str, list[Any]] = {n: [] for n in COLUMN_STATS.names}
    dec = _Decoder.of(table)
    schema = dec.schema
    for mf in table.manifests(snapshot):
        for e in table.manifest(mf).entries:
            if e.status == 2:
                continue
            df = e.data_file
            partition = _partition_struct(dec, df.spec_id, df.partition)
            for fid, name, m in dec.column_metrics(df):
                t = schema.find_type(fid)
                for key, value in (
                    ("status", STATUS.get(e.status, str(e.status))),
                    ("content", CONTENT.get(df.content, str(df.content))),
                    ("file_path", df.file_path),
                    ("partition", partition),
                    ("column_name", name),
                    ("column_type", duck_type(t) if t is not None else None),
                    ("lower_bound", m["lower_bound"]),
                    ("upper_bound", m["upper_bound"]),
                    ("column_size", m["column_size"]),
                    ("value_count", m["value_count"]),
                    ("null_value_count", m["null_value_count"]),
                    ("nan_value_count", m["nan_value_count"]),
                    ("file_sequence_number", e.file_sequence_number),
                    ("field_id", fid),
                ):
                    rows[key].append(value)
    return pa.table(rows, schema=COLUMN_STATS)


def extension_functions(ctx: Context) -> list[TableFunction]:
    """The extension's metadata functions for `all_functions`."""

    def function(name: str, schema: pa.Schema, rows: Any, doc: str) -> TableFunction:
        def run(args: Args, _columns: list[str] | None) -> pa.Table:
            return rows(*_load(ctx, args))

        def check(args: Args) -> None:
            _load(ctx, args)

        return TableFunction(name, EXTENSION_PARAMS, schema, run, doc, 10_000, check=check)

    return [
        function(
            "iceberg_metadata",
            METADATA,
            metadata_rows,
            "The DuckDB iceberg extension's iceberg_metadata: every manifest entry (DELETED ones included) with its manifest",
        ),
        function(
            "iceberg_partition_stats",
            PARTITION_STATS,
            partition_stats_rows,
            "The DuckDB iceberg extension's iceberg_partition_stats: per manifest and partition field, bounds and null/NaN flags",
        ),
        function(
            "iceberg_column_stats",
            COLUMN_STATS,
            column_stats_rows,
            "One row per live file and column with statistics (the DuckDB iceberg extension's columns, then field_id)",
        ),
    ]
