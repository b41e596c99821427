"""The FileIO interface and its local-file implementation.

Everything above `iceduck.io` reads and writes table files through a `FileIO`, so codecs and
planners stay testable on bytes and other storage can be added later behind the same interface.

Paths may be plain (absolute or relative), `file:/abs` or `file:///abs`; `LocalFileIO` refuses any
other scheme with `UnsupportedFormatError` naming the path. Paths it returns (from `list_prefix`)
are in the canonical plain form of `iceduck.io.paths.normalize_path`.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import os
import shutil
import stat
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any, ParamSpec, Protocol, Self, TypeVar, runtime_checkable

from iceduck.errors import (
    AlreadyExistsError,
    CorruptFileError,
    FileNotFoundInTableError,
    IcebergError,
    StorageAccessDeniedError,
    StorageError,
    UnsupportedFormatError,
)
from iceduck.io.paths import join_path, normalize_path, parent_path, split_scheme


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One file found by `FileIO.list_prefix`: its path, size in bytes and modification time."""

    path: str
    size: int
    mtime_ms: int


@dataclass(frozen=True, slots=True)
class DeleteOutcome:
    """What happened to one file of a batch delete: `deleted`, `not_found`, `denied` or `other`
    (with the store's reason in `detail`)."""

    path: str
    status: str
    detail: str = ""


@runtime_checkable
class InputFile(Protocol):
    """An open file with random access; use it as a context manager so it gets closed."""

    @property
    def path(self) -> str:
        """The path the file was opened with."""
        ...

    @property
    def size(self) -> int:
        """Length of the file in bytes."""
        ...

    def read_at(self, offset: int, length: int) -> bytes:
        """Exactly `length` bytes from `offset`; `CorruptFileError` if the file is shorter."""
        ...

    def close(self) -> None:
        """Release the file handle."""
        ...

    def __enter__(self) -> InputFile: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class FileIO(Protocol):
    """Reading and writing the files of a table."""

    def read(self, path: str) -> bytes:
        """The whole file; `FileNotFoundInTableError` if it does not exist."""
        ...

    def open_input(self, path: str, *, expected_size: int | None = None) -> InputFile:
        """The file opened for random access (e.g. reading a Puffin footer from the tail).

        `expected_size` is the size metadata records, if known: a store may use it to read the
        file's tail in one request; the file's true size still rules."""
        ...

    def exists(self, path: str) -> bool:
        """True if a file (not a folder) exists at `path`."""
        ...

    def size(self, path: str) -> int:
        """Length of the file in bytes."""
        ...

    def list_prefix(self, prefix: str) -> Iterator[FileInfo]:
        """Every file under the folder `prefix`, recursively, in path order; none if it is absent."""
        ...

    def write_new(self, path: str, data: bytes) -> None:
        """Create `path` holding `data`; `AlreadyExistsError` if it exists. Never seen half-written."""
        ...

    def write_atomic(self, path: str, data: bytes) -> None:
        """Create or replace `path` holding `data`; readers see the old or the new content."""
        ...

    def delete(self, path: str) -> None:
        """Remove the file; `FileNotFoundInTableError` if it does not exist."""
        ...

    def open_stream(self, path: str) -> IO[bytes]:
        """A seekable binary file object for libraries that want one (pyarrow); close it."""
        ...

    def put_file(self, local: str, path: str) -> None:
        """Make `path` hold the content of the local file `local` (never seen half-written)."""
        ...

    def stamp(self, path: str) -> tuple[int, int] | None:
        """(size, modification time) identifying the file's content for caches; None if absent."""
        ...

    def delete_many(self, paths: Sequence[str]) -> list[DeleteOutcome]:
        """Remove files, reporting each one's outcome (a partial batch is not "done")."""
        ...


_PARQUET_MAGIC = b"PAR1"


def parquet_footer(f: InputFile) -> bytes:
    """A Parquet file's footer framed as the smallest file a Parquet reader takes its metadata from
    (`PAR1`, metadata, length, `PAR1`): two reads at the end of the file, which an S3 input file
    answers from the tail it fetched on opening (no read-ahead block, no second request).
    `CorruptFileError` naming the file when the end is not a Parquet footer."""
    size = f.size
    if size < 12:
        raise CorruptFileError(f.path, f"not a Parquet file ({size} bytes)")
    end = f.read_at(size - 8, 8)
    length = int.from_bytes(end[:4], "little")
    if end[4:] != _PARQUET_MAGIC or length > size - 12:
        raise CorruptFileError(f.path, "not a Parquet file (no footer at the end)")
    return _PARQUET_MAGIC + f.read_at(size - 8 - length, length) + end


def local_path(path: str) -> str:
    """The OS path for a local `path`; `UnsupportedFormatError` naming it for other schemes."""
    if path[:1] == "/" and "//" not in path and "/./" not in path and not path.endswith(("/", "/.")):
        return path  # a plain absolute path without empty or "." segments is its canonical form
    scheme, _ = split_scheme(path)
    if scheme not in (None, "file"):
        raise UnsupportedFormatError(
            f"{path}: scheme '{scheme}:' is not a local path (local files are plain paths, file:/abs "
            "and file:///abs)"
        )
    return normalize_path(path)


def _not_found(path: str) -> FileNotFoundInTableError:
    return FileNotFoundInTableError(f"{path}: file not found")


def _fsync_dir(folder: str) -> None:
    # Makes a new directory entry durable; not every platform/file system allows it.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_file(path: str) -> None:
    """Flush a file another writer (DuckDB's COPY) wrote to stable storage."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_folders(folder: str) -> None:
    """`os.makedirs`, then each new folder's entry made durable in its parent."""
    missing: list[str] = []
    at = folder
    while at and not os.path.isdir(at):
        missing.append(at)
        parent = os.path.dirname(at)
        if parent == at:
            break
        at = parent
    os.makedirs(folder, exist_ok=True)
    for made in reversed(missing):
        _fsync_dir(os.path.dirname(made))


def _write_temp(folder: str, name: str, data: bytes) -> str:
    """Write `data` to a fresh hidden file next to the target, fsync'ed; return its path."""
    tmp = os.path.join(folder, f".{name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    return tmp


@contextlib.contextmanager
def _staged(path: str, data: bytes) -> Iterator[tuple[str, str]]:
    """`data` staged for `path`: (a fresh fsync'ed temporary file beside it, the target) for the
    caller to move into place (link or rename). The temporary file never outlives the block; once
    the move is done the folder is fsync'ed, so the new name is durable too."""
    target = local_path(path)
    folder = parent_path(target)
    _make_folders(folder)
    tmp = _write_temp(folder, os.path.basename(target), data)
    try:
        yield tmp, target
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # gone already after a rename
    _fsync_dir(folder)


def check_read_range(path: str, size: int, offset: int, length: int) -> None:
    """Refuse a read outside a file of `size` bytes before any I/O (every InputFile's first check)."""
    if offset < 0 or length < 0:
        raise ValueError(f"{path}: negative offset {offset} or length {length}")
    if offset + length > size:
        raise CorruptFileError(
            path, f"truncated: wanted {length} bytes at offset {offset}, file has {size} bytes"
        )


def check_read_length(path: str, offset: int, length: int, got: int) -> None:
    """Refuse a read that did not return exactly `length` bytes (the file shrank, the store cut the answer)."""
    if got != length:
        raise CorruptFileError(
            path, f"truncated while reading: wanted {length} bytes at offset {offset}, got {got}"
        )


class RangeReader(io.RawIOBase):
    """A seekable read-only file object over a stored object for pyarrow and DuckDB: each read is
    exactly the range asked for (`_fetch`, one request per store), never a read-ahead block.

    One object is read by several threads at once: DuckDB 2.0 shares one handle per file between
    its threads and reads a range as two Python calls, `seek(at)` then `read(n)`. Another thread
    can run between the two (the interpreter hands the GIL over at a call when a thread has waited
    for it), so a shared position would let a read start at another thread's offset and return
    other bytes (measured: wrong sums from cold 2-thread scans, no error). A `seek` is therefore
    remembered for the thread that made it, and that thread's next read starts there; a read with
    no seek of its own on its thread continues from the shared position (sequential use)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self._pos = 0
        self._sought = threading.local()

    def _fetch(self, start: int, end: int) -> bytes:
        """The object's bytes [start, end)."""
        raise NotImplementedError

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def _position(self) -> int:
        sought: int | None = getattr(self._sought, "pos", None)
        return self._pos if sought is None else sought

    def tell(self) -> int:
        return self._position()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position(), io.SEEK_END: self.size}[whence]
        pos = max(0, base + offset)
        self._sought.pos = pos
        self._pos = pos
        return pos

    def read(self, size: int | None = -1) -> bytes:
        start = self._position()
        self._sought.pos = None
        end = self.size if size is None or size < 0 else min(self.size, start + size)
        if end <= start:
            return b""
        data = self._fetch(start, end)
        self._pos = start + len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)


class OpenedInputFile:
    """What the `InputFile`s of every store share: the path and size fixed when the file was
    opened, `read_at`'s bounds checks around the store's own `read_range`, closing on exit."""

    __slots__ = ("_path", "_size")

    def __init__(self, path: str, size: int) -> None:
        self._path = path
        self._size = size

    @property
    def path(self) -> str:
        """The path the file was opened with."""
        return self._path

    @property
    def size(self) -> int:
        """Length of the file in bytes (when it was opened)."""
        return self._size

    def read_at(self, offset: int, length: int) -> bytes:
        """Exactly `length` bytes from `offset`; `CorruptFileError` if the file is shorter."""
        check_read_range(self._path, self._size, offset, length)
        data = self.read_range(offset, length) if length else b""
        check_read_length(self._path, offset, length, len(data))
        return data

    def read_range(self, offset: int, length: int) -> bytes:
        """Up to `length` bytes from `offset` (within the size, `length` > 0): the store's read."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the file holds (idempotent)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class LocalInputFile(OpenedInputFile):
    """A local file opened for positional reads (`os.pread`: no shared file offset)."""

    __slots__ = ("_fd",)

    def __init__(self, path: str) -> None:
        os_path = local_path(path)
        try:
            fd = os.open(os_path, os.O_RDONLY)
        except FileNotFoundError:
            raise _not_found(path) from None
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, f"{path}: is a folder, not a file")
        except BaseException:
            os.close(fd)
            raise
        super().__init__(path, st.st_size)
        self._fd: int | None = fd

    def read_range(self, offset: int, length: int) -> bytes:
        if self._fd is None:
            raise ValueError(f"{self._path}: read from a closed file")
        chunks = []
        got = 0
        while got < length:
            chunk = os.pread(self._fd, length - got, offset + got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        """Release the file handle (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _refusals(what: str, at: int = 1) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """A file system refusal (permission denied, a read-only file system) of a local file operation
    becomes `StorageAccessDeniedError` naming the path asked for (argument `at`; not a temporary
    name), as the object stores' refusals do: one line, no bare built-in exception."""

    def wrap(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(fn)
        def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return fn(*args, **kwargs)
            except OSError as e:
                path = args[at] if len(args) > at else kwargs.get("path")
                denied = access_denied(e, str(path), what)
                if denied is None:
                    raise
                raise denied from None

        return run

    return wrap


def access_denied(e: OSError, path: str, what: str) -> StorageAccessDeniedError | None:
    """The one-line error for a local file system refusal (permission denied, a read-only file
    system) of `what` at `path`; None for any other `OSError`."""
    if not isinstance(e, PermissionError) and e.errno != errno.EROFS:
        return None
    why = "permission denied" if isinstance(e, PermissionError) else "read-only file system"
    return StorageAccessDeniedError(f"{path}: {why} ({what})")


def _is_file_not_found(e: BaseException) -> bool:
    return isinstance(e, FileNotFoundError)


@dataclass(frozen=True, slots=True)
class StoreErrors:
    """How an object store's client libraries fail, and the one way every store reports it: one
    line naming the file (not found, access denied, or the first line of what the store said).

    `is_store_error` says which exceptions are the store's (the others, bugs among them, pass
    through unchanged); `is_denied` which of those refuse access, and `denied_by(path)` who refused
    and what to check; `is_missing` which say the object does not exist.
    """

    is_store_error: Callable[[BaseException], bool]
    is_denied: Callable[[BaseException], bool]
    denied_by: Callable[[str], str]
    is_missing: Callable[[BaseException], bool] = _is_file_not_found

    def error(self, path: str, e: BaseException) -> IcebergError:
        """The one-line iceduck error for the store's exception `e` at `path`."""
        if self.is_missing(e):
            return FileNotFoundInTableError(f"{path}: file not found")
        if self.is_denied(e):
            return StorageAccessDeniedError(f"{path}: access denied by {self.denied_by(path)}")
        text = str(e).strip()
        detail = text.splitlines()[0] if text else type(e).__name__
        return StorageError(f"{path}: object store error: {detail}")

    @contextlib.contextmanager
    def translated(self, path: str) -> Iterator[None]:
        """Run a request on `path`: the store's exceptions leave it as `error(path, e)`."""
        try:
            yield
        except IcebergError:
            raise
        except Exception as e:
            if not self.is_store_error(e):
                raise
            raise self.error(path, e) from None


class LocalFileIO:
    """`FileIO` on the local file system."""

    @_refusals("reading")
    def read(self, path: str) -> bytes:
        """The whole file; `FileNotFoundInTableError` if it does not exist."""
        try:
            with open(local_path(path), "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise _not_found(path) from None
        except IsADirectoryError:  # a metadata file replaced by a folder: the one-line error, not a 500
            raise FileNotFoundInTableError(f"{path}: is a folder, not a file") from None

    @_refusals("reading")
    def open_input(self, path: str, *, expected_size: int | None = None) -> LocalInputFile:
        """The file opened for positional reads; close it (or use `with`)."""
        return LocalInputFile(path)

    def exists(self, path: str) -> bool:
        """True if a file (not a folder) exists at `path`."""
        return os.path.isfile(local_path(path))

    def size(self, path: str) -> int:
        """Length of the file in bytes."""
        try:
            return os.stat(local_path(path)).st_size
        except FileNotFoundError:
            raise _not_found(path) from None

    def list_prefix(self, prefix: str) -> Iterator[FileInfo]:
        """Every file under the folder `prefix`, recursively, in path order (symlinked folders
        are not followed); nothing if the folder does not exist."""
        root = local_path(prefix)
        yield from self._walk(root)

    def _walk(self, folder: str) -> Iterator[FileInfo]:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return
        for entry in entries:
            path = join_path(folder, entry.name)
            if entry.is_dir(follow_symlinks=False):
                yield from self._walk(path)
            elif entry.is_file():
                try:
                    st = entry.stat()
                except FileNotFoundError:
                    continue  # removed while listing
                yield FileInfo(path, st.st_size, st.st_mtime_ns // 1_000_000)

    @_refusals("writing")
    def write_new(self, path: str, data: bytes) -> None:
        """Create `path` holding `data`, fsync'ed; `AlreadyExistsError` if it exists.

        The content goes to a temporary file first and is then hard-linked to `path`: linking
        fails if `path` exists, so the create is exclusive and nobody sees a half-written file.
        Where hard links are not supported, falls back to an exclusive create.
        """
        with _staged(path, data) as (tmp, target):
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise AlreadyExistsError(f"{path}: file exists already") from None
            except OSError as e:
                if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                    raise
                self._write_exclusive(path, target, data)

    @staticmethod
    def _write_exclusive(path: str, target: str, data: bytes) -> None:
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise AlreadyExistsError(f"{path}: file exists already") from None
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(target)
            raise

    @_refusals("writing")
    def write_atomic(self, path: str, data: bytes) -> None:
        """Create or replace `path` holding `data` (temporary file, fsync, rename)."""
        with _staged(path, data) as (tmp, target):
            os.replace(tmp, target)

    @_refusals("deleting")
    def delete(self, path: str) -> None:
        """Remove the file; `FileNotFoundInTableError` if it does not exist."""
        try:
            os.remove(local_path(path))
        except FileNotFoundError:
            raise _not_found(path) from None

    @_refusals("reading")
    def open_stream(self, path: str) -> IO[bytes]:
        """The file opened for reading in binary mode."""
        try:
            return open(local_path(path), "rb")
        except FileNotFoundError:
            raise _not_found(path) from None

    @_refusals("writing", at=2)
    def put_file(self, local: str, path: str) -> None:
        """Move (or copy, across file systems) the local file `local` to `path`, creating folders;
        durable when it returns (content, name and new folders fsync'ed), as a commit needs of
        every file before its metadata can point at it."""
        target = local_path(path)
        folder = parent_path(target)
        _make_folders(folder)
        try:
            _fsync_file(local)
            os.rename(local, target)
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
            tmp = os.path.join(folder, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
            shutil.copyfile(local, tmp)
            _fsync_file(tmp)
            os.replace(tmp, target)
        _fsync_dir(folder)

    def stamp(self, path: str) -> tuple[int, int] | None:
        """(size, mtime in ns): a rewritten local file gets a new stamp."""
        try:
            st = os.stat(local_path(path))
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    def delete_many(self, paths: Sequence[str]) -> list[DeleteOutcome]:
        """Remove each file; one outcome per path."""
        out = []
        for p in paths:
            try:
                os.remove(local_path(p))
                out.append(DeleteOutcome(p, "deleted"))
            except FileNotFoundError:
                out.append(DeleteOutcome(p, "not_found"))
            except PermissionError as e:
                out.append(DeleteOutcome(p, "denied", e.strerror or "permission denied"))
            except OSError as e:
                out.append(DeleteOutcome(p, "other", e.strerror or str(e)))
        return out
