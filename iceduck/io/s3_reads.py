"""What is known of S3 objects, and exact ranged reads of them.

Reads are exact ranges, never read-ahead blocks (measured: s3fs's default 50 MB read-ahead made a
cold full scan move 7-9x the file's bytes, while DuckDB's own ranged reads fetch only the row groups
and columns it needs). Sizes and tails (`SEEN`) are shared by iceduck's own reads and the filesystem
DuckDB reads through; a GET cut short is asked again with a fresh request.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from iceduck.errors import StorageError
from iceduck.io.fileio import RangeReader
from iceduck.io.s3_clients import error_code, is_store_error
from iceduck.io.s3_readers import CutShort, ObjectReader, obstore_is_cut
from iceduck.io.s3_settings import S3Settings

# DuckDB's Parquet reader asks for the last 16 KiB of a file first (seen on the wire). One suffix
# GET of that length tells the object's size, holds its footer for iceduck's own checks and answers
# DuckDB's first read from memory, so a planned file costs no HEAD and no second footer read.
TAIL_BYTES = 16 * 1024
# How long a size learnt by a HEAD answers later questions: one statement's planning plus DuckDB's
# reading (tails of table files, which never change, are kept longer: see _SeenObjects). Writes
# through this module forget what was seen of the object they replace.
_SEEN_TTL_S = 30.0
# Bytes of object tails kept at most (about 4,000 files' footers), and objects.
_SEEN_MAX_BYTES = 64 << 20
_SEEN_MAX_OBJECTS = 65536


@dataclass(frozen=True, slots=True)
class _Seen:
    """What one request learnt about an object: its `info` (s3fs's form) and its last bytes."""

    at: float
    info: dict[str, Any]
    tail_start: int
    tail: bytes

    @property
    def size(self) -> int:
        return int(self.info["size"])

    def slice(self, start: int, end: int) -> bytes | None:
        """Bytes [start, end) if they are all in the tail, else None."""
        if start >= self.tail_start and end <= self.size:
            return self.tail[start - self.tail_start : end - self.tail_start]
        return None


class _SeenObjects:
    """What was learnt about objects, keyed by (settings, bucket/key): shared by iceduck's own reads
    and the filesystem DuckDB reads through, so a footer iceduck checked is not fetched again by
    DuckDB, nor a size asked twice.

    Tails come from opening table files (data, delete, Puffin files), which Iceberg never changes:
    they are kept until the budget (`_SEEN_MAX_BYTES`, `_SEEN_MAX_OBJECTS`) pushes them out, oldest
    first. Sizes from a HEAD (any path DuckDB asks about) last `_SEEN_TTL_S`. Every ranged GET
    after them carries `If-Match: <ETag>`, so an object replaced behind iceduck's back is an error,
    never a mix of old and new bytes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[tuple[S3Settings, str], _Seen] = {}
        self._bytes = 0

    def get(self, settings: S3Settings, key: str) -> _Seen | None:
        with self._lock:
            found = self._items.get((settings, key))
            if found is None or found.tail or time.monotonic() - found.at < _SEEN_TTL_S:
                return found
            self._drop((settings, key))
            return None

    def put(
        self, settings: S3Settings, key: str, info: dict[str, Any], tail_start: int, tail: bytes
    ) -> _Seen:
        seen = _Seen(time.monotonic(), info, tail_start, tail)
        with self._lock:
            self._drop((settings, key))
            self._items[(settings, key)] = seen
            self._bytes += len(tail)
            while self._items and (self._bytes > _SEEN_MAX_BYTES or len(self._items) > _SEEN_MAX_OBJECTS):
                self._drop(next(iter(self._items)))
        return seen

    def _drop(self, k: tuple[S3Settings, str]) -> None:
        old = self._items.pop(k, None)
        if old is not None:
            self._bytes -= len(old.tail)

    def forget(self, settings: S3Settings | None = None, key: str | None = None) -> None:
        """Forget one object (all of them when no key is given)."""
        with self._lock:
            if key is None:
                self._items.clear()
                self._bytes = 0
            elif settings is None:
                for k in [k for k in self._items if k[1] == key]:
                    self._drop(k)
            else:
                self._drop((settings, key))


# Process-wide on purpose: sizes and tails of objects keyed by their settings and key, kept a few
# seconds (`_SEEN_TTL_S`); table files are immutable, so what one lake saw holds for another.
SEEN = _SeenObjects()


def forget_seen() -> None:
    """Forget every object size and tail kept (for cold-cache measurements)."""
    SEEN.forget()


def _content_range(header: str | None) -> tuple[int, int, int] | None:
    """(first, last, size) of `Content-Range: bytes first-last/size`; None when absent."""
    if not header:
        return None
    unit, _, rest = header.partition(" ")
    span, _, total = rest.partition("/")
    first, _, last = span.partition("-")
    if unit != "bytes" or not (first.isdigit() and last.isdigit() and total.isdigit()):
        raise StorageError(f"unexpected Content-Range from the object store: {header!r}")
    return int(first), int(last), int(total)


class _CutShortAgainError(StorageError):
    """Every attempt of a GET was cut short: the store or the network is failing now."""


# Attempts of one ranged GET whose answer is cut short or whose connection fails (each a fresh
# request), and the pause before the second (doubling after).
_READ_ATTEMPTS = 3
_READ_RETRY_PAUSE_S = 0.05


def _is_cut(e: BaseException) -> bool:
    """Whether a failed GET is worth a fresh request: its body ended early or its connection
    failed (not an answer of the store such as 404, 403 or 412)."""
    if isinstance(e, CutShort | ConnectionError | TimeoutError) or obstore_is_cut(e):
        return True
    module = type(e).__module__.split(".")[0]
    if module == "aiohttp":  # ClientPayloadError, ServerDisconnectedError, ...
        return True
    return module in ("botocore", "aiobotocore") and type(e).__name__ in (
        "ResponseStreamingError",
        "IncompleteReadError",
        "ReadTimeoutError",
        "AioReadTimeoutError",
        "ConnectionClosedError",
        "EndpointConnectionError",
    )


def _fetch(rd: ObjectReader, key: str, wanted: str, etag: str | None = None) -> tuple[dict[str, Any], bytes]:
    """One ranged GET of object `key` (bucket/key), asked again with a fresh request when its
    answer is cut short or its connection fails (up to `_READ_ATTEMPTS`): nothing of a cut answer
    is returned or kept. After the last attempt, a `StorageError` naming the object."""
    for attempt in range(_READ_ATTEMPTS):
        try:
            return rd.get(key, wanted, etag)
        except Exception as e:
            if not _is_cut(e):
                raise
            if attempt == _READ_ATTEMPTS - 1:
                detail = str(e).splitlines()[0] if str(e) else type(e).__name__
                raise _CutShortAgainError(
                    f"s3://{key}: the object store's answer to GET {wanted} was cut short "
                    f"{_READ_ATTEMPTS} times ({detail})"
                ) from None
            time.sleep(_READ_RETRY_PAUSE_S * 2**attempt)
    raise AssertionError("unreachable")


def _get_tail(rd: ObjectReader, key: str, wanted: str) -> tuple[dict[str, Any], int, int, bytes]:
    """(response, object size, first byte, bytes) of one ranged GET."""
    response, data = _fetch(rd, key, wanted)
    found = _content_range(response.get("ContentRange"))
    if found is None:  # the whole object came back (200)
        return response, len(data), 0, data
    first, last, size = found
    if len(data) != last - first + 1:
        raise StorageError(f"{key}: the object store sent {len(data)} bytes for {first}-{last}")
    return response, size, first, data


def seen_object(
    settings: S3Settings, rd: ObjectReader, key: str, *, tail: bool, expected_size: int | None = None
) -> _Seen:
    """What is known of object `key` (bucket/key): kept, else asked. With `tail`, one GET of the
    last `TAIL_BYTES` (size, LastModified and ETag come with it); without, a HEAD.

    The tail is asked as a suffix range, or at `expected_size` (what metadata records) when given.
    The answer's Content-Range is checked: a wrong expected size, or a store that misreads suffix
    ranges (s3rver sends the first bytes), costs one more GET of the true tail, never wrong bytes
    (obstore refuses the misread answer itself: then a HEAD tells the size first)."""
    found = SEEN.get(settings, key)
    if found is not None and (found.tail or not tail or found.size == 0):
        return found
    if tail and expected_size != 0:
        wanted = (
            f"bytes=-{TAIL_BYTES}"
            if expected_size is None
            else f"bytes={max(0, expected_size - TAIL_BYTES)}-{expected_size - 1}"
        )
        try:
            response, size, first, data = _get_tail(rd, key, wanted)
        except (FileNotFoundError, _CutShortAgainError):
            raise
        except Exception as e:
            if not is_store_error(e) and type(e).__module__.split(".")[0] != "aiohttp":
                raise
            if expected_size is not None:  # past the end: the recorded size is wrong
                return seen_object(settings, rd, key, tail=True)
            # ask plainly (an empty object has no last bytes; some stores fail on that)
            info = rd.info(key)
            if int(info.get("size") or 0) == 0:
                return SEEN.put(settings, key, info, 0, b"")
            response, size, first, data = {}, int(info["size"]), 0, b""
        if size > 0 and (first + len(data) != size or (first > 0 and len(data) < TAIL_BYTES)):
            first = max(0, size - TAIL_BYTES)
            response, size, first, data = _get_tail(rd, key, f"bytes={first}-{size - 1}")
        if size >= 0 and first + len(data) == size:
            info = {
                "name": key,
                "size": size,
                "type": "file",
                "LastModified": response.get("LastModified"),
                "ETag": response.get("ETag"),
            }
            return SEEN.put(settings, key, info, first, data)
    info = rd.info(key)
    return SEEN.put(settings, key, info, int(info.get("size") or 0), b"")


def read_range(settings: S3Settings, rd: ObjectReader, key: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of an object: from its kept tail when they are there, else one ranged GET
    (`If-Match` the ETag seen before: an object replaced since is refused, not mixed)."""
    found = SEEN.get(settings, key)
    if found is None:
        return rd.read_plain(key, start, end)
    cached = found.slice(start, end)
    if cached is not None:
        return cached
    etag = found.info.get("ETag")
    if not etag:
        return rd.read_plain(key, start, end)
    try:
        _, data = _fetch(rd, key, f"bytes={start}-{end - 1}", etag)
    except Exception as e:
        if error_code(e) == "PreconditionFailed" or (isinstance(e, OSError) and "Precondition" in str(e)):
            SEEN.forget(settings, key)
            raise StorageError(f"s3://{key}: the object changed while it was being read") from None
        raise
    return data


def read_all(rd: ObjectReader, key: str) -> bytes:
    """The whole object (one GET), asked again like `_fetch` when the answer is cut short."""
    for attempt in range(_READ_ATTEMPTS):
        try:
            return rd.read_all(key)
        except Exception as e:
            if not _is_cut(e) or attempt == _READ_ATTEMPTS - 1:
                raise
            time.sleep(_READ_RETRY_PAUSE_S * 2**attempt)
    raise AssertionError("unreachable")


class S3RangeReader(RangeReader):
    """Exact ranged reads of an S3 object (one GET, or the kept tail; see `read_range`)."""

    def __init__(self, settings: S3Settings, fs: ObjectReader, key: str, size: int) -> None:
        super().__init__(size)
        self._settings = settings
        self._fs = fs
        self._key = key

    def _fetch(self, start: int, end: int) -> bytes:
        return read_range(self._settings, self._fs, self._key, start, end)


__all__ = ["SEEN", "TAIL_BYTES", "S3RangeReader", "forget_seen", "read_all", "read_range", "seen_object"]
