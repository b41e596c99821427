"""The one FileIO every layer uses: local paths, `file:` URIs, S3 (`s3://`, `s3a://`, `s3n://`),
GCS (`gs://`, `gcs://`) and Azure (`az://`, `abfs://`, `abfss://`).

`default_io()` is shared by everything that is not handed a FileIO of its own; it dispatches each
call on the path's scheme. `connection_io()` makes the FileIO of one lake (connection): the same
dispatch, with S3, GCS and Azure settings of its own (registries whose parents are the process's),
so one connection's `CREATE SECRET` or vended credentials never reach another's reads. Schemes
iceduck does not reach (hdfs://, ...) fail
with one line naming the path and what is supported.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import IO

from iceduck.errors import UnsupportedFormatError
from iceduck.io.fileio import DeleteOutcome, FileInfo, FileIO, InputFile, LocalFileIO, local_path
from iceduck.io.fsspec_store import REGISTRY as STORE_REGISTRY
from iceduck.io.fsspec_store import STORE_SCHEMES, StoreFileIO, StoreRegistry, duckdb_spelling, is_store_path
from iceduck.io.paths import normalize_path, split_scheme
from iceduck.io.s3 import S3FileIO
from iceduck.io.s3_settings import REGISTRY, S3_SCHEMES, S3Registry, bucket_key, is_s3

SUPPORTED = "local paths, file://, s3:// (s3a://, s3n://), gs:// (gcs://), az://, abfs:// and abfss://"


def is_remote(path: str) -> bool:
    """True for object-store paths (anything with a scheme other than `file:`)."""
    scheme = split_scheme(path)[0]
    return scheme is not None and scheme != "file"


def absolute(path: str) -> str:
    """The canonical absolute form: local paths made absolute, URIs normalised."""
    if is_remote(path):
        return normalize_path(path)
    return normalize_path(os.path.abspath(local_path(path)))


class StorageFileIO:
    """`FileIO` over local files, S3, GCS and Azure, chosen per path by its scheme."""

    def __init__(
        self, local: LocalFileIO | None = None, s3: S3FileIO | None = None, store: StoreFileIO | None = None
    ) -> None:
        self.local = local or LocalFileIO()
        self.s3 = s3 or S3FileIO()
        self.store = store or StoreFileIO()

    @property
    def store_registry(self) -> StoreRegistry:
        """The GCS and Azure settings this FileIO reaches those stores with."""
        return self.store.registry

    @property
    def registry(self) -> S3Registry:
        """The S3 settings this FileIO reaches S3 with."""
        return self.s3.registry

    def _io(self, path: str) -> FileIO:
        scheme = split_scheme(path)[0]
        if scheme is None or scheme == "file":
            return self.local
        if scheme in S3_SCHEMES:
            return self.s3
        if scheme in STORE_SCHEMES:
            return self.store
        raise UnsupportedFormatError(
            f"{path}: {scheme}:// storage is not supported yet (iceduck reads {SUPPORTED})"
        )

    def read(self, path: str) -> bytes:
        """The whole file; `FileNotFoundInTableError` if it does not exist."""
        return self._io(path).read(path)

    def open_input(self, path: str, *, expected_size: int | None = None) -> InputFile:
        """The file opened for random access."""
        return self._io(path).open_input(path, expected_size=expected_size)

    def open_stream(self, path: str) -> IO[bytes]:
        """A seekable binary file object."""
        return self._io(path).open_stream(path)

    def exists(self, path: str) -> bool:
        """True if a file exists at `path`."""
        return self._io(path).exists(path)

    def size(self, path: str) -> int:
        """Length of the file in bytes."""
        return self._io(path).size(path)

    def stamp(self, path: str) -> tuple[int, int] | None:
        """What identifies the file's content for caches."""
        return self._io(path).stamp(path)

    def list_prefix(self, prefix: str) -> Iterator[FileInfo]:
        """Every file under the folder `prefix`, recursively, in path order."""
        return self._io(prefix).list_prefix(prefix)

    def list_children(self, prefix: str) -> tuple[list[str], list[str]]:
        """(sub-folder names, file names) one level below the folder `prefix`, each sorted."""
        if split_scheme(prefix)[0] in S3_SCHEMES:
            return self.s3.list_children(prefix)
        if is_store_path(prefix):
            return self.store.list_children(prefix)
        try:
            entries = list(os.scandir(local_path(prefix)))
        except (FileNotFoundError, NotADirectoryError):
            return [], []
        return sorted(e.name for e in entries if e.is_dir()), sorted(e.name for e in entries if e.is_file())

    def write_new(self, path: str, data: bytes) -> None:
        """Create `path`; `AlreadyExistsError` if it exists; never seen half-written."""
        self._io(path).write_new(path, data)

    def create_exclusive(self, path: str, data: bytes) -> None:
        """Create the object `path` with the store's create-only condition alone (no check first):
        `AlreadyExistsError` when the store refuses. Object stores only."""
        io = self._io(path)
        if io is self.local:
            raise UnsupportedFormatError(f"{path}: create_exclusive is for object-store paths")
        io.create_exclusive(path, data)  # type: ignore[attr-defined]

    def write_atomic(self, path: str, data: bytes) -> None:
        """Create or replace `path`; readers see the old or the new content."""
        self._io(path).write_atomic(path, data)

    def put_file(self, local: str, path: str) -> None:
        """Make `path` hold the local file `local` (moved when both are local)."""
        self._io(path).put_file(local, path)

    def delete(self, path: str) -> None:
        """Remove the file; `FileNotFoundInTableError` if it does not exist."""
        self._io(path).delete(path)

    def delete_many(self, paths: Sequence[str]) -> list[DeleteOutcome]:
        """Remove files (batched per store); one outcome per path, in order."""
        groups: dict[int, list[str]] = {}
        ios: dict[int, FileIO] = {}
        for p in paths:
            io = self._io(p)
            groups.setdefault(id(io), []).append(p)
            ios[id(io)] = io
        found: dict[str, DeleteOutcome] = {}
        for key, group in groups.items():
            for outcome in ios[key].delete_many(group):
                found[outcome.path] = outcome
        return [found[p] for p in paths]


_DEFAULT = StorageFileIO()


def default_io() -> StorageFileIO:
    """The shared FileIO for every path iceduck supports."""
    return _DEFAULT


def connection_io() -> StorageFileIO:
    """A FileIO for one connection: local files as `default_io()`, S3, GCS and Azure through
    registries of its own below the process's (see `iceduck.io.s3_settings.S3Registry`)."""
    return StorageFileIO(
        _DEFAULT.local, S3FileIO(S3Registry(parent=REGISTRY)), StoreFileIO(StoreRegistry(parent=STORE_REGISTRY))
    )


def s3_registry(io: object) -> S3Registry:
    """The S3 settings a FileIO reaches S3 with (the process's for a FileIO without its own)."""
    registry = getattr(io, "registry", None)
    return registry if isinstance(registry, S3Registry) else REGISTRY


def store_registry(io: object) -> StoreRegistry:
    """The GCS / Azure settings a FileIO reaches those stores with (the process's for a FileIO
    without its own)."""
    registry = getattr(io, "store_registry", None)
    return registry if isinstance(registry, StoreRegistry) else STORE_REGISTRY


def duckdb_path(path: str) -> str:
    """The path to hand DuckDB for a file: the local OS path, `s3://bucket/key` for every S3
    spelling, `gs://` for GCS (one spelling, so names DuckDB reports back match)."""
    if not is_remote(path):
        return local_path(path)
    if is_s3(path):
        bucket, key = bucket_key(path)
        return f"s3://{bucket}/{key}"
    if is_store_path(path):
        return duckdb_spelling(path)
    raise UnsupportedFormatError(
        f"{path}: {split_scheme(path)[0]}:// storage is not supported yet (iceduck reads {SUPPORTED})"
    )
