"""How DuckDB reads a planned scan: one SQL statement over native `read_parquet`.

`scan_sql(plan, options)` turns a `ScanPlan` into SQL. Data files are read by Parquet field id with
`read_parquet(files, schema := MAP{field_id: {name, type, default_value, children}})`, which renames,
reorders, casts (type promotion) and fills defaults (`initial-default`) natively, nested fields
included. Files are grouped so that most of the table is one multi-file `read_parquet` call:

- plain files (field ids, no position deletes) share one call per set of equality deletes;
- files whose identity-partition columns may be absent from the file take the partition value
  (`coalesce(column, [values][file_index + 1])`) in their own group, so the plain group keeps
  filter pushdown on those columns;
- files with position deletes (deletion vectors or v2 position-delete files) either read alone,
  whole and in order, `POSITIONAL JOIN`ed to a boolean mask of live rows (fastest for full scans),
  or together, anti-joined on `(file_index, file_row_number)` with the deleted positions (keeps
  filter pushdown and row-group skipping; chosen when a filter is known);
- files without field ids read alone, columns chosen by the table's name mapping, else by Java's
  fallback ids (position) and names (read/columns.py).

Equality deletes are anti joins on the equality columns (`IS NOT DISTINCT FROM`: NULL equals NULL)
against the delete files the planner found applicable to the group (lower sequence numbers only,
same partition or global). Per-file constants (`_file`, first row ids, sequence numbers, partition
values) are constant lists indexed by DuckDB's `file_index`. Rows never pass through Python.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from iceduck._lazy import LazyModule
from iceduck.errors import (
    FileNotFoundInTableError,
    IcebergError,
    InvalidMetadataError,
    UnsupportedFormatError,
)
from iceduck.io.fileio import local_path
from iceduck.io.paths import split_scheme
from iceduck.read.columns import columns_without_ids
from iceduck.read.copies import needs_copy, parquet_copy
from iceduck.read.deletes import FileDeletes, encode_key, file_deletes
from iceduck.read.parquet_columns import (
    ParquetColumns,
    parquet_columns,
    plain_groups,
    prefetch_parquet_columns,
)
from iceduck.read.types import default_text
from iceduck.scan.deletes import KIND_EQUALITY, DeleteFile
from iceduck.scan.planner import NAME_MAPPING_PROPERTY, FileScanTask, ScanPlan, parse_name_mapping
from iceduck.spec.manifest import DataFile
from iceduck.spec.table_metadata import unassigned_field
from iceduck.spec.transforms import IdentityTransform
from iceduck.spec.types import (
    LONG,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    Schema,
    StructType,
)
from iceduck.spec.values import from_json, to_json
from iceduck.vocabulary import duck_literal, duck_type, keyed_rows, quote_ident, quote_str

# The footer pool's module (with logging, ~0.7 MB) loads when remote footers are first fetched.
if TYPE_CHECKING:
    import concurrent.futures as futures

    import pyarrow as pa
else:
    futures = LazyModule("concurrent.futures")
    pa = LazyModule("pyarrow")

FIELD_ID_ROW_ID = 2147483540
FIELD_ID_LAST_UPDATED = 2147483539

BITS_SOURCE = "__iceduck_scan_bits"
MASK_SOURCE = "__iceduck_scan_mask"
POSITIONS_SOURCE = "__iceduck_scan_positions"
DELETE_MODES = ("bitmap", "positional", "anti")
KEY_COLUMN = "__key"
FILENAME_COLUMN = "__filename"
# At most this many distinct identity-partition tuples get their own read_parquet call.
MAX_DEFAULT_GROUPS = 64
# Up to this many files without deletes read in one call take their identity-partition values as
# constants looked up by file name (`MAP{path: value}[filename]`): DuckDB evaluates a filter on
# such a column once per file while planning and skips failing files before opening them. (Its
# bind cost grows faster than linearly beyond a few thousand entries.)
MAX_FILE_CONSTANTS = 1000


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """What a scan's SQL returns and how it applies position deletes.

    `row_lineage` adds `_row_id` and `_last_updated_sequence_number`; `metadata_columns` adds
    `_file` (the data file path as recorded) and `_pos` (the row's position in it). `filter_sql` is a
    SQL predicate on the output columns, applied exactly (DuckDB pushes it into the Parquet reader).
    `deletes` says how position deletes are applied: "bitmap" (default: one bit per row, looked up
    with `get_bit(bits, file_row_number)`), "positional" (a boolean mask POSITIONAL JOINed to each
    file read whole) or "anti" (an anti join with the deleted positions); all give the same rows.
    """

    row_lineage: bool = False
    metadata_columns: bool = False
    filter_sql: str | None = None
    deletes: str = "bitmap"
    allow_bare_dvs: bool = False


def output_columns(schema: Schema, options: ReadOptions) -> list[tuple[str, str]]:
    """(name, DuckDB type) of every column a scan returns, in order."""
    cols = [(f.name, duck_type(f.type)) for f in schema.fields]
    if options.metadata_columns:
        cols += [("_file", "VARCHAR"), ("_pos", "BIGINT")]
    if options.row_lineage:
        cols += [("_row_id", "BIGINT"), ("_last_updated_sequence_number", "BIGINT")]
    return cols


def empty_sql(columns: Sequence[tuple[str, str]]) -> str:
    """A query with the given columns and no rows."""
    if not columns:
        return "SELECT 1 AS __empty LIMIT 0"
    return "SELECT " + ", ".join(f"CAST(NULL AS {t}) AS {quote_ident(n)}" for n, t in columns) + " LIMIT 0"


def scan_sql(plan: ScanPlan, options: ReadOptions | None = None) -> str:
    """The SQL that returns the rows of `plan` (see the module docstring)."""
    options = options or ReadOptions()
    columns = output_columns(plan.schema, options)
    if not plan.tasks:
        return empty_sql(columns)
    builder = _Builder(plan, options)
    branches = builder.branches()
    body = branches[0] if len(branches) == 1 else "\nUNION ALL\n".join(f"({b})" for b in branches)
    if options.filter_sql:
        body = f"SELECT * FROM ({body}) AS __scan WHERE ({options.filter_sql})"
    _remember_reads(builder.read_paths(), body)
    return body


# The files of the last scans handed to DuckDB, most recent last: DuckDB's Parquet reader reports
# damage found while decoding pages ("TProtocolException: Invalid data", "Out of buffer") without
# the file's name, and iceduck's front door looks for it among these (duckdb/damage.py). Each is
# (where DuckDB reads it, the file to name: an ORC/Avro file for its Parquet copy, the options of
# the scan's read_parquet call: DuckDB decodes some damage only when reading by field id).
PlannedRead = tuple[str, str, str]
_RECENT_READS: deque[tuple[PlannedRead, ...]] = deque(maxlen=8)
_RECENT_LOCK = threading.Lock()


_READS_OF_SQL: OrderedDict[str, tuple[PlannedRead, ...]] = OrderedDict()


def _remember_reads(paths: tuple[PlannedRead, ...], sql: str | None = None) -> None:
    with _RECENT_LOCK:
        if paths in _RECENT_READS:
            _RECENT_READS.remove(paths)
        _RECENT_READS.append(paths)
        if sql is not None:
            _READS_OF_SQL[sql] = paths
            while len(_READS_OF_SQL) > 32:  # a cached scan older than these is not searched
                _READS_OF_SQL.popitem(last=False)


def scan_sql_reused(sql: str) -> None:
    """A scan's SQL served again from a cache: its files are what the next statement reads."""
    with _RECENT_LOCK:
        paths = _READS_OF_SQL.get(sql)
    if paths is not None:
        _remember_reads(paths)


def recently_read() -> list[PlannedRead]:
    """The Parquet files of the last few scans as (where DuckDB reads it, the file it holds the rows
    of, the read_parquet options it is read with), the latest scan's first, each once."""
    with _RECENT_LOCK:
        plans = list(_RECENT_READS)
    return list(dict.fromkeys(p for paths in reversed(plans) for p in paths))


def forget_reads() -> None:
    """Start a statement: scans planned before it are not what its errors are about."""
    with _RECENT_LOCK:
        _RECENT_READS.clear()


# ---------------------------------------------------------------------------------------------
# Schema maps
# ---------------------------------------------------------------------------------------------


def _default(f: NestedField) -> str:
    if not f.has_initial_default or f.initial_default is None:
        return "NULL"
    if not isinstance(f.type, StructType | ListType | MapType):
        try:
            text = default_text(f.type, from_json(f.type, f.initial_default))
        except Exception as e:
            raise InvalidMetadataError(
                f"field {f.name!r} (id {f.id}): invalid initial-default: {e}"
            ) from None
        return "NULL" if text is None else quote_str(text)
    return "NULL"


def _children(t: IcebergType) -> str:
    kids: tuple[NestedField, ...]
    if isinstance(t, StructType):
        kids = t.fields
    elif isinstance(t, ListType):
        kids = (t.element_field,)
    elif isinstance(t, MapType):
        kids = (t.key_field, t.value_field)
    else:
        return "NULL"
    return "MAP{" + ", ".join(_entry(k.id, k.name, k) for k in kids) + "}"


def _entry(field_id: int, name: str, f: NestedField, type_text: str | None = None) -> str:
    children = "NULL" if type_text is not None else _children(f.type)
    return (
        f"{field_id}: {{name: {quote_str(name)}, type: {quote_str(type_text or duck_type(f.type))}, "
        f"default_value: {_default(f)}, children: {children}}}"
    )


def schema_map(fields: Sequence[tuple[str, NestedField]], types: dict[int, str] | None = None) -> str:
    """`MAP{...}` for read_parquet's `schema` parameter: (output name, field) pairs, top level;
    `types` reads some field ids as another DuckDB type than their Iceberg type's."""
    types = types or {}
    return "MAP{" + ", ".join(_entry(f.id, name, f, types.get(f.id)) for name, f in fields) + "}"


def _with_default(f: NestedField, value: Any) -> NestedField:
    """The field with an initial default of `value` (internal form): a partition value for the file."""
    if value is None:
        return dataclasses.replace(f, initial_default=None, has_initial_default=False)
    return dataclasses.replace(f, initial_default=to_json(f.type, value), has_initial_default=True)


def _col(field_id: int) -> str:
    return f"c{field_id}"


def _missing_required(
    fields: Sequence[NestedField], ids: frozenset[int], partition_ids: set[int], prefix: str
) -> tuple[str, int] | None:
    """The first required field (name, id) without an initial-default whose id the file lacks, among
    `fields` and the fields of structs the file holds; identity partition columns come from the
    partition value."""
    for f in fields:
        if f.id in ids:
            if isinstance(f.type, StructType):
                found = _missing_required(f.type.fields, ids, set(), f"{prefix}{f.name}.")
                if found is not None:
                    return found
        elif f.required and f.initial_default is None and f.id not in partition_ids:
            return f"{prefix}{f.name}", f.id
    return None


def _measured_but_missing(
    fields: Sequence[NestedField], ids: frozenset[int], partition_ids: set[int], file: DataFile, prefix: str
) -> tuple[str, int, int] | None:
    """The first primitive field (name, id, non-null count) among `fields` and the structs the file
    holds whose id the file lacks while the entry's value_counts count non-null values of it. Only
    asked for fields a file lacks, so a file holding every column never decodes its metrics maps."""
    for f in fields:
        if f.id in ids:
            if isinstance(f.type, StructType):
                found = _measured_but_missing(f.type.fields, ids, set(), file, f"{prefix}{f.name}.")
                if found is not None:
                    return found
        elif f.type.is_primitive and f.id not in partition_ids:
            values = file.value_counts.get(f.id)
            if values is not None and values - file.null_value_counts.get(f.id, 0) > 0:
                return f"{prefix}{f.name}", f.id, values - file.null_value_counts.get(f.id, 0)
    return None


def _raw_variant_sql(column: str, children: tuple[tuple[str, str | None], ...], path: str) -> tuple[str, str]:
    """(DuckDB struct type to read an unannotated variant group as, SQL turning it into VARIANT).

    Unshredded: `variant_bytes_to_variant(metadata || value)` decodes the spec's binary encoding
    with its value types. Shredded into a primitive `typed_value`: that value where it is set.
    Shredded objects and arrays must be reassembled from parts; they are refused by name."""
    names = {n: t for n, t in children}
    if set(names) - {"metadata", "value", "typed_value"} or "metadata" not in names:
        raise UnsupportedFormatError(
            f"{path}: the variant column has children {sorted(names)}; expected metadata, value, typed_value"
        )
    decoded = f"variant_bytes_to_variant({column}.metadata || {column}.value)"
    if "typed_value" not in names:
        return "STRUCT(metadata BLOB, value BLOB)", f"CASE WHEN {column} IS NULL THEN NULL ELSE {decoded} END"
    typed = names["typed_value"]
    if typed is None:
        raise UnsupportedFormatError(
            f"{path}: shredded variant objects and arrays without the Parquet VARIANT annotation are not "
            "supported (only a primitive typed_value is)"
        )
    problem = quote_str(f"{path}: a variant value has neither value nor typed_value")
    return (
        f"STRUCT(metadata BLOB, value BLOB, typed_value {typed})",
        f"CASE WHEN {column} IS NULL THEN NULL WHEN {column}.typed_value IS NOT NULL "
        f"THEN CAST({column}.typed_value AS VARIANT) WHEN {column}.value IS NULL THEN error({problem}) "
        f"ELSE {decoded} END",
    )


# ---------------------------------------------------------------------------------------------
# The builder
# ---------------------------------------------------------------------------------------------


def _named_as_given(path: str) -> bool:
    """Whether DuckDB's `filename` column gives this path back unchanged (an absolute local path;
    it rewrites `file:` URIs, so a constant keyed by them would be missed)."""
    return path.startswith("/") and "://" not in path and not path.startswith("//")


def _list_literal(parts: Sequence[str], single: bool) -> str:
    if single:
        return parts[0]
    return "[" + ", ".join(parts) + "][d.file_index::BIGINT + 1]"


class _Builder:
    def __init__(self, plan: ScanPlan, options: ReadOptions) -> None:
        self.plan = plan
        self.options = options
        self.schema = plan.schema
        self.table = plan.table
        self.v3 = plan.format_version >= 3
        mapping_text = self.table.metadata.properties.get(NAME_MAPPING_PROPERTY)
        self.mapping = parse_name_mapping(mapping_text) if mapping_text is not None else None
        if options.deletes not in DELETE_MODES:
            raise ValueError(f"deletes must be one of {', '.join(DELETE_MODES)}, not {options.deletes!r}")
        self.positional = options.deletes == "positional"
        self.need_pos = options.metadata_columns or options.row_lineage
        self.by_default = True
        self.by_file = False
        self._resolved: dict[str, str] = {}
        # What this scan read of its data files' footers, by where DuckDB reads them: each is asked
        # for several times while the SQL is built (one stat-checked lookup each, ~15 us).
        self._columns: dict[str, ParquetColumns] = {}
        self._formats: dict[str, str] = {}  # recorded path -> file format, for data and delete files
        self._data_paths: set[str] = set()
        self._equality_paths: set[str] = set()
        self._sources: dict[str, str] = {}  # a Parquet copy -> the ORC/Avro file it copies
        self._listed_in: dict[str, str] = {}  # a data file's recorded path -> its manifest
        self._read_options: dict[str, str] = {}  # where DuckDB reads a file -> read_parquet options
        self._top = {f.id: f for f in self.schema.fields}
        self.variant_ids = frozenset(f.id for f, _ in self.schema.walk() if f.type.name == "variant")
        resolver = self.table.resolver
        self.locations = (resolver.recorded_location, resolver.actual_location)

    # -- grouping ---------------------------------------------------------------------------

    def branches(self) -> list[str]:
        for task in self.plan.tasks:
            fmt = task.file.file_format.upper()
            if fmt != "PARQUET" and not needs_copy(fmt):
                raise UnsupportedFormatError(
                    f"{task.path}: data files in {task.file.file_format} are not supported (Parquet, ORC, Avro)"
                )
            self._formats[task.path] = fmt
            self._data_paths.add(task.path)
            if task.manifest:
                self._listed_in[task.path] = task.manifest
            for d in task.deletes:
                self._formats.setdefault(d.path, d.file.file_format.upper())
                if d.kind == KIND_EQUALITY:
                    self._equality_paths.add(d.path)
        self._columns = prefetch_parquet_columns(
            {self._resolve(t.path): t.file.file_size_in_bytes for t in self.plan.tasks}, self.table.io
        )
        unassigned = unassigned_field(self.table.metadata, self.schema)
        if unassigned is not None:
            raise InvalidMetadataError(
                f"{self.table.metadata_location}: field {unassigned[0]!r} has id {unassigned[1]}, above "
                f"last-column-id {self.table.metadata.last_column_id} (an id never assigned)"
            )
        for task in self.plan.tasks:
            self._check_against_entry(task)
        items = [
            (
                task,
                file_deletes(
                    task.key, task.record_count, task.deletes, self._resolve, self._resolve(task.path)
                ),
            )
            for task in self.plan.tasks
        ]
        # Identity-partition values become the columns' defaults, one read_parquet call per distinct
        # partition tuple, while there are few; beyond that, constant lists indexed by file_index.
        distinct = {tuple(self._identity(t).items()) for t, _ in items}
        self.by_default = len(distinct) <= MAX_DEFAULT_GROUPS
        # Per-file constants by file name replace the per-partition calls for files without deletes,
        # unless other per-file values are indexed by position in the call (file_index), which
        # DuckDB renumbers when it skips files.
        plain = [t for t, d in items if d is None]
        self.by_file = (
            not self.need_pos
            and any(self._identity(t, kept_values=True) for t in plain)
            and len(plain) <= MAX_FILE_CONSTANTS
            and all(_named_as_given(self._resolve(t.path)) for t in plain)
        )
        groups: dict[tuple[Any, ...], list[tuple[FileScanTask, FileDeletes | None]]] = {}
        for task, deletes in items:
            eq = tuple(sorted(d.path for d in task.deletes if d.kind == KIND_EQUALITY))
            identity = self._identity(task)
            if self._mapped(task) or self._raw_variants(task) or (deletes is not None and self.positional):
                key: tuple[Any, ...] = ("single", task.path)
            elif self.by_file and deletes is None:
                key = ("by file", tuple(sorted(self._identity(task, kept_values=True))), eq)
            elif self.by_default:
                key = ("multi", deletes is not None, tuple(identity.items()), eq)
            else:
                key = ("multi", deletes is not None, bool(identity), eq)
            groups.setdefault(key, []).append((task, deletes))
        return [
            self._branch(items, single=key[0] == "single", by_file=key[0] == "by file")
            for key, items in groups.items()
        ]

    def read_paths(self) -> tuple[PlannedRead, ...]:
        """Every Parquet file this scan's SQL reads (data files, their Parquet copies, equality
        deletes) as (where DuckDB reads it, the file holding its rows, its read_parquet options);
        position deletes and DVs are read by iceduck itself."""
        return tuple(
            (found, self._sources.get(found, found), self._read_options.get(found, ""))
            for path, found in self._resolved.items()
            if path in self._data_paths or path in self._equality_paths
        )

    def _resolve(self, path: str) -> str:
        """Where DuckDB reads a planned file: its actual place, or for ORC and Avro files their
        Parquet copy (read/copies.py), which holds the same rows in the same order."""
        found = self._resolved.get(path)
        if found is None:
            found = self.table.resolve(path)
            scheme, _ = split_scheme(found)
            local = scheme is None or scheme == "file"
            table_scheme, _ = split_scheme(self.table.resolver.actual_location)
            # A table on an object store reads its objects there: DuckDB names a missing one itself,
            # and a HEAD per file on every scan is what ranged reads exist to avoid.
            on_store = not local and table_scheme not in (None, "file")
            if not on_store and (not local or not self.table.io.exists(found)):
                kind = "data" if path in self._data_paths else "delete"
                where = self.table.name or self.table.metadata_location
                hint = "" if local else f": outside the table folder {self.table.resolver.actual_location}"
                listed = f", listed in manifest {self._listed_in[path]}" if path in self._listed_in else ""
                raise FileNotFoundInTableError(
                    f"{where}: {kind} file not found: {path} (looked for it at {found}{hint}){listed}"
                )
            fmt = self._formats.get(path, "PARQUET")
            if needs_copy(fmt):
                source = local_path(found)
                found = parquet_copy(source, fmt)
                self._sources[found] = source
            self._resolved[path] = found
        return found

    def _check_against_entry(self, task: FileScanTask) -> None:
        """A data file must be the file its manifest entry describes, or its rows are not the
        table's (a file swapped for another valid one reads without a Parquet error):
        - its footer's row count is the entry's record_count;
        - a required field without an initial-default has a column: read as NULL it would break
          the schema's promise (and a damaged field id would pass unseen);
        - a field the file lacks has no non-null values in the entry's metrics (a column the
          entry measured cannot be missing from the file it measured)."""
        columns = self._parquet_columns(task)
        if columns.rows is not None and columns.rows != task.file.record_count:
            raise InvalidMetadataError(
                f"{task.path}: the data file holds {columns.rows} rows, but its manifest entry says "
                f"record_count {task.file.record_count}"
            )
        if not columns.has_ids:
            return  # columns found by name (read/columns.py)
        partition_ids = set(self._identity(task))
        missing = _missing_required(self.schema.fields, columns.ids, partition_ids, "")
        if missing is not None:
            name, fid = missing
            raise InvalidMetadataError(
                f"{task.path}: the data file has no column for the required field {name!r} (id {fid}) of "
                f"{self.table.metadata_location}, which has no initial-default"
            )
        measured = _measured_but_missing(self.schema.fields, columns.ids, partition_ids, task.file, "")
        if measured is not None:
            name, fid, values = measured
            raise InvalidMetadataError(
                f"{task.path}: the data file has no column for field {name!r} (id {fid}), but its manifest "
                f"entry counts {values} non-null values of it"
            )

    def _mapped(self, task: FileScanTask) -> bool:
        """Whether the file lacks field ids (its columns are then found by read/columns.py)."""
        return not self._parquet_columns(task).has_ids

    def _parquet_columns(self, task: FileScanTask) -> ParquetColumns:
        """`parquet_columns` of a data file, read once per scan."""
        found = self._resolve(task.path)
        columns = self._columns.get(found)
        if columns is None:
            columns = self._columns[found] = parquet_columns(found, task.file.file_size_in_bytes, self.table.io)
        return columns

    def _raw_variants(self, task: FileScanTask) -> dict[int, tuple[tuple[str, str | None], ...]]:
        """The table's variant columns this file stores as unannotated groups, with their children."""
        if not self.variant_ids:
            return {}
        groups = plain_groups(self._resolve(task.path), self.table.io)
        raw = {fid: groups[fid] for fid in self.variant_ids if fid in groups}
        nested = [fid for fid in raw if fid not in self._top]
        if nested:
            raise UnsupportedFormatError(
                f"{task.path}: variant field {nested[0]} inside a struct, list or map is stored without the "
                "Parquet VARIANT annotation; only top-level ones are decoded"
            )
        return raw

    def _identity(self, task: FileScanTask, *, kept_values: bool = False) -> dict[int, Any]:
        """Top-level columns an identity partition field of the file's spec reads, with its value.

        A file need not contain such a column (files added from a Hive layout, partition evolution);
        its value is then the partition value. Column metrics cannot tell: some writers record
        metrics for partition columns the file does not hold.

        `kept_values`: also the columns of other transforms whose partition value is the column's
        value in every row (the day of a date, `Transform.keeps_values`): constants by file name
        only, so a filter on them skips files too (no per-partition read_parquet calls for them).
        """
        out: dict[int, Any] = {}
        top = self._top
        for pf, value in zip(task.spec.fields, task.file.partition, strict=False):
            if len(pf.source_ids) != 1 or pf.source_ids[0] not in top:
                continue
            if isinstance(pf.transform, IdentityTransform) or (
                kept_values and pf.transform.keeps_values(top[pf.source_ids[0]].type)
            ):
                out[pf.source_ids[0]] = value
        return out

    # -- one branch -------------------------------------------------------------------------

    def _branch(
        self, items: list[tuple[FileScanTask, FileDeletes | None]], single: bool, by_file: bool = False
    ) -> str:
        tasks = [t for t, _ in items]
        first = tasks[0]
        eq_deletes = [d for d in first.deletes if d.kind == KIND_EQUALITY]
        eq_ids = sorted({i for d in eq_deletes for i in (d.file.equality_ids or ())})
        mapped = single and self._mapped(first)
        paths = [self._resolve(t.path) for t in tasks]
        has_deletes = any(fd is not None for _, fd in items)
        use_mask = single and has_deletes and self.positional
        use_anti = has_deletes and not use_mask and self.options.deletes == "anti"
        use_bits = has_deletes and not use_mask and not use_anti
        need_row_number = self.need_pos or use_anti or use_bits

        exprs: list[tuple[str, str]] = []  # (sql expression, output name)
        fills: dict[int, list[Any]] = {}
        defaults: dict[int, Any] = {}
        constants: dict[int, list[Any]] = {}  # by file name
        if by_file:
            for i, t in enumerate(tasks):
                for fid, value in self._identity(t, kept_values=True).items():
                    constants.setdefault(fid, [None] * len(tasks))[i] = value
            if any(fid not in self._identity(t, kept_values=True) for t in tasks for fid in constants):
                raise IcebergError("internal: files read by name constants differ in identity columns")
        elif self.by_default or single:
            defaults = self._identity(first)
        else:
            for i, t in enumerate(tasks):
                for fid, value in self._identity(t).items():
                    fills.setdefault(fid, [None] * len(tasks))[i] = value
        # A constant all the files share is one literal (a filter on one partition keeps files of
        # one value): DuckDB parses and folds a MAP of 40 paths in ~0.7 ms per bind.
        shared: dict[int, str] = {}
        for f in self.schema.fields:
            literals = {duck_literal(f.type, v) for v in constants.get(f.id, ())}
            if len(literals) == 1:
                shared[f.id] = literals.pop()
        if mapped:
            # Java's fallback ids by position are Parquet's rule; its ORC reader goes by names.
            parquet = self._formats.get(first.path, "PARQUET") == "PARQUET"
            source, field_expr = self._mapped_source(paths[0], need_row_number, defaults, parquet)
        else:
            raw = self._raw_variants(first) if single else {}
            source, field_expr = self._field_id_source(
                paths, eq_ids, need_row_number, defaults, raw, filename=bool(constants.keys() - shared.keys())
            )
        for f in self.schema.fields:
            # `unknown` columns are always NULL, even where a file holds a column with their id.
            e = "CAST(NULL AS INTEGER)" if f.type.name == "unknown" else field_expr(f.id)
            if f.id in fills:
                consts = [duck_literal(f.type, v) for v in fills[f.id]]
                e = f"coalesce({e}, {_list_literal(consts, single)})"
            if f.id in shared:
                e = shared[f.id]
            elif f.id in constants:
                # The partition's value is the column's value in every row of the file.
                entries = ", ".join(
                    f"{quote_str(path)}: {duck_literal(f.type, v)}"
                    for path, v in zip(paths, constants[f.id], strict=True)
                )
                e = f"MAP{{{entries}}}[d.{FILENAME_COLUMN}]"
            exprs.append((e, f.name))
        if self.options.metadata_columns:
            exprs.append((_list_literal([quote_str(t.path) for t in tasks], single), "_file"))
            exprs.append(("d.file_row_number", "_pos"))
        if self.options.row_lineage:
            exprs += self._lineage(tasks, single, mapped)
        eq_names = {fid: f"__eq{fid}" for fid in eq_ids}
        for fid, name in eq_names.items():
            exprs.append((self._eq_expr(fid, field_expr, mapped), name))

        select = ", ".join(f"{e} AS {quote_ident(n)}" for e, n in exprs)
        sql = f"SELECT {select} FROM {source} AS d"
        if use_mask:
            (fd,) = [fd for _, fd in items]
            assert fd is not None
            key = encode_key([fd], self.options.allow_bare_dvs, self.locations)
            sql += (
                f" POSITIONAL JOIN ({keyed_rows(MASK_SOURCE, KEY_COLUMN, key, 'alive')}) AS m WHERE m.alive"
            )
        elif use_bits:
            files = [
                fd if fd is not None else FileDeletes(t.record_count, "", path=self._resolve(t.path))
                for t, fd in items
            ]
            key = encode_key(files, self.options.allow_bare_dvs, self.locations)
            fi = "1" if single else "d.file_index::BIGINT + 1"
            sql += (
                f", ({keyed_rows(BITS_SOURCE, KEY_COLUMN, key, 'list_transform(bits, lambda b: b::BIT) AS bits')}) AS m "
                f"WHERE get_bit(m.bits[{fi}], d.file_row_number::INTEGER) = 1"
            )
        elif use_anti:
            files = [fd if fd is not None else FileDeletes(t.record_count, "") for t, fd in items]
            key = encode_key(files, self.options.allow_bare_dvs, self.locations)
            sql += (
                f" ANTI JOIN ({keyed_rows(POSITIONS_SOURCE, KEY_COLUMN, key, 'fi, pos')}) AS x"
                f" ON {'0' if single else 'd.file_index::BIGINT'} = x.fi AND d.file_row_number = x.pos"
            )
        if not eq_deletes:
            return sql
        return self._apply_equality(
            sql, eq_deletes, eq_names, [n for _, n in exprs if not n.startswith("__eq")]
        )

    def _field_id_source(
        self,
        paths: list[str],
        eq_ids: list[int],
        row_number: bool,
        defaults: dict[int, Any],
        raw_variants: dict[int, tuple[tuple[str, str | None], ...]] | None = None,
        filename: bool = False,
    ) -> tuple[str, Any]:
        fields: list[tuple[str, NestedField]] = [
            (_col(f.id), _with_default(f, defaults[f.id]) if f.id in defaults else f)
            for f in self.schema.fields
        ]
        overrides: dict[int, str] = {}
        decoded: dict[int, str] = {}
        for fid, children in (raw_variants or {}).items():
            overrides[fid], decoded[fid] = _raw_variant_sql(f"d.{_col(fid)}", children, paths[0])
        known = {f.id for f in self.schema.fields}
        for fid in eq_ids:
            if fid not in known and self.schema.find_field(fid) is None:
                old = self._field_anywhere(fid)
                fields.append((_col(fid), old))
                known.add(fid)
        if self.options.row_lineage:
            fields.append(("__row_id", NestedField(FIELD_ID_ROW_ID, "_row_id", LONG)))
            fields.append(
                ("__lusn", NestedField(FIELD_ID_LAST_UPDATED, "_last_updated_sequence_number", LONG))
            )
        files = "[" + ", ".join(quote_str(p) for p in paths) + "]"
        opts = f"schema := {schema_map(fields, overrides)}"
        if row_number:
            opts += ", file_row_number := true"
        if filename:
            opts += f", filename := {quote_str(FILENAME_COLUMN)}"
        for path in paths:
            self._read_options[path] = opts
        return f"read_parquet({files}, {opts})", lambda fid: decoded.get(fid, f"d.{_col(fid)}")

    def _mapped_source(
        self, path: str, row_number: bool, defaults: dict[int, Any], by_position: bool = True
    ) -> tuple[str, Any]:
        names = parquet_columns(path, io=self.table.io).names
        by_id = {f.id: f for f in self.schema.fields}
        columns = columns_without_ids(
            self.schema.fields, names, mapping=self.mapping, by_position=by_position, path=path
        )

        def expr(fid: int) -> str:
            f = by_id.get(fid) or self.schema.find_field(fid)
            if fid in columns and f is not None:
                return f"CAST(d.{quote_ident(columns[fid])} AS {duck_type(f.type)})"
            if f is None:
                return "NULL"
            if fid in defaults:
                return duck_literal(f.type, defaults[fid])
            default = _default(f)
            return f"CAST({default} AS {duck_type(f.type)})"

        opts = ", file_row_number := true" if row_number else ""
        return f"read_parquet({quote_str(path)}{opts})", expr

    def _field_anywhere(self, field_id: int) -> NestedField:
        for s in reversed(self.table.metadata.schemas):
            f = s.find_field(field_id)
            if f is not None:
                return f
        raise InvalidMetadataError(
            f"{self.table.metadata_location}: equality delete field id {field_id} is in no schema of the table"
        )

    def _eq_expr(self, fid: int, field_expr: Any, mapped: bool) -> str:
        if mapped or any(f.id == fid for f in self.schema.fields):
            return str(field_expr(fid))
        if self.schema.find_field(fid) is None:
            return f"d.{_col(fid)}"
        # a field nested in structs: follow the path by names
        path = (self.schema.column_name(fid) or "").split(".")
        top = self.schema.field_by_name(path[0])
        if top is None:
            raise IcebergError(f"equality delete field {fid} cannot be located")
        return f"d.{_col(top.id)}" + "".join(f".{quote_ident(p)}" for p in path[1:])

    def _lineage(self, tasks: list[FileScanTask], single: bool, mapped: bool) -> list[tuple[str, str]]:
        if not self.v3:
            return [
                ("CAST(NULL AS BIGINT)", "_row_id"),
                ("CAST(NULL AS BIGINT)", "_last_updated_sequence_number"),
            ]
        firsts = [
            "CAST(NULL AS BIGINT)" if t.first_row_id is None else f"CAST({t.first_row_id} AS BIGINT)"
            for t in tasks
        ]
        # A file without a first_row_id was committed before the table's upgrade to v3: "For such
        # snapshots without `first-row-id`, `first_row_id` values for data files and data manifests are
        # null, and values for `_row_id` are read as null for all rows." Its rows have no lineage, so
        # their `_last_updated_sequence_number` is null too (as Java Iceberg reads them), not the file's
        # data sequence number; once a later snapshot assigns the file a first_row_id, both inherit.
        seqs = [
            "CAST(NULL AS BIGINT)" if t.first_row_id is None else f"CAST({t.data_sequence_number} AS BIGINT)"
            for t in tasks
        ]
        stored_id = "CAST(NULL AS BIGINT)" if mapped else "d.__row_id"
        stored_seq = "CAST(NULL AS BIGINT)" if mapped else "d.__lusn"
        return [
            (f"coalesce({stored_id}, {_list_literal(firsts, single)} + d.file_row_number)", "_row_id"),
            (f"coalesce({stored_seq}, {_list_literal(seqs, single)})", "_last_updated_sequence_number"),
        ]

    def _apply_equality(
        self, inner: str, deletes: list[DeleteFile], eq_names: dict[int, str], outputs: list[str]
    ) -> str:
        by_ids: dict[tuple[int, ...], list[DeleteFile]] = {}
        for d in deletes:
            ids = tuple(d.file.equality_ids or ())
            if not ids:
                raise InvalidMetadataError(f"{d.path}: equality delete file has no equality_ids")
            held = parquet_columns(self._resolve(d.path), io=self.table.io)
            missing = [fid for fid in ids if fid not in held.ids]
            if held.has_ids and missing:
                # A column it does not hold would compare as NULL and delete other rows.
                raise InvalidMetadataError(
                    f"{d.path}: equality delete file has no column with field id {missing[0]}, which its "
                    f"manifest entry's equality_ids {list(ids)} name"
                )
            by_ids.setdefault(ids, []).append(d)
        sql = f"SELECT {', '.join('b.' + quote_ident(n) for n in outputs)} FROM ({inner}) AS b"
        for j, (ids, files) in enumerate(by_ids.items()):
            fields = []
            for fid in ids:
                f = self.schema.find_field(fid) or self._field_anywhere(fid)
                fields.append((f"k{fid}", NestedField(fid, f.name, f.type)))
            paths = "[" + ", ".join(quote_str(self._resolve(d.path)) for d in files) + "]"
            for d in files:
                self._read_options[self._resolve(d.path)] = f"schema := {schema_map(fields)}"
            read = f"read_parquet({paths}, schema := {schema_map(fields)})"
            cond = " AND ".join(
                f"b.{quote_ident(eq_names[fid])} IS NOT DISTINCT FROM e{j}.k{fid}" for fid in ids
            )
            sql += f" ANTI JOIN {read} AS e{j} ON {cond}"
        return sql
