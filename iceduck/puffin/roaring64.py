"""The portable 64-bit Roaring bitmap format, as deletion vectors store row positions.

Layout (RoaringFormatSpec, "extension for 64-bit implementations"; all little-endian): a u64 count of
32-bit bitmaps, then for each bitmap, in ascending key order, a u32 key (the high 32 bits of its
positions) followed by a standard 32-bit Roaring bitmap (the low 32 bits).

Reading follows the rules of Iceberg's Java reader, so that a file iceduck accepts is one every
Iceberg engine accepts: the count must lie in [0, 2^31-1], each key read as a signed 32-bit int must lie
in [0, 2^31-2], and keys must be strictly ascending. Writing run-length encodes every 32-bit bitmap first,
as the Java writer does, which makes the bytes identical to Java's.
"""

from __future__ import annotations

import array
import struct
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from iceduck._lazy import LazyModule
from iceduck.errors import CorruptFileError, ValidationError

# pyroaring loads with the first deletion vector, not with a scan of a table that has none.
if TYPE_CHECKING:
    import pyarrow as pa
    import pyroaring
    from pyroaring import FrozenBitMap
else:
    pa = LazyModule("pyarrow")
    pyroaring = LazyModule("pyroaring")

MAX_BITMAP_COUNT = 2**31 - 1
MAX_KEY = 2**31 - 2
# The Java writer's largest position: key 2^31-2 with low word 0x80000000. Positions written by iceduck
# stay within it so that every Iceberg implementation can load them.
MAX_POSITION = (MAX_KEY << 32) | 0x80000000
_LOW_MASK = 0xFFFFFFFF

# 32-bit Roaring serialization constants (RoaringFormatSpec).
_COOKIE_NO_RUNS = 12346
_COOKIE_RUNS = 12347
_NO_OFFSET_THRESHOLD = 4
_ARRAY_MAX_CARDINALITY = 4096
_BITSET_BYTES = 8192
_MAX_CONTAINERS = 1 << 16
_FILTER_MAX_KEYS = 8


@dataclass(frozen=True, slots=True, repr=False)
class Roaring64:
    """An immutable set of non-negative 64-bit positions, held as (key, 32-bit bitmap) pairs.

    ``bitmaps`` is sorted by key and holds no empty bitmap, so equal sets compare equal.
    """

    bitmaps: tuple[tuple[int, FrozenBitMap], ...] = ()

    def __post_init__(self) -> None:
        last = -1
        for key, bitmap in self.bitmaps:
            if not isinstance(bitmap, pyroaring.FrozenBitMap) or not bitmap:
                raise ValidationError(f"Roaring64 bitmap for key {key} must be a non-empty FrozenBitMap")
            if not last < key <= MAX_KEY:
                raise ValidationError(f"Roaring64 keys must ascend within [0, {MAX_KEY}]: {key} after {last}")
            last = key

    # construction ------------------------------------------------------------------------------

    @classmethod
    def empty(cls) -> Roaring64:
        """The empty set."""
        return cls(())

    @classmethod
    def from_positions(cls, positions: Roaring64 | Iterable[int] | Any) -> Roaring64:
        """Build from positions: a Roaring64, a ``range``, an Arrow or NumPy integer array, or ints.

        Arrays are converted without a Python loop per position. Every position must lie in
        [0, MAX_POSITION]; duplicates are fine.
        """
        if isinstance(positions, Roaring64):
            return positions
        if isinstance(positions, range) and positions.step == 1:
            return cls.empty().add_range(positions.start, max(positions.start, positions.stop))
        values = _as_int64_array(positions)
        if len(values) == 0:
            return cls.empty()
        low, high = _checked_bounds(values)
        groups = [(low >> 32, values)] if low >> 32 == high >> 32 else _split_by_key(values)
        return cls(tuple((key, pyroaring.FrozenBitMap(_low_words(part))) for key, part in groups))

    def add_range(self, start: int, end: int) -> Roaring64:
        """A new set that also holds every position in [start, end) (end-exclusive)."""
        if not 0 <= start <= end <= MAX_POSITION + 1:
            raise ValidationError(f"position range [{start}, {end}) is not within [0, {MAX_POSITION + 1})")
        if start == end:
            return self
        added = []
        for key in range(start >> 32, ((end - 1) >> 32) + 1):
            bitmap = pyroaring.BitMap()
            base = key << 32
            bitmap.add_range(max(start, base) - base, min(end, base + (1 << 32)) - base)
            added.append((key, pyroaring.FrozenBitMap(bitmap)))
        return self.union(Roaring64(tuple(added)))

    def union(self, *others: Roaring64) -> Roaring64:
        """A new set holding the positions of this set and of all ``others`` (merge of DVs)."""
        merged: dict[int, list[FrozenBitMap]] = {}
        for source in (self, *others):
            for key, bitmap in source.bitmaps:
                merged.setdefault(key, []).append(bitmap)
        return Roaring64(tuple((key, _union_all(parts)) for key, parts in sorted(merged.items())))

    def __or__(self, other: Roaring64) -> Roaring64:
        return self.union(other)

    # queries -----------------------------------------------------------------------------------

    @property
    def cardinality(self) -> int:
        """Number of positions in the set."""
        return sum(len(bitmap) for _, bitmap in self.bitmaps)

    def __len__(self) -> int:
        return self.cardinality

    @property
    def keys(self) -> tuple[int, ...]:
        """The high 32-bit words present, ascending."""
        return tuple(key for key, _ in self.bitmaps)

    def __contains__(self, position: object) -> bool:
        if not isinstance(position, int) or position < 0:
            return False
        key = position >> 32
        index = bisect_left(self.bitmaps, key, key=lambda pair: pair[0])
        return (
            index < len(self.bitmaps)
            and self.bitmaps[index][0] == key
            and (position & _LOW_MASK) in self.bitmaps[index][1]
        )

    def __iter__(self) -> Iterator[int]:
        """Positions in ascending order (one Python int each; prefer to_arrow for large sets)."""
        for key, bitmap in self.bitmaps:
            base = key << 32
            for low in bitmap:
                yield base | low

    def to_arrow(self) -> pa.Int64Array:
        """All positions, ascending, as an Arrow int64 array (vectorised, no per-position Python)."""
        parts = [_positions_of(key, bitmap) for key, bitmap in self.bitmaps]
        if not parts:
            return pa.array([], pa.int64())
        return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)

    def to_numpy(self) -> Any:
        """All positions, ascending, as a NumPy int64 array (needs NumPy installed)."""
        return self.to_arrow().to_numpy(zero_copy_only=False)

    @property
    def last(self) -> int | None:
        """The highest position (None when empty)."""
        if not self.bitmaps:
            return None
        key, bitmap = self.bitmaps[-1]
        return (key << 32) | bitmap.max()

    def to_bitset(self, stop: int, start: int = 0) -> Any:
        """The set as a dense bit array of the positions in [start, stop): NumPy uint8,
        ceil((stop - start) / 8) bytes, position p is bit (p - start) & 7 of byte (p - start) >> 3,
        least significant first. `start` is a multiple of 8; every position must lie in the window.

        Built from the 32-bit bitmaps' containers (a bitset container is already these bytes), so
        no array of positions is made: a deletion vector of a million rows becomes a row mask in
        tens of microseconds instead of a scatter of every position."""
        import numpy as np

        if start < 0 or start % 8 or stop < start:
            raise ValidationError(f"no bit array covers positions [{start}, {stop}) (start: a multiple of 8)")
        out = np.zeros((stop - start + 7) // 8, np.uint8)
        if not self.bitmaps:
            return out
        first = (self.bitmaps[0][0] << 32) | self.bitmaps[0][1].min()
        last = self.last
        assert last is not None
        if first < start or last >= stop:
            raise ValidationError(f"positions {first} .. {last} do not fit a bit array of [{start}, {stop})")
        for key, bitmap in self.bitmaps:
            for high, bits in _containers(bitmap):
                at = ((key << 32) + (high << 16) - start) >> 3  # byte of the container's first position
                low, high_end = max(0, -at), min(_BITSET_BYTES, len(out) - at)
                if low < high_end:
                    out[at + low : at + high_end] = bits[low:high_end]
        return out

    def __repr__(self) -> str:
        return f"Roaring64(cardinality={self.cardinality}, keys={list(self.keys)})"


# encoding / decoding ---------------------------------------------------------------------------


def encode_roaring64(bitmap: Roaring64) -> bytes:
    """Serialize in the portable 64-bit format, run-length encoding each 32-bit bitmap first."""
    out = [struct.pack("<Q", len(bitmap.bitmaps))]
    for key, frozen in bitmap.bitmaps:
        optimized = pyroaring.BitMap(frozen)
        optimized.run_optimize()
        out.append(struct.pack("<I", key))
        out.append(optimized.serialize())
    return b"".join(out)


def decode_roaring64(data: bytes | bytearray | memoryview, *, path: str | None = None) -> Roaring64:
    """Parse a portable 64-bit Roaring bitmap that must span ``data`` exactly.

    Raises CorruptFileError (naming ``path``) on an invalid count, key, order, 32-bit bitmap, truncated
    input or trailing bytes.
    """
    view = memoryview(data).cast("B")
    count = _read_uint(view, 0, 8, path, "bitmap count")
    if count > MAX_BITMAP_COUNT:
        raise CorruptFileError(path, f"Invalid bitmap count: {count} (must be in [0, {MAX_BITMAP_COUNT}])")
    offset, last_key = 8, -1
    pairs: list[tuple[int, FrozenBitMap]] = []
    for index in range(count):
        key = _read_key(view, offset, index, last_key, path)
        size = _bitmap32_size(view, offset + 4, path)
        bitmap = _deserialize32(view[offset + 4 : offset + 4 + size], key, path)
        if bitmap:
            pairs.append((key, bitmap))
        offset, last_key = offset + 4 + size, key
    if offset != len(view):
        raise CorruptFileError(
            path, f"{len(view) - offset} unexpected bytes after the last of {count} 32-bit bitmaps"
        )
    return Roaring64(tuple(pairs))


def _read_uint(view: memoryview, offset: int, width: int, path: str | None, what: str) -> int:
    _need(view, offset, width, path, what)
    return int.from_bytes(view[offset : offset + width], "little")


def _read_key(view: memoryview, offset: int, index: int, last_key: int, path: str | None) -> int:
    unsigned = _read_uint(view, offset, 4, path, f"key of bitmap {index}")
    key = unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned
    if key < 0:
        raise CorruptFileError(
            path,
            f"Invalid unsigned key: {key} (bitmap {index}; unsigned {unsigned}, but keys must be "
            "non-negative as signed 32-bit ints)",
        )
    if key > MAX_KEY:
        raise CorruptFileError(path, f"Key {key} is too large (bitmap {index}): the largest key is {MAX_KEY}")
    if key <= last_key:
        raise CorruptFileError(
            path, f"Keys must be sorted in ascending order: key {key} of bitmap {index} follows {last_key}"
        )
    return key


def _bitmap32_size(view: memoryview, start: int, path: str | None) -> int:
    """Byte length of the 32-bit Roaring bitmap at ``start``, from its headers (RoaringFormatSpec)."""
    cookie = _read_uint(view, start, 4, path, "32-bit bitmap cookie")
    pos = start + 4
    if cookie & 0xFFFF == _COOKIE_RUNS:
        containers = (cookie >> 16) + 1
        _need(view, pos, (containers + 7) // 8, path, "run-container flags")
        run_flags = bytes(view[pos : pos + (containers + 7) // 8])
        pos += len(run_flags)
    elif cookie == _COOKIE_NO_RUNS:
        containers = _read_uint(view, pos, 4, path, "container count")
        run_flags, pos = b"", pos + 4
    else:
        raise CorruptFileError(path, f"Invalid 32-bit Roaring bitmap cookie {cookie} at offset {start}")
    if containers > _MAX_CONTAINERS:
        raise CorruptFileError(path, f"Invalid 32-bit Roaring bitmap: {containers} containers at {start}")
    header = pos
    pos += 4 * containers  # descriptive header: (u16 key, u16 cardinality - 1) per container
    if not run_flags or containers >= _NO_OFFSET_THRESHOLD:
        pos += 4 * containers  # offset header
    for index in range(containers):
        pos += _container_size(view, header, index, run_flags, pos, path)
    _need(view, start, pos - start, path, "32-bit bitmap")
    return pos - start


def _need(view: memoryview, offset: int, length: int, path: str | None, what: str) -> None:
    if offset + length > len(view):
        raise CorruptFileError(
            path,
            f"Truncated 64-bit Roaring bitmap: {what} needs {length} bytes at offset {offset}, "
            f"only {max(0, len(view) - offset)} left",
        )


def _container_size(
    view: memoryview, header: int, index: int, run_flags: bytes, pos: int, path: str | None
) -> int:
    if run_flags and run_flags[index // 8] >> (index % 8) & 1:
        return 2 + 4 * _read_uint(view, pos, 2, path, "run count")
    cardinality = _read_uint(view, header + 4 * index + 2, 2, path, "container cardinality") + 1
    return _BITSET_BYTES if cardinality > _ARRAY_MAX_CARDINALITY else 2 * cardinality


def _deserialize32(chunk: memoryview, key: int, path: str | None) -> FrozenBitMap:
    try:
        return pyroaring.FrozenBitMap.deserialize(bytes(chunk))
    except (ValueError, IndexError) as error:
        raise CorruptFileError(path, f"Invalid 32-bit Roaring bitmap for key {key}: {error}") from error


# Arrow helpers -----------------------------------------------------------------------------------


def _as_int64_array(positions: Any) -> pa.Array:
    try:
        if isinstance(positions, pa.ChunkedArray):
            values = positions.combine_chunks()
        elif isinstance(positions, pa.Array):
            values = positions
        elif hasattr(positions, "__array__") or hasattr(positions, "__arrow_array__"):
            values = pa.array(positions)
        else:
            values = pa.array(list(positions))  # inferred, so floats or strings are refused below
        if len(values) == 0:
            return pa.array([], pa.int64())
        if not pa.types.is_integer(values.type):
            raise ValidationError(f"positions must be integers, got Arrow type {values.type}")
        if values.null_count:
            raise ValidationError(f"positions must not be null ({values.null_count} nulls)")
        return values.cast(pa.int64())
    except (pa.ArrowInvalid, OverflowError, TypeError) as error:
        raise ValidationError(f"positions must be integers in [0, {MAX_POSITION}]: {error}") from error


def _checked_bounds(values: pa.Array) -> tuple[int, int]:
    import pyarrow.compute as pc

    bounds = pc.min_max(values)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low < 0 or high > MAX_POSITION:
        raise ValidationError(f"positions must lie in [0, {MAX_POSITION}]; got min {low}, max {high}")
    return low, high


def _split_by_key(values: pa.Array) -> list[tuple[int, pa.Array]]:
    import pyarrow.compute as pc

    keys = pc.shift_right(values, pa.scalar(32, pa.int64()))
    distinct = sorted(pc.unique(keys).to_pylist())
    if len(distinct) <= _FILTER_MAX_KEYS:  # a few linear passes beat sorting everything
        return [(key, values.filter(pc.equal(keys, pa.scalar(key, pa.int64())))) for key in distinct]
    ordered = values.take(pc.array_sort_indices(values))
    counts = pc.value_counts(pc.shift_right(ordered, pa.scalar(32, pa.int64())))
    groups, offset = [], 0
    for item in sorted(counts.to_pylist(), key=lambda entry: entry["values"]):
        groups.append((item["values"], ordered.slice(offset, item["counts"])))
        offset += item["counts"]
    return groups


def _low_words(values: pa.Array) -> array.array[int]:
    import pyarrow.compute as pc

    lows = pc.cast(pc.bit_wise_and(values, pa.scalar(_LOW_MASK, pa.int64())), pa.uint32())
    words = array.array("I")
    words.frombytes(memoryview(lows.buffers()[1]).cast("B")[: 4 * len(lows)])
    return words


def _positions_of(key: int, bitmap: FrozenBitMap) -> pa.Array:
    import pyarrow.compute as pc

    words = bitmap.to_array()
    lows = pa.Array.from_buffers(pa.uint32(), len(words), [None, pa.py_buffer(words)]).cast(pa.int64())
    return pc.bit_wise_or(lows, pa.scalar(key << 32, pa.int64())) if key else lows


# A run container with more runs than this is expanded with one vectorised pass, not a loop per run.
_LOOPED_RUNS = 32


def _containers(bitmap: FrozenBitMap) -> Iterator[tuple[int, Any]]:
    """(high 16 bits, 8192-byte little-endian bitset) of each container of a 32-bit bitmap, read
    from its portable serialization (RoaringFormatSpec; pyroaring wrote it, so it is well formed)."""
    import numpy as np

    data = bitmap.serialize()
    cookie = int.from_bytes(data[:4], "little")
    if cookie & 0xFFFF == _COOKIE_RUNS:
        count = (cookie >> 16) + 1
        run_flags, pos = data[4 : 4 + (count + 7) // 8], 4 + (count + 7) // 8
    else:
        count, run_flags, pos = int.from_bytes(data[4:8], "little"), b"", 8
    header = np.frombuffer(data, "<u2", 2 * count, pos)
    highs, cardinalities = header[0::2].tolist(), (header[1::2].astype(np.int64) + 1).tolist()
    pos += 4 * count
    if not run_flags or count >= _NO_OFFSET_THRESHOLD:
        pos += 4 * count  # offsets: the containers are read in order instead
    for index in range(count):
        if run_flags and run_flags[index // 8] >> (index % 8) & 1:
            runs = int.from_bytes(data[pos : pos + 2], "little")
            pairs = np.frombuffer(data, "<u2", 2 * runs, pos + 2).astype(np.int64)
            pos += 2 + 4 * runs
            starts, ends = pairs[0::2], pairs[0::2] + pairs[1::2] + 1  # a run is [start, start + length]
            if runs <= _LOOPED_RUNS:
                present = np.zeros(1 << 16, bool)
                for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
                    present[start:end] = True
            else:
                marks = np.zeros((1 << 16) + 1, np.int32)
                np.add.at(marks, starts, 1)
                np.add.at(marks, ends, -1)
                present = np.cumsum(marks[:-1]) > 0
            yield highs[index], np.packbits(present, bitorder="little")
        elif cardinalities[index] > _ARRAY_MAX_CARDINALITY:
            yield highs[index], np.frombuffer(data, np.uint8, _BITSET_BYTES, pos)
            pos += _BITSET_BYTES
        else:
            present = np.zeros(1 << 16, bool)
            present[np.frombuffer(data, "<u2", cardinalities[index], pos)] = True
            pos += 2 * cardinalities[index]
            yield highs[index], np.packbits(present, bitorder="little")


def _union_all(parts: list[FrozenBitMap]) -> FrozenBitMap:
    if len(parts) == 1:
        return parts[0]
    combined = pyroaring.BitMap(parts[0])
    for part in parts[1:]:
        combined |= part
    return pyroaring.FrozenBitMap(combined)
