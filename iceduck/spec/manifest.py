"""Manifests (table spec "Manifests"): Avro files listing data or delete files with their metrics.

Reading turns each `manifest_entry` into a `ManifestEntry` holding a `DataFile`, with values in the
internal representation (docs/architecture.md): partition dates, times and timestamps as ints,
decimals as `Decimal`, uuids as `uuid.UUID`. Given the `ManifestFile` row that lists the manifest,
`read_manifest` applies the spec's inheritance rules (snapshot id, data and file sequence numbers,
v3 first row ids). Writing them is `iceduck.spec.manifest_writer`.

Manifest lists live in `iceduck.spec.manifest_list`; their API is re-exported here.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from iceduck.errors import IcebergError, InvalidMetadataError
from iceduck.spec._avro_schemas import (
    AvroContainer,
    Column,
    batch_columns,
    map_key_value_names,
    partition_readers,
    record_fields_by_id,
    unwrap_optional,
)
from iceduck.spec.manifest_list import (
    MANIFEST_CONTENT_DATA,
    MANIFEST_CONTENT_DELETES,
    UNASSIGNED_SEQUENCE_NUMBER,
    ManifestFile,
    ManifestListWriteResult,
    PartitionFieldSummary,
    read_manifest_list,
    write_manifest_list,
)

__all__ = [
    "CONTENT_DATA",
    "CONTENT_EQUALITY_DELETES",
    "CONTENT_POSITION_DELETES",
    "MANIFEST_CONTENT_DATA",
    "MANIFEST_CONTENT_DELETES",
    "STATUS_ADDED",
    "STATUS_DELETED",
    "STATUS_EXISTING",
    "UNASSIGNED_SEQUENCE_NUMBER",
    "DataFile",
    "Manifest",
    "ManifestEntry",
    "ManifestFile",
    "ManifestListWriteResult",
    "ManifestMetadata",
    "PartitionFieldSummary",
    "iter_manifest_rows",
    "read_manifest",
    "read_manifest_list",
    "read_manifests",
    "write_manifest_list",
]

# manifest_entry.status
STATUS_EXISTING = 0
STATUS_ADDED = 1
STATUS_DELETED = 2
# data_file.content
CONTENT_DATA = 0
CONTENT_POSITION_DELETES = 1
CONTENT_EQUALITY_DELETES = 2

_FILE_PATH_ID = 2147483546  # a position-delete file's file_path column (reserved field id)
STATUS_NAMES = {STATUS_EXISTING: "EXISTING", STATUS_ADDED: "ADDED", STATUS_DELETED: "DELETED"}
_STATUS_SET = frozenset(STATUS_NAMES)
# The column screens of `_build_columns` / `_inherit` (see there); tests switch them off to show
# that they refuse and keep exactly what the row loops alone do.
_SCREENS = True
_CONTENT_NAMES = {
    CONTENT_DATA: "data",
    CONTENT_POSITION_DELETES: "position deletes",
    CONTENT_EQUALITY_DELETES: "equality deletes",
}
_CONTENTS = tuple(_CONTENT_NAMES)


def _no_stats() -> dict[int, Any]:
    return {}


@dataclass(frozen=True, slots=True)
class DataFile:
    """A data or delete file as a manifest describes it (`data_file`, field ids 100..145).

    `partition` holds the partition values in the order of the manifest's partition spec fields, in
    the internal representation. Metric maps are keyed by column field id and are empty when the
    manifest has none (treat them as read-only). `spec_id` is the manifest's partition spec id.
    """

    content: int
    file_path: str
    file_format: str
    spec_id: int
    partition: tuple[Any, ...]
    record_count: int
    file_size_in_bytes: int
    column_sizes: Mapping[int, int] = field(default_factory=_no_stats, hash=False)
    value_counts: Mapping[int, int] = field(default_factory=_no_stats, hash=False)
    null_value_counts: Mapping[int, int] = field(default_factory=_no_stats, hash=False)
    nan_value_counts: Mapping[int, int] = field(default_factory=_no_stats, hash=False)
    lower_bounds: Mapping[int, bytes] = field(default_factory=_no_stats, hash=False)
    upper_bounds: Mapping[int, bytes] = field(default_factory=_no_stats, hash=False)
    key_metadata: bytes | None = None
    split_offsets: tuple[int, ...] | None = None
    equality_ids: tuple[int, ...] | None = None
    sort_order_id: int | None = None
    first_row_id: int | None = None
    referenced_data_file: str | None = None
    content_offset: int | None = None
    content_size_in_bytes: int | None = None

    @property
    def is_deletion_vector(self) -> bool:
        """True for a v3 deletion vector: position deletes stored as a Puffin blob.

        The spec marks a DV by its format (`puffin`) and its blob location (`content_offset`); either
        one is enough, since a position-delete Parquet file has neither.
        """
        return self.content == CONTENT_POSITION_DELETES and (
            self.content_offset is not None or self.file_format.upper() == "PUFFIN"
        )


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One `manifest_entry`: status (0 existing, 1 added, 2 deleted), tracking ids, the file.

    After inheritance (`read_manifest(..., manifest=...)`) the snapshot id and both sequence
    numbers are set; read without it they are as stored (None means "inherit").
    """

    status: int
    snapshot_id: int | None
    sequence_number: int | None
    file_sequence_number: int | None
    data_file: DataFile


@dataclass(frozen=True, slots=True)
class ManifestMetadata:
    """The manifest's Avro key-value metadata.

    `schema` and `partition_spec` are the JSON texts as stored (the table schema, and the partition
    fields array), or None where a writer left them out. `content` is 0 (data) or 1 (deletes).
    """

    schema: str | None
    partition_spec: str | None
    partition_spec_id: int
    format_version: int
    content: int
    schema_id: int | None = None


class Manifest:
    """A manifest read from its bytes: metadata, and its entries held as columns.

    `entries` builds every `ManifestEntry` (once); `entry(i)` builds one, and the column views
    (`statuses`, `contents`, `partitions`, ...) let a planner choose rows before any entry object
    exists. The values are those `entries` holds (inheritance applied when read with its list row).
    """

    __slots__ = ("_built", "_cols", "metadata")

    def __init__(self, metadata: ManifestMetadata, cols: _EntryColumns) -> None:
        self.metadata = metadata
        self._cols = cols
        self._built: dict[int, ManifestEntry] | tuple[ManifestEntry, ...] = {}

    def __len__(self) -> int:
        return len(self._cols.status)

    def approx_bytes(self) -> int:
        """About how much memory the decoded manifest holds (for caches bounded by bytes): measured
        ~520 bytes per entry of Python column values besides the paths, and the metrics maps at
        ~3x their Arrow size once turned into Python lists."""
        cols = self._cols
        maps = sum(m.arrow_bytes for m in cols.maps)
        return len(self) * 520 + sum(map(len, cols.file_path)) + 3 * maps

    @property
    def entries(self) -> tuple[ManifestEntry, ...]:
        """Every entry, in file order."""
        built = self._built
        if isinstance(built, dict):
            built = tuple(built.get(i) or self._cols.entry(i) for i in range(len(self)))
            self._built = built
        return built

    def entry(self, i: int) -> ManifestEntry:
        """Entry `i` (file order)."""
        built = self._built
        if isinstance(built, tuple):
            return built[i]
        e = built.get(i)
        if e is None:
            e = built[i] = self._cols.entry(i)
        return e

    def column(self, name: str) -> list[Any]:
        """One field of every entry, by its `ManifestEntry` / `DataFile` name (e.g. `status`,
        `file_path`, `record_count`, `lower_bounds`), without building entry objects. Treat the
        list as read-only."""
        cols = self._cols
        if name in _MAP_FIELDS:
            column = cols.maps[_MAP_FIELDS.index(name)]
            return [column[i] for i in range(len(self))]
        if name == "spec_id":
            return [cols.spec_id] * len(self)
        attr = _COLUMN_ATTRS.get(name)
        if attr is None:
            raise KeyError(name)
        values = getattr(cols, attr)
        return values.values() if isinstance(values, _LazyValues) else values

    @property
    def statuses(self) -> list[int]:
        return self._cols.status

    @property
    def contents(self) -> list[int]:
        return self._cols.content

    @property
    def file_paths(self) -> list[str]:
        return self._cols.file_path

    @property
    def partitions(self) -> list[tuple[Any, ...]]:
        return self._cols.partition

    @property
    def sequence_numbers(self) -> list[int | None]:
        return self._cols.seq

    @property
    def file_sizes(self) -> list[int]:
        return self._cols.size

    @property
    def referenced_data_files(self) -> list[str | None]:
        return self._cols.referenced


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------

# Field ids of manifest_entry and data_file.
_E_STATUS, _E_SNAPSHOT, _E_DATA_FILE, _E_SEQ, _E_FILE_SEQ = 0, 1, 2, 3, 4
_D_REQUIRED = {
    100: "file_path",
    101: "file_format",
    102: "partition",
    103: "record_count",
    104: "file_size_in_bytes",
}
_D_V3_ONLY = (142, 144, 145)
_D_MAPS = (108, 109, 110, 137, 125, 128)
_MAP_FIELDS = (
    "column_sizes",
    "value_counts",
    "null_value_counts",
    "nan_value_counts",
    "lower_bounds",
    "upper_bounds",
)
# `Manifest.column` names -> `_EntryColumns` attributes.
_COLUMN_ATTRS = {
    "status": "status",
    "snapshot_id": "snapshot_id",
    "sequence_number": "seq",
    "file_sequence_number": "fseq",
    "content": "content",
    "file_path": "file_path",
    "file_format": "file_format",
    "partition": "partition",
    "record_count": "record_count",
    "file_size_in_bytes": "size",
    "key_metadata": "key_metadata",
    "split_offsets": "split_offsets",
    "equality_ids": "equality_ids",
    "sort_order_id": "sort_order_id",
    "first_row_id": "first_row_id",
    "referenced_data_file": "referenced",
    "content_offset": "offset",
    "content_size_in_bytes": "content_size",
}


def _infer_format_version(entry_ids: Mapping[int, Any], file_ids: Mapping[int, Any]) -> int:
    if any(i in file_ids for i in _D_V3_ONLY):
        return 3
    if _E_SEQ in entry_ids or _E_FILE_SEQ in entry_ids or 134 in file_ids:
        return 2
    return 1


def _parse_metadata(
    meta: Mapping[str, str], entry_ids: Mapping[int, Any], file_ids: Mapping[int, Any], path: str | None
) -> ManifestMetadata:
    def as_int(key: str, default: int | None) -> int | None:
        text = meta.get(key)
        if text is None or text == "null":
            return default
        try:
            return int(text)
        except ValueError:
            raise InvalidMetadataError(f"{path}: manifest metadata {key} is not a number: {text!r}") from None

    fv = as_int("format-version", None)
    if fv is None:
        # Some writers leave the key out (BigQuery): judge by the columns present.
        fv = _infer_format_version(entry_ids, file_ids)
    elif fv not in (1, 2, 3):
        raise InvalidMetadataError(f"{path}: manifest has unsupported format-version {fv}")
    content_text = meta.get("content", "data")
    if content_text not in ("data", "deletes"):
        raise InvalidMetadataError(
            f"{path}: manifest content must be 'data' or 'deletes', not {content_text!r}"
        )
    return ManifestMetadata(
        schema=meta.get("schema"),
        partition_spec=meta.get("partition-spec"),
        partition_spec_id=as_int("partition-spec-id", 0) or 0,
        format_version=fv,
        content=MANIFEST_CONTENT_DATA if content_text == "data" else MANIFEST_CONTENT_DELETES,
        schema_id=as_int("schema-id", None),
    )


def iter_manifest_rows(data: bytes, *, path: str | None) -> Iterator[dict[Any, Any]]:
    """The raw `manifest_entry` records of a manifest, as stored (Avro field names, logical types not
    applied: dates/times/timestamps as ints, decimals and uuids as bytes; maps as key/value lists).

    For tools that want the stored form; `read_manifest` is the normal entry point.
    """
    return AvroContainer(data, path=path, what="manifest").records()


def read_manifest(data: bytes, *, path: str | None, manifest: ManifestFile | None = None) -> Manifest:
    """Read a manifest (format v1..v3) from its bytes.

    With `manifest` (its row in the manifest list) the inheritance rules apply:
    a null snapshot id becomes the manifest's `added_snapshot_id`; null data / file sequence numbers
    of ADDED entries (and of every entry of a v1 manifest or one listed with sequence number 0)
    become the manifest's sequence number; in a data manifest with a `first_row_id`, data files of
    non-DELETED entries without one get that id plus the record counts of the earlier such files.

    Raises CorruptFileError (damaged or non-Avro bytes),
    UnsupportedFormatError (encrypted), InvalidMetadataError (a field required by the manifest's
    format version is missing, an EXISTING/DELETED entry has no sequence number to keep, or an
    entry breaks the spec in a way that would change what a scan reads: a status or content the spec
    does not define, a delete file in a data manifest or a data file in a delete manifest, a negative
    sequence number, record count or first row id, a deletion vector without its referenced data
    file or its offset and size, or the same file (DV: the same blob) live twice).
    """
    opened = _open_manifest(data, path, manifest)
    return _finish_manifest(opened, opened.avro.columns())


def read_manifests(items: Sequence[tuple[bytes, str | None, ManifestFile | None]]) -> list[Manifest]:
    """`read_manifest(data, path=path, manifest=manifest)` of each item, in order, with the entries of
    manifests that share a writer schema decoded together (`batch_columns`: one polars call instead of
    one per manifest). The first failing manifest in order raises, as a loop over `read_manifest`
    would (a damaged one is decoded alone, so the error names it)."""
    opened: list[_OpenedManifest | IcebergError] = []
    for data, path, manifest in items:
        try:
            opened.append(_open_manifest(data, path, manifest))
        except IcebergError as e:
            opened.append(e)
    decoders = iter(batch_columns([o.avro for o in opened if isinstance(o, _OpenedManifest)]))
    out = []
    for o in opened:
        if isinstance(o, IcebergError):
            raise o
        out.append(_finish_manifest(o, next(decoders)()))
    return out


@dataclass(frozen=True, slots=True)
class _Layout:
    """What a manifest's writer schema says about reading its entries, worked out once per schema
    (a table's manifests share a handful; a batch of 40 paid these lookups 40 times): the field
    names by id, each metrics map's key/value names and what is wrong with its schema (None:
    readable), and the partition record's readers."""

    entry_ids: Mapping[int, Any]
    file_ids: Mapping[int, Any]
    data_file: str | None  # the data_file field's name (None: the schema has none)
    entry_names: tuple[str | None, ...]  # status, snapshot_id, sequence_number, file_sequence_number
    file_names: Mapping[int, str]  # data_file field id -> name
    maps: tuple[tuple[str | None, tuple[str, str], str | None], ...]  # per _D_MAPS: name, kv names, problem
    partition: str | None  # the partition record's name (None: the spec has no fields)
    partition_readers: tuple[tuple[str, Callable[[Any], Any] | None], ...]


def _make_layout(schema: dict[str, Any]) -> _Layout:
    entry_ids = record_fields_by_id(schema)
    df_field = entry_ids.get(_E_DATA_FILE)
    df_schema = unwrap_optional(df_field["type"]) if df_field else None
    file_ids = record_fields_by_id(df_schema) if isinstance(df_schema, dict) else {}
    file_names = {fid: f["name"] for fid, f in file_ids.items()}
    maps = []
    for fid in _D_MAPS:
        field = file_ids.get(fid)
        names = map_key_value_names(field)
        maps.append((file_names.get(fid), names, _map_problem(field, names)))
    readers = partition_readers(file_ids[102]["type"]) if 102 in file_ids else ()
    return _Layout(
        entry_ids,
        file_ids,
        df_field["name"] if df_field else None,
        tuple(
            f["name"] if (f := entry_ids.get(fid)) else None for fid in (_E_STATUS, _E_SNAPSHOT, _E_SEQ, _E_FILE_SEQ)
        ),
        file_names,
        tuple(maps),
        file_names.get(102) if readers else None,
        readers,
    )


_LAYOUTS: dict[bytes, _Layout] = {}


def _layout_of(avro: AvroContainer) -> _Layout:
    """The layout of the container's writer schema (cached by the schema's bytes; two threads may
    both make one, alike)."""
    key = avro.schema_key
    found = _LAYOUTS.get(key)
    if found is None:
        found = _make_layout(avro.schema)
        if len(_LAYOUTS) >= 256:
            _LAYOUTS.clear()
        _LAYOUTS[key] = found
    return found


@dataclass(frozen=True, slots=True)
class _OpenedManifest:
    """A manifest whose header, metadata and schema are checked, its entries not yet decoded."""

    avro: AvroContainer
    md: ManifestMetadata
    layout: _Layout
    manifest: ManifestFile | None
    path: str | None
    holds: int | None


def _open_manifest(data: bytes, path: str | None, manifest: ManifestFile | None) -> _OpenedManifest:
    avro = AvroContainer(data, path=path, what="manifest")
    layout = _layout_of(avro)
    entry_ids, file_ids = layout.entry_ids, layout.file_ids
    md = _parse_metadata(avro.metadata, entry_ids, file_ids, path)
    fv = md.format_version

    def missing(name: str, fid: int) -> InvalidMetadataError:
        return InvalidMetadataError(f"{path}: manifest (format v{fv}) has no field {name} (field id {fid})")

    if _E_STATUS not in entry_ids:
        raise missing("status", _E_STATUS)
    if layout.data_file is None or not file_ids:
        raise missing("data_file", _E_DATA_FILE)
    if fv == 1 and _E_SNAPSHOT not in entry_ids:
        raise missing("snapshot_id", _E_SNAPSHOT)
    for fid, name in _D_REQUIRED.items():
        if fid not in file_ids:
            raise missing(f"data_file.{name}", fid)
    if fv >= 2 and 134 not in file_ids:
        raise missing("data_file.content", 134)

    # The content its list row gives (else its own metadata, where it says): data manifests hold
    # only data files, delete manifests only delete files (spec "Manifests").
    if manifest is not None:
        holds: int | None = manifest.content
    else:
        holds = md.content if "content" in avro.metadata else None
    return _OpenedManifest(avro, md, layout, manifest, path, holds)


def _finish_manifest(o: _OpenedManifest, table: Column) -> Manifest:
    """The manifest from its decoded entries (`table`: a column of records), checked and with
    inheritance applied."""
    columns = _build_columns(table, o.md, o.layout, o.manifest, o.path, o.holds)
    if o.manifest is not None:
        check_entry_counts(o.manifest, columns.status, o.path)
    return Manifest(o.md, columns)


def check_entry_counts(manifest: ManifestFile, statuses: Iterable[int], path: str | None) -> None:
    """The manifest list's added/existing/deleted_files_count (where given) must count the
    manifest's entries of each status, as the spec defines them: an entry whose status was
    changed (ADDED -> DELETED hides a live file) then shows. Row counts are not compared: some
    writers record a v1 upgrade's rows as added while its entries are EXISTING."""
    counts = Counter(statuses)
    expected = (
        (STATUS_ADDED, "added_files_count", manifest.added_files_count),
        (STATUS_EXISTING, "existing_files_count", manifest.existing_files_count),
        (STATUS_DELETED, "deleted_files_count", manifest.deleted_files_count),
    )
    if all(listed is None or listed == counts[status] for status, _, listed in expected):
        return
    have = ", ".join(f"{counts[status]} {STATUS_NAMES[status]}" for status, _, _ in expected)
    said = ", ".join(f"{name} {listed}" for _, name, listed in expected if listed is not None)
    where = f" in {manifest.listed_in}" if manifest.listed_in else ""
    raise InvalidMetadataError(
        f"{path}: the manifest holds {have} entries, but its manifest-list entry{where} says {said}"
    )


def _map_problem(field: dict[str, Any] | None, names: tuple[str, str]) -> str | None:
    """What is wrong with a metrics map column's writer schema (None: an Avro map, or an array of
    records holding the key and value fields its schema names; a damaged schema names others)."""
    if field is None:
        return None
    t = unwrap_optional(field["type"])
    items = unwrap_optional(t.get("items")) if isinstance(t, dict) and t.get("type") == "array" else None
    is_map = isinstance(t, dict) and t.get("type") == "map"
    if not is_map and not (
        isinstance(items, dict)
        and items.get("type") == "record"
        and set(names) <= {f.get("name") for f in items.get("fields", ())}
    ):
        return f"a metrics map column is not an array of {names[0]}/{names[1]} records: {json.dumps(field['type'])}"
    return None


class _MapColumn:
    """One metrics map column (`column_sizes`, ...): row -> {field id: value}, built on demand.

    Iceberg stores these maps as arrays of key/value records (or, from some writers, Avro maps
    with string keys); null items of a nullable-union writer are skipped. The column is turned
    into flat Python lists on the first row asked for (a pruned or count-only read never pays).
    """

    __slots__ = (
        "_asked", "_col", "_keys", "_names", "_offsets", "_rows_valid", "_string_keys", "_valid", "_values",
    )  # fmt: skip

    def __init__(self, column: Column | None, names: tuple[str, str]) -> None:
        nulls = None if column is None else column.nulls()
        empty = column is None or not len(column) or (nulls is not None and all(nulls))
        self._col = None if empty else column
        self._names = names
        self._offsets: list[int] = []
        self._keys: list[Any] = []
        self._values: list[Any] = []
        self._valid: list[bool] | None = None
        self._rows_valid: list[bool] | None = None
        self._string_keys = False
        self._asked = 0

    @property
    def arrow_bytes(self) -> int:
        """About what the column's Arrow buffers take (0 once turned into lists, or when there is
        none; a fastavro-decoded column counts ~16 bytes per item, as Arrow would hold it)."""
        col = self._col
        if col is None:
            return 0
        arrow = col.arrow_bytes
        if arrow is not None:
            return arrow
        return 16 * sum(len(v) for v in col.values() if v)

    def _load(self) -> None:
        # Cached manifests are shared between threads: fill every list first, drop the decoded
        # column last, so a reader never sees a half-converted column (two may both convert).
        col = self._col
        if col is None:
            return
        arr = col.arrow
        if arr is None:
            self._load_values(col.values())
        else:
            import pyarrow as pa  # only polars-decoded columns are Arrow (pyarrow is loaded then)

            # A slice (one manifest of a batch decoded together) has offsets into its parent's
            # children, which `keys`/`items`/`values` return whole: take only the slice's part.
            offsets = arr.offsets.to_pylist()
            base, end = offsets[0], offsets[-1]
            if pa.types.is_map(arr.type):
                keys, values = arr.keys.slice(base, end - base), arr.items.slice(base, end - base)
                self._string_keys = True
            else:
                items = arr.values.slice(base, end - base)
                keys, values = items.field(self._names[0]), items.field(self._names[1])
                if items.null_count:
                    self._valid = items.is_valid().to_pylist()
            self._keys = keys.to_pylist()
            self._values = values.to_pylist()
            if arr.null_count:  # a null map reads as empty
                self._rows_valid = arr.is_valid().to_pylist()
            self._offsets = [o - base for o in offsets] if base else offsets
        self._col = None

    def _load_values(self, rows: list[Any]) -> None:
        """The flat lists `_load` makes, from fastavro's values: per row None (an empty map), an
        Avro map (a dict with string keys) or a list of key/value records (None: a null item)."""
        k_name, v_name = self._names
        offsets: list[int] = [0]
        keys: list[Any] = []
        values: list[Any] = []
        valid: list[bool] = []
        for row in rows:
            if row is None:
                pass
            elif isinstance(row, dict):
                self._string_keys = True
                keys.extend(row)
                values.extend(row.values())
                valid.extend([True] * len(row))
            else:
                for item in row:
                    if item is None:
                        keys.append(None)
                        values.append(None)
                        valid.append(False)
                    else:
                        keys.append(item[k_name])
                        values.append(item[v_name])
                        valid.append(True)
            offsets.append(len(keys))
        self._keys, self._values = keys, values
        self._valid = None if all(valid) else valid
        self._offsets = offsets

    def _row(self, arr: Any, i: int) -> dict[int, Any]:
        """Row `i` read straight from the Arrow column, without converting the rest of it."""
        import pyarrow as pa  # only polars-decoded columns are Arrow (pyarrow is loaded then)

        entries = arr[i].values  # this row's key/value records (None: a null map)
        if entries is None or not len(entries):
            return {}
        if pa.types.is_map(arr.type):
            return _as_dict(entries.field(0).to_pylist(), entries.field(1).to_pylist(), None, string_keys=True)
        valid = entries.is_valid().to_pylist() if entries.null_count else None
        keys, values = entries.field(self._names[0]).to_pylist(), entries.field(self._names[1]).to_pylist()
        return _as_dict(keys, values, valid, string_keys=False)

    def __getitem__(self, i: int) -> dict[int, Any]:
        col = self._col
        if col is not None:
            arr = col.arrow
            if arr is not None and self._asked < _ROWS_ALONE:
                self._asked += 1
                return self._row(arr, i)
            self._load()
        if not self._offsets:
            return {}
        a, b = self._offsets[i], self._offsets[i + 1]
        if a >= b or (self._rows_valid is not None and not self._rows_valid[i]):
            return {}
        valid = None if self._valid is None else self._valid[a:b]
        return _as_dict(self._keys[a:b], self._values[a:b], valid, string_keys=self._string_keys)


class _LazyValues:
    """A column of lists (`split_offsets`: one list per file) turned into Python values only when
    asked: a planner builds entries for the few files it keeps (those rows are read one by one
    from Arrow, as `_MapColumn` does), and a reader of every row converts the column once. A
    manifest then holds no list per file it was not asked about (nor has the collector walk them)."""

    __slots__ = ("_asked", "_col", "_n", "_values")

    def __init__(self, column: Column | None, n: int) -> None:
        self._col = column
        self._n = n
        self._values: list[Any] | None = [None] * n if column is None else None
        self._asked = 0

    def __len__(self) -> int:
        return self._n

    def values(self) -> list[Any]:
        """Every row's value (treat as read-only)."""
        values = self._values
        if values is None:
            col = self._col
            if col is None:  # another thread converted it meanwhile (values are set before col is dropped)
                values = self._values
                assert values is not None
            else:
                values = col.values()
                self._values = values
                self._col = None
        return values

    def __getitem__(self, i: int) -> Any:
        if self._values is None:
            col = self._col
            arr = None if col is None else col.arrow
            if arr is not None and self._asked < _ROWS_ALONE:
                self._asked += 1
                return arr[i].as_py()
        return self.values()[i]


# Rows of a metrics map column read one by one before the whole column is converted: a planner
# builds entries for the few files it keeps (converting a 100-row column costs ~10x one row);
# whatever reads most rows (metrics of every file) converts once after these.
_ROWS_ALONE = 8


def _as_dict(keys: list[Any], values: list[Any], valid: list[bool] | None, *, string_keys: bool) -> dict[int, Any]:
    """A map row's {field id: value}: null items (`valid` False) skipped, Avro map keys (text) as ints."""
    if valid is not None:
        keys = [k for k, v in zip(keys, valid, strict=True) if v]
        values = [x for x, v in zip(values, valid, strict=True) if v]
    if string_keys:
        keys = [int(k) for k in keys]
    return dict(zip(keys, values, strict=True))


@dataclass(slots=True)
class _EntryColumns:
    """A manifest's entries as columns of Python values (after inheritance), rows built on demand."""

    status: list[int]
    snapshot_id: list[int | None]
    seq: list[int | None]
    fseq: list[int | None]
    content: list[int]
    file_path: list[str]
    file_format: list[str]
    spec_id: int
    partition: list[tuple[Any, ...]]
    record_count: list[int]
    size: list[int]
    maps: tuple[_MapColumn, ...]
    key_metadata: list[bytes | None]
    split_offsets: _LazyValues
    equality_ids: list[list[int] | None]
    sort_order_id: list[int | None]
    first_row_id: list[int | None]
    referenced: list[str | None]
    offset: list[int | None]
    content_size: list[int | None]

    def entry(self, i: int) -> ManifestEntry:
        splits = self.split_offsets[i]
        eq = self.equality_ids[i]
        m = self.maps
        return ManifestEntry(
            self.status[i],
            self.snapshot_id[i],
            self.seq[i],
            self.fseq[i],
            DataFile(
                self.content[i],
                self.file_path[i],
                self.file_format[i],
                self.spec_id,
                self.partition[i],
                self.record_count[i],
                self.size[i],
                m[0][i],
                m[1][i],
                m[2][i],
                m[3][i],
                m[4][i],
                m[5][i],
                self.key_metadata[i],
                None if splits is None else tuple(splits),
                None if eq is None else tuple(eq),
                self.sort_order_id[i],
                self.first_row_id[i],
                self.referenced[i],
                self.offset[i],
                self.content_size[i],
            ),
        )


def _values(parent: Column, name: str | None, n: int) -> list[Any]:
    """A column's values as a list of its own (all None when the file has no such column)."""
    return parent.field_values(name, n)


def _least(values: list[Any], default: Any = 0) -> Any:
    """The least value that is not None (`default` when there is none), at C speed (`min` over a set)."""
    if None not in values:
        return min(values, default=default)
    rest = set(values)
    rest.discard(None)
    return min(rest, default=default)


def _first_null(values: list[Any]) -> int | None:
    """Index of the first None (list methods: C speed)."""
    return values.index(None) if None in values else None


def _build_columns(
    table: Column,
    md: ManifestMetadata,
    layout: _Layout,
    manifest: ManifestFile | None,
    path: str | None,
    holds: int | None,
) -> _EntryColumns:
    n_status, n_snapshot, n_seq, n_fseq = layout.entry_names
    fn = layout.file_names.get

    def null_field(i: int, name: str) -> InvalidMetadataError:
        return InvalidMetadataError(f"{path}: manifest entry {i} has null {name}")

    def no_seq(i: int, status: int, name: str) -> InvalidMetadataError:
        return InvalidMetadataError(
            f"{path}: manifest entry {i} ({STATUS_NAMES.get(status, status)}) has null {name}; only "
            "ADDED entries inherit sequence numbers"
        )

    def bad(i: int, problem: str) -> InvalidMetadataError:
        return InvalidMetadataError(f"{path}: manifest entry {i} {problem}")

    n = len(table)
    status = _values(table, n_status, n)
    df = table.field(layout.data_file)
    if df is None:  # only when every row is null: a data_file record with no fields at all
        df_nulls: list[bool] | None = [True] * n
    else:
        df_nulls = df.nulls()
    # Each check of the entries is screened over whole columns at C speed (sets, min, count); only
    # a column the screen cannot clear is walked row by row, which finds and words the first bad
    # row: the row loops are the rules, a screen only skips a loop that would find nothing.
    statuses = set(status)
    if not _SCREENS or not statuses <= _STATUS_SET or df_nulls is not None:
        for i, (s, df_null) in enumerate(zip(status, df_nulls or [False] * n, strict=True)):
            if s is None:
                raise null_field(i, "status")
            if df_null:
                raise null_field(i, "data_file")
            if s not in STATUS_NAMES:
                raise bad(i, f"has status {s}; the spec defines 0 (EXISTING), 1 (ADDED) and 2 (DELETED)")
    assert df is not None or n == 0

    def dcol(fid: int) -> list[Any]:
        return [] if df is None else _values(df, fn(fid), n)

    file_path, file_format, record_count, size = (dcol(i) for i in (100, 101, 103, 104))
    required = (
        ("file_path", file_path),
        ("file_format", file_format),
        ("record_count", record_count),
        ("file_size_in_bytes", size),
    )
    firsts = [j for j in (_first_null(values) for _, values in required) if j is not None]
    if firsts:  # the first row with a null required field, and its first such field
        j = min(firsts)
        raise null_field(j, "data_file." + next(label for label, values in required if values[j] is None))

    allowed_content = {
        None: _CONTENTS,
        MANIFEST_CONTENT_DATA: (CONTENT_DATA,),
        MANIFEST_CONTENT_DELETES: (CONTENT_POSITION_DELETES, CONTENT_EQUALITY_DELETES),
    }[holds]
    content = [c or 0 for c in dcol(134)]
    referenced, offset, content_size = dcol(143), dcol(144), dcol(145)
    live: set[tuple[str, int | None]] = set()
    contents = set(content)
    cleared = (
        _SCREENS
        and contents <= set(allowed_content)
        and CONTENT_POSITION_DELETES not in contents  # deletion vectors: checked row by row
        and (not n or min(record_count) >= 0)
        and len(set(file_path)) == n  # distinct paths: no (path, offset) live twice
    )
    for i in range(0 if cleared else n):
        c = content[i]
        if c not in allowed_content:
            if c not in _CONTENTS:
                raise bad(
                    i,
                    f"has data_file.content {c}; the spec defines 0 (data), 1 (position deletes) "
                    "and 2 (equality deletes)",
                )
            kind = "data" if holds == MANIFEST_CONTENT_DATA else "delete"
            raise bad(i, f"has data_file.content {c} ({_CONTENT_NAMES[c]}) in a {kind} manifest")
        if record_count[i] < 0:
            raise bad(i, f"has a negative data_file.record_count {record_count[i]}")
        if c == CONTENT_POSITION_DELETES and file_format[i].upper() == "PUFFIN":
            # A deletion vector: without the data file it applies to it would apply to nothing.
            if referenced[i] is None:
                raise bad(i, f"is a deletion vector in {file_path[i]} with null referenced_data_file")
            if offset[i] is None or content_size[i] is None:
                raise bad(
                    i, f"is a deletion vector in {file_path[i]} without content_offset/content_size_in_bytes"
                )
        if status[i] != STATUS_DELETED:
            # The same file live twice would be read (or applied) twice.
            key = (file_path[i], offset[i])
            if key in live:
                raise bad(i, f"lists {file_path[i]} a second time as live")
            live.add(key)

    partition = _partition_column(df, layout, n, null_field)
    snapshot_id, seq, fseq = (_values(table, name, n) for name in (n_snapshot, n_seq, n_fseq))
    first_row_id = dcol(142)
    cleared = _SCREENS and all(_least(values) >= 0 for values in (seq, fseq, first_row_id))
    for i in range(0 if cleared else n):
        if (seq[i] is not None and seq[i] < 0) or (fseq[i] is not None and fseq[i] < 0):
            raise bad(
                i,
                f"has a negative sequence number (sequence_number {seq[i]}, file_sequence_number {fseq[i]})",
            )
        if first_row_id[i] is not None and first_row_id[i] < 0:
            raise bad(i, f"has a negative data_file.first_row_id {first_row_id[i]}")
    if manifest is not None:
        _inherit(md, manifest, status, content, record_count, snapshot_id, seq, fseq, first_row_id, no_seq, path)

    for _, _, problem in layout.maps:
        if problem is not None:
            raise InvalidMetadataError(f"{path}: {problem}")
    maps = tuple(_MapColumn(None if df is None else df.field(name), names) for name, names, _ in layout.maps)
    lower, upper = maps[_D_MAPS.index(125)], maps[_D_MAPS.index(128)]
    for i in range(0 if _SCREENS and referenced.count(None) == n else n):
        ref = referenced[i]
        if ref is not None and content[i] == CONTENT_POSITION_DELETES and offset[i] is None:
            # Every row of a position-delete file with a referenced_data_file names that file, so
            # its file_path bounds (where recorded; truncation keeps them on the right side) hold it.
            lo, hi = lower[i].get(_FILE_PATH_ID), upper[i].get(_FILE_PATH_ID)
            if lo is not None and hi is not None and not (lo <= ref.encode() <= hi):
                raise bad(i, f"names referenced_data_file {ref}, outside the file_path bounds of {file_path[i]}")
    return _EntryColumns(
        status, snapshot_id, seq, fseq, content, file_path, file_format,
        manifest.partition_spec_id if manifest is not None else md.partition_spec_id,
        partition, record_count, size, maps, dcol(131), _LazyValues(None if df is None else df.field(fn(132)), n),
        dcol(135), dcol(140), first_row_id,
        referenced, offset, content_size,
    )  # fmt: skip


def _inherit_columns(
    status: list[int],
    snapshot_id: list[int | None],
    seq: list[int | None],
    fseq: list[int | None],
    inherit_snapshot: int | None,
    inherit_seq: int | None,
    seq_for_all: bool,
    min_seq: int | None,
) -> bool:
    """`_inherit`'s loop (without first row ids) applied to whole columns at once where that is
    certain to change and refuse nothing the loop would; False (nothing changed) otherwise, and
    the loop then runs. Cleared: every null sequence number may inherit (all of them may, or only
    ADDED entries have one), and no data sequence number can fall below min_sequence_number."""
    seq_gaps, fseq_gaps = None in seq, None in fseq
    if (seq_gaps or fseq_gaps) and not seq_for_all and not set(status) <= {STATUS_ADDED}:
        return False
    if not seq_for_all:
        least = _least([*seq, inherit_seq] if seq_gaps else seq, default=None)
        if least is not None and least < min_seq:
            return False
        if inherit_seq is not None and _greatest([*seq, *fseq]) > inherit_seq:
            return False
    for values, gaps, value in ((snapshot_id, None in snapshot_id, inherit_snapshot), (seq, seq_gaps, inherit_seq),
                                (fseq, fseq_gaps, inherit_seq)):  # fmt: skip
        if gaps:
            values[:] = [value if v is None else v for v in values]
    return True


def _partition_column(
    df: Column | None,
    layout: _Layout,
    n: int,
    null_field: Callable[[int, str], InvalidMetadataError],
) -> list[tuple[Any, ...]]:
    """Each row's partition tuple in the internal representation (spec field order)."""
    readers = layout.partition_readers
    if not readers:
        return [()] * n
    part = None if df is None else df.field(layout.partition)
    part_nulls = None if part is None else part.nulls()
    if part_nulls is not None:
        raise null_field(part_nulls.index(True), "data_file.partition")
    columns = []
    for name, conv in readers:
        values = [None] * n if part is None else _values(part, name, n)
        columns.append(values if conv is None else [conv(v) for v in values])
    return list(zip(*columns, strict=True))


def _greatest(values: Iterable[int | None]) -> int:
    """The largest of `values`, nulls skipped (-1 when there is none)."""
    return max((v for v in values if v is not None), default=-1)


def _check_not_after(
    manifest: ManifestFile, i: int, data_seq: int | None, file_seq: int | None, path: str | None
) -> None:
    """An entry's sequence numbers cannot exceed the manifest's own: the list's sequence_number is
    the one of the commit that added the manifest, and every file in it was committed by then. A
    larger one would put a data file after deletes that were meant to cover it."""
    for name, value in (("data", data_seq), ("file", file_seq)):
        if value is not None and value > manifest.sequence_number:
            raise InvalidMetadataError(
                f"{path}: manifest entry {i} has {name} sequence number {value}, above the manifest's "
                f"sequence_number {manifest.sequence_number} in the manifest list"
            )


def _inherit(
    md: ManifestMetadata,
    manifest: ManifestFile,
    status: list[int],
    content: list[int],
    record_count: list[int],
    snapshot_id: list[int | None],
    seq: list[int | None],
    fseq: list[int | None],
    first_row_id: list[int | None],
    no_seq: Callable[[int, int, str], InvalidMetadataError],
    path: str | None,
) -> None:
    """Apply the spec's inheritance rules in place (see `read_manifest`); entries below the
    list's min_sequence_number are refused."""
    inherit_snapshot = manifest.added_snapshot_id
    inherit_seq = 0 if md.format_version == 1 else manifest.sequence_number
    # v1 manifests have no sequence numbers (all 0); a list sequence number of 0 marks v1 data too.
    seq_for_all = md.format_version == 1 or manifest.sequence_number == 0
    next_row_id = manifest.first_row_id if manifest.content == MANIFEST_CONTENT_DATA else None
    min_seq = manifest.min_sequence_number
    if _SCREENS and next_row_id is None and _inherit_columns(
        status, snapshot_id, seq, fseq, inherit_snapshot, inherit_seq, seq_for_all, min_seq
    ):
        return
    for i, s in enumerate(status):
        if snapshot_id[i] is None:
            snapshot_id[i] = inherit_snapshot
        if seq[i] is None:
            if s != STATUS_ADDED and not seq_for_all:
                raise no_seq(i, s, "sequence_number")
            seq[i] = inherit_seq
        if fseq[i] is None:
            if s != STATUS_ADDED and not seq_for_all:
                raise no_seq(i, s, "file_sequence_number")
            fseq[i] = inherit_seq
        data_seq = seq[i]
        if not seq_for_all:
            _check_not_after(manifest, i, data_seq, fseq[i], path)
        if s != STATUS_DELETED and not seq_for_all and data_seq is not None and data_seq < min_seq:
            # The list's min_sequence_number is the minimum over the live files (spec): a file
            # below it had its number changed, and deletes would then cover it or not.
            raise InvalidMetadataError(
                f"{path}: manifest entry {i} has data sequence number {data_seq}, below the manifest's "
                f"min_sequence_number {min_seq} in the manifest list"
            )
        if (
            next_row_id is not None
            and first_row_id[i] is None
            and content[i] == CONTENT_DATA
            and s != STATUS_DELETED
        ):
            first_row_id[i] = next_row_id
            next_row_id += record_count[i]
