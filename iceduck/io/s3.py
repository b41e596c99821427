"""Tables on S3 and S3-compatible stores: `S3FileIO`, the FileIO over `s3://`, `s3a://`, `s3n://` paths.

Its neighbours: `s3_settings` (paths, settings and their registry), `s3_clients` (s3fs and the
object readers per settings), `s3_reads` (what is known of objects, exact ranged reads),
`s3_duckdb` (the filesystem DuckDB reads and writes through). The names the README documents
(`REGISTRY`, `register_vended_credentials`, `register_properties`, `register_filesystem`) are
also importable from here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any, cast

from iceduck._lazy import LazyModule
from iceduck.errors import AlreadyExistsError, FileNotFoundInTableError
from iceduck.io.fileio import DeleteOutcome, FileInfo, OpenedInputFile
from iceduck.io.paths import normalize_path, split_scheme
from iceduck.io.s3_clients import ERRORS, error_code, filesystem, is_store_error, reader
from iceduck.io.s3_duckdb import register_filesystem
from iceduck.io.s3_readers import ObjectReader
from iceduck.io.s3_reads import SEEN, S3RangeReader, read_all, read_range, seen_object
from iceduck.io.s3_settings import (
    REGISTRY,
    S3Registry,
    S3Settings,
    bucket_key,
    fs_path,
    register_properties,
    register_vended_credentials,
)

# fsspec (~5 MB of a fresh process) loads with the first S3 filesystem, not with iceduck.
if TYPE_CHECKING:
    import fsspec.asyn as fsspec_asyn
else:
    fsspec_asyn = LazyModule("fsspec.asyn")


def _is_object(rd: ObjectReader, key: str) -> bool:
    """Whether object `key` (bucket/key) exists: one HEAD."""
    return rd.exists(key)


class S3InputFile(OpenedInputFile):
    """An S3 object opened for ranged reads. Opening it is one GET of its last `TAIL_BYTES`
    (footers of Parquet and Puffin files are there); other ranges are one ranged GET each."""

    __slots__ = ("_fs", "_key", "_settings")

    def __init__(self, path: str, settings: S3Settings, *, expected_size: int | None = None) -> None:
        self._settings = settings
        self._fs = reader(self._settings)
        self._key = fs_path(path)
        with ERRORS.translated(path):
            seen = seen_object(self._settings, self._fs, self._key, tail=True, expected_size=expected_size)
        if seen.info.get("type") != "file":
            raise FileNotFoundInTableError(f"{path}: file not found")
        super().__init__(path, seen.size)

    def read_range(self, offset: int, length: int) -> bytes:
        with ERRORS.translated(self._path):
            return read_range(self._settings, self._fs, self._key, offset, offset + length)


class S3FileIO:
    """`FileIO` on S3 (paths `s3://`, `s3a://`, `s3n://`); settings from `registry` per path (the
    process's `REGISTRY`, or a connection's registry whose parent it is).

    An S3 PUT (and a completed multipart upload) becomes visible whole, so no reader ever sees a
    half-written object. `write_new` asks the store for an exclusive create (`If-None-Match: *`)
    and also checks first, for stores that ignore the condition; the catalog's compare-and-swap
    stays the commit point either way.
    """

    def __init__(self, registry: S3Registry | None = None) -> None:
        self.registry = registry or REGISTRY

    def _fs(self, path: str) -> Any:
        return filesystem(self.registry.settings_for(path))

    def read(self, path: str) -> bytes:
        """The whole object; `FileNotFoundInTableError` if it does not exist."""
        with ERRORS.translated(path):
            return read_all(reader(self.registry.settings_for(path)), fs_path(path))

    def open_input(self, path: str, *, expected_size: int | None = None) -> S3InputFile:
        """The object opened for ranged reads."""
        return S3InputFile(path, self.registry.settings_for(path), expected_size=expected_size)

    def open_stream(self, path: str) -> IO[bytes]:
        """A seekable binary file object (for pyarrow), reading ranges on demand."""
        settings = self.registry.settings_for(path)
        fs = reader(settings)
        key = fs_path(path)
        with ERRORS.translated(path):
            seen = seen_object(settings, fs, key, tail=True)
        if seen.info.get("type") != "file":
            raise FileNotFoundInTableError(f"{path}: file not found")
        return cast(IO[bytes], S3RangeReader(settings, fs, key, seen.size))

    def exists(self, path: str) -> bool:
        """True if an object exists at `path`."""
        with ERRORS.translated(path):
            return _is_object(reader(self.registry.settings_for(path)), fs_path(path))

    def size(self, path: str) -> int:
        """Length of the object in bytes."""
        with ERRORS.translated(path):
            info = reader(self.registry.settings_for(path)).info(fs_path(path))
        if info.get("type") != "file":
            raise FileNotFoundInTableError(f"{path}: file not found")
        return int(info["size"])

    def stamp(self, path: str) -> tuple[int, int] | None:
        """Objects a table references are immutable: the path and the store (its endpoint, as the
        settings for the path name it) identify the content."""
        return (0, hash(self.registry.settings_for(path).endpoint))

    def list_prefix(self, prefix: str) -> Iterator[FileInfo]:
        """Every object under the folder `prefix` (recursively, one listing by prefix), in path order."""
        scheme = split_scheme(normalize_path(prefix))[0]
        root = fs_path(prefix).rstrip("/")
        with ERRORS.translated(prefix):
            try:
                found = self._fs(prefix).find(root + "/", detail=True)
            except FileNotFoundError:
                return
        for key in sorted(found):
            info = found[key]
            if info.get("type") != "file" or key.endswith("/"):
                continue
            mtime = info.get("LastModified")
            mtime_ms = int(mtime.timestamp() * 1000) if mtime is not None else 0
            yield FileInfo(f"{scheme}://{key}", int(info.get("size") or 0), mtime_ms)

    def list_children(self, prefix: str) -> tuple[list[str], list[str]]:
        """(sub-folder names, object names) one level below the folder `prefix` (one listing with
        a delimiter), each sorted; empty when nothing is there."""
        root = fs_path(prefix).rstrip("/")
        with ERRORS.translated(prefix):
            try:
                found = self._fs(prefix).ls(root + "/", detail=True)
            except FileNotFoundError:
                return [], []
        folders: list[str] = []
        files: list[str] = []
        for info in found:
            full = str(info.get("name") or "").rstrip("/")
            if not full.startswith(root + "/"):  # the folder itself
                continue
            name = full[len(root) + 1 :]
            (files if info.get("type") == "file" else folders).append(name)
        return sorted(folders), sorted(files)

    def write_new(self, path: str, data: bytes) -> None:
        """Create the object; `AlreadyExistsError` if it exists."""
        key = fs_path(path)
        SEEN.forget(key=key)
        with ERRORS.translated(path):
            if _is_object(reader(self.registry.settings_for(path)), key):
                raise AlreadyExistsError(f"{path}: file exists already")
        self.create_exclusive(path, data)

    def create_exclusive(self, path: str, data: bytes) -> None:
        """One PUT with `If-None-Match: *` and no check of iceduck's own first: `AlreadyExistsError`
        when the store refuses it (a store that ignores the condition replaces the object)."""
        fs = self._fs(path)
        key = fs_path(path)
        SEEN.forget(key=key)
        with ERRORS.translated(path):
            try:
                fs.pipe_file(key, data, mode="create")
            except OSError as e:
                if error_code(e) in ("PreconditionFailed", "ConditionalRequestConflict"):
                    raise AlreadyExistsError(f"{path}: file exists already") from None
                raise

    def write_atomic(self, path: str, data: bytes) -> None:
        """Create or replace the object (one PUT: readers see the old or the new content)."""
        SEEN.forget(key=fs_path(path))
        with ERRORS.translated(path):
            self._fs(path).pipe_file(fs_path(path), data)

    def put_file(self, local: str, path: str) -> None:
        """Upload the local file `local` as the new object `path` (multipart for large files)."""
        SEEN.forget(key=fs_path(path))
        with ERRORS.translated(path):
            self._fs(path).put_file(local, fs_path(path))

    def delete(self, path: str) -> None:
        """Remove the object; `FileNotFoundInTableError` if it does not exist."""
        fs = self._fs(path)
        key = fs_path(path)
        SEEN.forget(key=key)
        with ERRORS.translated(path):
            if not _is_object(fs, key):
                raise FileNotFoundInTableError(f"{path}: file not found")
            fs.rm_file(key)

    def delete_many(self, paths: Sequence[str]) -> list[DeleteOutcome]:
        """Delete objects in batches of up to 1000 per bucket; one outcome per path.

        A batch that "succeeds" can still refuse some keys (S3 reports per-key errors in a 200
        response), so each path gets its own status: deleted, not_found, denied or other.
        """
        out: dict[str, DeleteOutcome] = {}
        groups: dict[tuple[str, S3Settings], list[str]] = {}
        for p in paths:
            SEEN.forget(key=fs_path(p))
            groups.setdefault((bucket_key(p)[0], self.registry.settings_for(p)), []).append(p)
        for (bucket, settings), group in groups.items():
            fs = filesystem(settings)
            for i in range(0, len(group), 1000):
                chunk = group[i : i + 1000]
                for o in _delete_batch(fs, bucket, chunk):
                    out[o.path] = o
        return [out[p] for p in paths]


def _delete_batch(fs: Any, bucket: str, paths: Sequence[str]) -> list[DeleteOutcome]:
    by_key = {bucket_key(p)[1]: p for p in paths}
    # S3 reports a missing key as deleted: ask which exist first, to report not_found honestly.
    present: set[str] = set()
    for key in by_key:
        try:
            if fs.isfile(f"{bucket}/{key}"):
                present.add(key)
        except Exception as e:
            if not is_store_error(e):
                raise
            present.add(key)  # let the delete itself say what is refused
    outcomes: dict[str, DeleteOutcome] = {
        key: DeleteOutcome(p, "not_found") for key, p in by_key.items() if key not in present
    }
    wanted = [k for k in by_key if k in present]
    if wanted:
        try:
            response = fsspec_asyn.sync(
                fs.loop,
                fs._call_s3,
                "delete_objects",
                Bucket=bucket,
                Delete={"Objects": [{"Key": k} for k in wanted], "Quiet": False},
            )
        except Exception as e:
            if not is_store_error(e):
                raise
            status = (
                "denied" if isinstance(e, PermissionError) or error_code(e) == "AccessDenied" else "other"
            )
            detail = str(e).splitlines()[0] if str(e) else type(e).__name__
            return [outcomes.get(k) or DeleteOutcome(by_key[k], status, detail) for k in by_key]
        for d in response.get("Deleted", []):
            outcomes[d["Key"]] = DeleteOutcome(by_key[d["Key"]], "deleted")
        for err in response.get("Errors", []):
            code = err.get("Code", "")
            status = "denied" if code == "AccessDenied" else "not_found" if code == "NoSuchKey" else "other"
            outcomes[err["Key"]] = DeleteOutcome(
                by_key[err["Key"]], status, f"{code}: {err.get('Message', '')}"
            )
        for k in wanted:
            outcomes.setdefault(k, DeleteOutcome(by_key[k], "other", "the store did not report this key"))
    return [outcomes[k] for k in by_key]


__all__ = [
    "REGISTRY",
    "S3FileIO",
    "S3InputFile",
    "register_filesystem",
    "register_properties",
    "register_vended_credentials",
]
