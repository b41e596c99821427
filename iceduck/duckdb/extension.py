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

import contextlib
import decimal
import functools
import glob
import json
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import duckdb

from iceduck._lazy import LazyModule
from iceduck.catalog.locate import DATABASE_ALIAS, TableLocation, locate_table
from iceduck.duckdb.context import (
    EXTENSION_SNAPSHOT_PARAMS,
    SNAPSHOT_PARAMS,
    TABLE,
    VERSION,
    Context,
)
from iceduck.duckdb.functions import (
    USER_ERRORS,
    Args,
    Param,
    TableFunction,
    create_sql_udf,
    error_sql,
    no_columns,
    one_line,
    user_message,
)
from iceduck.errors import IcebergError, NamespaceNotFoundError, ValidationError
from iceduck.io.fileio import local_path
from iceduck.spec.snapshots import Snapshot
from iceduck.spec.table_metadata import table_metadata_to_json
from iceduck.spec.transforms import BucketTransform, TruncateTransform
from iceduck.spec.types import DecimalType, IcebergType, PrimitiveType
from iceduck.spec.values import from_json
from iceduck.table import Table
from iceduck.vocabulary import duck_type, quote_str

if TYPE_CHECKING:
    import pyarrow as pa

    from iceduck.inspect.files import StatsDecoder
else:
    pa = LazyModule("pyarrow")

EXTENSION_PARAMS = (
    TABLE,
    *EXTENSION_SNAPSHOT_PARAMS[:2],
    VERSION,
    Param(
        "version_name_format", doc="metadata file name patterns of a table folder (v%s%s.metadata.json,...)"
    ),
    Param("metadata_compression_codec", doc="'gzip' for a folder of gzip metadata files"),
    EXTENSION_SNAPSHOT_PARAMS[2],
    *SNAPSHOT_PARAMS,  # iceduck's names for the same choices (snapshot_id, as_of, ref)
)

STATUS = {0: "EXISTING", 1: "ADDED", 2: "DELETED"}
CONTENT = {0: "DATA", 1: "POSITION_DELETES", 2: "EQUALITY_DELETES"}
MANIFEST_CONTENT = {0: "DATA", 1: "DELETE"}

@functools.cache
def metadata_schema() -> pa.Schema:
    """`iceberg_metadata`'s rows (built at first use, as every schema here: pyarrow loads then)."""
    return pa.schema(
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
@functools.cache
def partition_stats_schema() -> pa.Schema:
    """`iceberg_partition_stats`' rows."""
    return pa.schema(
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
@functools.cache
def column_stats_schema() -> pa.Schema:
    """`iceberg_column_stats`' rows."""
    return pa.schema(
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
            ("field_id", pa.int32()),  # iceduck's additions, after the extension's columns
            ("distinct_count", pa.int64()),  # the column's, from the snapshot's newest statistics file
            ("distinct_count_snapshot_id", pa.int64()),  # the snapshot those statistics describe
        ]
    )


def metadata_rows(table: Table, snapshot: Snapshot | None) -> pa.Table:
    """`iceberg_metadata`: every manifest entry of the snapshot, with its manifest."""
    rows: dict[str, list[Any]] = {n: [] for n in metadata_schema().names}
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
    return pa.table(rows, schema=metadata_schema())


def partition_stats_rows(table: Table, snapshot: Snapshot | None) -> pa.Table:
    """`iceberg_partition_stats`: per manifest and partition field, the manifest list's summary."""
    from iceduck.inspect.files import StatsDecoder, bound_text  # with pyarrow: at the first call

    rows: dict[str, list[Any]] = {n: [] for n in partition_stats_schema().names}
    dec = StatsDecoder.of(table)
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
                ("lower_bound", bound_text(field.type, summary.lower_bound)),
                ("upper_bound", bound_text(field.type, summary.upper_bound)),
                ("contains_null", summary.contains_null),
                ("contains_nan", bool(summary.contains_nan)),
            ):
                rows[name].append(value)
    return pa.table(rows, schema=partition_stats_schema())


def _partition_struct(dec: StatsDecoder, spec_id: int, partition: Any) -> str:
    # The extension prints the partition as a struct with positional field names r0, r1, ...
    parts = dec.partition(spec_id, partition)
    return "{" + ", ".join(f"'r{i}': {'NULL' if v is None else v}" for i, (_, v) in enumerate(parts)) + "}"


def column_stats_rows(table: Table, snapshot: Snapshot | None) -> pa.Table:
    """`iceberg_column_stats`: per live file and column of the schema with statistics."""
    from iceduck.inspect.files import StatsDecoder  # with pyarrow: at the first call
    from iceduck.inspect.statistics import distinct_counts

    rows: dict[str, list[Any]] = {n: [] for n in column_stats_schema().names}
    dec = StatsDecoder.of(table)
    schema = dec.schema
    ndv = distinct_counts(table, snapshot)
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
                    ("distinct_count", ndv.counts.get(fid)),
                    ("distinct_count_snapshot_id", ndv.snapshot_id if fid in ndv.counts else None),
                ):
                    rows[key].append(value)
    return pa.table(rows, schema=column_stats_schema())


# ---------------------------------------------------------------------------------------------
# Catalog tables: iceberg_load_table_response, iceberg_table_properties, iceberg_schema_properties
# ---------------------------------------------------------------------------------------------
# The extension offers these for tables of an attached catalog only; so does iceduck (any of its
# catalogs: SQLite, folder, REST), and a path gets the extension's refusal with the function that
# reads a table by path.

@functools.cache
def _str_map() -> pa.DataType:
    return pa.map_(pa.string(), pa.string())


@functools.cache
def load_table_response_schema() -> pa.Schema:
    """`iceberg_load_table_response`'s rows."""
    return pa.schema(
        [
            ("metadata_location", pa.string()),
            ("metadata", pa.string()),  # JSON text, a VARIANT in SQL (column_sql)
            ("config", _str_map()),
            ("storage_credentials", pa.list_(pa.struct([("prefix", pa.string()), ("config", _str_map())]))),
            ("request_url", pa.string()),
        ]
    )


@functools.cache
def key_value_schema() -> pa.Schema:
    """`iceberg_table_properties`' and `iceberg_schema_properties`' rows."""
    return pa.schema([("key", pa.string()), ("value", pa.string())])


_AS_VARIANT = {"metadata": "CAST(CAST({} AS JSON) AS VARIANT)"}


def catalog_table(ctx: Context, function: str, arg: str, by_path: str) -> TableLocation:
    """The catalog table `arg` names; a path (or no catalog) is refused as the extension does."""
    on_disk = "://" not in arg and os.path.exists(local_path(arg))
    location = None if on_disk else locate_table(arg, catalog=ctx.catalog, io=ctx.io)
    if location is None or location.name is None:
        raise ValidationError(
            f"Cannot call {function}() on a file/directory ({arg}): it reads tables of a catalog; "
            f"use {by_path}({quote_str(arg)}) for a table by path"
        )
    return location


def _pairs(items: Any) -> list[tuple[str, str]]:
    return [(str(k), str(v)) for k, v in dict(items or {}).items()]


def load_table_response_rows(ctx: Context, arg: str) -> pa.Table:
    """`iceberg_load_table_response`: what loading the table from its catalog returns."""
    location = catalog_table(ctx, "iceberg_load_table_response", arg, "iceberg_metadata_log")
    namespace, _, name = str(location.name).rpartition(".")
    route = getattr(ctx.catalog, "route", None)  # `cat.ns.t` of an ATTACHed catalog: that catalog's `ns.t`
    catalog, namespace = route(namespace) if route is not None else (ctx.catalog, namespace)
    load = getattr(catalog, "load", None)  # a REST catalog keeps the whole response
    if load is not None:
        loaded = load(namespace, name)
        metadata_location, metadata = loaded.metadata_location, loaded.metadata
        config, credentials = (
            _pairs(loaded.config),
            [
                {"prefix": str(c.get("prefix", "")), "config": _pairs(c.get("config"))}
                for c in loaded.storage_credentials
            ],
        )
        url_of = getattr(catalog, "table_url", None)
        url = url_of(namespace, name) if url_of is not None else None
    else:
        table = Table.from_location(location, io=ctx.io)
        metadata_location, metadata = location.metadata_location, table.metadata
        config, credentials, url = [], [], None
    return pa.table(
        {
            "metadata_location": [metadata_location],
            "metadata": [json.dumps(table_metadata_to_json(metadata))],
            "config": [config],
            "storage_credentials": [credentials],
            "request_url": [url],
        },
        schema=load_table_response_schema(),
    )


def table_properties_rows(ctx: Context, arg: str) -> pa.Table:
    """`iceberg_table_properties`: the catalog table's properties, one row each."""
    location = catalog_table(ctx, "iceberg_table_properties", arg, "iceberg_properties")
    rows = sorted(Table.from_location(location, io=ctx.io).metadata.properties.items())
    return pa.table({"key": [k for k, _ in rows], "value": [v for _, v in rows]}, schema=key_value_schema())


def catalog_namespace(ctx: Context, arg: str) -> str:
    """The namespace `arg` names (`ns`, `a.b`, or with the catalog's name first: `lake.ns`)."""
    catalog = ctx.catalog
    if catalog is None:
        raise ValidationError(
            f"Cannot call iceberg_schema_properties() on {arg}: no catalog "
            "(iceduck.connect(warehouse), or iceduck.register(con, catalog=...))"
        )
    candidates = [arg]
    first, _, rest = arg.partition(".")
    if rest and first in (catalog.name, DATABASE_ALIAS):
        candidates.append(rest)
    for namespace in candidates:
        if catalog.namespace_exists(namespace):
            return namespace
    raise NamespaceNotFoundError(f"{arg}: no such schema (namespace) in catalog '{catalog.name}'")


def schema_properties_rows(ctx: Context, arg: str) -> pa.Table:
    """`iceberg_schema_properties`: the properties of a namespace of the catalog."""
    rows = sorted(ctx.catalog.namespace_properties(catalog_namespace(ctx, arg)).items())
    return pa.table({"key": [k for k, _ in rows], "value": [v for _, v in rows]}, schema=key_value_schema())


def catalog_functions(ctx: Context) -> list[TableFunction]:
    """The extension's catalog-table functions for `all_functions`."""
    table = Param("tbl", default=None, doc="a catalog table: ns.table or lake.ns.table")
    schema = Param("tbl", default=None, doc="a namespace of the catalog: ns or lake.ns")

    def function(
        name: str, param: Param, out: Callable[[], pa.Schema], rows: Any, doc: str, column_sql: Any = None
    ) -> TableFunction:
        def run(args: Args, _columns: list[str] | None) -> pa.Table:
            return rows(ctx, str(args["tbl"]))

        def check(args: Args) -> None:
            run(args, None)  # small: the errors then come from binding, as one line

        return TableFunction(name, (param,), out, run, doc, 10, check=check, column_sql=column_sql)

    return [
        function(
            "iceberg_load_table_response",
            table,
            load_table_response_schema,
            load_table_response_rows,
            "What loading a catalog table returns: metadata_location, metadata (VARIANT), config, "
            "storage_credentials, request_url (the DuckDB iceberg extension's columns)",
            _AS_VARIANT,
        ),
        function(
            "iceberg_table_properties",
            table,
            key_value_schema,
            table_properties_rows,
            "A catalog table's properties as key/value rows (the DuckDB iceberg extension's function)",
        ),
        function(
            "iceberg_schema_properties",
            schema,
            key_value_schema,
            schema_properties_rows,
            "A catalog namespace's properties as key/value rows (the DuckDB iceberg extension's function)",
        ),
    ]


def extension_functions(ctx: Context) -> list[TableFunction]:
    """The extension's metadata functions for `all_functions`."""

    def function(name: str, schema: Callable[[], pa.Schema], rows: Any, doc: str) -> TableFunction:
        def run(args: Args, _columns: list[str] | None) -> pa.Table:
            return rows(*ctx.table_at(args))

        return TableFunction(name, EXTENSION_PARAMS, schema, run, doc, 10_000, check=ctx.check_snapshot)

    return [
        function(
            "iceberg_metadata",
            metadata_schema,
            metadata_rows,
            "The DuckDB iceberg extension's iceberg_metadata: every manifest entry (DELETED ones included) with its manifest",
        ),
        function(
            "iceberg_partition_stats",
            partition_stats_schema,
            partition_stats_rows,
            "The DuckDB iceberg extension's iceberg_partition_stats: per manifest and partition field, bounds and null/NaN flags",
        ),
        function(
            "iceberg_column_stats",
            column_stats_schema,
            column_stats_rows,
            "One row per live file and column with statistics (the DuckDB iceberg extension's columns, then field_id and the column's distinct_count from the snapshot's newest statistics file, with the snapshot it describes)",
        ),
    ]


# ---------------------------------------------------------------------------------------------
# read_avro: DuckDB's avro extension's table function, for walking manifests by hand
# ---------------------------------------------------------------------------------------------

READ_AVRO_UDF = "__iceduck_read_avro_sql"
READ_AVRO_PARAMS = (
    Param("path", default=None, doc="an Avro file, a glob pattern, or a list of them"),
    Param("filename", "BOOLEAN", "false", doc="add a filename column naming each row's file"),
)
READ_AVRO_MACRO = (
    f"CREATE OR REPLACE TEMP MACRO read_avro(path, filename := false) AS TABLE "
    f"FROM query({READ_AVRO_UDF}(to_json(path), CAST(filename AS BOOLEAN)))"
)


def avro_paths(argument: Any) -> list[str]:
    """The files a `read_avro` path argument names: one path or glob, or a list of them, in order
    (a glob's matches sorted, as DuckDB lists them)."""
    patterns = argument if isinstance(argument, list) else [argument]
    found: list[str] = []
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise ValidationError(
                f"the path must be a string or a list of strings, not {json.dumps(pattern)}"
            )
        if "://" in pattern and not pattern.startswith("file:"):
            raise ValidationError(f"{pattern}: only local Avro files can be read")
        local = local_path(pattern)
        if glob.has_magic(local):
            matches = sorted(glob.glob(local, recursive=True))
            if not matches:
                raise ValidationError(f'No files found that match the pattern "{pattern}"')
            found.extend(matches)
        elif os.path.isfile(local):
            found.append(local)
        else:
            raise ValidationError(f'No files found that match the pattern "{pattern}"')
    return found


def read_avro_sql(path_json: str, filename: bool) -> str:
    """The query `read_avro` runs: each file's Parquet copy read back with DuckDB's avro types."""
    # imported here: the Avro/ORC/Parquet-copy readers load pyarrow.compute, which a session that
    # never reads an Avro file should not pay for at startup
    from iceduck.read.copies import avro_rows_copy

    parts = []
    for path in avro_paths(json.loads(path_json)):
        try:
            copy, columns = avro_rows_copy(path)
        except pa.ArrowException as e:  # a value the Parquet copy cannot hold
            raise ValidationError(f"{path}: cannot read this Avro file's rows ({one_line(str(e))})") from None
        select = ", ".join(columns.select)
        extra = f", {quote_str(path)} AS filename" if filename else ""
        parts.append(f"SELECT {select}{extra} FROM read_parquet({quote_str(copy)})")
    return parts[0] if len(parts) == 1 else " UNION ALL BY NAME ".join(f"({p})" for p in parts)


def avro_extension_loaded(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether DuckDB's own avro extension is loaded (then its read_avro stays)."""
    rows = con.execute("SELECT loaded FROM duckdb_extensions() WHERE extension_name = 'avro'").fetchall()
    return bool(rows and rows[0][0])


def _install_read_avro(con: duckdb.DuckDBPyConnection) -> None:
    def udf(path_json: str | None, filename: bool | None) -> str:
        if path_json is None or path_json == "null":
            return error_sql("read_avro: the path argument is required (got NULL)")
        try:
            return read_avro_sql(path_json, bool(filename))
        except USER_ERRORS as e:
            return error_sql(user_message("read_avro", e))

    create_sql_udf(con, READ_AVRO_UDF, udf, ["VARCHAR", "BOOLEAN"])


def read_avro_function() -> TableFunction:
    """`read_avro(path, filename := false)`: any Avro file's rows, with the DuckDB avro extension's
    types (read/avro.py). Installed only when that extension is not loaded, so DuckDB never tries
    to download it (offline, that fails)."""

    def unused(_args: Args, _columns: list[str] | None) -> pa.Table:
        raise AssertionError("read_avro runs as a query macro")

    return TableFunction(
        "read_avro",
        READ_AVRO_PARAMS,
        no_columns,
        unused,
        "The rows of Avro files (a path, glob or list), with DuckDB's avro extension's types; "
        "filename := true adds the file of each row",
        setup=_install_read_avro,
        macro=READ_AVRO_MACRO,
        installed_if=lambda con: not avro_extension_loaded(con),
    )


# ---------------------------------------------------------------------------------------------
# iceberg_bucket / iceberg_truncate: Iceberg's partition transforms as scalar functions
# ---------------------------------------------------------------------------------------------
# The transforms are iceduck's own (spec/transforms.py). A Python UDF has one signature, so the
# macros hand it the value as DuckDB's text with its type name (`typeof`), and iceberg_truncate
# reads the answer back into the value's own type with `from_json(..., '"<type>"')`.

TRANSFORM_UDF = "__iceduck_transform"
_INTEGERS = {"TINYINT": "int", "SMALLINT": "int", "INTEGER": "int", "BIGINT": "long"}
_INTEGER_BITS = {"TINYINT": 8, "SMALLINT": 16, "INTEGER": 32, "BIGINT": 64}
_TEXT_TYPES = {
    "DATE": "date",
    "TIME": "time",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP WITH TIME ZONE": "timestamptz",
    "TIMESTAMP_NS": "timestamp_ns",
    "TIMESTAMPTZ_NS": "timestamptz_ns",
    "VARCHAR": "string",
    "UUID": "uuid",
}
BUCKET_TYPES = (*_INTEGERS, *_TEXT_TYPES, "BLOB")  # and DECIMAL(p,s)
TRUNCATE_TYPES = (*_INTEGERS, "VARCHAR", "BLOB")  # and DECIMAL(p,s)


def _transform_macro(name: str, argument: str, types: tuple[str, ...], result: str, null: str) -> str:
    """A macro checking the argument and the value's type in SQL (one-line errors from DuckDB's own
    `error`), then calling the transform UDF on the value's text."""
    listed = ", ".join(quote_str(t) for t in types)
    call = f"{TRANSFORM_UDF}('{name}', CAST({argument} AS BIGINT), typeof(value), CAST(value AS VARCHAR))"
    return (
        f"CREATE OR REPLACE TEMP MACRO iceberg_{name}({argument}, value) AS CASE "
        f"WHEN typeof(value) NOT IN ({listed}) AND NOT starts_with(typeof(value), 'DECIMAL(') THEN "
        f"error('iceberg_{name}: a ' || typeof(value) || ' value has no Iceberg {name} transform "
        f"(it takes {', '.join(t.lower() for t in types)}, decimal)') "
        f"WHEN CAST({argument} AS BIGINT) <= 0 THEN "
        f"error('iceberg_{name}: {argument} must be a positive integer, got ' || CAST({argument} AS VARCHAR)) "
        f"WHEN value IS NULL THEN {null} "
        # the UDF answers a failure as chr(0) + the message, so it reaches the user as one line
        f"WHEN starts_with({call}, chr(0)) THEN error(substr({call}, 2)) "
        f"ELSE {result.format(call)} END"
    )


SCALAR_MACROS = (
    (
        "iceberg_bucket",
        _transform_macro(
            "bucket", "num_buckets", BUCKET_TYPES, "CAST({} AS INTEGER)", "CAST(NULL AS INTEGER)"
        ),
        "Iceberg's bucket partition value (INTEGER) of a value",
    ),
    (
        "iceberg_truncate",
        _transform_macro(
            "truncate", "width", TRUNCATE_TYPES, "from_json({}, '\"' || typeof(value) || '\"')", "value"
        ),
        "Iceberg's truncate partition value of a value, in the value's type",
    ),
)
_DECIMAL = re.compile(r"^DECIMAL\((\d+),(\d+)\)$")
_BLOB_ESCAPE = re.compile(rb"\\x([0-9A-Fa-f]{2})")
_SHORT_ZONE = re.compile(r"([+-]\d\d)$")


def duck_value(type_name: str, text: str) -> tuple[IcebergType, Any]:
    """The Iceberg type and internal value of a DuckDB value given as its type name and text."""
    if type_name in _INTEGERS:
        return PrimitiveType(_INTEGERS[type_name]), int(text)
    m = _DECIMAL.match(type_name)
    if m is not None:
        t = DecimalType(int(m.group(1)), int(m.group(2)))
        return t, decimal.Decimal(text)
    if type_name == "BLOB":  # DuckDB's text escapes every byte it does not print (and the backslash)
        return PrimitiveType("binary"), _BLOB_ESCAPE.sub(
            lambda b: bytes([int(b.group(1), 16)]), text.encode()
        )
    kind = _TEXT_TYPES.get(type_name)
    if kind is None:
        raise ValidationError(f"values of type {type_name} have no Iceberg transform")
    if text.endswith(" (BC)"):
        raise ValidationError(f"{text}: dates before year 1 are not supported")
    if kind.startswith("timestamp"):
        text = _SHORT_ZONE.sub(r"\1:00", text.replace(" ", "T", 1))
    return PrimitiveType(kind), from_json(PrimitiveType(kind), text)


def _duck_text(t: IcebergType, value: Any) -> str:
    if isinstance(value, bytes):
        return "".join(f"\\x{b:02X}" for b in value)
    if isinstance(t, DecimalType):
        return str(value)
    return str(value)


def transform_value(name: str, argument: int, type_name: str, text: str) -> str:
    """What iceberg_bucket / iceberg_truncate return for one value (text; JSON for truncate)."""
    t, value = duck_value(type_name, text)
    if name == "bucket":
        transform: BucketTransform | TruncateTransform = BucketTransform(argument)
    else:
        transform = TruncateTransform(argument)
    if not transform.can_transform(t):
        raise ValidationError(f"iceberg_{name}: values of type {type_name} cannot be {name}d")
    result = transform.apply(t, value)
    bits = _INTEGER_BITS.get(type_name)
    if bits is not None and not -(2 ** (bits - 1)) <= result < 2 ** (bits - 1):
        # Java's int arithmetic would wrap around here; a wrapped value is no truncation of this one
        raise ValidationError(f"truncate[{argument}] of {text} is {result}, outside the range of {type_name}")
    return str(result) if name == "bucket" else json.dumps(_duck_text(t, result))


def install_scalar_functions(con: duckdb.DuckDBPyConnection) -> None:
    """iceberg_bucket and iceberg_truncate on the connection."""

    def udf(name: str, argument: int | None, type_name: str, text: str | None) -> str | None:
        if argument is None or text is None:
            return None
        try:
            return transform_value(name, argument, type_name, text)
        except (IcebergError, ValueError, ArithmeticError) as e:
            return "\0" + user_message(f"iceberg_{name}", e)

    with contextlib.suppress(Exception):  # not registered yet
        con.remove_function(TRANSFORM_UDF)
    create: Any = con.create_function  # the stubs do not cover a callable of this shape
    create(
        TRANSFORM_UDF, udf, ["VARCHAR", "BIGINT", "VARCHAR", "VARCHAR"], "VARCHAR", null_handling="special"
    )
    for name, macro, doc in SCALAR_MACROS:
        con.execute(macro)
        con.execute(f"COMMENT ON MACRO {name} IS {quote_str(doc)}")
