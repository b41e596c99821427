"""Avro plumbing shared by the manifest-list and manifest codecs (private).

Two jobs:

* Reading an Avro object container into raw records (fastavro) or columns (`AvroContainer.columns`:
  polars' compiled columnar reader into Arrow once a process has decoded enough to pay for
  importing it, fastavro's records before that and where polars refuses a file). Both would turn logical
  types into Python or Arrow temporal values (`datetime.date`, aware `datetime`, ...), which loses
  nanoseconds and overflows outside year 1..9999. So when a schema carries such logical types the
  header is re-encoded with them removed: the decoders then hand back the stored ints and bytes,
  and the few conversions the internal representation needs (decimal, uuid) are done here, exactly.
* Building the Avro schemas Iceberg writes: manifest lists and manifest entries for format
  versions 1..3, with a field id on every field, nullable unions for optional fields, key/value
  maps as arrays of records with `logicalType: map`, and the partition struct mapped from Iceberg
  types (table spec, Appendix A).
"""

from __future__ import annotations

import functools
import io
import json
import re
import sys
import threading
import uuid
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import fastavro
import fastavro.read

from iceduck._stderr import stderr_held
from iceduck.errors import CorruptFileError, UnsupportedFormatError
from iceduck.spec.types import (
    DecimalType,
    FixedType,
    GeographyType,
    GeometryType,
    IcebergType,
    PrimitiveType,
    StructType,
)

if TYPE_CHECKING:
    import pyarrow as pa

AVRO_MAGIC = b"Obj\x01"
# Iceberg's AES-GCM stream encryption ("AGS1" magic, then the block size and encrypted blocks).
AES_GCM_MAGIC = b"AGS1"

Schema = dict[str, Any]

# ---------------------------------------------------------------------------------------------
# Container header
# ---------------------------------------------------------------------------------------------


def _read_long(data: bytes, pos: int) -> tuple[int, int]:
    """Decode one zig-zag varint at `pos`; returns (value, next position)."""
    shift = 0
    acc = 0
    while True:
        b = data[pos]  # IndexError on truncation, turned into CorruptFileError by the caller
        pos += 1
        acc |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")
    return (acc >> 1) ^ -(acc & 1), pos


def _write_long(value: int) -> bytes:
    acc = (value << 1) ^ (value >> 63)
    out = bytearray()
    while acc > 0x7F:
        out.append((acc & 0x7F) | 0x80)
        acc >>= 7
    out.append(acc)
    return bytes(out)


def parse_header(data: bytes, *, path: str | None, what: str) -> tuple[dict[str, bytes], int]:
    """Check the magic and decode the file metadata map; returns (metadata, offset of first block).

    `what` names the kind of file for messages ("manifest list", "manifest").
    """
    if data[:4] != AVRO_MAGIC:
        if data[:4] == AES_GCM_MAGIC:
            raise UnsupportedFormatError(
                f"{path}: encrypted {what} (AES-GCM stream, 'AGS1' magic): reading encrypted "
                "metadata is not supported"
            )
        if len(data) < 4:
            raise CorruptFileError(path, f"truncated or corrupt Avro: {what} has only {len(data)} bytes")
        raise CorruptFileError(
            path, f"not an Avro file: {what} starts with {bytes(data[:4])!r}, expected {AVRO_MAGIC!r}"
        )
    meta: dict[str, bytes] = {}
    pos = 4
    try:
        while True:
            count, pos = _read_long(data, pos)
            if count == 0:
                break
            if count < 0:  # a negative count is followed by the block's byte size
                count = -count
                _, pos = _read_long(data, pos)
            for _ in range(count):
                klen, pos = _read_long(data, pos)
                key = data[pos : pos + klen].decode("utf-8")
                pos += klen
                vlen, pos = _read_long(data, pos)
                if klen < 0 or vlen < 0 or pos + vlen > len(data):
                    raise ValueError("metadata entry runs past the end of the file")
                meta[key] = bytes(data[pos : pos + vlen])
                pos += vlen
        if pos + 16 > len(data):
            raise ValueError("file ends inside the header (no sync marker)")
    except (IndexError, ValueError, UnicodeDecodeError) as e:
        raise CorruptFileError(path, f"truncated or corrupt Avro: {what} header: {e}") from None
    return meta, pos + 16


def _encode_header(meta: dict[str, bytes], sync: bytes) -> bytes:
    out = bytearray(AVRO_MAGIC)
    out += _write_long(len(meta))
    for k, v in meta.items():
        kb = k.encode("utf-8")
        out += _write_long(len(kb)) + kb + _write_long(len(v)) + v
    out += _write_long(0)
    out += sync
    return bytes(out)


# Logical types fastavro would convert on read; "map" (arrays of key/value records) it ignores.
_CONVERTED_LOGICAL = re.compile(r'"logicalType"\s*:\s*"(?!map")')


def _strip_logical(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {k: _strip_logical(v) for k, v in schema.items() if k != "logicalType"}
        if schema.get("logicalType") == "map":
            out["logicalType"] = "map"
        return out
    if isinstance(schema, list):
        return [_strip_logical(s) for s in schema]
    return schema


@functools.lru_cache(maxsize=256)
def _parse_schema_text(raw: bytes) -> tuple[Schema, bytes | None] | str:
    """The writer schema as JSON, and the schema re-encoded without converting logical types (None
    when it has none); a problem description instead when the schema is unusable. Cached: the
    manifests of a table share a handful of schemas. Callers must not mutate the result."""
    try:
        text = raw.decode("utf-8")
        schema = json.loads(text)
    except (UnicodeDecodeError, ValueError) as e:
        return f"schema is not JSON: {e}"
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return "schema is not a record"
    try:
        fastavro.parse_schema(schema, _write_hint=False)
    except Exception as e:  # fastavro reports a malformed schema with many types (KeyError, ...)
        return f"schema is not a valid Avro schema ({_damage(e)})"
    stripped = json.dumps(_strip_logical(schema)).encode("utf-8") if _CONVERTED_LOGICAL.search(text) else None
    return schema, stripped


def _damage(e: Exception) -> str:
    """What a decoding exception says about the file, without Python's exception names."""
    if isinstance(e, EOFError):
        return "the data ends early"
    if isinstance(e, UnicodeDecodeError):
        return "a string is not valid UTF-8"
    if isinstance(e, KeyError):
        return f"missing {e}"
    if isinstance(e, RecursionError):
        return "nested too deeply"
    text = str(e).splitlines()[0] if str(e) else ""
    return text or "damaged data"


class AvroContainer:
    """An Avro file opened for reading: metadata as text, the writer schema, and raw records."""

    __slots__ = ("_data", "_meta", "_start", "metadata", "path", "schema", "schema_key", "what")

    def __init__(self, data: bytes, *, path: str | None, what: str) -> None:
        self.path = path
        self.what = what
        meta, start = parse_header(data, path=path, what=what)
        raw_schema = meta.get("avro.schema")
        if raw_schema is None:
            raise CorruptFileError(path, f"truncated or corrupt Avro: {what} header has no avro.schema")
        codec = meta.get("avro.codec", b"null").decode("utf-8", "replace")
        if codec not in fastavro.read.BLOCK_READERS:
            raise UnsupportedFormatError(f"{path}: {what} uses Avro codec {codec!r}, which is not available")
        parsed = _parse_schema_text(raw_schema)
        if isinstance(parsed, str):
            raise CorruptFileError(path, f"truncated or corrupt Avro: {what} {parsed}")
        self.schema, stripped = parsed
        self.schema_key = raw_schema  # the writer schema's bytes: equal keys, equal schemas
        self.metadata: dict[str, str] = {
            k: v.decode("utf-8", "replace") for k, v in meta.items() if not k.startswith("avro.")
        }
        if stripped is not None:
            # Re-encode the header so fastavro returns stored values (see module docstring).
            meta = dict(meta)
            meta["avro.schema"] = stripped
            header = _encode_header(meta, bytes(data[start - 16 : start]))
            data, start = header + bytes(data[start:]), len(header)
        self._data = data
        self._meta = meta
        self._start = start

    @property
    def _sync(self) -> bytes:
        """The container's sync marker (the 16 bytes ending its header)."""
        return bytes(self._data[self._start - 16 : self._start])

    def records(self) -> Iterator[dict[Any, Any]]:
        """Decoded records (plain dicts, as fastavro makes them); damage raises CorruptFileError."""
        try:
            yield from fastavro.reader(io.BytesIO(self._data))  # type: ignore[misc]
        except (CorruptFileError, UnsupportedFormatError):
            raise
        except Exception as e:  # fastavro signals damage with many types (EOFError, zlib.error, ...)
            raise CorruptFileError(
                self.path, f"truncated or corrupt Avro: {self.what}: {_damage(e)}"
            ) from None

    def read_all(self) -> list[dict[Any, Any]]:
        return list(self.records())

    @property
    def block_bytes(self) -> int:
        """How many bytes of data blocks follow the header (what `use_polars` counts)."""
        return len(self._data) - self._start

    def columns(self, *, polars: bool | None = None) -> Column:
        """The records as one `Column` (a column of records), fields named as in the writer schema,
        values as stored. `polars` says whether to try polars first (None: `use_polars` decides;
        a caller that decided for several containers at once says so).

        Decoded by polars' Avro reader (compiled, columnar: 5-10x fastavro on manifests) over a
        copy of the writer schema it can read, once the process has decoded enough to pay for
        importing polars (`use_polars`): then the column holds Arrow arrays. Before that, and for
        a file polars refuses, fastavro's records are the column, so reading a few small
        manifests needs neither pyarrow nor polars (building Arrow arrays from Python values
        would also import pandas where it is installed: ~40 MB for a scan). Damage is reported
        by `records` in either case. Fields that take no bytes (the empty partition record of an
        unpartitioned spec, `null` fields) may be absent from a polars-decoded column: absent
        reads as all null/empty.
        """
        if self.block_bytes > 0 and (use_polars(self.block_bytes) if polars is None else polars):
            table = _polars_decode(self._meta, self._sync, self._data, self._start)
            if table is not None:
                return Column(table)
        _check_supported(self.schema, {})
        return Column(list(self.records()))


class Column:
    """One decoded Avro column, whichever decoder made it: Arrow (a table, or an array) from polars,
    a list of Python values (records as dicts, `None` for null) from fastavro, or one container's
    rows of a column decoded for a batch of containers together (`_Part`).

    The codecs read every column through this view (`field`, `values`, `nulls`), so each reading
    rule is written once for both decoders; values are what the stored bytes mean (ints, bytes,
    strings, dicts for records, lists for arrays), as `to_pylist` gives them.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Any) -> None:
        self._data = data

    @property
    def arrow(self) -> Any:
        """The Arrow table or array behind the column, or None when fastavro decoded it."""
        data = self._data
        if isinstance(data, _Part):
            return data.shared.arrow.slice(data.start, data.stop - data.start)
        return None if isinstance(data, list) else data

    def __len__(self) -> int:
        data = self._data
        return data.stop - data.start if isinstance(data, _Part) else len(data)

    @property
    def arrow_bytes(self) -> int | None:
        """About what the Arrow buffers behind the column take (a batch's rows: their share of the
        batch column); None when fastavro decoded it."""
        data = self._data
        if isinstance(data, _Part):
            return data.shared.nbytes() * (data.stop - data.start) // max(1, len(data.shared.arrow))
        return None if isinstance(data, list) else int(data.nbytes)

    def field(self, name: str | None) -> Column | None:
        """A field of this column of records (None: no such field was decoded; read as all null)."""
        if name is None:
            return None
        data = self._data
        if isinstance(data, _Part):
            child = data.shared.child(name)
            return None if child is None else Column(_Part(child, data.start, data.stop))
        if isinstance(data, list):
            return Column([None if r is None else r.get(name) for r in data])
        arr = arrow_field(data, name)
        return None if arr is None else Column(arr)

    def field_values(self, name: str | None, n: int) -> list[Any]:
        """`field(name).values()`, or n Nones when there is no such field (a list the caller may
        change), without the intermediate column for a container's share of a batch."""
        data = self._data
        if isinstance(data, _Part) and name is not None:
            child = data.shared.child(name)
            return [None] * n if child is None else child.values()[data.start : data.stop]
        column = self.field(name)  # a new column: its values are a new list
        return [None] * n if column is None else column.values()

    def values(self) -> list[Any]:
        """The column's values as Python objects (treat as read-only)."""
        data = self._data
        if isinstance(data, _Part):
            return data.shared.values()[data.start : data.stop]
        return data if isinstance(data, list) else data.to_pylist()

    def nulls(self) -> list[bool] | None:
        """Which rows are null, or None when none is."""
        data = self._data
        if isinstance(data, _Part):
            every = data.shared.nulls()
            if every is None:
                return None
            part = every[data.start : data.stop]
            return part if True in part else None
        if isinstance(data, list):
            return [v is None for v in data] if None in data else None
        if not hasattr(data, "null_count") or not data.null_count:
            return None
        return data.is_null().to_pylist()


class _Shared:
    """A column of a batch of containers decoded together (Arrow), turned into Python values once
    for all of them: each container's `Column` is a `_Part` (its rows) of it, so a batch of 40
    manifests pays one `to_pylist` per column instead of 40 (each with its own fixed cost).
    Fields and conversions are made on first use; two threads may both make one (same value)."""

    __slots__ = ("_children", "_nbytes", "_nulls", "_values", "arrow")

    def __init__(self, arrow: Any) -> None:
        self.arrow = arrow
        self._children: dict[str, _Shared | None] = {}
        self._values: list[Any] | None = None
        self._nulls: list[bool] | None = None
        self._nbytes: int | None = None

    def nbytes(self) -> int:
        if self._nbytes is None:
            self._nbytes = int(self.arrow.nbytes)
        return self._nbytes

    def child(self, name: str) -> _Shared | None:
        if name not in self._children:
            arr = arrow_field(self.arrow, name)
            self._children[name] = None if arr is None else _Shared(arr)
        return self._children[name]

    def values(self) -> list[Any]:
        values = self._values
        if values is None:
            values = self._values = self.arrow.to_pylist()
        return values

    def nulls(self) -> list[bool] | None:
        arr = self.arrow
        if not hasattr(arr, "null_count") or not arr.null_count:
            return None
        nulls = self._nulls
        if nulls is None:
            nulls = self._nulls = arr.is_null().to_pylist()
        return nulls


@dataclass(frozen=True, slots=True)
class _Part:
    """Rows `start:stop` of a batch column: one container's share of it."""

    shared: _Shared
    start: int
    stop: int


def _zero_width(t: Any) -> bool:
    """True for a type whose values take no bytes: `null` and records without fields."""
    return t == "null" or (isinstance(t, dict) and t.get("type") == "record" and not t.get("fields"))


def _for_polars(schema: Any) -> Any:
    """The writer schema as polars' reader takes it, decoding the same bytes: logical types,
    defaults and docs dropped (values stay as stored; polars misreads fields with defaults), and
    fields that take no bytes dropped (it cannot build empty structs or null columns)."""
    if isinstance(schema, list):
        return [_for_polars(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {
        k: _for_polars(v) for k, v in schema.items() if k not in ("logicalType", "default", "doc", "fields")
    }
    if "fields" in schema:
        out["fields"] = [_for_polars(f) for f in schema["fields"] if not _zero_width(f.get("type"))]
    return out


@functools.lru_cache(maxsize=256)
def _polars_schema(raw: bytes) -> bytes | None:
    """The writer schema (JSON bytes) as `_for_polars` makes it; None: nothing polars can read.
    Cached: the manifests of a table share a handful of schemas."""
    schema = json.loads(raw)
    if not isinstance(schema, dict) or _zero_width(schema):
        return None
    return json.dumps(_for_polars(schema)).encode("utf-8")


# Importing polars costs a process ~0.1 s of CPU and ~28 MB of RSS, once; fastavro (loaded with this
# module) decodes a 100-entry manifest (~7 KB) in ~2.5 ms against polars' ~1.2 ms. So a process
# decodes with fastavro until it has met POLARS_AFTER_BYTES of Avro blocks, then imports polars and
# keeps it: a scan of a table with a few small manifests never loads polars, planning over dozens
# of manifests switches after the first few, and once polars is imported (by this rule or by the
# user) it decodes everything of FASTAVRO_BELOW bytes of blocks or more: below that fastavro is the
# faster of the two even then (a manifest list of 40 manifests, 1.9 KB of blocks: 0.38 against
# 0.49 ms; of 10, 0.25 KB: 0.13 against 0.29 ms). Both paths give the same values
# (tests/spec/test_avro_columns.py).
POLARS_AFTER_BYTES = 128 * 1024
FASTAVRO_BELOW = 4 * 1024
_SEEN_BYTES = [0]
_SEEN_LOCK = threading.Lock()


def use_polars(size: int) -> bool:
    """Whether to decode `size` more bytes of Avro blocks with polars (see POLARS_AFTER_BYTES)."""
    polars = "polars" in sys.modules
    if polars and size >= FASTAVRO_BELOW:
        return True
    with _SEEN_LOCK:
        _SEEN_BYTES[0] += size
        return size >= FASTAVRO_BELOW and _SEEN_BYTES[0] > POLARS_AFTER_BYTES


def _one_block(codec: bytes, sync: bytes, data: bytes, pos: int) -> bytes | None:
    """The container's data blocks from `pos` on as ONE uncompressed block (count, size, records,
    sync), or None when the framing or a deflate stream is damaged (fastavro then names it).

    polars pays a large fixed cost per block: PyIceberg writes one record per block, and its
    100-entry manifests took ~4 ms of CPU each in polars, 0.4 ms as one block. zlib (C) inflates
    deflate blocks here; other codecs are left to polars (None is also returned for them)."""
    found = _inflated(codec, sync, data, pos)
    return None if found is None else b"".join(_framed([found], sync))


def _inflated(codec: bytes, sync: bytes, data: bytes, pos: int) -> tuple[int, list[bytes]] | None:
    """What `_one_block` joins: the record count of the blocks from `pos` on and their
    uncompressed bodies (None: damaged framing, or a codec left to polars)."""
    if codec not in (b"null", b"deflate"):
        return None
    parts: list[bytes] = []
    count = 0
    end = len(data)
    view = memoryview(data)
    inflate = codec == b"deflate"
    try:
        while pos < end:
            # Counts below 64 take one varint byte (PyIceberg's one-record blocks): read inline.
            b = data[pos]
            if b < 0x80:
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                n, pos = _read_long(data, pos)
            size, pos = _read_long(data, pos)
            stop = pos + size
            if n < 0 or size < 0 or stop + 16 > end or not data.startswith(sync, stop):
                return None
            parts.append(zlib.decompress(view[pos:stop], -15) if inflate else data[pos:stop])
            count += n
            pos = stop + 16
    except (IndexError, ValueError, zlib.error):
        return None
    return count, parts


def _framed(blocks: Sequence[tuple[int, list[bytes]]], sync: bytes) -> list[bytes]:
    """Uncompressed blocks (a record count and the bodies making it up) framed for one container
    body: count, size, the bodies, the sync marker. The pieces are joined once by the caller (the
    copies joining them in steps made cost ~1.6 ms for a batch of 40 manifests, 1 MB)."""
    pieces: list[bytes] = []
    for count, parts in blocks:
        pieces += (_write_long(count), _write_long(sum(map(len, parts))), *parts, sync)
    return pieces


def _polars_decode(meta: dict[str, bytes], sync: bytes, data: bytes, start: int) -> pa.Table | None:
    """Decode the blocks from `start` on with polars, or None when it cannot (the caller falls
    back to fastavro)."""
    schema = _polars_schema(meta["avro.schema"])
    if schema is None:
        return None
    found = _inflated(meta.get("avro.codec", b"null"), sync, data, start)
    if found is None:
        header = _encode_header({**meta, "avro.schema": schema}, sync)
        pieces = [header, data[start:]]
    else:
        header = _encode_header({**meta, "avro.schema": schema, "avro.codec": b"null"}, sync)
        pieces = [header, *_framed([found], sync)]

    return _polars_read(b"".join(pieces))  # None: fastavro decodes, or names the damage


def batch_columns(containers: Sequence[AvroContainer]) -> list[Callable[[], Column]]:
    """For each container, in order, a function giving what `c.columns()` gives, with the containers
    that share a writer schema decoded by polars in ONE call once the process decodes with polars
    (`use_polars`, asked once for all of them). A container decoded alone is decoded when its
    function is called, so the caller meets the errors in its own order of work.

    polars pays a fixed cost per call and per Arrow conversion (~0.3 ms each: a 100-entry manifest
    took 0.6 ms alone, 0.25 ms in a batch of 40). Each container's blocks are joined into one block
    (`_one_block`) and the blocks of a batch are framed under one header and sync marker; every
    block keeps its own record count and size, so the decoded table splits back into the
    containers' rows exactly. A container that cannot join a batch (no blocks, a codec zlib does
    not inflate, damaged framing, the only one of its schema) and every container of a batch polars
    refuses or miscounts are decoded alone: `columns()` falls back to fastavro and names the
    damaged file."""
    size = sum(c.block_bytes for c in containers)
    polars = size > 0 and use_polars(size)
    decoders: list[Callable[[], Column]] = [functools.partial(c.columns, polars=polars) for c in containers]
    if not polars or len(containers) < 2:
        return decoders
    groups: dict[bytes, list[tuple[int, tuple[int, list[bytes]]]]] = {}
    for i, c in enumerate(containers):
        if c.block_bytes <= 0:
            continue
        found = _inflated(c._meta.get("avro.codec", b"null"), c._sync, c._data, c._start)
        if found is not None:
            groups.setdefault(c._meta["avro.schema"], []).append((i, found))
    for members in groups.values():
        if len(members) < 2:
            continue  # alone: `columns()` decodes it the usual way
        first = containers[members[0][0]]
        decoded = _polars_batch(first._meta, first._sync, [found for _, found in members])
        if decoded is None or decoded.num_rows != sum(count for _, (count, _) in members):
            continue
        offset = 0
        batch = _Shared(decoded)
        for i, (count, _) in members:
            decoders[i] = functools.partial(Column, _Part(batch, offset, offset + count))
            offset += count
    return decoders


def _polars_batch(meta: dict[str, bytes], sync: bytes, blocks: list[tuple[int, list[bytes]]]) -> pa.Table | None:
    """Uncompressed blocks (a record count and the bodies making it up: `_inflated`) of containers
    sharing the writer schema in `meta`, decoded by polars in one call (None: it cannot)."""
    schema = _polars_schema(meta["avro.schema"])
    if schema is None:
        return None
    header = _encode_header({**meta, "avro.schema": schema, "avro.codec": b"null"}, sync)
    return _polars_read(b"".join([header, *_framed(blocks, sync)]))  # None: each container alone


_POLARS_LOCK = threading.Lock()


def _polars_read(container: bytes) -> pa.Table | None:
    """polars' decode of one framed container as Arrow, or None for any refusal.

    polars refuses some damaged record data with a Rust panic, and Rust's panic hook writes the
    panic and a backtrace to the process's stderr before polars raises: a user must see only
    iceduck's one line naming the file. So the call runs with stderr held (`iceduck._stderr`, the
    process-level part, kept out of this pure layer). One call at a time costs nothing: polars holds
    the GIL for the whole call anyway."""
    import polars as pl  # not at import time: startup of commands that read no manifest

    with _POLARS_LOCK, stderr_held(drop_if=b"panicked at"):
        try:
            return pl.read_avro(io.BytesIO(container)).to_arrow()
        except (Exception, pl.exceptions.PanicException):
            return None


_PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))


def _check_supported(t: Any, named: dict[str, Any]) -> None:
    """Refuse writer schemas whose values the codecs could not read exactly: unions other than
    `[null, T]`, unknown named types (polars refuses them too, so this is the one check)."""
    if isinstance(t, str):
        if t not in _PRIMITIVES and t not in named:
            raise UnsupportedFormatError(f"Avro type {t!r} is not supported here")
        return
    if isinstance(t, list):
        branches = [b for b in t if b != "null"]
        if len(branches) != 1:
            raise UnsupportedFormatError(f"Avro union {t!r} is not supported here (only [null, T])")
        _check_supported(branches[0], named)
        return
    kind = t.get("type")
    if "name" in t:
        named[t["name"]] = t
    if kind == "record":
        for f in t.get("fields", ()):
            _check_supported(f["type"], named)
    elif kind == "array":
        _check_supported(t["items"], named)
    elif kind == "map":
        _check_supported(t["values"], named)
    elif kind not in ("fixed", "enum"):
        _check_supported(kind, named)


# ---------------------------------------------------------------------------------------------
# Schema inspection (reading)
# ---------------------------------------------------------------------------------------------


def arrow_field(parent: pa.Table | pa.StructArray, name: str | None) -> pa.Array | None:
    """A column of a decoded table, or a field of a decoded record column (None: not there)."""
    if name is None:
        return None
    import pyarrow as pa

    if isinstance(parent, pa.Table):
        if name not in parent.column_names:
            return None
        column = parent.column(name)
        return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    index = parent.type.get_field_index(name)
    return None if index < 0 else parent.field(index)


def unwrap_optional(t: Any) -> Any:
    """The non-null branch of a `["null", T]` union (or T itself)."""
    if isinstance(t, list):
        branches = [b for b in t if b != "null"]
        return branches[0] if len(branches) == 1 else t
    return t


def record_fields_by_id(record: Schema) -> dict[int, Schema]:
    """The fields of a record schema keyed by their `field-id` (fields without one are skipped)."""
    out: dict[int, Schema] = {}
    for f in record.get("fields", ()):
        fid = f.get("field-id")
        if fid is not None:
            out[int(fid)] = f
    return out


def map_key_value_names(field: Schema | None) -> tuple[str, str]:
    """Names of the key and value fields of a map stored as an array of records."""
    if field is None:
        return "key", "value"
    t = unwrap_optional(field["type"])
    if isinstance(t, dict) and t.get("type") == "array":
        items = unwrap_optional(t.get("items"))
        if isinstance(items, dict) and len(items.get("fields", ())) == 2:
            return items["fields"][0]["name"], items["fields"][1]["name"]
    return "key", "value"


def _decode_decimal(scale: int) -> Callable[[Any], Any]:
    def conv(v: Any) -> Any:
        if v is None or isinstance(v, Decimal):
            return v
        return Decimal(f"{int.from_bytes(v, 'big', signed=True)}E-{scale}")

    return conv


def _decode_uuid(v: Any) -> Any:
    if v is None or isinstance(v, uuid.UUID):
        return v
    if isinstance(v, bytes):
        return uuid.UUID(bytes=v)
    return uuid.UUID(str(v))


def partition_readers(partition_record: Any) -> tuple[tuple[str, Callable[[Any], Any] | None], ...]:
    """For each field of the Avro partition record: its name and a converter to the internal form.

    The converter is None where the stored value already is the internal form (ints for dates,
    times and timestamps, bytes, str, ...).
    """
    rec = unwrap_optional(partition_record)
    if not isinstance(rec, dict):
        return ()
    out: list[tuple[str, Callable[[Any], Any] | None]] = []
    for f in rec.get("fields", ()):
        t = unwrap_optional(f["type"])
        conv: Callable[[Any], Any] | None = None
        if isinstance(t, dict):
            logical = t.get("logicalType")
            if logical == "decimal":
                conv = _decode_decimal(int(t.get("scale", 0)))
            elif logical == "uuid":
                conv = _decode_uuid
        out.append((f["name"], conv))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Schema building (writing)
# ---------------------------------------------------------------------------------------------

_NAME_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def avro_name(name: str) -> str:
    """A valid Avro name for an Iceberg field name: invalid characters become `_x<HEX>`."""
    if _NAME_OK.fullmatch(name):
        return name
    out = []
    for i, ch in enumerate(name):
        if ch == "_" or (ch.isascii() and (ch.isalpha() or (ch.isdigit() and i > 0))):
            out.append(ch)
        elif ch.isdigit():
            out.append("_" + ch)
        else:
            out.append(f"_x{ord(ch):X}")
    return "".join(out) or "_"


def decimal_required_bytes(precision: int) -> int:
    """Smallest byte count whose two's complement holds every unscaled value of `precision` digits."""
    n = 1
    while 2 ** (8 * n - 1) < 10**precision:
        n += 1
    return n


def avro_primitive(t: IcebergType, field_id: int) -> Any:
    """The Avro type of an Iceberg primitive (spec Appendix A); named types get unique names."""
    if isinstance(t, DecimalType):
        return {
            "type": "fixed",
            "name": f"decimal_{t.precision}_{t.scale}_f{field_id}",
            "size": decimal_required_bytes(t.precision),
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    if isinstance(t, FixedType):
        return {"type": "fixed", "name": f"fixed_{t.length}_f{field_id}", "size": t.length}
    if isinstance(t, GeometryType | GeographyType):
        return "bytes"
    if isinstance(t, PrimitiveType):
        simple = {
            "boolean": "boolean",
            "int": "int",
            "long": "long",
            "float": "float",
            "double": "double",
            "string": "string",
            "binary": "bytes",
            "unknown": "null",
        }.get(t.name)
        if simple is not None:
            return simple
        if t.name == "date":
            return {"type": "int", "logicalType": "date"}
        if t.name == "time":
            return {"type": "long", "logicalType": "time-micros"}
        if t.name in ("timestamp", "timestamptz"):
            return {
                "type": "long",
                "logicalType": "timestamp-micros",
                "adjust-to-utc": t.name == "timestamptz",
            }
        if t.name in ("timestamp_ns", "timestamptz_ns"):
            return {
                "type": "long",
                "logicalType": "timestamp-nanos",
                "adjust-to-utc": t.name == "timestamptz_ns",
            }
        if t.name == "uuid":
            return {"type": "fixed", "name": f"uuid_fixed_f{field_id}", "size": 16, "logicalType": "uuid"}
    raise UnsupportedFormatError(f"type {t} cannot be a partition field in a manifest")


def partition_record_schema(partition_type: StructType) -> Schema:
    """The `r102` record holding a partition tuple; fields carry the partition field ids."""
    fields: list[Schema] = []
    for f in partition_type.fields:
        at = avro_primitive(f.type, f.id)
        if at == "null":
            fields.append({"name": avro_name(f.name), "type": "null", "default": None, "field-id": f.id})
        elif f.required:
            fields.append({"name": avro_name(f.name), "type": at, "field-id": f.id})
        else:
            fields.append(
                {"name": avro_name(f.name), "type": ["null", at], "default": None, "field-id": f.id}
            )
    return {"type": "record", "name": "r102", "fields": fields}


def _opt(name: str, fid: int, t: Any) -> Schema:
    return {"name": name, "type": ["null", t], "default": None, "field-id": fid}


def _req(name: str, fid: int, t: Any) -> Schema:
    return {"name": name, "type": t, "field-id": fid}


def _kv_map(name: str, fid: int, key_id: int, value_id: int, value_type: str) -> Schema:
    arr = {
        "type": "array",
        "logicalType": "map",
        "items": {
            "type": "record",
            "name": f"k{key_id}_v{value_id}",
            "fields": [
                {"name": "key", "type": "int", "field-id": key_id},
                {"name": "value", "type": value_type, "field-id": value_id},
            ],
        },
    }
    return _opt(name, fid, arr)


def _list(name: str, fid: int, element_id: int, element_type: str) -> Schema:
    return _opt(name, fid, {"type": "array", "items": element_type, "element-id": element_id})


# Deprecated v1 field kept for old readers; the spec says "always write a default in v1".
V1_BLOCK_SIZE_DEFAULT = 64 * 1024 * 1024


def manifest_entry_schema(format_version: int, partition_type: StructType) -> Schema:
    """The Avro schema of `manifest_entry` for format version 1, 2 or 3."""
    fv = format_version
    df: list[Schema] = []
    if fv >= 2:
        df.append(_req("content", 134, "int"))
    df += [
        _req("file_path", 100, "string"),
        _req("file_format", 101, "string"),
        _req("partition", 102, partition_record_schema(partition_type)),
        _req("record_count", 103, "long"),
        _req("file_size_in_bytes", 104, "long"),
    ]
    if fv == 1:
        df.append(
            {"name": "block_size_in_bytes", "type": "long", "default": V1_BLOCK_SIZE_DEFAULT, "field-id": 105}
        )
    df += [
        _kv_map("column_sizes", 108, 117, 118, "long"),
        _kv_map("value_counts", 109, 119, 120, "long"),
        _kv_map("null_value_counts", 110, 121, 122, "long"),
        _kv_map("nan_value_counts", 137, 138, 139, "long"),
        _kv_map("lower_bounds", 125, 126, 127, "bytes"),
        _kv_map("upper_bounds", 128, 129, 130, "bytes"),
        _opt("key_metadata", 131, "bytes"),
        _list("split_offsets", 132, 133, "long"),
    ]
    if fv >= 2:
        df.append(_list("equality_ids", 135, 136, "int"))
    df.append(_opt("sort_order_id", 140, "int"))
    if fv >= 3:
        df.append(_opt("first_row_id", 142, "long"))
    if fv >= 2:
        df.append(_opt("referenced_data_file", 143, "string"))
    if fv >= 3:
        df += [_opt("content_offset", 144, "long"), _opt("content_size_in_bytes", 145, "long")]
    data_file = {"type": "record", "name": "r2", "fields": df}
    entry: list[Schema] = [_req("status", 0, "int")]
    if fv == 1:
        entry.append(_req("snapshot_id", 1, "long"))
    else:
        entry += [
            _opt("snapshot_id", 1, "long"),
            _opt("sequence_number", 3, "long"),
            _opt("file_sequence_number", 4, "long"),
        ]
    entry.append(_req("data_file", 2, data_file))
    return {"type": "record", "name": "manifest_entry", "fields": entry}


_FIELD_SUMMARY = {
    "type": "record",
    "name": "r508",
    "fields": [
        _req("contains_null", 509, "boolean"),
        _opt("contains_nan", 518, "boolean"),
        _opt("lower_bound", 510, "bytes"),
        _opt("upper_bound", 511, "bytes"),
    ],
}


def manifest_list_schema(format_version: int) -> Schema:
    """The Avro schema of `manifest_file` (a manifest list row) for format version 1, 2 or 3."""
    fv = format_version
    counts = [
        ("added_files_count", 504, "int"),
        ("existing_files_count", 505, "int"),
        ("deleted_files_count", 506, "int"),
        ("added_rows_count", 512, "long"),
        ("existing_rows_count", 513, "long"),
        ("deleted_rows_count", 514, "long"),
    ]
    fields: list[Schema] = [
        _req("manifest_path", 500, "string"),
        _req("manifest_length", 501, "long"),
        _req("partition_spec_id", 502, "int"),
    ]
    if fv >= 2:
        fields += [
            _req("content", 517, "int"),
            _req("sequence_number", 515, "long"),
            _req("min_sequence_number", 516, "long"),
        ]
    fields.append(_req("added_snapshot_id", 503, "long"))
    fields += [(_opt if fv == 1 else _req)(n, i, t) for n, i, t in counts]
    fields.append(
        _opt(
            "partitions",
            507,
            {"type": "array", "items": json.loads(json.dumps(_FIELD_SUMMARY)), "element-id": 508},
        )
    )
    fields.append(_opt("key_metadata", 519, "bytes"))
    if fv >= 3:
        fields.append(_opt("first_row_id", 520, "long"))
    return {"type": "record", "name": "manifest_file", "fields": fields}


def write_container(
    schema: Schema, records: list[dict[str, Any]], metadata: dict[str, str], *, codec: str
) -> bytes:
    """Serialise records into an Avro object container with the given file metadata."""
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, codec=codec, metadata=metadata)
    return buf.getvalue()
