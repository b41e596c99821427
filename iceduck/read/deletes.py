"""Deleted positions of data files, as DuckDB joins them natively.

A scan's SQL names the positions it needs by a *key*: a compact JSON text describing, per data
file, where its deletion vectors and position-delete files are. The key is self-contained (no
state is kept between planning and reading), so a statement can be prepared, explained or run
twice. Three keyed sources serve them (registered per connection by `iceduck.duckdb.scan`):

- `alive_bits(key)`: per data file a bit string of its live rows, for a filter
  `get_bit(bits[file_index + 1], file_row_number) = 1` on one multi-file `read_parquet` (the
  default: parallel, and filter pushdown and row-group skipping stay intact);
- `alive_mask(key)`: one boolean per row of one data file (False: deleted), for a
  `read_parquet(f) POSITIONAL JOIN mask` that keeps the file whole and in order;
- `deleted_positions(key)`: `(fi, pos)` pairs for several files, for an anti join on
  `(file_index, file_row_number)` that leaves filter pushdown into the Parquet reader intact.

Deletion vectors are read and checked with `iceduck.puffin`; position-delete files (Parquet) are
read once per process and kept per (path, size, mtime), grouped by the match key of each `file_path`
value (`PathResolver.match_key` of the table's recorded and actual location, which the key carries),
so a delete spelled `hdfs://nn:8020/w/t/f` finds the data file recorded as `/w/t/f`.
"""

from __future__ import annotations

import array
import contextlib
import functools
import itertools
import json
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from iceduck._lazy import LazyModule
from iceduck.errors import CorruptFileError, FileNotFoundInTableError, IcebergError, InvalidMetadataError
from iceduck.io.fileio import FileIO, parquet_footer
from iceduck.io.paths import PathResolver, storage_key
from iceduck.io.storage import default_io
from iceduck.read.footer import footer_schema
from iceduck.scan.deletes import KIND_DV, KIND_POSITION, DeleteFile, PathKey, referenced_path
from iceduck.spec.manifest import DataFile
from iceduck.spec.types import LONG
from iceduck.spec.values import from_bytes

if TYPE_CHECKING:
    import pyarrow as pa

    from iceduck.puffin.puffin import DeletionVectorBlob
    from iceduck.puffin.ranged import RangeReader
    from iceduck.puffin.roaring64 import Roaring64
else:
    pa = LazyModule("pyarrow")

FIELD_ID_FILE_PATH = 2147483546
FIELD_ID_POS = 2147483545


# The rows of the three ways a scan reads deletes (built on first use: pyarrow loads only then).
@functools.cache
def mask_schema() -> pa.Schema:
    """`alive_mask`'s rows: one boolean per row of the data file."""
    return pa.schema([("alive", pa.bool_())])


@functools.cache
def bits_schema() -> pa.Schema:
    """`alive_bits`'s one row: the live-row bits of each file the key names."""
    return pa.schema([("bits", pa.list_(pa.binary()))])


@functools.cache
def positions_schema() -> pa.Schema:
    """`deleted_positions`' rows: (file index, deleted position)."""
    return pa.schema([("fi", pa.int64()), ("pos", pa.int64())])


@dataclass(frozen=True, slots=True)
class FileDeletes:
    """Where the position deletes of one data file are (actual paths, ready to read)."""

    rows: int  # the manifest's record_count: checked against the file before anything is sized by it
    data_key: str  # match key of the data file (`PathResolver.match_key`)
    dvs: tuple[tuple[str, int, int, int], ...] = ()  # (puffin path, offset, length, cardinality)
    files: tuple[str, ...] = ()  # position-delete Parquet files
    path: str = ""  # the data file (actual path): its footer says how many rows it really has
    # per position-delete file, what its manifest entry says of it (checked against its rows)
    facts: tuple[PositionFileFacts, ...] = ()

    def to_json(self) -> list[Any]:
        return [
            self.rows, self.data_key, [list(d) for d in self.dvs], list(self.files), self.path,
            [list(f) for f in self.facts],
        ]  # fmt: skip

    @classmethod
    def from_json(cls, obj: Sequence[Any]) -> FileDeletes:
        rows, key, dvs, files, path, facts = obj
        return cls(
            int(rows), str(key), tuple((str(a), int(b), int(c), int(e)) for a, b, c, e in dvs), tuple(files),
            str(path), tuple(PositionFileFacts(int(n), str(r), lo, hi) for n, r, lo, hi in facts),
        )  # fmt: skip


class PositionFileFacts(NamedTuple):
    """What a position-delete file's manifest entry says about its rows."""

    record_count: int
    referenced: str  # the one data file it names (referenced_data_file or equal file_path bounds), or ""
    pos_lower: int | None  # the pos column's bounds
    pos_upper: int | None


def position_file_facts(d: DataFile) -> PositionFileFacts:
    """The facts of a position-delete file's manifest entry that its rows must agree with."""

    def bound(raw: bytes | None) -> int | None:
        if raw is None:
            return None
        try:
            return int(from_bytes(LONG, raw))
        except IcebergError:
            return None

    return PositionFileFacts(
        d.record_count,
        referenced_path(d) or "",
        bound(d.lower_bounds.get(FIELD_ID_POS)),
        bound(d.upper_bounds.get(FIELD_ID_POS)),
    )


def file_deletes(
    data_key: str, rows: int, deletes: Sequence[DeleteFile], resolve: Any, path: str = ""
) -> FileDeletes | None:
    """The position deletes of one data file (by its match key; `path`: where it is) from its
    planned deletes (None when it has none). `resolve` maps a recorded path to where the file is
    now (`Table.resolve`)."""
    dvs = tuple(
        (resolve(d.path), d.file.content_offset or 0, d.file.content_size_in_bytes or 0, d.file.record_count)
        for d in deletes
        if d.kind == KIND_DV
    )
    positional = [d for d in deletes if d.kind == KIND_POSITION]
    files = tuple(resolve(d.path) for d in positional)
    if not dvs and not files:
        return None
    return FileDeletes(rows, data_key, dvs, files, path, tuple(position_file_facts(d.file) for d in positional))


def encode_key(
    files: Sequence[FileDeletes], allow_bare: bool = False, locations: tuple[str, str] | None = None
) -> str:
    """The key naming the deletes of `files` (in file_index order); `locations` are the table's
    (recorded, actual) locations, from which the reader rebuilds the match keys of delete paths."""
    obj: dict[str, Any] = {"b": allow_bare, "f": [f.to_json() for f in files]}
    if locations is not None:
        obj["l"] = list(locations)
    return json.dumps(obj, separators=(",", ":"))


@functools.lru_cache(maxsize=16)
def decode_key(key: str) -> tuple[tuple[FileDeletes, ...], bool, PathKey]:
    """(files, allow bare DVs, the match-key function) of a key made by `encode_key`; the last few
    are kept decoded (a statement's source reads its key on every run)."""
    obj = json.loads(key)
    loc = obj.get("l")
    matcher = match_key_of(str(loc[0]), str(loc[1])) if loc else storage_key
    return tuple(FileDeletes.from_json(f) for f in obj["f"]), bool(obj.get("b")), matcher


@functools.lru_cache(maxsize=64)
def match_key_of(recorded: str, actual: str) -> PathKey:
    """The match-key function of a table recorded at `recorded` and found at `actual`."""
    return PathResolver(recorded, actual).match_key


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


def positions_of(
    f: FileDeletes,
    *,
    allow_bare: bool = False,
    key: PathKey = storage_key,
    rows: int | None = None,
    io: FileIO | None = None,
    reads: _DvReads | None = None,
) -> np.ndarray:
    """The deleted positions of one data file, sorted and unique, as int64.

    `key` is the table's match-key function: position-delete `file_path` values are matched to
    `f.data_key` by it. `rows` (the data file's checked row count, when known): a position at or
    beyond it names no row, so the delete is not what was written (an error). `reads`: the DV
    bytes of the statement's files (`_DvReads`)."""
    parts: list[np.ndarray] = [
        np.asarray(bitmap.to_numpy(), dtype=np.int64) for bitmap in _checked_dvs(f, allow_bare, key, io, reads)
    ]
    for i, path in enumerate(f.files):
        parsed = _position_file(path, key, io)
        if i < len(f.facts):
            _check_position_file(path, parsed, f.facts[i], key)
        found = parsed.positions.get(f.data_key)
        if found is not None:
            parts.append(found)
    if not parts:
        return np.empty(0, np.int64)
    out = parts[0] if len(parts) == 1 and not f.files else np.unique(np.concatenate(parts))
    if rows is not None and len(out):
        _check_within(f, int(out[-1]), rows)
    return out


def _checked_dvs(
    f: FileDeletes, allow_bare: bool, key: PathKey, io: FileIO | None, reads: _DvReads | None = None
) -> list[Roaring64]:
    """The deletion vectors of one data file, each read and checked against its manifest entry
    and Puffin footer (`_check_dv`, `_check_dv_target`); `reads`: the statement's DV bytes."""
    # Puffin (and its codecs) loads with the first deletion vector read: a scan of a table without
    # any does not pay its memory (issue 11).
    from iceduck.puffin.puffin import MAGIC as PUFFIN_MAGIC
    from iceduck.puffin.puffin import read_deletion_vector

    reads = reads or _DvReads([f], io)
    found = []
    for path, offset, length, cardinality in f.dvs:
        try:
            reader = reads.reader(path)
            bitmap = read_deletion_vector(reader, offset, length, path=path, allow_bare=allow_bare)
            framed = reader.read_at(0, len(PUFFIN_MAGIC)) == PUFFIN_MAGIC
            _check_dv(path, offset, length, bitmap.cardinality, cardinality, framed, io, reader)
            if framed:
                _check_dv_target(path, offset, length, f, key, io, reader)
        except FileNotFoundError:
            raise FileNotFoundInTableError(f"{path}: deletion vector file not found") from None
        found.append(bitmap)
    return found


# Deletion vectors of one statement this close in one Puffin file are fetched in one read (on an
# object store a request costs more than a megabyte of transfer); the head of the file joins the
# first range when that starts this close to it.
_MERGE_GAP = 1 << 20
_MAX_RANGE = 64 << 20  # and no one read larger than this (a Puffin file may hold a whole table's DVs)
# `read_deletion_vector` reads a blob starting this close to the file's head together with it.
_HEAD_JOIN = 64 << 10


class _DvReads:
    """The bytes of the deletion vectors one statement reads, fetched once per Puffin file: its
    blobs merged into ranges (gaps under `_MERGE_GAP`), each range read in one request when a blob
    in it is first asked for (a Puffin file written for many data files is read once, not once
    per DV, and the DVs a selective scan does not need are not read)."""

    def __init__(self, files: Iterable[FileDeletes], io: FileIO | None) -> None:
        self._io = io
        self._wanted: dict[str, list[tuple[int, int]]] = {}
        for f in files:
            for path, offset, length, _ in f.dvs:
                self._wanted.setdefault(path, []).append((offset, length))
        self._readers: dict[str, _DvWindow] = {}

    def reader(self, path: str) -> _DvWindow:
        """A reader of the Puffin file `path` answering from the ranges fetched for the statement."""
        found = self._readers.get(path)
        if found is None:
            with _io(self._io).open_input(path) as opened:
                size = opened.size
            # blobs outside the file are left to read_deletion_vector, which names the problem
            spans = sorted(
                (o, o + n) for o, n in self._wanted.get(path, ()) if o >= 0 and n >= 0 and o + n <= size
            )
            ranges: list[list[int]] = []
            for start, end in spans:
                if ranges and start - ranges[-1][1] <= _MERGE_GAP and end - ranges[-1][0] <= _MAX_RANGE:
                    ranges[-1][1] = max(ranges[-1][1], end)
                else:
                    ranges.append([start, end])
            if ranges and ranges[0][0] <= _HEAD_JOIN:
                ranges[0][0] = 0
            found = self._readers[path] = _DvWindow(path, size, [(a, b) for a, b in ranges], self._io)
        return found


class _DvWindow:
    """`RangeReader` of one Puffin file over the ranges `_DvReads` chose, each fetched on first
    use; a read outside them goes to the file itself."""

    def __init__(self, path: str, size: int, ranges: list[tuple[int, int]], io: FileIO | None) -> None:
        self.path = path
        self._size = size
        self._ranges = ranges
        self._fetched: dict[int, bytes] = {}  # range start -> its bytes
        self._other: dict[tuple[int, int], bytes] = {}  # reads outside the ranges (the head, the magic)
        self._io = io

    @property
    def size(self) -> int:
        """Length of the file when it was opened."""
        return self._size

    def read_at(self, offset: int, length: int) -> bytes:
        """`length` bytes at `offset`: from a fetched range when they lie in one."""
        for start, end in self._ranges:
            if start <= offset and offset + length <= end:
                data = self._fetched.get(start)
                if data is None:
                    with _io(self._io).open_input(self.path) as opened:
                        data = self._fetched[start] = opened.read_at(start, end - start)
                return data[offset - start : offset - start + length]
        found = self._other.get((offset, length))
        if found is None:
            with _io(self._io).open_input(self.path) as opened:
                found = self._other[(offset, length)] = opened.read_at(offset, length)
        return found


def _check_within(f: FileDeletes, highest: int, rows: int) -> None:
    """A deleted position at or beyond the data file's row count names no row: the delete does not
    describe that file."""
    if highest >= rows:
        where = f.dvs[0][0] if f.dvs and not f.files else ", ".join(f.files) if len(f.files) == 1 else "its deletes"
        raise CorruptFileError(
            where,
            f"deletes position {highest} of {f.path or f.data_key}, which has {rows} rows: the delete "
            "does not describe that file",
        )


def _check_position_file(path: str, parsed: PositionFile, facts: PositionFileFacts, key: PathKey) -> None:
    """A position-delete file's rows against its manifest entry: the row count, the one data file
    it names (a changed referenced_data_file applies it to another file or none) and the bounds of
    pos (a changed position outside them)."""
    problem = None
    if parsed.rows != facts.record_count:
        problem = f"holds {parsed.rows} rows, but its manifest entry says record_count {facts.record_count}"
    elif facts.referenced and set(parsed.positions) - {key(facts.referenced)}:
        problem = (
            f"names data files other than {facts.referenced}, the one its manifest entry says it deletes from"
        )
    elif parsed.rows and (
        (facts.pos_lower is not None and parsed.lowest < facts.pos_lower)
        or (facts.pos_upper is not None and parsed.highest > facts.pos_upper)
    ):
        problem = (
            f"holds positions {parsed.lowest} .. {parsed.highest}, outside the bounds its manifest entry "
            f"records ({facts.pos_lower} .. {facts.pos_upper})"
        )
    if problem is not None:
        raise CorruptFileError(path, f"position-delete file {problem}; it is not applied")


_DV_CHECK = "iceberg_dv_check shows every deletion vector against its manifest entry and Puffin footer"


def _check_dv(
    path: str,
    offset: int,
    length: int,
    cardinality: int,
    record_count: int,
    framed: bool,
    io: FileIO | None = None,
    reader: RangeReader | None = None,
) -> None:
    """A DV is applied only if its bitmap's cardinality is the manifest's record_count and (in a
    Puffin file) the `cardinality` property of the deletion-vector-v1 blob the footer lists exactly
    where the manifest says: a DV that disagrees with its own records is not trusted."""
    if record_count >= 0 and cardinality != record_count:
        raise CorruptFileError(
            path,
            f"the deletion vector at offset {offset} holds {cardinality} positions but its manifest entry says "
            f"record_count {record_count}; it is not applied ({_DV_CHECK})",
        )
    if not framed:
        return  # a legacy bare blob (allow_bare_dvs) has no footer
    blob = _dv_blobs(path, io, reader).get((offset, length))
    if blob is None:
        raise CorruptFileError(
            path,
            f"no deletion-vector-v1 blob at offset {offset}, length {length} in the Puffin footer; the "
            f"deletion vector is not applied ({_DV_CHECK})",
        )
    if blob.cardinality != cardinality:
        raise CorruptFileError(
            path,
            f"the deletion vector at offset {offset} holds {cardinality} positions but its Puffin blob says "
            f"cardinality {blob.cardinality}; it is not applied ({_DV_CHECK})",
        )


def _check_dv_target(
    path: str,
    offset: int,
    length: int,
    f: FileDeletes,
    key: PathKey,
    io: FileIO | None = None,
    reader: RangeReader | None = None,
) -> None:
    """The Puffin blob names the data file it was written for (`referenced-data-file`): a DV the
    manifest assigns to another file (its referenced_data_file changed) would delete that file's
    rows instead."""
    blob = _dv_blobs(path, io, reader).get((offset, length))
    if blob is not None and key(blob.referenced_data_file) != f.data_key:
        raise CorruptFileError(
            path,
            f"the deletion vector at offset {offset} was written for {blob.referenced_data_file} (its Puffin "
            f"blob says), but its manifest entry applies it to {f.path or f.data_key}; it is not applied "
            f"({_DV_CHECK})",
        )


def _io(io: FileIO | None) -> FileIO:
    """The FileIO to read with: the connection's when given, else the process's."""
    return io or default_io()


def _stamp(path: str, kind: str, io: FileIO | None = None) -> tuple[int, int]:
    """What identifies a file's content for the caches below (local: size and mtime; S3: the
    path, objects being immutable); `FileNotFoundInTableError` naming the kind of file."""
    st = _io(io).stamp(path)
    if st is None:
        raise FileNotFoundInTableError(f"{path}: {kind} file not found")
    return st


def _dv_blobs(
    path: str, io: FileIO | None = None, reader: RangeReader | None = None
) -> Mapping[tuple[int, int], DeletionVectorBlob]:
    """The deletion-vector blobs a Puffin file's footer lists, by (offset, length) (the first of
    any listed twice): a scan looks up each of its DVs, and one Puffin file may hold thousands.
    `reader`: the file as the scan already reads it (`_DvWindow`)."""
    # with the first deletion vector read (see _checked_dvs)
    from iceduck.puffin.puffin import deletion_vector_blobs, read_footer

    st = _stamp(path, "deletion vector", io)
    key = (path, st[0], st[1])
    with _CACHE_LOCK:
        found = _FOOTERS.get(key)
    if found is None:
        with contextlib.nullcontext(reader) if reader is not None else _io(io).open_input(path) as source:
            listed = deletion_vector_blobs(read_footer(source, path=path), path=path)
        found = {}
        for blob in listed:
            found.setdefault((blob.offset, blob.length), blob)
        with _CACHE_LOCK:
            _FOOTERS[key] = found
            while len(_FOOTERS) > _CACHE_SIZE:
                _FOOTERS.popitem(last=False)
    return found


def checked_rows(f: FileDeletes, io: FileIO | None = None) -> int:
    """The number of rows of the data file `f` describes, from its Parquet footer, which must agree
    with the manifest's record_count: bit strings and masks are sized by it (a lying count would
    allocate terabytes, or make deletes land on the wrong rows). Planning has usually read it
    already (`remember_rows`); pyarrow.parquet loads only when neither that nor the pure footer
    reader has it (~5 MB of a fresh scan's peak)."""
    if f.rows < 0:
        raise InvalidMetadataError(f"{f.path or f.data_key}: impossible record_count {f.rows}")
    if not f.path:
        return f.rows
    st = _stamp(f.path, "data", io)
    key = (f.path, st[0], st[1])
    with _CACHE_LOCK:
        rows = _ROWS.get(key)
    if rows is None:
        try:
            with _io(io).open_input(f.path) as reader:
                footer = parquet_footer(reader)
            read = footer_schema(footer)
            if read is not None:
                rows = read.num_rows
            else:  # what the pure reader cannot decode: pyarrow's verdict stands
                import pyarrow.parquet as pq

                rows = int(pq.read_metadata(pa.BufferReader(footer)).num_rows)
        except IcebergError:
            raise
        except Exception as e:  # OSError, ArrowException, and whatever else a damaged footer raises
            raise CorruptFileError(f.path, f"cannot read the Parquet footer: {e}") from None
        remember_rows(f.path, st, rows)
    if rows != f.rows:
        raise InvalidMetadataError(
            f"{f.path}: the data file holds {rows} rows, but its manifest entry says record_count {f.rows}"
        )
    return rows


def alive_mask(key: str, io: FileIO | None = None) -> pa.Table:
    """One boolean per row of the single data file the key names (False where deleted)."""
    files, allow_bare, matcher = decode_key(key)
    (f,) = files
    rows = checked_rows(f, io)
    positions = positions_of(f, allow_bare=allow_bare, key=matcher, rows=rows, io=io)
    mask = np.ones(rows, dtype=bool)
    mask[positions] = False
    return pa.table([pa.array(mask)], schema=mask_schema())


def alive_bits(key: str, io: FileIO | None = None) -> pa.Table:
    """One row: for each file the key names, its live rows as a bit string (bit p set: row p is live).

    Bits are in DuckDB's BIT order (most significant bit of the first byte is row 0), so the scan
    keeps a row where `get_bit(bits[file_index + 1]::BIT, file_row_number) = 1`.
    """
    return pa.table([_one_list(live_bit_strings(key, io))], schema=bits_schema())


def live_bit_strings(key: str, io: FileIO | None = None) -> list[bytes]:
    """For each file the key names, its live rows as a bit string (`alive_bits`' one row as Python
    values: the scan's keyed source hands them to DuckDB without pyarrow)."""
    files, allow_bare, matcher = decode_key(key)
    stamps: dict[str, tuple[int, int] | None] = {}  # the files of one statement's DVs, each looked at once
    reads = _DvReads(files, io)
    return [_bits(f, allow_bare, matcher, io, stamps, reads) for f in files]


def _one_list(values: list[bytes]) -> pa.Array:
    """A one-row `list<binary>` array holding `values`, assembled from buffers: `pa.array` over
    Python values imports pandas where it is installed (~41 MB of a fresh DV scan's peak)."""
    if sum(map(len, values)) >= 2**31:  # past 32-bit offsets: let pyarrow say what it does
        return pa.array([values], pa.list_(pa.binary()))
    offsets = array.array("i", [0, *itertools.accumulate(map(len, values))])
    if sys.byteorder != "little":  # Arrow buffers are little-endian
        offsets.byteswap()
    binary = pa.Array.from_buffers(
        pa.binary(), len(values), [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(values))]
    )
    row = pa.py_buffer((0).to_bytes(4, "little") + len(values).to_bytes(4, "little"))  # the list's offsets
    return pa.Array.from_buffers(pa.list_(pa.binary()), 1, [None, row], children=[binary])


_BITS: OrderedDict[tuple[Any, ...], bytes] = OrderedDict()
_BITS_BYTES = 0
_BITS_LIMIT = 256 << 20  # keep up to 256 MB of bit strings (2 G rows)


def clear_caches() -> None:
    """Forget cached live-row bit strings, deletion-vector footers and parsed position-delete files
    (cold measurements). Data files' row counts are footer facts: `forget_row_counts`."""
    global _BITS_BYTES
    with _CACHE_LOCK:
        _BITS.clear()
        _BITS_BYTES = 0
        _CACHE.clear()
        _FOOTERS.clear()


def remember_rows(path: str, stamp: tuple[int, int], rows: int) -> None:
    """The row count a data file's footer gives (read while planning: `read.parquet_columns.parquet_columns`),
    so that sizing its live-row bits reads no footer again (`checked_rows`)."""
    with _CACHE_LOCK:
        _ROWS[(path, stamp[0], stamp[1])] = rows
        while len(_ROWS) > _ROWS_SIZE:
            _ROWS.popitem(last=False)


def forget_row_counts() -> None:
    """Forget the data files' row counts read from their footers (with the other footer caches)."""
    with _CACHE_LOCK:
        _ROWS.clear()


def _bits(
    f: FileDeletes,
    allow_bare: bool,
    matcher: PathKey,
    io: FileIO | None = None,
    stamps: dict[str, tuple[int, int] | None] | None = None,
    reads: _DvReads | None = None,
) -> bytes:
    """The live-row bit string of one file, cached: deletion vectors and delete files never change
    (`stamps`: the stamps of delete files already looked at by this statement)."""
    global _BITS_BYTES
    seen = {} if stamps is None else stamps
    for p in (*(d[0] for d in f.dvs), *f.files):
        if p not in seen:
            seen[p] = _io(io).stamp(p)
    stamp = tuple(seen[p] for p in (*(d[0] for d in f.dvs), *f.files))
    key = (f, allow_bare, stamp, matcher)
    with _CACHE_LOCK:
        if key in _BITS:
            _BITS.move_to_end(key)
            return _BITS[key]
    rows = checked_rows(f, io)
    value = _live_bits(f, rows, allow_bare, matcher, io, reads)
    with _CACHE_LOCK:
        _BITS[key] = value
        _BITS_BYTES += len(value)
        while _BITS_BYTES > _BITS_LIMIT and _BITS:
            _, dropped = _BITS.popitem(last=False)
            _BITS_BYTES -= len(dropped)
    return value


def _live_bits(
    f: FileDeletes, rows: int, allow_bare: bool, matcher: PathKey, io: FileIO | None, reads: _DvReads | None = None
) -> bytes:
    """The live-row bit string of one data file of `rows` rows (bit p set: row p is live; DuckDB's
    BIT order). Deletion vectors become it container by container (`live_bits_of`); position-delete
    files go through their positions."""
    if f.files:
        positions = positions_of(f, allow_bare=allow_bare, key=matcher, rows=rows, io=io, reads=reads)
        mask = np.ones(rows, dtype=bool)
        mask[positions] = False
        return np.packbits(mask).tobytes()
    bitmaps = _checked_dvs(f, allow_bare, matcher, io, reads)
    for bitmap in bitmaps:
        highest = bitmap.last
        if highest is not None:
            _check_within(f, highest, rows)
    return live_bits_of(bitmaps, rows)


# Masks of the byte-wise bit reversal below (pairs, nibble halves, nibbles of each byte of a word).
_REVERSE_MASKS = tuple(np.uint64(m) for m in (0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F))


def live_bits_of(bitmaps: Sequence[Roaring64], rows: int) -> bytes:
    """The live rows of a data file of `rows` rows whose deleted positions are the union of
    `bitmaps` (each below `rows`), as a bit string in DuckDB's BIT order: row p is bit 7 - p % 8 of
    byte p // 8 (the most significant bit of the first byte is row 0), set when the row is live,
    and the bits past the last row clear.

    `Roaring64.to_bitset` lays the deleted positions out least significant bit first; each byte is
    then bit-reversed and inverted in 64-bit words with three shift-and-mask steps (whole-array
    NumPy operations: no loop per byte or per position, no index array)."""
    size = (rows + 7) // 8
    words = -(-size // 8)
    buffer = np.zeros(words * 8, np.uint8)
    for bitmap in bitmaps:
        buffer[:size] |= bitmap.to_bitset(rows)
    x = buffer.view(np.uint64)  # byte order does not matter: each byte is reversed in place
    for shift, mask in zip((1, 2, 4), _REVERSE_MASKS, strict=True):
        x = ((x >> np.uint64(shift)) & mask) | ((x & mask) << np.uint64(shift))
    live = np.invert(x).view(np.uint8)[:size]
    if rows % 8:
        live[-1] &= (0xFF << (8 - rows % 8)) & 0xFF  # the bits past the last row stay clear
    return live.tobytes()


def deleted_positions(key: str, io: FileIO | None = None) -> pa.RecordBatchReader:
    """`(fi, pos)` for every deleted position of the files the key names (fi: index in the key)."""
    files, allow_bare, matcher = decode_key(key)

    def batches() -> Iterator[pa.RecordBatch]:
        reads = _DvReads(files, io)
        for i, f in enumerate(files):
            positions = positions_of(f, allow_bare=allow_bare, key=matcher, io=io, reads=reads)
            if len(positions):
                yield pa.RecordBatch.from_arrays(
                    [pa.array(np.full(len(positions), i, np.int64)), pa.array(positions)],
                    schema=positions_schema(),
                )

    return pa.RecordBatchReader.from_batches(positions_schema(), batches())


# ---------------------------------------------------------------------------------------------
# Position-delete files (v2), parsed once and grouped by data file
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PositionFile:
    """A parsed position-delete file: deleted positions per data file match key, and its rows."""

    positions: dict[str, np.ndarray]
    rows: int
    lowest: int = 0  # the smallest and largest pos (0 when empty)
    highest: int = 0


_CACHE: OrderedDict[tuple[str, int, int, PathKey], PositionFile] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 64
_ROWS_SIZE = 65536  # as many data files as the planner keeps footer facts of
# (path, size, mtime) -> rows of a data file / DV blobs of a Puffin file (both never change)
_ROWS: OrderedDict[tuple[str, int, int], int] = OrderedDict()
_FOOTERS: OrderedDict[tuple[str, int, int], dict[tuple[int, int], DeletionVectorBlob]] = OrderedDict()


def _position_file(path: str, matcher: PathKey, io: FileIO | None = None) -> PositionFile:
    st = _stamp(path, "position-delete", io)
    key = (path, st[0], st[1], matcher)
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    value = _read_position_file(path, matcher, io)
    with _CACHE_LOCK:
        _CACHE[key] = value
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return value


def position_file_keys(path: str, key: PathKey, io: FileIO | None = None) -> frozenset[str]:
    """The match keys of the data files a position-delete file (its actual `path`) names."""
    return frozenset(_position_file(path, key, io).positions)


def _read_position_file(path: str, matcher: PathKey, io: FileIO | None = None) -> PositionFile:
    """Parse a position-delete file. Its rows must be sorted by file_path, then pos (spec "Position
    Delete Files"), and page checksums, where the writer stored them, must hold: a flipped byte in
    a page otherwise reads as another position, silently."""
    import pyarrow.parquet as pq

    try:
        with _io(io).open_stream(path) as stream:
            pf = pq.ParquetFile(stream, page_checksum_verification=True)
            path_col, pos_col = position_delete_columns(pf.schema_arrow, path)
            table = pf.read(columns=[path_col, pos_col])
        # Parquet strings are not checked on read: a damaged file_path need not be UTF-8
        return _parsed_position_file(path, table, matcher)
    except IcebergError:
        raise
    except Exception as e:  # OSError, ArrowException, and what else damaged bytes decode to
        text = str(e).strip().splitlines()[0] if str(e).strip() else "cannot be decoded"
        raise CorruptFileError(path, f"cannot read position-delete file: {text}") from None


def _parsed_position_file(path: str, table: pa.Table, matcher: PathKey) -> PositionFile:
    import pyarrow.compute as pc

    plain = table.column(0).combine_chunks()
    plain.validate(full=True)
    if pa.types.is_dictionary(plain.type):
        plain = plain.cast(plain.type.value_type)
    positions = table.column(1).combine_chunks().cast(pa.int64()).to_numpy(zero_copy_only=False)
    paths = pc.dictionary_encode(plain)
    if paths.null_count or (len(positions) and positions.min() < 0):
        raise CorruptFileError(path, "position-delete file has a null file_path or a negative pos")
    # dictionary values in sort order: each row's rank, which must never fall, and pos rising within
    order = pc.sort_indices(paths.dictionary).to_numpy()
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    ranks = rank[paths.indices.to_numpy(zero_copy_only=False)] if len(order) else np.zeros(0, np.int64)
    step = np.diff(ranks)
    if (step < 0).any() or ((step == 0) & (np.diff(positions) < 0)).any():
        raise CorruptFileError(path, "position-delete file is not sorted by file_path, then pos, as the spec requires")
    indices = paths.indices.to_numpy(zero_copy_only=False)
    out: dict[str, list[np.ndarray]] = {}
    for i, recorded in enumerate(paths.dictionary.to_pylist()):
        out.setdefault(matcher(recorded), []).append(positions[indices == i])
    return PositionFile(
        {k: np.unique(np.concatenate(v)) for k, v in out.items()},
        len(positions),
        int(positions.min()) if len(positions) else 0,
        int(positions.max()) if len(positions) else 0,
    )


def position_delete_columns(schema: pa.Schema, path: str) -> tuple[str, str]:
    """The (file path, position) column names of a position-delete file: by reserved field id, else by name."""
    by_id: dict[int, str] = {}
    for f in schema:
        raw = (f.metadata or {}).get(b"PARQUET:field_id")
        if raw is not None:
            by_id[int(raw)] = f.name
    path_col = by_id.get(FIELD_ID_FILE_PATH) or ("file_path" if "file_path" in schema.names else None)
    pos_col = by_id.get(FIELD_ID_POS) or ("pos" if "pos" in schema.names else None)
    if path_col is None or pos_col is None:
        raise InvalidMetadataError(
            f"{path}: position-delete file has no file_path/pos columns (field ids {FIELD_ID_FILE_PATH}, "
            f"{FIELD_ID_POS}); columns: {', '.join(schema.names)}"
        )
    return path_col, pos_col
