"""What a data file's Parquet footer tells a read: its columns, their field ids, its row count.

`parquet_columns(path, size)` reads (and caches per file version) whether the file carries field
ids, its top-level names and every field id, for the read's schema map and name mapping;
`plain_groups` the unannotated variant groups older writers leave; `prefetch_parquet_columns`
reads many footers at once when a plan meets files not seen before. The caches are process-wide on
purpose: data files are immutable, and an entry is keyed by the file's version (path, size, mtime).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from iceduck._lazy import LazyModule
from iceduck.errors import (
    CorruptFileError,
    FileNotFoundInTableError,
)
from iceduck.io.fileio import FileIO, parquet_footer
from iceduck.io.paths import split_scheme
from iceduck.io.storage import default_io
from iceduck.read.deletes import forget_row_counts, remember_rows
from iceduck.read.footer import footer_schema

# The footer pool's module (with logging, ~0.7 MB) loads when remote footers are first fetched.
if TYPE_CHECKING:
    import concurrent.futures as futures
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa
else:
    futures = LazyModule("concurrent.futures")
    pa = LazyModule("pyarrow")


@dataclass(frozen=True, slots=True)
class ParquetColumns:
    """What a Parquet file's footer says about its top-level columns, as far as reading needs it."""

    has_ids: bool
    names: tuple[str, ...]
    ids: frozenset[int] = frozenset()  # every field id, nested ones too
    rows: int | None = None  # the footer's num_rows


def _field_ids(fields: Iterable[pa.Field]) -> Iterator[int]:
    for f in fields:
        raw = (f.metadata or {}).get(b"PARQUET:field_id")
        if raw is not None and raw.isdigit():
            yield int(raw)
        t = f.type
        if pa.types.is_struct(t):
            yield from _field_ids(t.fields)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            yield from _field_ids([t.value_field])
        elif pa.types.is_map(t):
            yield from _field_ids([t.key_field, t.item_field])


_FIELD_IDS: dict[tuple[str, int, int], ParquetColumns] = {}


_PLAIN_GROUPS: dict[tuple[str, int, int], dict[int, tuple[tuple[str, str | None], ...]]] = {}


_FIELD_IDS_LOCK = threading.Lock()


# Footers read at once when a plan has many files not seen before (file reads overlap in threads).
_PREFETCH_THREADS = 8


# `optional group field_id=2 v (Variant(1)) {` in pyarrow's text form of a Parquet schema.
_GROUP_LINE = re.compile(r"^\s*(?:required|optional|repeated) group field_id=(-?\d+) (.*?)(?: \((.*)\))? \{$")


def _arrow_duck_type(t: pa.DataType) -> str | None:
    """The DuckDB type of a primitive Arrow type of a shredded variant value, None otherwise."""
    simple = {
        pa.bool_(): "BOOLEAN",
        pa.int8(): "TINYINT",
        pa.int16(): "SMALLINT",
        pa.int32(): "INTEGER",
        pa.int64(): "BIGINT",
        pa.float32(): "FLOAT",
        pa.float64(): "DOUBLE",
        pa.string(): "VARCHAR",
        pa.large_string(): "VARCHAR",
        pa.binary(): "BLOB",
        pa.large_binary(): "BLOB",
        pa.date32(): "DATE",
        pa.time64("us"): "TIME",
    }
    if t in simple:
        return simple[t]
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    if pa.types.is_timestamp(t) and t.unit in ("us", "ns"):
        return ("TIMESTAMPTZ" if t.tz else "TIMESTAMP") + ("_NS" if t.unit == "ns" else "")
    if pa.types.is_fixed_size_binary(t) and t.byte_width == 16:
        return "UUID"
    return None


def _plain_groups(pf: Any) -> dict[int, tuple[tuple[str, str | None], ...]]:
    groups: dict[int, tuple[tuple[str, str | None], ...]] = {}
    # pyarrow shows a group's logical type annotation only in the schema's text form
    ids = {
        int(m.group(1))
        for line in str(pf.schema).splitlines()
        if (m := _GROUP_LINE.match(line)) and int(m.group(1)) >= 0 and not m.group(3)
    }
    if not ids:
        return groups

    def walk(fields: Sequence[pa.Field]) -> None:
        for f in fields:
            meta = f.metadata or {}
            fid = int(meta[b"PARQUET:field_id"]) if b"PARQUET:field_id" in meta else None
            if pa.types.is_struct(f.type):
                children = [f.type.field(i) for i in range(f.type.num_fields)]
                if fid is not None and fid in ids:
                    groups[fid] = tuple((c.name, _arrow_duck_type(c.type)) for c in children)
                walk(children)
            elif pa.types.is_list(f.type) or pa.types.is_large_list(f.type):
                walk([f.type.value_field])
            elif pa.types.is_map(f.type):
                walk([f.type.key_field, f.type.item_field])

    walk(list(pf.schema_arrow))
    return groups


def _version_key(path: str, io: FileIO) -> tuple[str, int, int]:
    st = io.stamp(path)
    if st is None:
        raise FileNotFoundInTableError(f"{path}: data file not found")
    return (path, st[0], st[1])


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    with _FIELD_IDS_LOCK:
        if len(cache) > 65536:
            cache.clear()
        cache[key] = value


def parquet_columns(path: str, size: int | None = None, io: FileIO | None = None) -> ParquetColumns:
    """Whether the file's columns carry field ids, and its top-level names; cached per file version.

    Files without field ids (migrated, `add_files`) can only be told apart by their footers.
    `size` (the manifest's) lets a store fetch the footer in one request; DuckDB's own first read
    of the file is then answered from it (io.s3). `io`: the table's (the process's when None)."""
    fio = io or default_io()
    key = _version_key(path, fio)
    with _FIELD_IDS_LOCK:
        if key in _FIELD_IDS:
            return _FIELD_IDS[key]
    with fio.open_input(path, expected_size=size) as f:
        footer = parquet_footer(f)
    read = footer_schema(footer)
    if read is not None:
        top = read.root.children
        num_rows = read.num_rows
        value = ParquetColumns(
            any(c.field_id is not None for c in top),
            tuple(c.name for c in top),
            frozenset(read.root.field_ids()),
            num_rows,
        )
    else:  # what read/footer.py does not decode exactly, pyarrow judges (values, or the damage)
        import pyarrow.parquet as pq  # not at import time: ~5 MB a plain scan does not need

        try:
            metadata = pq.read_metadata(pa.BufferReader(footer))
            schema = metadata.schema.to_arrow_schema()
            has_ids = any(b"PARQUET:field_id" in (f.metadata or {}) for f in schema)
            num_rows = metadata.num_rows
            value = ParquetColumns(has_ids, tuple(schema.names), frozenset(_field_ids(schema)), num_rows)
        except Exception as e:  # pyarrow reports a damaged footer as thrift, flatbuffer, UTF-8, ... errors
            raise damaged_footer(path, e) from None
    _remember(_FIELD_IDS, key, value)
    remember_rows(path, (key[1], key[2]), num_rows)  # what sizes its live-row bits
    return value


def damaged_footer(path: str, e: BaseException) -> CorruptFileError:
    """The error for a Parquet footer that pyarrow cannot decode (its thrift, its schema, the Arrow
    schema stored in its key-value metadata)."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else "cannot be decoded"
    return CorruptFileError(path, f"damaged Parquet footer: {text}")


def clear_footer_caches() -> None:
    """Forget what was read from data file footers (for cold-cache measurements)."""
    with _FIELD_IDS_LOCK:
        _FIELD_IDS.clear()
        _PLAIN_GROUPS.clear()
    forget_row_counts()


def prefetch_parquet_columns(files: Mapping[str, int | None], io: FileIO | None = None) -> dict[str, ParquetColumns]:
    """Read the footers of many files not seen yet (path -> recorded size) concurrently (a plan's
    first scan); returns what it read, by path."""
    with _FIELD_IDS_LOCK:
        known = {k[0] for k in _FIELD_IDS}
    todo = [p for p in files if p not in known]
    if len(todo) < 16:
        return {}
    # Local footers are read in place: decoding one is Python (GIL-bound) and its read is a page-cache
    # copy, so threads only add their start-up (40 footers: 1.3 ms inline, 2.4-3.6 ms in a new pool).
    if all(split_scheme(p)[0] in (None, "file") for p in todo):
        return {p: parquet_columns(p, files[p], io) for p in todo}
    return dict(zip(todo, _prefetch_pool().map(lambda p: parquet_columns(p, files[p], io), todo), strict=True))


_POOL: dict[int, ThreadPoolExecutor] = {}


def _prefetch_pool() -> ThreadPoolExecutor:
    """The threads remote footers are fetched on: made once per process (by pid: a forked child
    has none of its parent's threads), on first use."""
    with _FIELD_IDS_LOCK:
        pool = _POOL.get(os.getpid())
        if pool is None:
            pool = _POOL[os.getpid()] = futures.ThreadPoolExecutor(_PREFETCH_THREADS, thread_name_prefix="iceduck-footers")
        return pool


def plain_groups(path: str, io: FileIO | None = None) -> dict[int, tuple[tuple[str, str | None], ...]]:
    """The file's groups with a field id and no logical type annotation, with their children (name,
    DuckDB type or None where not primitive); cached per file version. A variant column stored so is
    the `{metadata, value[, typed_value]}` struct older writers (Spark 4.0, Iceberg before 1.10.1)
    leave unannotated, which DuckDB does not decode by itself."""
    fio = io or default_io()
    key = _version_key(path, fio)
    with _FIELD_IDS_LOCK:
        if key in _PLAIN_GROUPS:
            return _PLAIN_GROUPS[key]
    with fio.open_input(path) as f:
        footer = parquet_footer(f)
    import pyarrow.parquet as pq  # not at import time: only tables with variant columns need it

    try:
        value = _plain_groups(pq.ParquetFile(pa.BufferReader(footer)))
    except Exception as e:
        raise damaged_footer(path, e) from None
    _remember(_PLAIN_GROUPS, key, value)
    return value
