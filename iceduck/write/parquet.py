"""Writing Iceberg data files with DuckDB's own Parquet writer.

One `COPY (SELECT ...) TO '<staging folder>' (FORMAT parquet, FIELD_IDS {...}, RETURN_STATS, ...)`
writes every file of an append: DuckDB stamps the Iceberg field ids into the Parquet schema, splits
files at `write.target-file-size-bytes` (default 512 MB), fans rows out to partitions
(`PARTITION_BY` over text keys of the transformed values, see `iceduck.write.partition`), sorts
by the table's sort order, and reports each file's row count, size, partition key and column
statistics, from which `iceduck.write.metrics` builds the manifest metrics without reading any
file back. Files are then renamed from the staging folder to `data/<partition path>/<name>.parquet`
(a rename in the same folder tree: cheap and atomic); a writer that dies leaves only files no
metadata references. For a table on an object store the staging folder is a local temporary one
and each finished file is uploaded to its final key (an upload is visible whole or not at all).

Compression is `write.parquet.compression-codec` (default zstd, as Java and PyIceberg),
`write.parquet.compression-level` and `write.parquet.row-group-limit` (rows per row group) pass
through; `write.data.path` moves the data folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from iceduck.errors import IcebergError, ValidationError
from iceduck.io.fileio import FileIO, access_denied
from iceduck.io.fsspec_store import register_filesystems
from iceduck.io.paths import join_path
from iceduck.io.s3_duckdb import register_filesystem
from iceduck.io.storage import default_io, is_remote, s3_registry, store_registry
from iceduck.spec.manifest import CONTENT_DATA, DataFile
from iceduck.spec.partitioning import PartitionSpec
from iceduck.spec.sorting import NullOrder, SortDirection, SortOrder
from iceduck.spec.transforms import partition_path
from iceduck.spec.types import IcebergType, ListType, MapType, NestedField, Schema, StructType
from iceduck.vocabulary import quote_ident, quote_str
from iceduck.write import bucket
from iceduck.write.metrics import file_metrics, iter_required_violations, leaf_columns, modes_for
from iceduck.write.parquet_footer import strip_int32_annotations
from iceduck.write.partition import (
    PartitionColumn,
    column_sql,
    key_sql,
    parse_key,
    partition_columns,
    transform_sql,
)
from iceduck.write.types import (
    LAST_UPDATED_SEQUENCE_NUMBER,
    LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID,
    ROW_ID,
    ROW_ID_FIELD_ID,
    check_writable,
)

DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024
DEFAULT_CODEC = "zstd"
_CODECS = {
    "zstd": "zstd",
    "snappy": "snappy",
    "gzip": "gzip",
    "uncompressed": "uncompressed",
    "lz4": "lz4_raw",
    "brotli": "brotli",
}
_KEY_PREFIX = "__iceduck_p"


@dataclass(frozen=True, slots=True)
class WriteTarget:
    """Where and how to write data files for a table: location, schema, spec, order, properties."""

    location: str
    schema: Schema
    spec: PartitionSpec
    sort_order: SortOrder
    properties: Mapping[str, str] = field(default_factory=dict)
    # the table's FileIO (its connection's S3 settings); the process's when None
    io: FileIO | None = field(default=None, compare=False)

    @property
    def data_path(self) -> str:
        """The folder data files go to (`write.data.path`, else `<location>/data`)."""
        return self.properties.get("write.data.path") or join_path(self.location, "data")


def field_ids_literal(fields: Sequence[NestedField], lineage: bool = False) -> str:
    """The `FIELD_IDS` option value for columns `fields` (plus the row lineage columns)."""
    items = [
        f"{quote_str(f.name)}: {_field_id_spec(f.id, f.type)}" for f in fields if f.type.name != "unknown"
    ]
    if lineage:
        items.append(f"{quote_str(ROW_ID)}: {ROW_ID_FIELD_ID}")
        items.append(f"{quote_str(LAST_UPDATED_SEQUENCE_NUMBER)}: {LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID}")
    return "{" + ", ".join(items) + "}"


def _field_id_spec(fid: int, t: IcebergType) -> str:
    if isinstance(t, StructType):
        children = [f"{quote_str(c.name)}: {_field_id_spec(c.id, c.type)}" for c in t.fields]
        return "{" + ", ".join([f"__duckdb_field_id: {fid}", *children]) + "}"
    if isinstance(t, ListType):
        return f"{{__duckdb_field_id: {fid}, 'element': {_field_id_spec(t.element_id, t.element)}}}"
    if isinstance(t, MapType):
        key = _field_id_spec(t.key_id, t.key)
        value = _field_id_spec(t.value_id, t.value)
        return f"{{__duckdb_field_id: {fid}, 'key': {key}, 'value': {value}}}"
    return str(fid)


def sort_sql(order: SortOrder, schema: Schema) -> list[str]:
    """ORDER BY terms of a sort order (transforms applied), or [] when unsorted."""
    terms = []
    for sf in order.fields:
        if len(sf.source_ids) != 1:
            raise ValidationError(f"sort field {sf}: iceduck cannot sort by multi-argument transforms")
        source = schema.find_type(sf.source_id)
        if source is None:
            continue  # the column was dropped: nothing to sort by
        expr = transform_sql(sf.transform, source, column_sql(schema, sf.source_id))
        direction = "DESC" if sf.direction == SortDirection.DESC else "ASC"
        nulls = "NULLS FIRST" if sf.null_order == NullOrder.NULLS_FIRST else "NULLS LAST"
        terms.append(f"{expr} {direction} {nulls}")
    return terms


def _copy_options(target: WriteTarget, lineage: bool, keys: list[str], pattern: str) -> str:
    props = target.properties
    codec_name = props.get("write.parquet.compression-codec", DEFAULT_CODEC).lower()
    codec = _CODECS.get(codec_name)
    if codec is None:
        raise ValidationError(f"write.parquet.compression-codec: unsupported codec {codec_name!r}")
    try:
        target_size = int(props.get("write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE))
    except ValueError:
        raise ValidationError("write.target-file-size-bytes must be an integer") from None
    options = [
        "FORMAT parquet",
        f"COMPRESSION {codec}",
        f"FIELD_IDS {field_ids_literal(target.schema.fields, lineage)}",
        "RETURN_STATS",
        f"FILE_SIZE_BYTES {max(target_size, 1)}",
        f"FILENAME_PATTERN {quote_str(pattern)}",
    ]
    if "write.parquet.compression-level" in props:
        options.append(f"COMPRESSION_LEVEL {int(props['write.parquet.compression-level'])}")
    if "write.parquet.row-group-limit" in props:
        options.append(f"ROW_GROUP_SIZE {int(props['write.parquet.row-group-limit'])}")
    if keys:
        options.append("PARTITION_BY (" + ", ".join(quote_ident(k) for k in keys) + ")")
        options.append("WRITE_PARTITION_COLUMNS false")
    return ", ".join(options)


def needs_connection(target: WriteTarget) -> bool:
    """Whether writing for `target` takes more than one statement (sorted and partitioned)."""
    return not target.sort_order.is_unsorted and not target.spec.is_unpartitioned


def uses_bucket(target: WriteTarget) -> bool:
    """Whether writing for `target` calls the bucket UDFs (partition or sort by bucket)."""
    transforms = [f.transform for f in target.spec.fields] + [f.transform for f in target.sort_order.fields]
    return any(str(t).startswith("bucket") for t in transforms)


def prepare_connection(con: Any, io: FileIO | None = None) -> None:
    """Session settings the writer relies on: UTC (timestamptz text), the bucket UDFs, and the
    S3, GCS and Azure filesystems with the settings of `io` (the writer's SELECT may read their files)."""
    con.execute("SET TimeZone = 'UTC'")
    register_filesystem(con, s3_registry(io))
    register_filesystems(con, store_registry(io))
    bucket.register_bucket_functions(con)


def write_data_files(
    con: Any,
    select_sql: str,
    target: WriteTarget,
    *,
    lineage: bool = False,
    spec_id: int | None = None,
    run: Callable[[str], list[tuple[Any, ...]]] | None = None,
) -> list[DataFile]:
    """Write the rows of `select_sql` as data files of `target`; returns their `DataFile`s.

    `select_sql` must produce one column per (non-`unknown`) schema field, named and typed as the
    schema says (see `iceduck.write.types.duck_type`), plus `_row_id` and
    `_last_updated_sequence_number` when `lineage` is set (rows moved by a rewrite keep their
    lineage). `con` is a DuckDB connection prepared with `prepare_connection`. Raises
    `ValidationError` naming the column when a required column would hold nulls (nothing is kept).

    `run`, when given, executes the one COPY statement instead of `con` (e.g. on the connection a
    DuckDB relation belongs to, so its rows never leave DuckDB); it cannot serve sorted partitioned
    writes, which take several statements (`needs_connection` tells).
    """
    schema, spec = target.schema, target.spec
    fio = target.io or default_io()
    check_writable(schema)
    pcols: list[PartitionColumn] = [] if spec.is_unpartitioned else partition_columns(spec, schema)
    keyed = [(i, pc) for i, pc in enumerate(pcols) if pc.result_type is not None and pc.sql != "NULL"]
    keys = [f"{_KEY_PREFIX}{i}" for i, _ in keyed]

    columns = [quote_ident(f.name) for f in schema.fields if f.type.name != "unknown"]
    if lineage:
        columns += [quote_ident(ROW_ID), quote_ident(LAST_UPDATED_SEQUENCE_NUMBER)]
    select = list(columns)
    for (_, pc), key in zip(keyed, keys, strict=True):
        assert pc.result_type is not None
        select.append(f"{key_sql(pc.sql, pc.result_type)} AS {quote_ident(key)}")
    order = sort_sql(target.sort_order, schema)

    write_id = uuid.uuid4().hex
    data_path = target.data_path
    # Object stores: DuckDB writes to a local staging folder (its partitioned COPY cannot target
    # an fsspec path) and each finished file is uploaded; an upload appears whole or not at all.
    remote = is_remote(data_path)
    if remote:
        made = tempfile.mkdtemp(prefix="iceduck-staging-")
        scratch: str | None = made
        staging = os.path.join(made, write_id)
    else:
        scratch = None
        staging = join_path(data_path, f".iceduck-staging-{write_id}")
        try:
            # made here rather than by DuckDB's COPY, so a refusal names the table's data folder,
            # not a temporary one, in one line (COPY writes into an empty folder as it would a new one)
            os.makedirs(staging)
        except OSError as e:
            denied = access_denied(e, data_path, "writing")
            if denied is None:
                raise
            raise denied from None
    moved: list[str] = []
    # (file name, row count, size, column stats, partition keys) of every written file
    written: list[tuple[str, int, int, Mapping[str, Any], Mapping[str, str]]] = []
    try:
        if order and keys:
            if run is not None:
                raise ValidationError("sorted partitioned writes need a connection, not a statement runner")
            written = _write_sorted_partitions(
                con, select_sql, select, order, keys, target, lineage, staging, write_id
            )
        else:
            query = f"SELECT {', '.join(select)} FROM ({select_sql}) AS __iceduck_rows"
            if order:
                query += " ORDER BY " + ", ".join(order)
            options = _copy_options(target, lineage, keys, f"{write_id}-{{i}}")
            statement = f"COPY ({query}) TO {quote_str(staging)} ({options})"
            rows = run(statement) if run is not None else con.execute(statement).fetchall()
            written = [(r[0], r[1], r[2], r[4] or {}, r[5] or {}) for r in rows]
        leaves = leaf_columns(schema)
        modes = modes_for(schema, target.properties)
        # Iceberg `int` columns as Java writes them (bare INT32): see iceduck.write.parquet_footer
        bare_ints = any(leaf.field.type.name == "int" for leaf in leaves)
        files: list[DataFile] = []
        for n, (filename, count, size, stats, partition_keys) in enumerate(
            sorted(written, key=lambda r: r[0])
        ):
            if not count:
                with contextlib.suppress(OSError):
                    os.remove(filename)
                continue
            bad = list(iter_required_violations(stats, schema))
            if bad:
                column, nulls = bad[0]
                raise ValidationError(f"required column {column} would hold {nulls} null value(s)")
            if bare_ints:
                size = strip_int32_annotations(filename, int(size))
            partition = _partition_values(pcols, keyed, keys, partition_keys)
            folder = data_path
            if not spec.is_unpartitioned:
                rel = partition_path(
                    (pc.name, pc.transform, pc.source_type, value)
                    for pc, value in zip(pcols, partition, strict=True)
                    if pc.source_type is not None
                )
                folder = join_path(data_path, rel) if rel else data_path
            final = join_path(folder, f"{write_id}-{n:05d}.parquet")
            if remote:
                moved.append(final)  # before the upload: a failed multipart upload may still leave it
                fio.put_file(filename, final)
            else:
                fio.put_file(filename, final)  # fsync'ed: the commit will point at it
                moved.append(final)
            metrics = file_metrics(stats, leaves, modes)
            files.append(
                DataFile(
                    CONTENT_DATA,
                    final,
                    "PARQUET",
                    spec.spec_id if spec_id is None else spec_id,
                    partition,
                    int(count),
                    int(size),
                    metrics.column_sizes,
                    metrics.value_counts,
                    metrics.null_value_counts,
                    metrics.nan_value_counts,
                    metrics.lower_bounds,
                    metrics.upper_bounds,
                    sort_order_id=None if target.sort_order.is_unsorted else target.sort_order.order_id,
                )
            )
        return files
    except BaseException:
        remove_files(moved, fio)
        raise
    finally:
        shutil.rmtree(scratch or staging, ignore_errors=True)


def _write_sorted_partitions(
    con: Any,
    select_sql: str,
    select: list[str],
    order: list[str],
    keys: list[str],
    target: WriteTarget,
    lineage: bool,
    staging: str,
    write_id: str,
) -> list[tuple[str, int, int, Mapping[str, Any], Mapping[str, str]]]:
    """Sorted files per partition: DuckDB's partitioned COPY does not keep row order, so the rows
    are sorted once into a temporary table and each partition is copied on its own (a filtered
    scan keeps insertion order)."""
    temp = quote_ident(f"__iceduck_sorted_{write_id}")
    key_list = ", ".join(quote_ident(k) for k in keys)
    con.execute(
        f"CREATE TEMP TABLE {temp} AS SELECT {', '.join(select)} FROM ({select_sql}) AS __iceduck_rows "
        f"ORDER BY {key_list}, {', '.join(order)}"
    )
    try:
        parts = con.execute(f"SELECT DISTINCT {key_list} FROM {temp}").fetchall()
        os.makedirs(staging, exist_ok=True)
        columns = [s for s in select if not any(s.endswith(f"AS {quote_ident(k)}") for k in keys)]
        out: list[tuple[str, int, int, Mapping[str, Any], Mapping[str, str]]] = []
        for i, values in enumerate(parts):
            where = " AND ".join(
                f"{quote_ident(k)} = {quote_str(v)}" for k, v in zip(keys, values, strict=True)
            )
            options = _copy_options(target, lineage, [], f"{write_id}-p{i}-{{i}}")
            rows = con.execute(
                f"COPY (SELECT {', '.join(columns)} FROM {temp} WHERE {where}) TO "
                f"{quote_str(join_path(staging, str(i)))} ({options})"
            ).fetchall()
            found = dict(zip(keys, values, strict=True))
            out += [(r[0], r[1], r[2], r[4] or {}, found) for r in rows]
        return out
    finally:
        con.execute(f"DROP TABLE IF EXISTS {temp}")


def _partition_values(
    pcols: list[PartitionColumn],
    keyed: list[tuple[int, PartitionColumn]],
    keys: list[str],
    found: Mapping[str, str],
) -> tuple[Any, ...]:
    values: list[Any] = [None] * len(pcols)
    for (i, pc), key in zip(keyed, keys, strict=True):
        text = found.get(key)
        if text is None:
            raise ValidationError(f"DuckDB reported no value for partition field {pc.name}")
        assert pc.result_type is not None
        values[i] = parse_key(text, pc.result_type)
    return tuple(values)


def remove_files(paths: Sequence[str], io: FileIO | None = None) -> None:
    """Delete written files (best effort) through `io` (the table's; the process's when None):
    used when a commit gives up."""
    if paths:
        with contextlib.suppress(OSError, IcebergError):
            (io or default_io()).delete_many(list(paths))
