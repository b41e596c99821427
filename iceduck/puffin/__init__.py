"""Puffin files and deletion vectors: the portable 64-bit Roaring format, the ``deletion-vector-v1`` blob,
and the Puffin container (footer reader, blob reader, writer, DV helpers). All pure: bytes in, values out.
"""

from __future__ import annotations

from iceduck.puffin.deletion_vector import decode_deletion_vector, encode_deletion_vector
from iceduck.puffin.puffin import (
    BlobMetadata,
    DeletionVectorBlob,
    PuffinFooter,
    PuffinWriter,
    compress,
    deletion_vector_blobs,
    footer_payload,
    read_blob,
    read_deletion_vector,
    read_footer,
    write_deletion_vectors,
)
from iceduck.puffin.ranged import BytesReader, LocalFileReader, RangeReader
from iceduck.puffin.roaring64 import MAX_POSITION, Roaring64, decode_roaring64, encode_roaring64

__all__ = [
    "MAX_POSITION",
    "BlobMetadata",
    "BytesReader",
    "DeletionVectorBlob",
    "LocalFileReader",
    "PuffinFooter",
    "PuffinWriter",
    "RangeReader",
    "Roaring64",
    "compress",
    "decode_deletion_vector",
    "decode_roaring64",
    "deletion_vector_blobs",
    "encode_deletion_vector",
    "encode_roaring64",
    "footer_payload",
    "read_blob",
    "read_deletion_vector",
    "read_footer",
    "write_deletion_vectors",
]
