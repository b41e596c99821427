"""Puffin files: Java goldens (GOLDEN_EXPECTATIONS.md section 3), DV Puffin files from Java and Go (section
4), the legacy bare DV, footer validation, compression, and the writer's byte-identity with Java."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import lz4.frame
import pytest
import zstandard

from iceduck.errors import CorruptFileError, UnsupportedFormatError, ValidationError
from iceduck.puffin import (
    BlobMetadata,
    BytesReader,
    DeletionVectorBlob,
    LocalFileReader,
    PuffinFooter,
    PuffinWriter,
    RangeReader,
    Roaring64,
    compress,
    deletion_vector_blobs,
    read_blob,
    read_deletion_vector,
    read_footer,
    write_deletion_vectors,
)

PUFFIN_V1 = (
    "apache-iceberg/core/src/test/resources/org/apache/iceberg/puffin/v1",
    "apache-iceberg-python/tests/table/puffin/v1",
    "apache-iceberg-rust/crates/iceberg/testdata/puffin/java-generated",
    "apache-iceberg-go/puffin/testdata",
)
GO_DELETES = "apache-iceberg-go/table/dv/testdata/deletes"
GO_PUFFIN = "apache-iceberg-go/puffin/testdata"
BARE_DV = (
    "duckdb-iceberg/data/persistent/legacy_bare_deletion_vector/warehouse/default/"
    "legacy_bare_deletion_vector/data/legacy-bare-deletion-vector.puffin"
)
BLOB_0 = b"abcdefghi"
BLOB_1 = "some blob \u0000 binary data 🤯 that is not very very very very very very long, is it?".encode()
SAMPLE = {
    # name: (file size, footer start, payload size, footer size, lengths, codec)
    "sample-metric-data-uncompressed.bin": (355, 96, 243, 259, (9, 83), None),
    "sample-metric-data-compressed-zstd.bin": (417, 103, 298, 314, (22, 77), "zstd"),
}


def write_sample(codec: str | None) -> PuffinWriter:
    writer = PuffinWriter(properties={"created-by": "Test 1234"})
    writer.add_blob(
        "some-blob", BLOB_0, fields=[1], snapshot_id=2, sequence_number=1, compression_codec=codec
    )
    writer.add_blob(
        "some-other-blob", BLOB_1, fields=[2], snapshot_id=2, sequence_number=1, compression_codec=codec
    )
    return writer


# empty file ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", PUFFIN_V1)
def test_empty_puffin(conformance: Path, folder: str) -> None:
    data = (conformance / folder / "empty-puffin-uncompressed.bin").read_bytes()
    assert data == b"PFA1" + b'PFA1{"blobs":[]}' + struct.pack("<iI", 12, 0) + b"PFA1"
    for footer_size in (None, 28):
        footer = read_footer(data, path="empty", footer_size=footer_size)
        assert footer.blobs == ()
        assert dict(footer.properties) == {}
        assert footer.footer_size == 28
        assert not footer.footer_compressed


def test_empty_puffin_writer(conformance: Path) -> None:
    writer = PuffinWriter()
    data = writer.finish()
    assert len(data) == 32
    assert data == (conformance / PUFFIN_V1[0] / "empty-puffin-uncompressed.bin").read_bytes()
    assert writer.footer_size == 28


# sample metric data ------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", PUFFIN_V1)
@pytest.mark.parametrize("name", sorted(SAMPLE))
def test_sample_metric_data(conformance: Path, folder: str, name: str) -> None:
    size, footer_start, payload_size, footer_size, lengths, codec = SAMPLE[name]
    path = conformance / folder / name
    reader = LocalFileReader(str(path))
    assert reader.size == size
    footer = read_footer(reader)
    assert dict(footer.properties) == {"created-by": "Test 1234"}
    assert footer.footer_size == footer_size == size - footer_start == payload_size + 16
    assert not footer.footer_compressed
    first, second = footer.blobs
    assert first == BlobMetadata("some-blob", (1,), 2, 1, 4, lengths[0], codec, {})
    assert second == BlobMetadata("some-other-blob", (2,), 2, 1, 4 + lengths[0], lengths[1], codec, {})
    assert dict(first.properties) == {} == dict(second.properties)
    assert read_blob(reader, first) == BLOB_0
    assert read_blob(reader, second) == BLOB_1
    assert len(BLOB_1) == 83
    assert read_footer(path.read_bytes(), footer_size=footer_size) == footer


def test_zstd_frames_carry_content_size(conformance: Path) -> None:
    data = (conformance / PUFFIN_V1[0] / "sample-metric-data-compressed-zstd.bin").read_bytes()
    for blob, content in zip(read_footer(data).blobs, (BLOB_0, BLOB_1), strict=True):
        frame = data[blob.offset : blob.offset + blob.length]
        assert zstandard.get_frame_parameters(frame).content_size == len(content)
        assert zstandard.get_frame_parameters(compress("zstd", content)).content_size == len(content)


@pytest.mark.parametrize("name", sorted(SAMPLE))
def test_writer_matches_java_bytes(conformance: Path, name: str) -> None:
    codec = SAMPLE[name][-1]
    writer = write_sample(codec)
    data = writer.finish()
    assert data == (conformance / PUFFIN_V1[0] / name).read_bytes()
    assert writer.footer_size == SAMPLE[name][3]
    assert [blob.offset for blob in writer.blobs] == [4, 4 + SAMPLE[name][4][0]]


def test_file_size_of_one_small_blob() -> None:
    """TestPuffinWriter.testFileSizeCalculation: one 4-byte blob makes a 122-byte file."""
    writer = PuffinWriter()
    writer.add_blob("blob", b"blob", fields=[1], snapshot_id=2, sequence_number=1)
    assert len(writer.finish()) == 122


@pytest.mark.parametrize("delta", [1, -1, 10, -10])
def test_wrong_footer_size_near_the_real_one(conformance: Path, delta: int) -> None:
    data = (conformance / PUFFIN_V1[0] / "sample-metric-data-compressed-zstd.bin").read_bytes()
    with pytest.raises(CorruptFileError) as caught:
        read_footer(data, path="zstd.bin", footer_size=314 + delta)
    assert caught.value.problem.startswith("Invalid file: expected magic at offset")


@pytest.mark.parametrize("delta", [10000, -10000])
def test_wrong_footer_size_far_from_the_real_one(conformance: Path, delta: int) -> None:
    data = (conformance / PUFFIN_V1[0] / "sample-metric-data-compressed-zstd.bin").read_bytes()
    with pytest.raises(CorruptFileError, match="Invalid footer size"):
        read_footer(data, path="zstd.bin", footer_size=314 + delta)


# footer validation ---------------------------------------------------------------------------------


def sample_bytes(conformance: Path) -> bytes:
    return (conformance / PUFFIN_V1[0] / "sample-metric-data-uncompressed.bin").read_bytes()


def test_compressed_footer_is_read(conformance: Path) -> None:
    data = sample_bytes(conformance)
    original = read_footer(data)
    start = len(data) - original.footer_size
    payload = lz4.frame.compress(data[start + 4 : -12], store_size=True)
    rebuilt = data[:start] + b"PFA1" + payload + struct.pack("<iI", len(payload), 1) + b"PFA1"
    footer = read_footer(rebuilt)
    assert footer.footer_compressed
    assert footer.blobs == original.blobs and footer.properties == original.properties
    assert read_blob(rebuilt, footer.blobs[1]) == BLOB_1


def test_writer_compresses_footer_on_request() -> None:
    writer = PuffinWriter(properties={"created-by": "x"}, compress_footer=True)
    writer.add_blob("b", b"payload", fields=[], snapshot_id=1, sequence_number=2, compression_codec="lz4")
    data = writer.finish()
    assert struct.unpack("<I", data[-8:-4])[0] == 1
    footer = read_footer(data)
    assert footer.footer_compressed and dict(footer.properties) == {"created-by": "x"}
    (blob,) = footer.blobs
    assert blob.compression_codec == "lz4"
    assert lz4.frame.decompress(data[blob.offset : blob.offset + blob.length]) == b"payload"
    assert read_blob(data, blob) == b"payload"


def test_reserved_flag_bits_are_unsupported(conformance: Path) -> None:
    data = bytearray(sample_bytes(conformance))
    data[-8] = 0x02
    with pytest.raises(UnsupportedFormatError, match="reserved"):
        read_footer(bytes(data), path="flags.bin")


def test_bad_magic_at_either_end(conformance: Path) -> None:
    data = sample_bytes(conformance)
    with pytest.raises(CorruptFileError, match="Not a Puffin file"):
        read_footer(b"XFA1" + data[4:], path="head.bin")
    with pytest.raises(CorruptFileError, match=f"expected magic at offset {len(data) - 4}"):
        read_footer(data[:-1] + b"X", path="tail.bin")


def test_payload_size_field_must_fit(conformance: Path) -> None:
    data = sample_bytes(conformance)
    with pytest.raises(CorruptFileError, match="Invalid footer size"):
        read_footer(data[:-12] + struct.pack("<iI", 5000, 0) + b"PFA1")
    with pytest.raises(CorruptFileError, match="Invalid footer size"):
        read_footer(data[:-12] + struct.pack("<iI", -1, 0) + b"PFA1")


def replace_payload(data: bytes, footer_size: int, payload: bytes) -> bytes:
    return data[: len(data) - footer_size] + b"PFA1" + payload + struct.pack("<iI", len(payload), 0) + b"PFA1"


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"{not json", "Invalid footer JSON"),
        (b"\xff\xfe", "Invalid footer JSON"),
        (b"[]", "'blobs' list"),
        (b'{"properties":{}}', "'blobs' list"),
        (b'{"blobs":[{"type":"t","fields":[1],"snapshot-id":2,"sequence-number":1,"offset":4}]}', "'length'"),
        (b'{"blobs":[{"type":"t","fields":["a"],"snapshot-id":2,"sequence-number":1,"offset":4,"length":1}]}',
         "'fields'"),
        (b'{"blobs":[{"type":"t","fields":[],"snapshot-id":true,"sequence-number":1,"offset":4,"length":1}]}',
         "'snapshot-id'"),
        (b'{"blobs":[{"type":"t","fields":[],"snapshot-id":1,"sequence-number":1,"offset":4,"length":1000}]}',
         "outside the blob area"),
        (b'{"blobs":[{"type":"t","fields":[],"snapshot-id":1,"sequence-number":1,"offset":0,"length":1}]}',
         "outside the blob area"),
        (b'{"blobs":[],"properties":{"a":1}}', "file properties"),
    ],
)  # fmt: skip
def test_invalid_footer_json(conformance: Path, payload: bytes, reason: str) -> None:
    data = sample_bytes(conformance)
    with pytest.raises(CorruptFileError, match=reason):
        read_footer(replace_payload(data, 259, payload), path="bad.bin")


def test_unknown_keys_are_ignored_and_null_codec_is_absent(conformance: Path) -> None:
    payload = (
        b'{"blobs":[{"type":"t","fields":[],"snapshot-id":1,"sequence-number":1,"offset":4,"length":9,'
        b'"compression-codec":null,"future":1}],"future":{}}'
    )
    footer = read_footer(replace_payload(sample_bytes(conformance), 259, payload))
    assert footer.blobs[0].compression_codec is None


def test_unsupported_codec_and_corrupt_frames(conformance: Path) -> None:
    data = (conformance / PUFFIN_V1[0] / "sample-metric-data-compressed-zstd.bin").read_bytes()
    blob = read_footer(data).blobs[0]
    with pytest.raises(UnsupportedFormatError, match="snappy"):
        read_blob(data, BlobMetadata("x", (), 1, 1, blob.offset, blob.length, "snappy"))
    with pytest.raises(CorruptFileError, match="Invalid zstd data"):
        read_blob(data, BlobMetadata("x", (), 1, 1, blob.offset + 1, blob.length - 1, "zstd"))
    with pytest.raises(ValidationError):
        compress("brotli", b"")


def test_too_small_files_are_refused() -> None:
    for data in (b"", b"PF", b"PFA1" * 4):
        with pytest.raises(CorruptFileError, match="Not a Puffin file"):
            read_footer(data, path="small.bin")


def test_writer_refuses_use_after_finish() -> None:
    writer = PuffinWriter()
    with pytest.raises(ValidationError):
        _ = writer.footer_size
    writer.finish()
    with pytest.raises(ValidationError):
        writer.add_blob("b", b"", fields=[], snapshot_id=1, sequence_number=1)
    with pytest.raises(ValidationError):
        writer.finish()


def test_readers(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"0123456789")
    for reader in (LocalFileReader(str(path)), BytesReader(b"0123456789", "f.bin")):
        assert isinstance(reader, RangeReader)
        assert reader.size == 10
        assert reader.read_at(3, 4) == b"3456"
        assert reader.read_at(10, 0) == b""
    with pytest.raises(CorruptFileError, match=r"f\.bin"):
        BytesReader(b"0123456789", "f.bin").read_at(8, 3)
    with pytest.raises(CorruptFileError, match="truncated"):
        LocalFileReader(str(path)).read_at(8, 3)


def test_model_values_are_immutable() -> None:
    blob = BlobMetadata("t", [1, 2], 1, 1, 4, 0, None, {"a": "b"})  # type: ignore[arg-type]
    assert blob.fields == (1, 2)
    with pytest.raises(TypeError):
        blob.properties["a"] = "c"  # type: ignore[index]
    assert hash(blob) == hash(BlobMetadata("t", (1, 2), 1, 1, 4, 0, None, {"a": "other"}))
    assert PuffinFooter([blob]).blobs == (blob,)  # type: ignore[arg-type]


# deletion vectors in Puffin ----------------------------------------------------------------------

JAVA_DV_FILES = {
    "single-blob-dv.puffin": (
        384, 54, 314, [("s3://warehouse/db/table/data/00000-0-abc.parquet", 4, 50, [1, 3, 5, 7, 9])],
    ),
    "multi-blob-dv.puffin": (
        639, 94, 529,
        [
            ("s3://warehouse/db/table/data/file-001.parquet", 4, 46, [0, 100, 200]),
            ("s3://warehouse/db/table/data/file-002.parquet", 50, 44, [50, 150]),
        ],
    ),
}  # fmt: skip
JAVA_CREATED_BY = "iceberg-go DV cross-client fixtures (apache/iceberg)"


@pytest.mark.parametrize("name", sorted(JAVA_DV_FILES))
def test_java_written_dv_puffin(conformance: Path, name: str) -> None:
    size, footer_start, payload_size, expected = JAVA_DV_FILES[name]
    data = (conformance / GO_DELETES / name).read_bytes()
    assert len(data) == size
    footer = read_footer(data, path=name)
    assert footer.footer_size == size - footer_start == payload_size + 16
    assert dict(footer.properties) == {"created-by": JAVA_CREATED_BY}
    for blob, (data_file, offset, length, positions) in zip(footer.blobs, expected, strict=True):
        assert blob.type == "deletion-vector-v1"
        assert blob.fields == (2147483645,)
        assert (blob.snapshot_id, blob.sequence_number, blob.compression_codec) == (-1, -1, None)
        assert (blob.offset, blob.length) == (offset, length)
        assert dict(blob.properties) == {
            "referenced-data-file": data_file,
            "cardinality": str(len(positions)),
        }
        read = read_deletion_vector(data, offset, length, path=name, record_count=len(positions))
        assert list(read) == positions
    assert deletion_vector_blobs(footer) == tuple(
        DeletionVectorBlob(data_file, offset, length, len(positions))
        for data_file, offset, length, positions in expected
    )


def test_java_dv_crcs(conformance: Path) -> None:
    data = (conformance / GO_DELETES / "multi-blob-dv.puffin").read_bytes()
    assert data[46:50] == bytes.fromhex("4967e825") and data[90:94] == bytes.fromhex("869cbeb9")


@pytest.mark.parametrize("name", sorted(JAVA_DV_FILES))
def test_write_deletion_vectors_matches_java_bytes(conformance: Path, name: str) -> None:
    _, _, _, expected = JAVA_DV_FILES[name]
    vectors = [(data_file, positions) for data_file, _, _, positions in expected]
    data, written = write_deletion_vectors(vectors, created_by=JAVA_CREATED_BY)
    assert data == (conformance / GO_DELETES / name).read_bytes()
    assert written == tuple(DeletionVectorBlob(f, o, n, len(p)) for f, o, n, p in expected)


def test_go_written_dv_puffin(conformance: Path) -> None:
    path = conformance / GO_PUFFIN / "deletion-vector-v1.puffin"
    reader = LocalFileReader(str(path))
    assert reader.size == 314
    footer = read_footer(reader)
    assert dict(footer.properties) == {"created-by": "iceberg-go test fixture"}
    (blob,) = footer.blobs
    assert (blob.type, blob.fields, blob.offset, blob.length) == ("deletion-vector-v1", (), 4, 50)
    assert (blob.snapshot_id, blob.sequence_number, blob.compression_codec) == (-1, -1, None)
    assert dict(blob.properties) == {"referenced-data-file": "data/test.parquet", "cardinality": "5"}
    assert (
        read_blob(reader, blob) == (conformance / GO_PUFFIN / "deletion-vector-v1-payload.bin").read_bytes()
    )
    assert list(read_deletion_vector(reader, 4, 50, record_count=5)) == [1, 3, 5, 7, 9]
    assert deletion_vector_blobs(footer) == (DeletionVectorBlob("data/test.parquet", 4, 50, 5),)


def test_write_deletion_vectors_metadata_rules() -> None:
    data, written = write_deletion_vectors(
        [("s3://b/a.parquet", Roaring64.from_positions([2**33, 1])), ("s3://b/c.parquet", range(10, 20))]
    )
    footer = read_footer(data)
    assert footer.properties["created-by"].startswith("iceduck")
    for blob, entry in zip(footer.blobs, written, strict=True):
        assert json.dumps(dict(blob.properties)) == json.dumps(
            {"referenced-data-file": entry.referenced_data_file, "cardinality": str(entry.cardinality)}
        )
        assert (blob.fields, blob.snapshot_id, blob.sequence_number) == ((2147483645,), -1, -1)
        assert blob.compression_codec is None
    assert [entry.cardinality for entry in written] == [2, 10]
    first = read_deletion_vector(data, written[0].offset, written[0].length, record_count=2)
    assert list(first) == [1, 2**33]
    with pytest.raises(ValidationError, match="at most one deletion vector"):
        write_deletion_vectors([("a", [1]), ("a", [2])])
    assert "created-by" not in read_footer(write_deletion_vectors([], created_by=None)[0]).properties


def test_deletion_vector_blobs_checks_dv_properties(conformance: Path) -> None:
    blob = BlobMetadata("deletion-vector-v1", (), -1, -1, 4, 50, None, {"cardinality": "5"})
    with pytest.raises(CorruptFileError, match="referenced-data-file"):
        deletion_vector_blobs(PuffinFooter((blob,)))
    props = {"cardinality": "x", "referenced-data-file": "f"}
    with pytest.raises(CorruptFileError, match="cardinality"):
        deletion_vector_blobs(
            PuffinFooter((BlobMetadata("deletion-vector-v1", (), -1, -1, 4, 50, None, props),))
        )
    zstd = BlobMetadata(
        "deletion-vector-v1", (), -1, -1, 4, 50, "zstd", {"cardinality": "1", "referenced-data-file": "f"}
    )
    with pytest.raises(CorruptFileError, match="compressed"):
        deletion_vector_blobs(PuffinFooter((zstd,)))
    other = BlobMetadata("apache-datasketches-theta-v1", (1,), 1, 1, 4, 1)
    assert deletion_vector_blobs(PuffinFooter((other,))) == ()


def test_read_deletion_vector_checks(conformance: Path) -> None:
    data = (conformance / GO_DELETES / "single-blob-dv.puffin").read_bytes()
    with pytest.raises(CorruptFileError, match="Invalid cardinality"):
        read_deletion_vector(data, 4, 50, path="dv.puffin", record_count=4)
    with pytest.raises(CorruptFileError, match="outside the file"):
        read_deletion_vector(data, 380, 50, path="dv.puffin")
    with pytest.raises(CorruptFileError, match="Invalid bitmap data length"):
        read_deletion_vector(data, 4, 51, path="dv.puffin")
    with pytest.raises(CorruptFileError, match="overlaps the Puffin magic"):
        read_deletion_vector(data, 0, 50, path="dv.puffin")
    with pytest.raises(CorruptFileError, match="Not a Puffin file"):
        read_deletion_vector(b"XXXX" + data[4:], 4, 50, path="dv.puffin")
    far = data[:4] + bytes(70000) + data[4:]
    assert list(read_deletion_vector(far, 70004, 50, record_count=5)) == [1, 3, 5, 7, 9]


def test_legacy_bare_deletion_vector(conformance: Path) -> None:
    path = conformance / BARE_DV
    data = path.read_bytes()
    assert len(data) == 42 and data[-4:] == bytes.fromhex("eebd85f4")
    reader = LocalFileReader(str(path))
    with pytest.raises(CorruptFileError, match=r"Not a Puffin file.*bare deletion-vector-v1 blob") as caught:
        read_footer(reader)
    assert caught.value.path == str(path)
    # the manifest records content_offset 0, content_size_in_bytes 42, record_count 1
    with pytest.raises(CorruptFileError, match=r"Not a Puffin file.*allow_bare=True"):
        read_deletion_vector(reader, 0, 42, record_count=1)
    assert list(read_deletion_vector(reader, 0, 42, record_count=1, allow_bare=True)) == [1]
