"""deletion-vector-v1 blobs: Java goldens (GOLDEN_EXPECTATIONS.md section 1), validation messages, Delta Lake
DV files (byte-identical blobs), and properties (round trip, CRC catches any flipped bitmap byte)."""

from __future__ import annotations

import json
import struct
import urllib.parse
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iceduck.errors import CorruptFileError
from iceduck.puffin import Roaring64, decode_deletion_vector, encode_deletion_vector

ICEBERG_DELETES = "apache-iceberg/core/src/test/resources/org/apache/iceberg/deletes"
GO_DELETES = "apache-iceberg-go/table/dv/testdata/deletes"
DELTA = "delta-io-delta"


def position(bitmap: int, container: int, value: int) -> int:
    """Java test helper's layout: 32-bit key, 16-bit container key, 16-bit value."""
    return (bitmap << 32) + (container << 16) + value


def all_container_types() -> Roaring64:
    """TestBitmapPositionDeleteIndex's construction, with its end-exclusive ranges."""
    return (
        Roaring64.from_positions(
            [position(0, 0, 5), position(0, 0, 7), position(1, 0, 10), position(1, 0, 20)]
        )
        .add_range(position(0, 1, 1), position(0, 1, 1000))
        .add_range(position(0, 2, 1), position(0, 2, 65535))
        .add_range(position(1, 1, 10), position(1, 1, 500))
        .add_range(position(1, 2, 1), position(1, 2, 65535))
    )


GOLDENS = {
    "empty-position-index.bin": (20, 12, 0xBF18480C, Roaring64.empty()),
    "small-alternating-values-position-index.bin": (50, 42, 0xB3FB20BE, Roaring64.from_positions([1, 3, 5, 7, 9])),
    "small-and-large-values-position-index.bin": (
        56, 48, 0x15EB1C7C, Roaring64.from_positions([100, 101, 2**31 - 1 + 100, 2**31 - 1 + 101]),
    ),
    "all-container-types-position-index.bin": (94, 86, 0xC89BE397, all_container_types()),
}  # fmt: skip


@pytest.mark.parametrize("folder", [ICEBERG_DELETES, GO_DELETES])
@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_java_golden_blobs(conformance: Path, folder: str, name: str) -> None:
    size, length, crc, expected = GOLDENS[name]
    data = (conformance / folder / name).read_bytes()
    assert len(data) == size
    assert struct.unpack(">I", data[:4])[0] == length == size - 8
    assert data[4:8] == bytes.fromhex("d1d33964")
    assert struct.unpack(">I", data[-4:])[0] == crc == zlib.crc32(data[4:-4])
    decoded = decode_deletion_vector(
        data, path=name, expected_length=len(data), expected_cardinality=expected.cardinality
    )
    assert decoded == expected
    assert encode_deletion_vector(expected) == data  # serialize(index) is byte-equal to the golden


def test_golden_details() -> None:
    assert encode_deletion_vector([]).hex() == "0000000cd1d339640000000000000000bf18480c"
    bitmap = all_container_types()
    assert bitmap.cardinality == 132561
    expected = (
        {5, 7}
        | set(range(65537, 66536))
        | set(range(131073, 196607))
        | {4294967306, 4294967316}
        | set(range(4295032842, 4295033332))
        | set(range(4295098369, 4295163903))
    )
    assert set(bitmap) == expected
    assert [len(range(65537, 66536)), len(range(4295032842, 4295033332)), len(range(131073, 196607))] == [
        999,
        490,
        65534,
    ]


def test_all_container_types_bytes(conformance: Path) -> None:
    """Keys 0 and 1, each cookie 12347 (runs) with 3 containers and no offset header."""
    data = (conformance / ICEBERG_DELETES / "all-container-types-position-index.bin").read_bytes()
    bitmap = data[8:-4]
    assert struct.unpack_from("<Q", bitmap)[0] == 2
    assert struct.unpack_from("<I", bitmap, 8)[0] == 0
    assert struct.unpack_from("<I", bitmap, 12)[0] == 12347 | (2 << 16)


# validation --------------------------------------------------------------------------------------


def blob_1_2() -> bytes:
    return encode_deletion_vector([1, 2])


def test_crc_of_positions_1_2() -> None:
    blob = blob_1_2()
    assert len(blob) == 44  # 36 bytes of magic + bitmap
    assert blob[-4:] == bytes.fromhex("712fa6e8")


def test_invalid_crc_message_is_javas() -> None:
    blob = bytearray(blob_1_2())
    blob[-1] ^= 1
    with pytest.raises(CorruptFileError) as caught:
        decode_deletion_vector(bytes(blob), path="s3://bucket/dv.puffin")
    problem = "Invalid CRC for deletion vector s3://bucket/dv.puffin: 0x712fa6e8, expected 0x712fa6e9"
    assert caught.value.problem == problem
    assert caught.value.path == "s3://bucket/dv.puffin"
    assert problem in str(caught.value)


def test_length_field_must_match_content_size() -> None:
    blob = blob_1_2()
    with pytest.raises(CorruptFileError, match="Invalid bitmap data length: 36, expected 37"):
        decode_deletion_vector(blob, path="dv.puffin", expected_length=45)


def test_length_field_must_match_blob() -> None:
    blob = blob_1_2()
    with pytest.raises(CorruptFileError, match="Invalid bitmap data length"):
        decode_deletion_vector(struct.pack(">I", 40) + blob[4:], path="dv.puffin")
    with pytest.raises(CorruptFileError, match="Invalid bitmap data length"):
        decode_deletion_vector(blob + b"\x00", path="dv.puffin")


def test_magic_is_checked() -> None:
    blob = bytearray(blob_1_2())
    blob[7] = 0x65
    with pytest.raises(CorruptFileError, match="Invalid magic number"):
        decode_deletion_vector(bytes(blob), path="dv.puffin")


def test_cardinality_must_match_record_count() -> None:
    with pytest.raises(CorruptFileError, match="Invalid cardinality"):
        decode_deletion_vector(blob_1_2(), path="dv.puffin", expected_cardinality=3)
    assert list(decode_deletion_vector(blob_1_2(), path="dv.puffin", expected_cardinality=2)) == [1, 2]


@pytest.mark.parametrize("size", [0, 4, 11])
def test_too_short_is_refused(size: int) -> None:
    with pytest.raises(CorruptFileError, match="Truncated deletion vector"):
        decode_deletion_vector(blob_1_2()[:size], path="dv.puffin")


def test_key_rules_apply_inside_a_blob() -> None:
    body = b"\xd1\xd3\x39\x64" + struct.pack("<QI", 1, 2**32 - 1) + bytes.fromhex("3a300000 00000000")
    blob = struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))
    with pytest.raises(CorruptFileError, match="Invalid unsigned key: -1"):
        decode_deletion_vector(blob, path="dv.puffin")


# properties --------------------------------------------------------------------------------------

_positions = st.sets(
    st.one_of(
        st.integers(min_value=0, max_value=2**17),
        st.integers(min_value=2**32 - 5, max_value=2**32 + 5),
        st.integers(min_value=0, max_value=2**40),
    ),
    max_size=80,
)


@settings(max_examples=80, deadline=None)
@given(_positions, st.integers(min_value=0, max_value=2**33), st.integers(min_value=0, max_value=5000))
def test_round_trip(positions: set[int], start: int, length: int) -> None:
    expected = positions | set(range(start, start + length))
    blob = encode_deletion_vector(Roaring64.from_positions(positions).add_range(start, start + length))
    decoded = decode_deletion_vector(
        blob, path="x", expected_length=len(blob), expected_cardinality=len(expected)
    )
    assert list(decoded) == sorted(expected)


@settings(max_examples=100, deadline=None)
@given(_positions, st.data())
def test_any_flipped_bitmap_or_crc_byte_fails_the_crc(positions: set[int], data: st.DataObject) -> None:
    blob = bytearray(encode_deletion_vector(positions))
    index = data.draw(st.integers(min_value=8, max_value=len(blob) - 1), label="byte")
    blob[index] ^= data.draw(st.integers(min_value=1, max_value=255), label="mask")
    with pytest.raises(CorruptFileError, match="Invalid CRC for deletion vector x"):
        decode_deletion_vector(bytes(blob), path="x")


# Delta Lake: a DV at each log offset is a byte-exact deletion-vector-v1 blob ---------------------------

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85_decode(text: str) -> bytes:
    """ZeroMQ Z85 (RFC 32/Z85): every 5 characters encode 4 big-endian bytes in base 85."""
    out = bytearray()
    for start in range(0, len(text), 5):
        value = 0
        for char in text[start : start + 5]:
            value = value * 85 + _Z85.index(char)
        out += value.to_bytes(4, "big")
    return bytes(out)


def delta_dv_file(table: Path, descriptor: dict[str, object]) -> Path | None:
    """Where a Delta log ``deletionVector`` descriptor points: 'u' = optional prefix + Z85 UUID."""
    reference = str(descriptor["pathOrInlineDv"])
    if descriptor["storageType"] == "u":
        prefix, file_id = reference[:-20], uuid.UUID(bytes=z85_decode(reference[-20:]))
        # some Spark test tables also prefix the file name itself (e.g. "test%dv%prefix-")
        return next((table / prefix).glob(f"*deletion_vector_{file_id}.bin"), None)
    name = urllib.parse.unquote(reference.rsplit("/", 1)[-1])
    return next(table.rglob(name), None)


def delta_deletion_vectors(root: Path) -> Iterator[tuple[Path, Path | None, dict[str, int]]]:
    for log in sorted(root.rglob("_delta_log")):
        for commit in sorted(log.glob("*.json")):
            for line in commit.read_text().splitlines():
                action = json.loads(line)
                for kind in ("add", "remove"):
                    descriptor = action.get(kind, {}).get("deletionVector")
                    if descriptor and descriptor["storageType"] != "i":
                        yield log.parent, delta_dv_file(log.parent, descriptor), descriptor


def test_z85_decoder_on_the_rfc_example() -> None:
    assert z85_decode("HelloWorld") == bytes.fromhex("864FD26FB559F75B")


def test_delta_lake_deletion_vectors(conformance: Path) -> None:
    decoded, missing, seen = 0, set(), set()
    for table, dv_file, descriptor in delta_deletion_vectors(conformance / DELTA):
        if dv_file is None:
            missing.add(table.name)
            continue
        key = (dv_file, descriptor["offset"])
        if key in seen:
            continue
        seen.add(key)
        data = dv_file.read_bytes()
        assert data[0] == 1  # Delta DV file format version
        offset, size = descriptor["offset"], descriptor["sizeInBytes"]
        blob = data[offset : offset + size + 8]
        positions = decode_deletion_vector(
            blob, path=str(dv_file), expected_length=size + 8, expected_cardinality=descriptor["cardinality"]
        )
        assert positions.cardinality == descriptor["cardinality"]
        assert encode_deletion_vector(positions) == blob  # Delta's writer also run-length encodes
        decoded += 1
    assert decoded == 94  # distinct (file, offset) pairs in the logs, over 76 DV files
    assert missing <= {"table-with-dv-gigantic"}  # the only table shipped without its DV file
