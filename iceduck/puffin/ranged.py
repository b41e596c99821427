"""Byte-range readers: the smallest interface the Puffin codec needs to read a file's tail and blobs.

A Puffin reader only ever asks for a few byte ranges (the footer at the end, then single blobs), so
it takes anything with a ``size`` and ``read_at(offset, length)``. An object store's input file can
satisfy this protocol without copying the whole object.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from iceduck.errors import CorruptFileError


@runtime_checkable
class RangeReader(Protocol):
    """Random access to the bytes of one file."""

    @property
    def size(self) -> int:
        """Total length of the file in bytes."""
        ...

    def read_at(self, offset: int, length: int) -> bytes:
        """Exactly ``length`` bytes starting at ``offset`` (raise if the file is shorter)."""
        ...


def _check_range(path: str | None, offset: int, length: int, size: int) -> None:
    if offset < 0 or length < 0 or offset + length > size:
        raise CorruptFileError(
            path, f"read of {length} bytes at offset {offset} is outside the file ({size} bytes)"
        )


@dataclass(frozen=True, slots=True)
class BytesReader:
    """A :class:`RangeReader` over bytes already in memory."""

    data: bytes
    path: str | None = None

    @property
    def size(self) -> int:
        """Length of the data."""
        return len(self.data)

    def read_at(self, offset: int, length: int) -> bytes:
        """Slice ``length`` bytes at ``offset``."""
        _check_range(self.path, offset, length, len(self.data))
        return self.data[offset : offset + length]


@dataclass(frozen=True, slots=True)
class LocalFileReader:
    """A :class:`RangeReader` over a local file; each read opens the file (no handle to leak)."""

    path: str

    @property
    def size(self) -> int:
        """Current size of the file on disk."""
        return os.path.getsize(self.path)

    def read_at(self, offset: int, length: int) -> bytes:
        """Read ``length`` bytes at ``offset``."""
        with open(self.path, "rb") as handle:
            handle.seek(offset)
            data = handle.read(length)
        if len(data) != length:
            raise CorruptFileError(
                self.path, f"read of {length} bytes at offset {offset} returned {len(data)} (file truncated?)"
            )
        return data


def as_reader(source: bytes | bytearray | memoryview | RangeReader, path: str | None = None) -> RangeReader:
    """Wrap in-memory bytes as a reader; pass readers through unchanged."""
    if isinstance(source, bytes | bytearray | memoryview):
        return BytesReader(bytes(source), path)
    return source


def reader_path(reader: RangeReader, path: str | None) -> str | None:
    """The path to name in errors: the explicit one, else the reader's own ``path`` if it has one."""
    if path is not None:
        return path
    own = getattr(reader, "path", None)
    return own if isinstance(own, str) else None
