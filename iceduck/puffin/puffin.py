"""Puffin files (Iceberg's blob container): footer model, reader, writer, and deletion vectors in Puffin.

File layout (format/puffin-spec.md): ``PFA1``, blobs, footer. Footer: ``PFA1``, UTF-8 JSON
``FileMetadata`` (optionally one LZ4 frame), ``i32 LE`` payload size, 4 flag bytes (byte 0 bit 0:
payload compressed), ``PFA1``. The writer emits compact JSON with keys in the order the Java writer
uses, so its output is byte-identical to Java's for the same blobs.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from iceduck._lazy import LazyModule
from iceduck._version import __version__
from iceduck.errors import CorruptFileError, UnsupportedFormatError, ValidationError
from iceduck.puffin import deletion_vector as dv
from iceduck.puffin.ranged import RangeReader, as_reader, reader_path
from iceduck.puffin.roaring64 import Roaring64

# The codecs load with the first compressed blob or footer, not with a scan that reads no Puffin file.
if TYPE_CHECKING:
    import lz4.frame as lz4_frame
    import zstandard
else:
    lz4_frame = LazyModule("lz4.frame")
    zstandard = LazyModule("zstandard")

MAGIC = b"PFA1"
FLAG_FOOTER_COMPRESSED = 0x1
CODEC_ZSTD = "zstd"
CODEC_LZ4 = "lz4"
CODECS = (CODEC_ZSTD, CODEC_LZ4)
# Field id of the reserved ``_pos`` metadata column (Integer.MAX_VALUE - 2): what a DV blob is computed
# over, as the Java writer records it in ``fields``.
ROW_POSITION_FIELD_ID = 2147483645
PROPERTY_CREATED_BY = "created-by"
PROPERTY_REFERENCED_DATA_FILE = "referenced-data-file"
PROPERTY_CARDINALITY = "cardinality"

_TRAILER = 12  # payload size + flags + closing magic
_MIN_FOOTER = len(MAGIC) + _TRAILER
_MIN_FILE = len(MAGIC) + _MIN_FOOTER
_TAIL_READ = 16 * 1024  # one read usually covers the whole footer
_HEAD_READ_LIMIT = 64 * 1024  # read magic and DV together when the DV starts this close to the head
_ZSTD_LEVEL = 3  # zstd's default level; with checksum and content size it reproduces Java's frames


def _frozen_map(values: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(values or {}))


@dataclass(frozen=True, slots=True)
class BlobMetadata:
    """One entry of the footer's ``blobs`` list."""

    type: str
    fields: tuple[int, ...]
    snapshot_id: int
    sequence_number: int
    offset: int
    length: int
    compression_codec: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        object.__setattr__(self, "properties", _frozen_map(self.properties))


@dataclass(frozen=True, slots=True)
class PuffinFooter:
    """A Puffin file's metadata: its blobs and properties, plus the footer's size and compression."""

    blobs: tuple[BlobMetadata, ...]
    properties: Mapping[str, str] = field(default_factory=dict, hash=False)
    footer_size: int = 0
    footer_compressed: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "blobs", tuple(self.blobs))
        object.__setattr__(self, "properties", _frozen_map(self.properties))


# reading -----------------------------------------------------------------------------------------


def read_footer(
    source: bytes | bytearray | memoryview | RangeReader,
    *,
    path: str | None = None,
    file_size: int | None = None,
    footer_size: int | None = None,
) -> PuffinFooter:
    """Read and validate a Puffin file's footer, reading only its head magic and its tail.

    ``file_size`` (e.g. from a manifest) saves asking the reader; ``footer_size``, when known, is
    checked against the file. Raises CorruptFileError for anything that is not a valid Puffin footer
    (including a bare deletion-vector blob), UnsupportedFormatError for unknown flags.
    """
    reader = as_reader(source, path)
    path = reader_path(reader, path)
    size = reader.size if file_size is None else file_size
    tail = reader.read_at(size - min(size, _TAIL_READ), min(size, _TAIL_READ))
    head = tail[:8] if len(tail) == size else reader.read_at(0, min(size, 8))
    _check_head(head, size, path)
    if footer_size is None:
        footer_size = _footer_size_from_trailer(tail[-_TRAILER:], size, path)
    elif not _MIN_FOOTER <= footer_size <= size - len(MAGIC):
        raise CorruptFileError(path, f"Invalid footer size {footer_size} for a file of {size} bytes")
    footer = (
        tail[-footer_size:] if footer_size <= len(tail) else reader.read_at(size - footer_size, footer_size)
    )
    return _parse_footer(footer, size, path)


def _check_head(head: bytes, size: int, path: str | None) -> None:
    if head[: len(MAGIC)] == MAGIC and size >= _MIN_FILE:
        return
    if head[: len(MAGIC)] == MAGIC:
        raise CorruptFileError(
            path, f"Not a Puffin file: {size} bytes, the smallest Puffin file has {_MIN_FILE}"
        )
    raise _not_puffin(head, path, "as some legacy writers produced")


def _not_puffin(head: bytes, path: str | None, bare_hint: str) -> CorruptFileError:
    """The error for a file that does not start with the Puffin magic; a bare deletion vector
    (its own magic after the 4-byte length) is named as such, with `bare_hint`."""
    if head[4:8] == dv.MAGIC:
        return CorruptFileError(
            path,
            "Not a Puffin file: it holds a bare deletion-vector-v1 blob without Puffin framing "
            f"(no PFA1 magic, no footer), {bare_hint}",
        )
    return CorruptFileError(
        path, f"Not a Puffin file: expected magic PFA1 at offset 0, found {head[: len(MAGIC)].hex(' ')!r}"
    )


def _footer_size_from_trailer(trailer: bytes, size: int, path: str | None) -> int:
    _expect_magic(trailer, _TRAILER - len(MAGIC), size - len(MAGIC), path)
    payload_size = struct.unpack_from("<i", trailer, 0)[0]
    if payload_size < 0 or payload_size + _MIN_FOOTER > size - len(MAGIC):
        raise CorruptFileError(
            path,
            f"Invalid footer size: payload size field {payload_size} does not fit a file of {size} bytes",
        )
    return payload_size + _MIN_FOOTER


def _expect_magic(data: bytes, at: int, file_offset: int, path: str | None) -> None:
    found = data[at : at + len(MAGIC)]
    if found != MAGIC:
        raise CorruptFileError(
            path,
            f"Invalid file: expected magic at offset {file_offset}: {MAGIC.hex(' ')}, but got {found.hex(' ')}",
        )


def _parse_footer(footer: bytes, size: int, path: str | None) -> PuffinFooter:
    start = size - len(footer)
    _expect_magic(footer, 0, start, path)
    _expect_magic(footer, len(footer) - len(MAGIC), size - len(MAGIC), path)
    payload_size, flags = struct.unpack_from("<iI", footer, len(footer) - _TRAILER)
    if payload_size != len(footer) - _MIN_FOOTER:
        raise CorruptFileError(
            path,
            f"Invalid footer size: footer of {len(footer)} bytes but payload size field {payload_size} "
            f"(expected {len(footer) - _MIN_FOOTER})",
        )
    if flags & ~FLAG_FOOTER_COMPRESSED:
        raise UnsupportedFormatError(f"{path}: Puffin footer flags 0x{flags:08x} set reserved bits")
    payload = footer[len(MAGIC) : len(MAGIC) + payload_size]
    compressed = bool(flags & FLAG_FOOTER_COMPRESSED)
    if compressed:
        payload = _decompress(CODEC_LZ4, payload, path, "footer payload")
    blobs, properties = _parse_file_metadata(payload, path)
    _check_blob_ranges(blobs, start, path)
    return PuffinFooter(blobs, properties, len(footer), compressed)


def _parse_file_metadata(
    payload: bytes, path: str | None
) -> tuple[tuple[BlobMetadata, ...], Mapping[str, str]]:
    try:
        document = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptFileError(path, f"Invalid footer JSON: {error}") from error
    except RecursionError:
        raise CorruptFileError(path, "Invalid footer JSON: nested too deeply") from None
    if not isinstance(document, dict) or not isinstance(document.get("blobs"), list):
        raise CorruptFileError(path, "Invalid footer JSON: expected an object with a 'blobs' list")
    blobs = tuple(_parse_blob(entry, index, path) for index, entry in enumerate(document["blobs"]))
    return blobs, _string_map(document.get("properties"), "file properties", path)


def _parse_blob(entry: object, index: int, path: str | None) -> BlobMetadata:
    if not isinstance(entry, dict):
        raise CorruptFileError(path, f"Invalid footer JSON: blob {index} is not an object")
    blob_type = entry.get("type")
    fields = entry.get("fields")
    codec = entry.get("compression-codec")
    if not isinstance(blob_type, str):
        raise CorruptFileError(path, f"Invalid footer JSON: blob {index} has no string 'type'")
    if not isinstance(fields, list) or not all(_is_int(item) for item in fields):
        raise CorruptFileError(path, f"Invalid footer JSON: blob {index} 'fields' must be a list of ints")
    if codec is not None and not isinstance(codec, str):
        raise CorruptFileError(
            path, f"Invalid footer JSON: blob {index} 'compression-codec' must be a string"
        )
    return BlobMetadata(
        type=blob_type,
        fields=tuple(fields),
        snapshot_id=_required_int(entry, "snapshot-id", index, path),
        sequence_number=_required_int(entry, "sequence-number", index, path),
        offset=_required_int(entry, "offset", index, path, minimum=0),
        length=_required_int(entry, "length", index, path, minimum=0),
        compression_codec=codec,
        properties=_string_map(entry.get("properties"), f"blob {index} properties", path),
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _required_int(
    entry: dict[str, Any], key: str, index: int, path: str | None, minimum: int | None = None
) -> int:
    value = entry.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and (minimum is None or value >= minimum):
        return value
    raise CorruptFileError(
        path, f"Invalid footer JSON: blob {index} '{key}' must be an integer, got {value!r}"
    )


def _string_map(value: object, what: str, path: str | None) -> Mapping[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
        raise CorruptFileError(path, f"Invalid footer JSON: {what} must map strings to strings")
    return value


def _check_blob_ranges(blobs: tuple[BlobMetadata, ...], footer_start: int, path: str | None) -> None:
    for index, blob in enumerate(blobs):
        if blob.offset < len(MAGIC) or blob.offset + blob.length > footer_start:
            raise CorruptFileError(
                path,
                f"Blob {index} ({blob.type}) at offset {blob.offset}, length {blob.length} lies outside "
                f"the blob area [{len(MAGIC)}, {footer_start})",
            )


def read_blob(
    source: bytes | bytearray | memoryview | RangeReader, blob: BlobMetadata, *, path: str | None = None
) -> bytes:
    """The bytes of one blob, decompressed according to its ``compression-codec``."""
    reader = as_reader(source, path)
    path = reader_path(reader, path)
    if blob.offset < 0 or blob.offset + blob.length > reader.size:
        raise CorruptFileError(
            path,
            f"Blob {blob.type} at offset {blob.offset}, length {blob.length} lies past the end of the file",
        )
    data = reader.read_at(blob.offset, blob.length)
    return (
        data if blob.compression_codec is None else _decompress(blob.compression_codec, data, path, blob.type)
    )


def _decompress(codec: str, data: bytes, path: str | None, what: str) -> bytes:
    if codec not in CODECS:
        raise UnsupportedFormatError(f"{path}: {what}: unsupported Puffin compression codec {codec!r}")
    try:
        if codec == CODEC_LZ4:
            return bytes(lz4_frame.decompress(data))
        try:
            return zstandard.ZstdDecompressor().decompress(data)
        except zstandard.ZstdError:
            # The spec wants the content size in the frame; accept frames without it all the same.
            return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    except (RuntimeError, zstandard.ZstdError) as error:
        raise CorruptFileError(path, f"Invalid {codec} data in {what}: {error}") from error


# writing -----------------------------------------------------------------------------------------


def compress(codec: str, data: bytes) -> bytes:
    """One frame of ``codec`` ("zstd" or "lz4") with the content size recorded, as the spec requires."""
    if codec == CODEC_ZSTD:
        compressor = zstandard.ZstdCompressor(level=_ZSTD_LEVEL, write_content_size=True, write_checksum=True)
        return compressor.compress(data)
    if codec == CODEC_LZ4:
        return bytes(lz4_frame.compress(data, store_size=True))
    raise ValidationError(f"unsupported Puffin compression codec {codec!r}; use one of {CODECS}")


class PuffinWriter:
    """Builds a Puffin file in memory: add blobs, then ``finish()`` for the file's bytes."""

    def __init__(self, *, properties: Mapping[str, str] | None = None, compress_footer: bool = False) -> None:
        self._properties = dict(properties or {})
        self._compress_footer = compress_footer
        self._parts: list[bytes] = [MAGIC]
        self._offset = len(MAGIC)
        self._blobs: list[BlobMetadata] = []
        self._footer_size: int | None = None

    def add_blob(
        self,
        blob_type: str,
        data: bytes,
        *,
        fields: Sequence[int],
        snapshot_id: int,
        sequence_number: int,
        compression_codec: str | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> BlobMetadata:
        """Append a blob (compressed with ``compression_codec`` if given); returns its footer entry."""
        if self._footer_size is not None:
            raise ValidationError("PuffinWriter: cannot add a blob after finish()")
        stored = data if compression_codec is None else compress(compression_codec, data)
        blob = BlobMetadata(
            blob_type, tuple(fields), snapshot_id, sequence_number, self._offset, len(stored),
            compression_codec, properties or {},
        )  # fmt: skip
        self._parts.append(stored)
        self._offset += len(stored)
        self._blobs.append(blob)
        return blob

    @property
    def blobs(self) -> tuple[BlobMetadata, ...]:
        """Footer entries of the blobs added so far."""
        return tuple(self._blobs)

    @property
    def footer_size(self) -> int:
        """Size of the footer written by ``finish()`` (magic to magic)."""
        if self._footer_size is None:
            raise ValidationError("PuffinWriter: footer_size is known only after finish()")
        return self._footer_size

    def finish(self) -> bytes:
        """Append the footer and return the whole file."""
        if self._footer_size is not None:
            raise ValidationError("PuffinWriter: finish() was called already")
        payload = footer_payload(self._blobs, self._properties)
        flags = 0
        if self._compress_footer:
            payload, flags = compress(CODEC_LZ4, payload), FLAG_FOOTER_COMPRESSED
        footer = MAGIC + payload + struct.pack("<iI", len(payload), flags) + MAGIC
        self._footer_size = len(footer)
        return b"".join([*self._parts, footer])


def footer_payload(blobs: Iterable[BlobMetadata], properties: Mapping[str, str]) -> bytes:
    """The uncompressed footer JSON: compact, keys in spec order, empty properties omitted (as Java)."""
    document: dict[str, Any] = {"blobs": [_blob_json(blob) for blob in blobs]}
    if properties:
        document["properties"] = dict(properties)
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _blob_json(blob: BlobMetadata) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": blob.type,
        "fields": list(blob.fields),
        "snapshot-id": blob.snapshot_id,
        "sequence-number": blob.sequence_number,
        "offset": blob.offset,
        "length": blob.length,
    }
    if blob.compression_codec is not None:
        entry["compression-codec"] = blob.compression_codec
    if blob.properties:
        entry["properties"] = dict(blob.properties)
    return entry


# deletion vectors in Puffin ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeletionVectorBlob:
    """Where a DV sits in its Puffin file: what a delete manifest entry records about it."""

    referenced_data_file: str
    offset: int  # content_offset
    length: int  # content_size_in_bytes
    cardinality: int  # record_count


def write_deletion_vectors(
    vectors: Iterable[tuple[str, Roaring64 | Iterable[int] | Any]],
    *,
    created_by: str | None = "",
) -> tuple[bytes, tuple[DeletionVectorBlob, ...]]:
    """A Puffin file holding one ``deletion-vector-v1`` blob per (referenced data file, positions).

    Blob metadata follows the spec's DV rules: snapshot-id and sequence-number -1, no codec,
    properties ``referenced-data-file`` and ``cardinality``; ``fields`` is ``[_pos field id]`` as Java
    writes it. ``created_by`` is the file's created-by property: "" (default) writes
    "iceduck version <version>", None leaves it out. Returns the file's bytes and each DV's location,
    in input order.
    """
    if created_by == "":
        created_by = _default_created_by()
    writer = PuffinWriter(properties={PROPERTY_CREATED_BY: created_by} if created_by else None)
    written: list[DeletionVectorBlob] = []
    seen: set[str] = set()
    for data_file, positions in vectors:
        if data_file in seen:
            raise ValidationError(f"{data_file}: at most one deletion vector per data file in a Puffin file")
        bitmap = Roaring64.from_positions(positions)
        blob = writer.add_blob(
            dv.BLOB_TYPE,
            dv.encode_deletion_vector(bitmap),
            fields=(ROW_POSITION_FIELD_ID,),
            snapshot_id=-1,
            sequence_number=-1,
            properties={
                PROPERTY_REFERENCED_DATA_FILE: data_file,
                PROPERTY_CARDINALITY: str(bitmap.cardinality),
            },
        )
        written.append(DeletionVectorBlob(data_file, blob.offset, blob.length, bitmap.cardinality))
        seen.add(data_file)
    return writer.finish(), tuple(written)


def _default_created_by() -> str:
    return f"iceduck version {__version__}"


def deletion_vector_blobs(footer: PuffinFooter, *, path: str | None = None) -> tuple[DeletionVectorBlob, ...]:
    """The ``deletion-vector-v1`` blobs of a footer, checked against the spec's DV metadata rules.

    Other blob types are skipped. A DV blob must have no codec and properties ``referenced-data-file``
    and a non-negative integer ``cardinality``. ``snapshot-id``/``sequence-number`` (-1 by the spec)
    are not enforced: they carry no information a reader uses.
    """
    found = []
    for index, blob in enumerate(footer.blobs):
        if blob.type != dv.BLOB_TYPE:
            continue
        data_file = blob.properties.get(PROPERTY_REFERENCED_DATA_FILE)
        cardinality = blob.properties.get(PROPERTY_CARDINALITY, "")
        if blob.compression_codec is not None:
            raise CorruptFileError(path, f"Deletion vector blob {index} must not be compressed")
        if data_file is None or not cardinality.isdigit():
            raise CorruptFileError(
                path, f"Deletion vector blob {index} needs properties referenced-data-file and cardinality"
            )
        found.append(DeletionVectorBlob(data_file, blob.offset, blob.length, int(cardinality)))
    return tuple(found)


def read_deletion_vector(
    source: bytes | bytearray | memoryview | RangeReader,
    offset: int,
    length: int,
    *,
    path: str | None = None,
    record_count: int | None = None,
    allow_bare: bool = False,
) -> Roaring64:
    """Read and verify the DV at ``offset``/``length`` (a manifest's content_offset/content_size_in_bytes).

    The file must start with the Puffin magic unless ``allow_bare`` is set, which accepts legacy files
    that hold only a bare DV blob. ``record_count`` is checked against the DV's cardinality when given.
    """
    reader = as_reader(source, path)
    path = reader_path(reader, path)
    size = reader.size
    if offset < 0 or length < 0 or offset + length > size:
        raise CorruptFileError(
            path, f"Deletion vector at offset {offset}, length {length} lies outside the file ({size} bytes)"
        )
    if offset <= _HEAD_READ_LIMIT:
        data = reader.read_at(0, offset + length)
        head, blob = data[:8], data[offset:]
    else:
        head, blob = reader.read_at(0, min(size, 8)), reader.read_at(offset, length)
    if not allow_bare:
        _check_puffin_head(head, offset, path)
    return dv.decode_deletion_vector(
        blob, path=path, expected_length=length, expected_cardinality=record_count
    )


def _check_puffin_head(head: bytes, offset: int, path: str | None) -> None:
    if head[: len(MAGIC)] != MAGIC:
        raise _not_puffin(head, path, "pass allow_bare=True to read such legacy files")
    if offset < len(MAGIC):
        raise CorruptFileError(path, f"Deletion vector offset {offset} overlaps the Puffin magic")
