"""Iceberg `int` columns written as Java writes them: plain INT32, without the INT(32) annotation.

DuckDB's Parquet writer marks every INTEGER column `INT32` with the legacy converted type `INT_32`
and the logical type `INT(32, signed)`. Both are valid Parquet, and every reader reads them, but
Java Iceberg's vectorized reader (the default in Spark) picks its Arrow vector from the annotation
when there is one: after `ALTER ... TYPE BIGINT` it allocates a 32-bit vector for a column Spark
reads as 64-bit and fails (`ClassCastException: BigIntVector cannot be cast to IntVector`). For a
bare INT32 column it widens to a 64-bit vector, which is how Java's own writer leaves `int` columns
(Iceberg's `TypeToMessageType` gives `int` no annotation).

So, after DuckDB has written a file, `strip_int32_annotations` rewrites the file's footer in place
without those two annotations on INT32 columns. Only the footer's schema elements change: the
data pages, their offsets, statistics and the page indexes stay byte for byte, and a signed INT32
with no annotation means the same values (the spec's default for INT32 is signed). The footer is
read, its `schema` list re-encoded, and the rest of the footer (row groups, key-value metadata)
copied as is, so the cost is one small read and one small write per file, however large.

The footer is Thrift's compact protocol; only what the rewrite needs is decoded here.
"""

from __future__ import annotations

import os
import struct

from iceduck.errors import IcebergError

_MAGIC = b"PAR1"

# Thrift compact protocol types
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)

# parquet.thrift: FileMetaData.schema = 2; SchemaElement.type = 1, converted_type = 6, logicalType = 10;
# Type.INT32 = 1; ConvertedType.INT_32 = 17; LogicalType.INTEGER = 10 (IntType: bitWidth = 1, isSigned = 2)
_SCHEMA = 2
_EL_TYPE, _EL_CONVERTED, _EL_LOGICAL = 1, 6, 10
_INT32, _CONVERTED_INT_32, _LOGICAL_INTEGER = 1, 17, 10


class FooterError(IcebergError):
    """A Parquet footer this module cannot read."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise FooterError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _field_header(buf: bytes, pos: int, last: int) -> tuple[int, int, int]:
    """(field id, compact type, position after the header); type _STOP ends the struct."""
    b = buf[pos]
    pos += 1
    ctype = b & 0x0F
    if ctype == _STOP:
        return 0, _STOP, pos
    delta = b >> 4
    if delta:
        return last + delta, ctype, pos
    raw, pos = _varint(buf, pos)
    return _zigzag(raw), ctype, pos


def _skip(buf: bytes, pos: int, ctype: int) -> int:
    """The position after a value of compact type `ctype` starting at `pos` (a field's value: a
    boolean field carries its value in the header and has none)."""
    if ctype in (_TRUE, _FALSE):
        return pos
    if ctype == _BYTE:
        return pos + 1
    if ctype in (_I16, _I32, _I64):
        return _varint(buf, pos)[1]
    if ctype == _DOUBLE:
        return pos + 8
    if ctype == _BINARY:
        n, pos = _varint(buf, pos)
        return pos + n
    if ctype in (_LIST, _SET):
        head = buf[pos]
        pos += 1
        n, etype = head >> 4, head & 0x0F
        if n == 15:
            n, pos = _varint(buf, pos)
        for _ in range(n):
            pos = pos + 1 if etype in (_TRUE, _FALSE) else _skip(buf, pos, etype)
        return pos
    if ctype == _MAP:
        n, pos = _varint(buf, pos)
        if n:
            kv = buf[pos]
            pos += 1
            for _ in range(n):
                pos = _skip(buf, pos, kv >> 4)
                pos = _skip(buf, pos, kv & 0x0F)
        return pos
    if ctype == _STRUCT:
        last = 0
        while True:
            fid, ftype, pos = _field_header(buf, pos, last)
            if ftype == _STOP:
                return pos
            pos = _skip(buf, pos, ftype)
            last = fid
    raise FooterError(f"unknown thrift compact type {ctype}")


def _header(fid: int, ctype: int, last: int) -> bytes:
    delta = fid - last
    if 0 < delta <= 15:
        return bytes([(delta << 4) | ctype])
    z = (fid << 1) ^ (fid >> 63)
    out = bytearray([ctype])
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _is_int32_logical(raw: bytes) -> bool:
    """Whether a LogicalType union (its encoded struct) is INTEGER(32, signed)."""
    fid, ctype, pos = _field_header(raw, 0, 0)
    if fid != _LOGICAL_INTEGER or ctype != _STRUCT:
        return False
    width, signed, last = None, None, 0
    while True:
        f, t, pos = _field_header(raw, pos, last)
        if t == _STOP:
            return width == 32 and signed is True
        if f == 1 and t == _BYTE:
            width = raw[pos] if raw[pos] < 128 else raw[pos] - 256
        elif f == 2 and t in (_TRUE, _FALSE):
            signed = t == _TRUE
        pos = _skip(raw, pos, t)
        last = f


def _schema_element(buf: bytes, pos: int) -> tuple[bytes, int, bool]:
    """One SchemaElement re-encoded without the INT(32) annotations of an INT32 column:
    (its bytes, the position after it, whether anything was left out)."""
    fields: list[tuple[int, int, bytes]] = []
    last = 0
    while True:
        fid, ctype, start = _field_header(buf, pos, last)
        if ctype == _STOP:
            pos = start
            break
        end = _skip(buf, start, ctype)
        fields.append((fid, ctype, buf[start:end]))
        pos, last = end, fid
    by_id = {fid: (ctype, raw) for fid, ctype, raw in fields}
    physical = by_id.get(_EL_TYPE)
    converted = by_id.get(_EL_CONVERTED)
    logical = by_id.get(_EL_LOGICAL)
    strip = (
        physical is not None
        and _zigzag(_varint(physical[1], 0)[0]) == _INT32
        and (converted is None or _zigzag(_varint(converted[1], 0)[0]) == _CONVERTED_INT_32)
        and (logical is None or _is_int32_logical(logical[1]))
        and (converted is not None or logical is not None)
    )
    if not strip:
        return b"", pos, False
    out = bytearray()
    last = 0
    for fid, ctype, raw in fields:
        if fid in (_EL_CONVERTED, _EL_LOGICAL):
            continue
        out += _header(fid, ctype, last)
        out += raw
        last = fid
    out.append(_STOP)
    return bytes(out), pos, True


def bare_int32_footer(footer: bytes) -> bytes | None:
    """The FileMetaData `footer` with INT32 columns' INT(32) annotations left out; None when it has
    none to leave out."""
    pos, last = 0, 0
    while True:
        fid, ctype, start = _field_header(footer, pos, last)
        if ctype == _STOP:
            return None
        if fid == _SCHEMA and ctype == _LIST:
            break
        pos, last = _skip(footer, start, ctype), fid
    # the schema list: its header stays, each element is re-encoded; everything after it is copied
    head = footer[start]
    p = start + 1
    n, etype = head >> 4, head & 0x0F
    if n == 15:
        n, p = _varint(footer, p)
    if etype != _STRUCT:
        raise FooterError("the schema is not a list of structs")
    out = bytearray(footer[:p])
    changed = False
    for _ in range(n):
        el_start = p
        encoded, p, stripped = _schema_element(footer, p)
        if stripped:
            out += encoded
            changed = True
        else:
            out += footer[el_start:p]
    if not changed:
        return None
    out += footer[p:]
    return bytes(out)


def strip_int32_annotations(path: str, size: int | None = None) -> int:
    """Rewrite the footer of the local Parquet file `path` so its INT32 columns carry no INT(32)
    annotation; returns the file's size afterwards (unchanged when there was nothing to do)."""
    with open(path, "r+b") as f:
        if size is None:
            size = f.seek(0, os.SEEK_END)
        if size < 12:
            raise FooterError(f"{path}: not a Parquet file ({size} bytes)")
        f.seek(size - 8)
        tail = f.read(8)
        if tail[4:] != _MAGIC:
            return size  # an encrypted footer ("PARE") or not Parquet: left alone
        (length,) = struct.unpack("<I", tail[:4])
        start = size - 8 - length
        if start < 4:
            raise FooterError(f"{path}: footer length {length} does not fit the file")
        f.seek(start)
        footer = f.read(length)
        try:
            new = bare_int32_footer(footer)
        except (FooterError, IndexError) as e:
            raise FooterError(f"{path}: cannot read the Parquet footer: {e}") from None
        if new is None:
            return size
        f.seek(start)
        f.write(new + struct.pack("<I", len(new)) + _MAGIC)
        f.truncate()
        return start + len(new) + 8
