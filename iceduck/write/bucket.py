"""Vectorised Iceberg bucket hashes (Murmur3 x86 32-bit, spec Appendix B) over NumPy and Arrow arrays.

DuckDB has no Iceberg bucket function, so partitioned writes call these through Arrow UDFs that
`register_bucket_functions(con)` adds to a connection:

* `__iceduck_bucket_long(BIGINT, INTEGER)`: int, long, date (days), time and timestamps (micros),
  all hashed as the 8-byte little-endian long;
* `__iceduck_bucket_bytes(BLOB, INTEGER)` and `__iceduck_bucket_string(VARCHAR, INTEGER)`: the bytes
  (UTF-8 for strings); uuid columns are passed as their 16 big-endian bytes;
* `__iceduck_bucket_decimal(VARCHAR, INTEGER)`: decimal text (all scale digits), hashed as the minimal two's-complement
  big-endian bytes of the unscaled value (rare, so one value at a time).

The results equal `iceduck.spec.transforms.BucketTransform` value by value (tests check it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iceduck.spec.values import min_bytes_signed

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_M5 = np.uint32(5)
_N = np.uint32(0xE6546B64)
_F1 = np.uint32(0x85EBCA6B)
_F2 = np.uint32(0xC2B2AE35)

LONG_FUNCTION = "__iceduck_bucket_long"
BYTES_FUNCTION = "__iceduck_bucket_bytes"
STRING_FUNCTION = "__iceduck_bucket_string"
DECIMAL_FUNCTION = "__iceduck_bucket_decimal"


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _scramble(k: np.ndarray) -> np.ndarray:
    k = k * _C1
    k = _rotl(k, 15)
    return k * _C2


def _mix(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    h = h ^ _scramble(k)
    h = _rotl(h, 13)
    return h * _M5 + _N


def _finish(h: np.ndarray, length: np.ndarray) -> np.ndarray:
    h = h ^ length.astype(np.uint32)
    h = h ^ (h >> np.uint32(16))
    h = h * _F1
    h = h ^ (h >> np.uint32(13))
    h = h * _F2
    return h ^ (h >> np.uint32(16))


def hash_longs(values: np.ndarray) -> np.ndarray:
    """Murmur3 (as uint32) of each int64 value's 8-byte little-endian form."""
    with np.errstate(over="ignore"):
        v = values.astype(np.int64, copy=False).view(np.uint64)
        low = (v & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        high = (v >> np.uint64(32)).astype(np.uint32)
        h = _mix(np.zeros(len(v), dtype=np.uint32), low)
        h = _mix(h, high)
        return _finish(h, np.full(len(v), 8, dtype=np.uint32))


def hash_binary(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Murmur3 (as uint32) of each byte string `data[offsets[i]:offsets[i+1]]`.

    Vectorised across rows: step j mixes the j-th 4-byte block of every row long enough to have it.
    """
    starts = offsets[:-1].astype(np.int64)
    lengths = (offsets[1:] - offsets[:-1]).astype(np.int64)
    n = len(lengths)
    padded = np.concatenate([data.astype(np.uint8, copy=False), np.zeros(4, dtype=np.uint8)])
    h = np.zeros(n, dtype=np.uint32)
    blocks = lengths // 4
    with np.errstate(over="ignore"):
        rows = np.arange(n)
        j = 0
        while True:
            rows = rows[blocks[rows] > j]
            if len(rows) == 0:
                break
            at = starts[rows] + 4 * j
            k = (
                padded[at].astype(np.uint32)
                | (padded[at + 1].astype(np.uint32) << np.uint32(8))
                | (padded[at + 2].astype(np.uint32) << np.uint32(16))
                | (padded[at + 3].astype(np.uint32) << np.uint32(24))
            )
            h[rows] = _mix(h[rows], k)
            j += 1
        tail = lengths % 4
        has_tail = np.nonzero(tail)[0]
        if len(has_tail):
            at = starts[has_tail] + 4 * blocks[has_tail]
            t = tail[has_tail]
            k = padded[at].astype(np.uint32)
            k |= np.where(t > 1, padded[at + 1].astype(np.uint32) << np.uint32(8), np.uint32(0)).astype(
                np.uint32
            )
            k |= np.where(t > 2, padded[at + 2].astype(np.uint32) << np.uint32(16), np.uint32(0)).astype(
                np.uint32
            )
            h[has_tail] = h[has_tail] ^ _scramble(k)
        return _finish(h, lengths)


def bucket_of_hashes(hashes: np.ndarray, n: int) -> np.ndarray:
    """`(hash & Integer.MAX_VALUE) % n` as int32."""
    return ((hashes & np.uint32(0x7FFFFFFF)) % np.uint32(n)).astype(np.int32)


def _with_nulls(values: np.ndarray, array: pa.Array) -> pa.Array:
    mask = array.is_null() if array.null_count else None
    return pa.array(
        values, type=pa.int32(), mask=None if mask is None else mask.to_numpy(zero_copy_only=False)
    )


def _scalar_n(n: pa.Array | pa.ChunkedArray) -> int:
    value = n[0].as_py() if len(n) else 1
    return int(value)


def _chunks(array: Any) -> list[pa.Array]:
    return list(array.chunks) if isinstance(array, pa.ChunkedArray) else [array]


def bucket_longs(array: Any, n: Any) -> pa.Array:
    """Arrow UDF body: bucket of int64 values."""
    width = _scalar_n(n)
    out = []
    for chunk in _chunks(array):
        values = pc.fill_null(chunk.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        out.append(_with_nulls(bucket_of_hashes(hash_longs(values), width), chunk))
    return pa.concat_arrays(out) if len(out) != 1 else out[0]


def bucket_bytes(array: Any, n: Any) -> pa.Array:
    """Arrow UDF body: bucket of binary or string values (their bytes)."""
    width = _scalar_n(n)
    out = []
    for chunk in _chunks(array):
        chunk = chunk.cast(pa.large_binary())
        filled = pc.fill_null(chunk, b"") if chunk.null_count else chunk
        filled = filled.combine_chunks() if isinstance(filled, pa.ChunkedArray) else filled
        buffers = filled.buffers()
        offsets = np.frombuffer(buffers[1], dtype=np.int64)[filled.offset : filled.offset + len(filled) + 1]
        data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
        out.append(_with_nulls(bucket_of_hashes(hash_binary(data, offsets), width), chunk))
    return pa.concat_arrays(out) if len(out) != 1 else out[0]


def bucket_decimals(array: Any, n: Any) -> pa.Array:
    """Arrow UDF body: bucket of decimal values given as text."""
    width = _scalar_n(n)
    values: list[int | None] = []
    for text in array.to_pylist():
        if text is None:
            values.append(None)
            continue
        # DuckDB prints every digit of the scale, so the digits without the point are the unscaled value
        unscaled = int(text.replace(".", ""))
        data = np.frombuffer(min_bytes_signed(unscaled), dtype=np.uint8)
        h = hash_binary(data, np.array([0, len(data)], dtype=np.int64))
        values.append(int(bucket_of_hashes(h, width)[0]))
    return pa.array(values, type=pa.int32())


def register_bucket_functions(con: Any) -> None:
    """Add the `__iceduck_bucket_*` Arrow UDFs to a DuckDB connection (idempotent per connection)."""
    specs = (
        (LONG_FUNCTION, bucket_longs, "BIGINT"),
        (BYTES_FUNCTION, bucket_bytes, "BLOB"),
        (STRING_FUNCTION, bucket_bytes, "VARCHAR"),
        (DECIMAL_FUNCTION, bucket_decimals, "VARCHAR"),
    )
    for name, fn, arg in specs:
        try:
            con.create_function(name, fn, [arg, "INTEGER"], "INTEGER", type="arrow", null_handling="special")
        except Exception as e:  # already registered on this connection
            if "already" not in str(e).lower():
                raise
