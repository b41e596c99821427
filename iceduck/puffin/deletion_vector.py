"""The ``deletion-vector-v1`` blob: deleted row positions of one data file (Puffin spec).

Layout: ``u32 BE length`` (magic + bitmap bytes), magic ``D1 D3 39 64``, a portable 64-bit Roaring
bitmap, then ``u32 BE CRC-32`` of magic + bitmap. The whole blob is therefore ``length + 8`` bytes, which
is what a manifest records as the DV's ``content_size_in_bytes``. Delta Lake stores the same bytes.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from typing import Any

from iceduck.errors import CorruptFileError
from iceduck.puffin.roaring64 import Roaring64, decode_roaring64, encode_roaring64

BLOB_TYPE = "deletion-vector-v1"
MAGIC = b"\xd1\xd3\x39\x64"
_LENGTH_BYTES = 4
_CRC_BYTES = 4
_OVERHEAD = _LENGTH_BYTES + _CRC_BYTES  # bytes of a blob outside its magic + bitmap
_MIN_BLOB = _OVERHEAD + len(MAGIC)


def encode_deletion_vector(positions: Roaring64 | Iterable[int] | Any) -> bytes:
    """Serialize positions as a ``deletion-vector-v1`` blob (bitmap run-length encoded, as Java does)."""
    body = MAGIC + encode_roaring64(Roaring64.from_positions(positions))
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def decode_deletion_vector(
    blob: bytes | bytearray | memoryview,
    *,
    path: str | None,
    expected_length: int | None = None,
    expected_cardinality: int | None = None,
) -> Roaring64:
    """Parse and verify a ``deletion-vector-v1`` blob.

    ``path`` names the containing file in errors; ``expected_length`` is the manifest's
    ``content_size_in_bytes`` and ``expected_cardinality`` its ``record_count`` (each checked when given).
    Checks, in order: length field, magic, CRC-32, bitmap rules, cardinality. Any failure raises
    CorruptFileError.
    """
    view = memoryview(blob).cast("B")
    length = _checked_length(view, path, expected_length)
    body = view[_LENGTH_BYTES : _LENGTH_BYTES + length]
    if body[: len(MAGIC)] != MAGIC:
        raise CorruptFileError(
            path, f"Invalid magic number: {bytes(body[: len(MAGIC)]).hex(' ')}, expected {MAGIC.hex(' ')}"
        )
    _check_crc(view, body, path)
    positions = decode_roaring64(body[len(MAGIC) :], path=path)
    if expected_cardinality is not None and positions.cardinality != expected_cardinality:
        raise CorruptFileError(
            path,
            f"Invalid cardinality: the deletion vector holds {positions.cardinality} positions, "
            f"expected record_count {expected_cardinality}",
        )
    return positions


def _checked_length(view: memoryview, path: str | None, expected_length: int | None) -> int:
    if len(view) < _MIN_BLOB:
        raise CorruptFileError(
            path, f"Truncated deletion vector: {len(view)} bytes, a blob needs at least {_MIN_BLOB}"
        )
    length = int.from_bytes(view[:_LENGTH_BYTES], "big")
    if expected_length is not None and length != expected_length - _OVERHEAD:
        raise CorruptFileError(
            path,
            f"Invalid bitmap data length: {length}, expected {expected_length - _OVERHEAD} "
            f"(content_size_in_bytes {expected_length} - 8)",
        )
    if length + _OVERHEAD != len(view) or length < len(MAGIC):
        raise CorruptFileError(
            path, f"Invalid bitmap data length: {length} does not fit a blob of {len(view)} bytes"
        )
    return length


def _check_crc(view: memoryview, body: memoryview, path: str | None) -> None:
    computed = zlib.crc32(body)
    stored = int.from_bytes(view[_LENGTH_BYTES + len(body) :], "big")
    if computed != stored:
        raise CorruptFileError(
            path, f"Invalid CRC for deletion vector {path}: 0x{computed:08x}, expected 0x{stored:08x}"
        )
