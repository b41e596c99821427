"""Apache DataSketches theta sketches: the Puffin blob type `apache-datasketches-theta-v1`.

The spec: a compact theta sketch (default seed 9001) fed with each distinct value's Iceberg
single-value serialization (`spec.values.to_bytes`); the blob's `ndv` property is its estimate as a
decimal integer (Java and Trino write the estimate truncated to a long).

DataSketches' Python package updates a sketch only with str, int and float values (it hashes their
own byte forms, not Iceberg's: an int column's 4-byte value would hash as 8 bytes), so the hashes
are made here, as the library makes them (MurmurHash3 x64 128 of the bytes with the seed, the first
64-bit half shifted right by one), and the smallest `k` of them become a compact sketch in the
library's serial format (version 3). Reading, merging (`union`) and estimating are the library's,
so a sketch iceduck writes is one DataSketches itself deserializes, and a Java- or Trino-written one
(serial version 3, or 4 compressed) decodes the same way.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import datasketches
import mmh3

from iceduck.errors import CorruptFileError

THETA_BLOB = "apache-datasketches-theta-v1"
DEFAULT_SEED = 9001
DEFAULT_LG_K = 12  # the library's default nominal entries: 4096 (relative error ~1.6% at 1 sigma)
MAX_THETA = (1 << 63) - 1

_SERIAL_VERSION = 3
_FAMILY_COMPACT = 3
_READ_ONLY, _EMPTY, _COMPACT, _ORDERED = 2, 4, 8, 16


def _seed_hash(seed: int) -> int:
    h1, _ = mmh3.hash64(struct.pack("<q", seed), seed=0, x64arch=True, signed=False)
    return h1 & 0xFFFF


_SEED_HASH = _seed_hash(DEFAULT_SEED)


def value_hash(data: bytes) -> int:
    """The theta hash of one value's bytes (never 0: the library skips a 0 hash)."""
    h1, _ = mmh3.hash64(data, seed=DEFAULT_SEED, x64arch=True, signed=False)
    return h1 >> 1


def sketch_from_hashes(hashes: Iterable[int], lg_k: int = DEFAULT_LG_K) -> bytes:
    """A compact, ordered theta sketch (serial version 3) of the distinct `hashes` (`value_hash`):
    all of them while an update sketch of nominal size k = 2**lg_k would keep them all (its table of
    2k slots is rebuilt past 15/16 full: so Java's sketch of the same values is byte for byte this
    one), else the k smallest with theta the next one (what a rebuild keeps)."""
    k = 1 << lg_k
    distinct = sorted({h for h in hashes if 0 < h < MAX_THETA})
    theta = MAX_THETA
    if len(distinct) > (2 * k) * 15 // 16:
        theta = distinct[k]
        distinct = distinct[:k]
    flags = _READ_ONLY | _COMPACT | _ORDERED
    if not distinct and theta == MAX_THETA:
        return struct.pack("<BBBBBBH", 1, _SERIAL_VERSION, _FAMILY_COMPACT, 0, 0, flags | _EMPTY, _SEED_HASH)
    if len(distinct) == 1 and theta == MAX_THETA:  # a single item: one preamble long, then its hash
        head = struct.pack("<BBBBBBH", 1, _SERIAL_VERSION, _FAMILY_COMPACT, 0, 0, flags, _SEED_HASH)
        return head + struct.pack("<Q", distinct[0])
    pre = 2 if theta == MAX_THETA else 3
    head = struct.pack(
        "<BBBBBBHII", pre, _SERIAL_VERSION, _FAMILY_COMPACT, 0, 0, flags, _SEED_HASH, len(distinct), 0
    )
    if pre == 3:
        head += struct.pack("<Q", theta)
    return head + struct.pack(f"<{len(distinct)}Q", *distinct)


def sketch_of(values: Iterable[bytes], lg_k: int = DEFAULT_LG_K) -> bytes:
    """The compact theta sketch of values given as their Iceberg single-value bytes."""
    return sketch_from_hashes((value_hash(v) for v in values), lg_k)


def read_sketch(data: bytes, *, path: str | None = None) -> datasketches.compact_theta_sketch:
    """A serialized compact theta sketch (as Java, Trino or iceduck wrote it); `CorruptFileError`
    naming `path` when the library refuses the bytes."""
    try:
        return datasketches.compact_theta_sketch.deserialize(bytes(data), DEFAULT_SEED)
    except (RuntimeError, ValueError) as e:
        raise CorruptFileError(path or "<theta sketch>", f"not a theta sketch: {e}") from None


def estimate(data: bytes, *, path: str | None = None) -> float:
    """The distinct-count estimate of a serialized sketch."""
    return float(read_sketch(data, path=path).get_estimate())


def bounds(data: bytes, std_devs: int = 2, *, path: str | None = None) -> tuple[float, float]:
    """The (lower, upper) bounds of the estimate at `std_devs` standard deviations (1-3)."""
    s = read_sketch(data, path=path)
    return float(s.get_lower_bound(std_devs)), float(s.get_upper_bound(std_devs))


def union(sketches: Sequence[bytes], lg_k: int = DEFAULT_LG_K) -> bytes:
    """One compact sketch of the union of `sketches` (the library's union, serialized ordered)."""
    u = datasketches.theta_union(lg_k, 1.0, DEFAULT_SEED)
    for data in sketches:
        u.update(read_sketch(data))
    return bytes(u.get_result(True).serialize())


def ndv_property(data: bytes) -> str:
    """The blob's `ndv` property: the estimate truncated to an integer, as Java writes it."""
    return str(int(estimate(data)))
