"""Portable 64-bit Roaring bitmaps: goldens from Java/CRoaring (GOLDEN_EXPECTATIONS.md section 2), the
Java reader's key rules, and properties checked against pyroaring's independent 64-bit implementation."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap, BitMap64

from iceduck.errors import CorruptFileError, ValidationError
from iceduck.puffin import MAX_POSITION, Roaring64, decode_roaring64, encode_roaring64

ICEBERG_DELETES = "apache-iceberg/core/src/test/resources/org/apache/iceberg/deletes"
GO_DELETES = "apache-iceberg-go/table/dv/testdata/deletes"
PY_BITMAPS = "apache-iceberg-python/tests/table/bitmaps"
CROARING = "RoaringBitmap-CRoaring/tests/testdata"
VALID_COPIES = (ICEBERG_DELETES, GO_DELETES, PY_BITMAPS, CROARING)


def _bitmap_bytes(key_values: list[tuple[int, BitMap]]) -> bytes:
    """A portable 64-bit map assembled by hand from (raw u32 key, 32-bit bitmap) pairs."""
    parts = [struct.pack("<Q", len(key_values))]
    for key, bitmap in key_values:
        parts += [struct.pack("<I", key), bitmap.serialize()]
    return b"".join(parts)


# goldens -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", VALID_COPIES)
def test_64mapempty(conformance: Path, folder: str) -> None:
    data = (conformance / folder / "64mapempty.bin").read_bytes()
    bitmap = decode_roaring64(data, path="64mapempty.bin")
    assert len(data) == 8
    assert list(bitmap) == []
    assert bitmap.cardinality == 0
    assert encode_roaring64(bitmap) == data


@pytest.mark.parametrize("folder", VALID_COPIES)
def test_64map32bitvals(conformance: Path, folder: str) -> None:
    data = (conformance / folder / "64map32bitvals.bin").read_bytes()
    bitmap = decode_roaring64(data)
    assert len(data) == 48
    assert bitmap.cardinality == 10
    assert list(bitmap) == list(range(10))
    assert all(value in bitmap for value in range(10))
    assert 10 not in bitmap


@pytest.mark.parametrize("folder", VALID_COPIES)
def test_64mapspreadvals(conformance: Path, folder: str) -> None:
    data = (conformance / folder / "64mapspreadvals.bin").read_bytes()
    bitmap = decode_roaring64(data)
    assert len(data) == 408
    assert bitmap.cardinality == 100
    assert bitmap.keys == tuple(range(10))
    assert list(bitmap) == [(key << 32) + value for key in range(10) for value in range(10)]
    assert 0 in bitmap and (3 << 32) | 7 in bitmap and (9 << 32) | 9 in bitmap
    assert 10 << 32 not in bitmap


@pytest.mark.parametrize("folder", (ICEBERG_DELETES, GO_DELETES, PY_BITMAPS))
def test_64maphighvals_corrupted_copy_is_refused(conformance: Path, folder: str) -> None:
    data = (conformance / folder / "64maphighvals.bin").read_bytes()
    assert len(data) == 1086
    assert struct.unpack_from("<Q", data)[0] == 11
    assert data[8:12] == bytes.fromhex("efbfbdef")
    with pytest.raises(CorruptFileError, match="Invalid unsigned key") as caught:
        decode_roaring64(data, path="64maphighvals.bin")
    # 0xEFBDBFEF = 4022190063 unsigned, negative as a Java int
    assert "Invalid unsigned key: -272777233" in caught.value.problem
    assert "4022190063" in caught.value.problem
    assert caught.value.path == "64maphighvals.bin"


def test_64maphighvals_croaring_original_breaks_the_java_key_rule(conformance: Path) -> None:
    data = (conformance / CROARING / "64maphighvals.bin").read_bytes()
    assert len(data) == 470
    # CRoaring reads it: 11 keys 2^32-11 .. 2^32-1, each with low values 2^32-11 .. 2^32-1
    croaring = BitMap64.deserialize(data)
    high = range(2**32 - 11, 2**32)
    assert sorted(croaring) == [(key << 32) | low for key in high for low in high]
    # Java reads each key as a signed int: 4294967285 is -11, so the Java rule refuses the file
    with pytest.raises(CorruptFileError, match=r"Invalid unsigned key: -11\b"):
        decode_roaring64(data)


@pytest.mark.parametrize(
    ("name", "size", "reason"),
    [
        ("64mapemptyinput.bin", 0, "Truncated"),
        ("64mapsizetoosmall.bin", 7, "Truncated"),
        # the count bytes read as a u64 are 2^56: Java's count rule fires before truncation
        ("64mapinvalidsize.bin", 9, "Invalid bitmap count: 72057594037927936"),
        ("64mapkeytoosmall.bin", 11, "Invalid bitmap count: 72057594037927936"),
    ],
)
def test_croaring_invalid_inputs_are_refused(conformance: Path, name: str, size: int, reason: str) -> None:
    data = (conformance / CROARING / name).read_bytes()
    assert len(data) == size
    with pytest.raises(CorruptFileError, match=reason):
        decode_roaring64(data, path=name)


@pytest.mark.parametrize(
    ("name", "size", "cookie"),
    [("bitmapwithoutruns.bin", 72616, 12346), ("bitmapwithruns.bin", 48056, 12347)],
)
def test_32bit_format_vectors_inside_a_64bit_map(
    conformance: Path, name: str, size: int, cookie: int
) -> None:
    """CRoaring's 32-bit vectors, framed as key 0: header parsing must find exactly their length."""
    raw = (conformance / CROARING / name).read_bytes()
    assert len(raw) == size and struct.unpack_from("<I", raw)[0] & 0xFFFF == cookie
    bitmap = decode_roaring64(struct.pack("<QI", 1, 0) + raw)
    expected = (
        set(range(0, 100000, 1000)) | {3 * k for k in range(100000, 200000)} | set(range(700000, 800000))
    )
    assert bitmap.cardinality == 200100 == len(expected)
    assert set(bitmap.to_arrow().to_pylist()) == expected
    assert min(bitmap) == 0 and max(bitmap) == 799999
    with pytest.raises(CorruptFileError, match="Truncated"):
        decode_roaring64(struct.pack("<QI", 1, 0) + raw[:-1])


# Java reader rules on hand-built inputs ----------------------------------------------------------


def test_max_position_is_javas() -> None:
    assert MAX_POSITION == 9223372030412324864 == 0x7FFFFFFE80000000


def test_largest_allowed_key_decodes() -> None:
    data = _bitmap_bytes([(2**31 - 2, BitMap([0, 5]))])
    assert list(decode_roaring64(data)) == [(2**31 - 2) << 32, ((2**31 - 2) << 32) + 5]


def test_key_too_large() -> None:
    with pytest.raises(CorruptFileError, match="Key 2147483647 is too large"):
        decode_roaring64(_bitmap_bytes([(2**31 - 1, BitMap([1]))]))


@pytest.mark.parametrize("keys", [(3, 1), (2, 2)])
def test_keys_must_ascend(keys: tuple[int, int]) -> None:
    data = _bitmap_bytes([(keys[0], BitMap([1])), (keys[1], BitMap([2]))])
    with pytest.raises(CorruptFileError, match="Keys must be sorted in ascending order"):
        decode_roaring64(data)


def test_count_above_int_max_is_refused() -> None:
    with pytest.raises(CorruptFileError, match="Invalid bitmap count: 2147483648"):
        decode_roaring64(struct.pack("<Q", 2**31))


def test_count_larger_than_data_is_truncation() -> None:
    data = _bitmap_bytes([(0, BitMap([1]))])
    with pytest.raises(CorruptFileError, match="Truncated"):
        decode_roaring64(struct.pack("<Q", 2) + data[8:])


@pytest.mark.parametrize("cut", [1, 2, 5, 9])
def test_truncated_bitmap_is_refused(cut: int) -> None:
    data = _bitmap_bytes([(0, BitMap([1, 2, 3])), (1, BitMap(range(100000)))])
    with pytest.raises(CorruptFileError, match="Truncated"):
        decode_roaring64(data[:-cut])


def test_trailing_bytes_are_refused() -> None:
    data = _bitmap_bytes([(0, BitMap([1]))])
    with pytest.raises(CorruptFileError, match="1 unexpected bytes"):
        decode_roaring64(data + b"\x00")


def test_bad_cookie_is_refused() -> None:
    with pytest.raises(CorruptFileError, match="cookie"):
        decode_roaring64(struct.pack("<QII", 1, 0, 777))


def test_empty_32bit_bitmaps_decode_to_nothing() -> None:
    data = _bitmap_bytes([(0, BitMap()), (4, BitMap([9]))])
    bitmap = decode_roaring64(data)
    assert bitmap.keys == (4,)
    assert list(bitmap) == [(4 << 32) + 9]


# the value type ----------------------------------------------------------------------------------


def test_from_positions_accepts_lists_ranges_and_arrow() -> None:
    expected = [3, 5, 2**32 + 1, 2**40]
    assert list(Roaring64.from_positions([2**40, 5, 3, 5, 2**32 + 1])) == expected
    assert list(Roaring64.from_positions(pa.array(expected, pa.int64()))) == expected
    assert list(Roaring64.from_positions(pa.array(expected, pa.uint64()))) == expected
    assert list(Roaring64.from_positions(pa.chunked_array([[2**40], [3, 5, 2**32 + 1]]))) == expected
    assert list(Roaring64.from_positions(range(2**32 - 2, 2**32 + 2))) == [
        2**32 - 2,
        2**32 - 1,
        2**32,
        2**32 + 1,
    ]
    assert Roaring64.from_positions([]) == Roaring64.empty()


def test_from_positions_with_many_keys() -> None:
    positions = [(key << 32) | low for key in range(19, -1, -1) for low in (9, 2, 9)]
    bitmap = Roaring64.from_positions(pa.array(positions, pa.int64()))
    assert bitmap.keys == tuple(range(20))
    assert list(bitmap) == sorted(set(positions))


@pytest.mark.parametrize("bad", [[-1], [MAX_POSITION + 1], [2**64 - 1], [1.5], ["x"], pa.array([1, None])])
def test_from_positions_refuses_out_of_range_or_non_integers(bad: object) -> None:
    with pytest.raises(ValidationError):
        Roaring64.from_positions(bad)


def test_add_range_is_end_exclusive_and_crosses_keys() -> None:
    bitmap = Roaring64.empty().add_range(2**32 - 2, 2**32 + 2)
    assert list(bitmap) == [2**32 - 2, 2**32 - 1, 2**32, 2**32 + 1]
    assert bitmap.keys == (0, 1)
    assert Roaring64.empty().add_range(7, 7) == Roaring64.empty()
    assert list(Roaring64.from_positions([1]).add_range(3, 5)) == [1, 3, 4]
    with pytest.raises(ValidationError):
        Roaring64.empty().add_range(5, 4)
    with pytest.raises(ValidationError):
        Roaring64.empty().add_range(0, MAX_POSITION + 2)


def test_union_merges() -> None:
    left = Roaring64.from_positions([1, 2, 2**33])
    right = Roaring64.from_positions([2, 3, 2**34])
    assert list(left | right) == [1, 2, 3, 2**33, 2**34]
    assert list(left.union(right, Roaring64.from_positions([0]))) == [0, 1, 2, 3, 2**33, 2**34]
    assert list(left) == [1, 2, 2**33]  # inputs unchanged


def test_contains_and_iteration_order() -> None:
    bitmap = Roaring64.from_positions([2**35 + 1, 7, 2**33])
    assert list(bitmap) == [7, 2**33, 2**35 + 1]
    assert 7 in bitmap and 2**33 in bitmap
    assert 8 not in bitmap and -1 not in bitmap and 2**34 not in bitmap and "7" not in bitmap


def test_equal_sets_compare_and_hash_equal() -> None:
    a = Roaring64.from_positions([1, 2, 3])
    b = Roaring64.empty().add_range(1, 4)
    assert a == b and hash(a) == hash(b)
    assert a != Roaring64.from_positions([1, 2])


def test_constructor_rejects_unsorted_or_empty_bitmaps() -> None:
    from pyroaring import FrozenBitMap

    with pytest.raises(ValidationError):
        Roaring64(((2, FrozenBitMap([1])), (1, FrozenBitMap([1]))))
    with pytest.raises(ValidationError):
        Roaring64(((0, FrozenBitMap()),))


def test_to_arrow_and_numpy() -> None:
    bitmap = Roaring64.from_positions([5, 2**32 + 3, 1])
    arrow = bitmap.to_arrow()
    assert arrow.type == pa.int64()
    assert arrow.to_pylist() == [1, 5, 2**32 + 3]
    assert Roaring64.empty().to_arrow().to_pylist() == []
    numpy = pytest.importorskip("numpy")
    assert numpy.array_equal(bitmap.to_numpy(), numpy.array([1, 5, 2**32 + 3], dtype=numpy.int64))


def test_large_listing_is_vectorised() -> None:
    """2 M positions over two keys decode to an Arrow array without a per-position Python loop."""
    count = 1_000_000
    bitmap = Roaring64.empty().add_range(0, count).add_range(2**32, 2**32 + count)
    decoded = decode_roaring64(encode_roaring64(bitmap))
    positions = decoded.to_arrow()
    assert len(positions) == 2 * count
    assert positions[0].as_py() == 0 and positions[count - 1].as_py() == count - 1
    assert positions[count].as_py() == 2**32 and positions[-1].as_py() == 2**32 + count - 1
    assert Roaring64.from_positions(positions) == bitmap


# properties against pyroaring's own 64-bit bitmap (CRoaring roaring64) -------------------------------

_low = st.integers(min_value=0, max_value=2**32 - 1)
_key = st.sampled_from([0, 1, 2, 7, 2**20, 2**31 - 3])
_position = st.builds(lambda key, low: (key << 32) | low, _key, _low)
_run = st.tuples(_position, st.integers(min_value=1, max_value=70000))


@st.composite
def position_sets(draw: st.DrawFn) -> set[int]:
    positions = set(draw(st.lists(_position, max_size=60)))
    positions |= set(draw(st.lists(st.integers(min_value=0, max_value=70000), max_size=30)))
    for start, length in draw(st.lists(_run, max_size=3)):
        positions |= set(range(start, min(start + length, MAX_POSITION + 1)))
    return positions


@settings(max_examples=80, deadline=None)
@given(position_sets())
def test_round_trip_and_bytes_match_croaring(positions: set[int]) -> None:
    bitmap = Roaring64.from_positions(positions)
    data = encode_roaring64(bitmap)
    oracle = BitMap64(positions)
    oracle.run_optimize()
    assert data == oracle.serialize()
    decoded = decode_roaring64(data)
    assert decoded == bitmap
    assert decoded.cardinality == len(positions)
    assert decoded.to_arrow().to_pylist() == sorted(positions)
    assert set(BitMap64.deserialize(data)) == positions


@settings(max_examples=60, deadline=None)
@given(position_sets(), position_sets())
def test_union_is_set_union(left: set[int], right: set[int]) -> None:
    merged = Roaring64.from_positions(left) | Roaring64.from_positions(right)
    assert list(merged) == sorted(left | right)
    assert merged == Roaring64.from_positions(right).union(Roaring64.from_positions(left))


@settings(max_examples=60, deadline=None)
@given(position_sets(), st.integers(min_value=0, max_value=2**34), st.integers(min_value=0, max_value=3000))
def test_add_range_matches_set_semantics(positions: set[int], start: int, length: int) -> None:
    bitmap = Roaring64.from_positions(positions).add_range(start, start + length)
    assert list(bitmap) == sorted(positions | set(range(start, start + length)))


# the dense form deletion vectors are applied in (to_bitset) -------------------------------------------

# window starts: the first row, around 2^31 (the largest INTEGER row), around 2^32 (a 64-bit key's
# first container), and the last key Java allows
_window_starts = st.sampled_from([0, 2**31 - 2**17, 2**32 - 2**16, 2**32, 7 << 32, (2**31 - 3) << 32])


@st.composite
def windows(draw: st.DrawFn) -> tuple[int, int, set[int]]:
    """(start, stop, positions inside): array, bitset and run containers, empty and full windows,
    container edges."""
    start = draw(_window_starts)
    span = draw(st.integers(min_value=0, max_value=5 * 2**16 + 3))
    offsets: set[int] = set()
    if span:
        inside = st.integers(min_value=0, max_value=span - 1)
        offsets |= set(draw(st.lists(inside, max_size=80)))
        kind = draw(st.sampled_from(["sparse", "dense", "runs", "full"]))
        if kind == "dense":  # > 4096 in a container: a bitset container
            first = draw(inside)
            offsets |= set(range(first, min(span, first + 2**16), draw(st.integers(min_value=1, max_value=9))))
        elif kind == "runs":  # many short runs in a container, and long ones across containers
            for begin, length in draw(st.lists(st.tuples(inside, st.integers(1, 3 * 2**16)), max_size=3)):
                offsets |= set(range(begin, min(span, begin + length)))
            base = draw(inside)
            offsets |= {o for k in range(draw(st.integers(0, 70))) for o in (base + 3 * k, base + 3 * k + 1)}
        elif kind == "full":
            offsets = set(range(span))
        offsets = {o for o in offsets if o < span}
    return start, start + span, {start + o for o in offsets}


def _reference_bitset(start: int, stop: int, positions: set[int]) -> bytes:
    mask = bytearray((stop - start + 7) // 8)
    for p in positions:
        mask[(p - start) >> 3] |= 1 << ((p - start) & 7)
    return bytes(mask)


@settings(max_examples=150, deadline=None)
@given(windows())
def test_to_bitset_is_exact_for_every_position(window: tuple[int, int, set[int]]) -> None:
    start, stop, positions = window
    expected = _reference_bitset(start, stop, positions)
    built = Roaring64.from_positions(sorted(positions))
    # as built (array and bitset containers) and as read back from a file (run-length encoded)
    for bitmap in (built, decode_roaring64(encode_roaring64(built))):
        assert bitmap.to_bitset(stop, start).tobytes() == expected
    if start == 0:
        assert built.to_bitset(stop).tobytes() == expected


def test_to_bitset_refuses_positions_outside_the_window() -> None:
    bitmap = Roaring64.from_positions([8, 100])
    assert bitmap.to_bitset(101, 8).tobytes()[0] == 1
    with pytest.raises(ValidationError):
        bitmap.to_bitset(100)
    with pytest.raises(ValidationError):
        bitmap.to_bitset(200, 16)
    with pytest.raises(ValidationError):
        bitmap.to_bitset(200, 3)
    assert Roaring64.empty().to_bitset(0).tobytes() == b""
    assert Roaring64.empty().last is None and bitmap.last == 100
