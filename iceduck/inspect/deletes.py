"""Delete files as tables: Puffin blobs, deletion-vector positions, position deletes, DV health.

- `puffin_blobs`: the footer entries of every Puffin file a snapshot references (deletion-vector
  files and statistics files), or of one Puffin file given by path.
- `dv_positions`: one row per position a deletion vector deletes, streamed.
- `position_deletes`: v2 position-delete files and v3 deletion vectors together, streamed.
- `dv_check`: one row per deletion vector saying whether its bytes and metadata agree; it reports a
  broken DV instead of raising.
- `delete_check`: one row per position-delete file and DV: how many of the data file paths it
  references match a live data file as written, only after normalisation
  (`PathResolver.match_key`, the rule scans apply), or not at all.

Paths shown are the ones the metadata records; files are read where they are now
(`Table.resolve`), so a moved table reads the same. The streaming functions build each record batch
with vectorised Arrow calls: positions come straight from the Roaring containers, and the constant
path columns are dictionary arrays over one value (an index buffer of zeros, shared by all batches),
so positions cost no Python per row (20 million stream into DuckDB in well under a second).
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from iceduck.errors import (
    CorruptFileError,
    FileNotFoundInTableError,
    IcebergError,
    InvalidMetadataError,
    UnsupportedFormatError,
)
from iceduck.inspect.metadata import Column, columns_schema, columns_table
from iceduck.io.fileio import FileIO, LocalFileIO, local_path
from iceduck.io.paths import is_local
from iceduck.io.storage import default_io
from iceduck.puffin import deletion_vector as dvcodec
from iceduck.puffin.puffin import (
    PROPERTY_CARDINALITY,
    PROPERTY_REFERENCED_DATA_FILE,
    PuffinFooter,
    deletion_vector_blobs,
    read_deletion_vector,
    read_footer,
)
from iceduck.puffin.roaring64 import Roaring64
from iceduck.read.deletes import position_delete_columns
from iceduck.spec.manifest import (
    CONTENT_DATA,
    CONTENT_POSITION_DELETES,
    MANIFEST_CONTENT_DATA,
    MANIFEST_CONTENT_DELETES,
    DataFile,
    ManifestEntry,
)
from iceduck.spec.snapshots import Snapshot
from iceduck.table import Table

__all__ = [
    "BATCH_ROWS",
    "DELETE_CHECK",
    "DV_CHECK",
    "DV_POSITIONS",
    "POSITION_DELETES",
    "PUFFIN_BLOBS",
    "delete_check",
    "dv_check",
    "dv_positions",
    "position_deletes",
    "puffin_blobs",
]

STR_MAP = pa.map_(pa.string(), pa.string())
# A column that holds one path for a whole batch: dictionary-encoded, so a batch carries the path
# once plus an index buffer of zeros (DuckDB reads dictionary columns as VARCHAR).
PATH = pa.dictionary(pa.int32(), pa.string())
# Positions per record batch: big enough that per-batch overhead vanishes, small enough to stream.
BATCH_ROWS = 1 << 20

DELETE_KIND_FILE = "position-delete-file"
DELETE_KIND_DV = "deletion-vector"
_FORMAT_PUFFIN = "PUFFIN"
_FORMAT_PARQUET = "PARQUET"


# ---------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------


def _delete_entries(table: Table, snapshot: Snapshot | None) -> Iterator[ManifestEntry]:
    """Live entries of the snapshot's delete manifests (data manifests are not read)."""
    for mf in table.manifests(snapshot):
        if mf.content != MANIFEST_CONTENT_DELETES:
            continue
        for entry in table.manifest(mf).entries:
            if entry.status != 2:
                yield entry


def _dv_entries(table: Table, snapshot: Snapshot | None) -> list[ManifestEntry]:
    return [e for e in _delete_entries(table, snapshot) if e.data_file.is_deletion_vector]


def _dv_location(d: DataFile) -> tuple[int, int]:
    """The DV's (content_offset, content_size_in_bytes); both are required for a DV."""
    if d.content_offset is None or d.content_size_in_bytes is None:
        raise InvalidMetadataError(
            f"{d.file_path}: deletion vector entry has no content_offset/content_size_in_bytes "
            f"(offset {d.content_offset}, size {d.content_size_in_bytes})"
        )
    if d.referenced_data_file is None:
        raise InvalidMetadataError(f"{d.file_path}: deletion vector entry has no referenced_data_file")
    return d.content_offset, d.content_size_in_bytes


@functools.cache
def _zeros() -> pa.Array:
    """BATCH_ROWS int32 zeros: the dictionary indices of every constant path column (sliced, never copied)."""
    return pa.array(np.zeros(BATCH_ROWS, np.int32))


def _constant_path(value: str | None, n: int) -> pa.DictionaryArray:
    if value is None:
        return pa.DictionaryArray.from_arrays(pa.nulls(n, pa.int32()), pa.array([], pa.string()))
    indices = _zeros().slice(0, n) if n <= BATCH_ROWS else pa.array(np.zeros(n, np.int32))
    return pa.DictionaryArray.from_arrays(indices, pa.array([value], pa.string()))


def _position_chunks(positions: Roaring64) -> Iterator[pa.Array]:
    """The positions ascending, as int64 arrays of at most BATCH_ROWS each.

    Works per 32-bit bitmap and converts one chunk at a time, so the peak extra memory is the
    bitmap's 4-byte low words plus one chunk, not 8 bytes per position.
    """
    import pyarrow.compute as pc

    for key, bitmap in positions.bitmaps:
        words = bitmap.to_array()  # array('I'): the low 32 bits, ascending
        lows = pa.Array.from_buffers(pa.uint32(), len(words), [None, pa.py_buffer(words)])
        high = pa.scalar(key << 32, pa.int64())
        for start in range(0, len(words), BATCH_ROWS):
            chunk = lows.slice(start, BATCH_ROWS).cast(pa.int64())
            yield pc.bit_wise_or(chunk, high) if key else chunk


# ---------------------------------------------------------------------------------------------
# puffin_blobs
# ---------------------------------------------------------------------------------------------

# rows: (the Puffin file, blob index, the blob's footer entry, file size); blob fields by their own names
_PUFFIN_BLOB_COLUMNS: list[Column] = [
    ("file_path", pa.string(), lambda r, _: r[0].recorded),
    ("blob_index", pa.int32(), lambda r, _: r[1]),
    ("type", pa.string(), lambda r, _: r[2].type),
    ("fields", pa.list_(pa.int32()), lambda r, _: list(r[2].fields)),
    ("snapshot_id", pa.int64(), lambda r, _: r[2].snapshot_id),
    ("sequence_number", pa.int64(), lambda r, _: r[2].sequence_number),
    ("offset", pa.int64(), lambda r, _: r[2].offset),
    ("length", pa.int64(), lambda r, _: r[2].length),
    ("compression_codec", pa.string(), lambda r, _: r[2].compression_codec),
    ("properties", STR_MAP, lambda r, _: list(r[2].properties.items())),
    ("referenced_data_file", pa.string(), lambda r, _: r[2].properties.get(PROPERTY_REFERENCED_DATA_FILE)),
    ("cardinality", pa.int64(), lambda r, _: _cardinality(r[2].properties.get(PROPERTY_CARDINALITY))),
    ("file_size", pa.int64(), lambda r, _: r[3]),
]
PUFFIN_BLOBS = columns_schema(_PUFFIN_BLOB_COLUMNS)


def _cardinality(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


@dataclass(frozen=True, slots=True)
class _PuffinRef:
    recorded: str  # as the metadata records it (shown)
    actual: str  # where it is read
    footer_size: int | None = None  # known for statistics files


def puffin_blobs(source: Table | str, snapshot: Snapshot | None = None) -> pa.Table:
    """One row per blob of a Puffin file's footer.

    `source` is a loaded Table, whose `snapshot` references Puffin files through its delete
    manifests (deletion vectors, each file listed once) and the table metadata's `statistics` for
    that snapshot; a snapshot of None (an empty table) has none. Or `source` is the path of one
    Puffin file (`snapshot` is ignored). `referenced_data_file` and `cardinality` come from the
    blob's properties (NULL when absent or, for cardinality, not a number); `file_size` is the
    size of the file as read. Raises CorruptFileError naming the file when a footer is invalid
    (a bare deletion-vector file included).
    """
    if isinstance(source, Table):
        io: FileIO = source.io
        refs = _table_puffin_files(source, snapshot)
    else:
        io = default_io()
        refs = [_PuffinRef(source, source)]
    rows = []
    for ref in refs:
        with io.open_input(ref.actual) as f:
            footer = read_footer(f, path=ref.actual, footer_size=ref.footer_size)
            size = f.size
        rows += [(ref, index, blob, size) for index, blob in enumerate(footer.blobs)]
    return columns_table(_PUFFIN_BLOB_COLUMNS, PUFFIN_BLOBS, rows, None)


def _table_puffin_files(table: Table, snapshot: Snapshot | None) -> list[_PuffinRef]:
    refs: dict[str, _PuffinRef] = {}
    for entry in _delete_entries(table, snapshot):
        d = entry.data_file
        if d.is_deletion_vector and d.file_path not in refs:
            refs[d.file_path] = _PuffinRef(d.file_path, table.resolve(d.file_path))
    if snapshot is not None:
        for stats in table.metadata.statistics:
            if stats.snapshot_id == snapshot.snapshot_id and stats.statistics_path not in refs:
                refs[stats.statistics_path] = _PuffinRef(
                    stats.statistics_path,
                    table.resolve(stats.statistics_path),
                    stats.file_footer_size_in_bytes,
                )
    return list(refs.values())


# ---------------------------------------------------------------------------------------------
# dv_positions / position_deletes
# ---------------------------------------------------------------------------------------------

DV_POSITIONS = pa.schema(
    [
        ("delete_file_path", PATH),
        ("referenced_data_file", PATH),
        ("pos", pa.int64()),
    ]
)


@dataclass(frozen=True, slots=True)
class _DV:
    """One deletion vector to read: where it is, what to check it against, what to show."""

    recorded: str  # the Puffin file as recorded (shown)
    actual: str  # where it is read
    referenced_data_file: str | None
    offset: int
    length: int
    cardinality: int  # the expected record count; -1: unknown (a bare DV read by path)


def dv_positions(
    source: Table | str, snapshot: Snapshot | None = None, *, allow_bare: bool = False
) -> pa.RecordBatchReader:
    """One row per deleted position: the Puffin file, the data file it applies to, the position.

    For a Table: every deletion vector (delete entry with a content_offset) of the snapshot's live
    delete manifests, each checked against its manifest entry (content_size_in_bytes, record_count);
    for a path: every `deletion-vector-v1` blob of that Puffin file, checked against its footer
    entry. Positions stream in ascending order per DV, in batches of at most BATCH_ROWS; the path
    columns are dictionary-encoded strings. Raises CorruptFileError naming the Puffin file for a
    damaged DV (while streaming). A legacy file holding only a bare DV blob is refused unless
    `allow_bare` (a bare file given by path then reads as one DV with no referenced data file).
    """
    if isinstance(source, Table):
        io: FileIO = source.io
        dvs: Iterable[_DV] = [_table_dv(source, e) for e in _dv_entries(source, snapshot)]
    else:
        io = default_io()
        dvs = _file_dvs(io, source, allow_bare=allow_bare)
    return pa.RecordBatchReader.from_batches(DV_POSITIONS, _dv_position_batches(io, dvs, allow_bare))


def _table_dv(table: Table, entry: ManifestEntry) -> _DV:
    d = entry.data_file
    offset, length = _dv_location(d)
    return _DV(
        d.file_path,
        table.resolve(d.file_path),
        d.referenced_data_file,
        offset,
        length,
        d.record_count,
    )


def _file_dvs(io: FileIO, path: str, *, allow_bare: bool) -> list[_DV]:
    """The DV blobs of one Puffin file, from its footer (read now, so a bad file fails the call)."""
    with io.open_input(path) as f:
        head = f.read_at(0, min(f.size, 8))
        if allow_bare and head[4:8] == dvcodec.MAGIC:
            return [_DV(path, path, None, 0, f.size, -1)]
        footer = read_footer(f, path=path)
    return [
        _DV(path, path, blob.referenced_data_file, blob.offset, blob.length, blob.cardinality)
        for blob in deletion_vector_blobs(footer, path=path)
    ]


def _read_dv(io: FileIO, dv: _DV, *, allow_bare: bool) -> Roaring64:
    with io.open_input(dv.actual) as f:
        return read_deletion_vector(
            f,
            dv.offset,
            dv.length,
            path=dv.actual,
            record_count=dv.cardinality if dv.cardinality >= 0 else None,
            allow_bare=allow_bare,
        )


def _dv_position_batches(io: FileIO, dvs: Iterable[_DV], allow_bare: bool) -> Iterator[pa.RecordBatch]:
    for dv in dvs:
        positions = _read_dv(io, dv, allow_bare=allow_bare)
        for chunk in _position_chunks(positions):
            n = len(chunk)
            yield pa.RecordBatch.from_arrays(
                [_constant_path(dv.recorded, n), _constant_path(dv.referenced_data_file, n), chunk],
                schema=DV_POSITIONS,
            )


POSITION_DELETES = pa.schema(
    [
        ("delete_file_path", PATH),
        ("referenced_data_file", PATH),
        ("pos", pa.int64()),
        ("delete_kind", PATH),
        ("sequence_number", pa.int64()),
    ]
)


def position_deletes(
    table: Table, snapshot: Snapshot | None = None, *, allow_bare: bool = False
) -> pa.RecordBatchReader:
    """Every position delete of the snapshot: v2 position-delete files and v3 deletion vectors.

    One row per deleted position: the delete file (as recorded), the data file it deletes from
    (`file_path` of a position-delete file, `referenced_data_file` of a DV), the position,
    `delete_kind` ('position-delete-file' or 'deletion-vector') and the delete file's data sequence
    number. Position-delete files are Parquet; their `file_path` and `pos` columns are found by
    field id (2147483546, 2147483545), else by name. Streams; path columns are dictionary-encoded.
    DVs are checked as in `dv_positions`. Equality deletes are not position deletes: skipped.
    """
    entries = [e for e in _delete_entries(table, snapshot) if e.data_file.content == CONTENT_POSITION_DELETES]
    return pa.RecordBatchReader.from_batches(
        POSITION_DELETES, _position_delete_batches(table, entries, allow_bare)
    )


def _position_delete_batches(
    table: Table, entries: list[ManifestEntry], allow_bare: bool
) -> Iterator[pa.RecordBatch]:
    for entry in entries:
        d = entry.data_file
        seq = entry.sequence_number
        if d.is_deletion_vector:
            dv = _table_dv(table, entry)
            kind = DELETE_KIND_DV
            parts: Iterator[tuple[pa.Array, pa.Array]] = (
                (_constant_path(dv.referenced_data_file, len(chunk)), chunk)
                for chunk in _position_chunks(_read_dv(table.io, dv, allow_bare=allow_bare))
            )
        else:
            kind = DELETE_KIND_FILE
            parts = _position_delete_file(table, d)
        for referenced, pos in parts:
            n = len(pos)
            yield pa.RecordBatch.from_arrays(
                [
                    _constant_path(d.file_path, n),
                    referenced,
                    pos,
                    _constant_path(kind, n),
                    pa.nulls(n, pa.int64()) if seq is None else pa.array(np.full(n, seq, np.int64)),
                ],
                schema=POSITION_DELETES,
            )


def _position_delete_file(table: Table, d: DataFile) -> Iterator[tuple[pa.Array, pa.Array]]:
    """(file_path as dictionary, pos) batches of a Parquet position-delete file."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    actual = table.resolve(d.file_path)
    if d.file_format.upper() != _FORMAT_PARQUET:
        raise UnsupportedFormatError(
            f"{actual}: position-delete files in {d.file_format} are not supported (only Parquet)"
        )
    # pyarrow streams a local file itself; other storage goes through the FileIO as bytes.
    source: Any = (
        local_path(actual)
        if isinstance(table.io, LocalFileIO) or is_local(actual)
        else table.io.open_stream(actual)
    )
    try:
        pf = pq.ParquetFile(source)
        path_col, pos_col = position_delete_columns(pf.schema_arrow, actual)
        # Read file_path as a dictionary: Parquet stores it dictionary-encoded, so this is cheap.
        pf = pq.ParquetFile(source, read_dictionary=[path_col])
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=[path_col, pos_col]):
            paths = batch.column(0)
            if not pa.types.is_dictionary(paths.type):
                paths = pc.dictionary_encode(paths)
            yield paths.cast(PATH), batch.column(1).cast(pa.int64())
    except FileNotFoundError:
        raise FileNotFoundInTableError(f"{actual}: position-delete file not found") from None
    except (OSError, pa.ArrowException) as error:
        raise CorruptFileError(actual, f"cannot read position-delete file: {error}") from error


# ---------------------------------------------------------------------------------------------
# delete_check
# ---------------------------------------------------------------------------------------------

DELETE_CHECK = pa.schema(
    [
        ("delete_file_path", pa.string()),
        ("kind", pa.string()),
        ("content_offset", pa.int64()),
        ("referenced_paths", pa.int64()),
        ("exact", pa.int64()),
        ("normalized", pa.int64()),
        ("unmatched", pa.int64()),
        ("unmatched_example", pa.string()),
        ("error", pa.string()),
    ]
)


def delete_check(table: Table, snapshot: Snapshot | None = None) -> pa.Table:
    """Per position-delete file and DV of the snapshot: do the data file paths it names match?

    A DV names its `referenced_data_file`; a position-delete file names the distinct `file_path`
    values it holds. Each is counted once as `exact` (equal to a live data file's path as the
    manifest records it), `normalized` (equal only after both are resolved and normalised by the
    table's `PathResolver.match_key`, which is how scans match them), or `unmatched` (no live data
    file: those deletes apply to nothing). `unmatched_example` shows one unmatched path; `error`
    says why a file could not be read (the row is still returned).
    """
    key = table.resolver.match_key
    live = _live_data_files(table, snapshot)
    raw = {d.path for d in live.values()}
    rows = []
    for e in _delete_entries(table, snapshot):
        d = e.data_file
        if d.content != CONTENT_POSITION_DELETES:
            continue
        row: dict[str, Any] = {
            "delete_file_path": d.file_path,
            "kind": DELETE_KIND_DV if d.is_deletion_vector else DELETE_KIND_FILE,
            "content_offset": d.content_offset,
        }
        try:
            if d.is_deletion_vector:
                named = [d.referenced_data_file] if d.referenced_data_file is not None else []
            else:
                named = sorted(
                    {
                        str(v)
                        for paths, _ in _position_delete_file(table, d)
                        for v in paths.dictionary.to_pylist()
                    }
                )
        except IcebergError as error:
            row["error"] = _message(error)
            named = []
        exact = [p for p in named if p in raw]
        normalized = [p for p in named if p not in raw and key(p) in live]
        unmatched = [p for p in named if p not in raw and key(p) not in live]
        row.update(
            referenced_paths=len(named), exact=len(exact), normalized=len(normalized), unmatched=len(unmatched),
            unmatched_example=unmatched[0] if unmatched else None,
        )  # fmt: skip
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=DELETE_CHECK)


# ---------------------------------------------------------------------------------------------
# dv_check
# ---------------------------------------------------------------------------------------------

DV_CHECK = pa.schema(
    [
        ("delete_file_path", pa.string()),
        ("referenced_data_file", pa.string()),
        ("content_offset", pa.int64()),
        ("content_size_in_bytes", pa.int64()),
        ("manifest_cardinality", pa.int64()),
        ("blob_cardinality", pa.int64()),
        ("decoded_cardinality", pa.int64()),
        ("crc_ok", pa.bool_()),
        ("error", pa.string()),
        ("ok", pa.bool_()),
        ("problems", pa.string()),
    ]
)


@dataclass(frozen=True, slots=True)
class _LiveData:
    record_count: int
    sequence_number: int | None
    path: str  # as the manifest records it


def dv_check(table: Table, snapshot: Snapshot | None = None) -> pa.Table:
    """One row per deletion vector of the snapshot: do its bytes, footer entry and manifest entry agree?

    Reads each DV's bytes at (content_offset, content_size_in_bytes) and its Puffin footer entry
    (the blob at that offset). `blob_cardinality` is the blob's `cardinality` property,
    `decoded_cardinality` the number of positions decoded; `crc_ok` compares the CRC-32 stored
    after the bitmap with the one computed (NULL when the bytes are too short to hold one);
    `error` is the message of a failed decode or read. `problems` lists, separated by "; ", every
    disagreement: file size, footer unreadable (e.g. a bare legacy DV), no blob at the offset,
    blob type/length/codec, referenced-data-file, cardinalities, snapshot-id/sequence-number not -1,
    referenced data file not live in the snapshot, positions past its record count, a DV with a
    lower sequence number than its data file, two DVs for one data file. `ok` is true when there is
    no error and no problem. Never raises for a broken DV; it reports it.
    """
    entries = _dv_entries(table, snapshot)
    live = _live_data_files(table, snapshot) if entries else {}
    per_data_file: dict[str | None, int] = {}
    key = table.resolver.match_key
    for e in entries:
        ref = e.data_file.referenced_data_file
        ref = None if ref is None else key(ref)
        per_data_file[ref] = per_data_file.get(ref, 0) + 1
    footers: dict[str, PuffinFooter | str] = {}
    rows = [_check_one(table, e, live, per_data_file, footers) for e in entries]
    return pa.Table.from_pylist(rows, schema=DV_CHECK)


def _live_data_files(table: Table, snapshot: Snapshot | None) -> dict[str, _LiveData]:
    """Live data files by match key (a DV may spell its data file differently from the manifest)."""
    key = table.resolver.match_key
    live: dict[str, _LiveData] = {}
    for mf in table.manifests(snapshot):
        if mf.content != MANIFEST_CONTENT_DATA:
            continue
        for e in table.manifest(mf).entries:
            if e.status != 2 and e.data_file.content == CONTENT_DATA:
                d = e.data_file
                live[key(d.file_path)] = _LiveData(d.record_count, e.sequence_number, d.file_path)
    return live


def _check_one(
    table: Table,
    entry: ManifestEntry,
    live: Mapping[str, _LiveData],
    per_data_file: Mapping[str | None, int],
    footers: dict[str, PuffinFooter | str],
) -> dict[str, Any]:
    d = entry.data_file
    row: dict[str, Any] = {
        "delete_file_path": d.file_path,
        "referenced_data_file": d.referenced_data_file,
        "content_offset": d.content_offset,
        "content_size_in_bytes": d.content_size_in_bytes,
        "manifest_cardinality": d.record_count,
    }
    problems: list[str] = []
    actual = table.resolve(d.file_path)
    try:
        _check_bytes(table.io, actual, d, row, problems, footers)
    except Exception as error:  # a checker reports whatever stops it, it does not raise
        row["error"] = _message(error)
    _check_against_data_file(entry, live, per_data_file, row, problems, table.resolver.match_key)
    row["problems"] = "; ".join(problems) or None
    row["ok"] = row.get("error") is None and not problems
    return row


def _check_bytes(
    io: FileIO,
    actual: str,
    d: DataFile,
    row: dict[str, Any],
    problems: list[str],
    footers: dict[str, PuffinFooter | str],
) -> None:
    with io.open_input(actual) as f:
        size = f.size
        if size != d.file_size_in_bytes:
            problems.append(
                f"file is {size} bytes, the manifest records file_size_in_bytes {d.file_size_in_bytes}"
            )
        if actual not in footers:
            try:
                footers[actual] = read_footer(f, path=actual)
            except Exception as error:
                footers[actual] = _message(error)
        footer = footers[actual]
        if isinstance(footer, str):
            problems.append(f"footer: {footer}")
        else:
            _check_blob_metadata(footer, d, row, problems)
        offset, length = _dv_location(d)
        if offset < 0 or length < 0 or offset + length > size:
            raise CorruptFileError(
                actual,
                f"deletion vector at offset {offset}, length {length} lies outside the file ({size} bytes)",
            )
        blob = f.read_at(offset, length)
    row["crc_ok"] = _crc_ok(blob)
    positions = dvcodec.decode_deletion_vector(blob, path=actual, expected_length=length)
    row["decoded_cardinality"] = positions.cardinality
    if positions.cardinality != d.record_count:
        problems.append(
            f"decoded {positions.cardinality} positions, the manifest records record_count {d.record_count}"
        )
    if positions.bitmaps:
        key, last = positions.bitmaps[-1]
        row["_max_position"] = (key << 32) | last.max()


def _check_blob_metadata(footer: PuffinFooter, d: DataFile, row: dict[str, Any], problems: list[str]) -> None:
    matches = [(i, b) for i, b in enumerate(footer.blobs) if b.offset == d.content_offset]
    if not matches:
        problems.append(f"the Puffin footer has no blob at offset {d.content_offset}")
        return
    index, blob = matches[0]
    where = f"blob {index}"
    if blob.type != dvcodec.BLOB_TYPE:
        problems.append(f"{where} has type {blob.type!r}, not {dvcodec.BLOB_TYPE!r}")
    if blob.length != d.content_size_in_bytes:
        problems.append(f"{where} has length {blob.length}, the manifest records {d.content_size_in_bytes}")
    if blob.compression_codec is not None:
        problems.append(f"{where} is compressed ({blob.compression_codec}); DV blobs must not be")
    ref = blob.properties.get(PROPERTY_REFERENCED_DATA_FILE)
    if ref != d.referenced_data_file:
        problems.append(
            f"{where} referenced-data-file is {ref!r}, the manifest records {d.referenced_data_file!r}"
        )
    text = blob.properties.get(PROPERTY_CARDINALITY)
    if text is None or not text.isdigit():
        problems.append(f"{where} cardinality property is {text!r}, not a count")
    else:
        row["blob_cardinality"] = int(text)
        if int(text) != d.record_count:
            problems.append(
                f"{where} cardinality is {text}, the manifest records record_count {d.record_count}"
            )
    if blob.snapshot_id != -1 or blob.sequence_number != -1:
        problems.append(
            f"{where} has snapshot-id {blob.snapshot_id} and sequence-number {blob.sequence_number}; "
            "the spec wants -1 for both"
        )


def _message(error: Exception) -> str:
    if isinstance(error, CorruptFileError):
        return error.problem
    return str(error) if isinstance(error, IcebergError | OSError) else f"{type(error).__name__}: {error}"


def _crc_ok(blob: bytes) -> bool | None:
    """Whether the CRC-32 stored in the DV's last 4 bytes matches magic + bitmap before it."""
    if len(blob) < 12:  # length, magic, CRC
        return None
    return zlib.crc32(blob[4:-4]) == int.from_bytes(blob[-4:], "big")


def _check_against_data_file(
    entry: ManifestEntry,
    live: Mapping[str, _LiveData],
    per_data_file: Mapping[str | None, int],
    row: dict[str, Any],
    problems: list[str],
    key: Callable[[str], str],
) -> None:
    d = entry.data_file
    max_position = row.pop("_max_position", None)
    if d.referenced_data_file is None:
        problems.append("the manifest entry has no referenced_data_file")
        return
    ref = key(d.referenced_data_file)
    if per_data_file.get(ref, 0) > 1:
        problems.append(f"{per_data_file[ref]} deletion vectors reference this data file")
    data = live.get(ref)
    if data is None:
        problems.append("the referenced data file is not a live data file of the snapshot")
        return
    if max_position is not None and max_position >= data.record_count:
        problems.append(f"position {max_position} is past the data file's {data.record_count} rows")
    if (
        entry.sequence_number is not None
        and data.sequence_number is not None
        and entry.sequence_number < data.sequence_number
    ):
        problems.append(
            f"the DV's sequence number {entry.sequence_number} is below the data file's "
            f"{data.sequence_number}: it does not apply"
        )
