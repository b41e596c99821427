"""A loaded table: its metadata, where its files really are, and snapshot selection.

`Table.load(arg)` finds the table (metadata path, table folder or catalog name), reads its
metadata and prepares a resolver for tables whose recorded location differs from where they are.
Manifest lists and manifests are immutable files, so parsed ones are cached by path, size and
modification time across tables and calls.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from iceduck._gc import gc_paused
from iceduck._lazy import LazyModule
from iceduck.catalog.locate import TableLocation, locate_table
from iceduck.errors import FileNotFoundInTableError, IcebergError, InvalidMetadataError
from iceduck.io.fileio import FileIO
from iceduck.io.paths import PathResolver, split_scheme
from iceduck.io.storage import default_io
from iceduck.spec.manifest import Manifest, ManifestEntry, read_manifest, read_manifests
from iceduck.spec.manifest_list import ManifestFile, check_sequence_numbers, read_manifest_list
from iceduck.spec.snapshots import Snapshot
from iceduck.spec.table_metadata import TableMetadata, read_table_metadata

# The decoding pool's module (with logging, queue and traceback, ~0.7 MB) loads when a plan first
# decodes manifests concurrently, not with every table read.
if TYPE_CHECKING:
    import concurrent.futures as futures
    from concurrent.futures import ThreadPoolExecutor
else:
    futures = LazyModule("concurrent.futures")

T = TypeVar("T")

# Manifests decoded together (concurrently) by `Table.iter_manifests`.
MANIFEST_CHUNK = 64
# Manifests to decode at once above which `Table.read_manifests` splits them over two threads.
# polars holds the GIL while it decodes, so the threads overlap only zlib's inflating and file
# reads: 10 manifests decode faster in one call (~1.5 ms less for 1,000 files), 40 about alike.
DECODE_SPLIT = 16


class _FileCache:
    """A small thread-safe LRU of parsed immutable files, keyed by (path, size, mtime).

    Bounded by a number of items and, with `weigh`, by their approximate bytes: the least recently
    used go first. An item heavier than the whole budget is returned without being kept."""

    def __init__(
        self, capacity: int, *, max_bytes: int | None = None, weigh: Callable[[Any], int] | None = None
    ) -> None:
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._weigh = weigh
        self._items: OrderedDict[tuple[str, int, int, Any], tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0

    @property
    def bytes(self) -> int:
        """The approximate bytes of what is kept (0 without `weigh`)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def key(self, path: str, extra: Any = None, io: FileIO | None = None) -> tuple[str, int, int, Any] | None:
        """The cache key of a file: its stamp through `io` (the reader's: for an S3 path the stamp
        names the store its settings reach, so two stores' objects of one name never share), or
        None when the file has none (absent: its loader raises its own, clearer error)."""
        try:
            st = (io or default_io()).stamp(path)
        except IcebergError:
            st = None
        return None if st is None else (path, st[0], st[1], extra)

    def lookup(self, key: tuple[str, int, int, Any]) -> Any:
        """The value kept under `key` (now the most recently used), or `_ABSENT`."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return _ABSENT
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: tuple[str, int, int, Any], value: Any) -> None:
        """Keep `value` under `key`, dropping the least recently used beyond the bounds."""
        weight = self._weigh(value) if self._weigh is not None else 0
        if self._max_bytes is not None and weight > self._max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._items[key] = (value, weight)
            self._bytes += weight
            while len(self._items) > self._capacity or (
                self._max_bytes is not None and self._bytes > self._max_bytes
            ):
                _, (_, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped

    def get(self, path: str, load: Callable[[], T], extra: Any = None, io: FileIO | None = None) -> T:
        """`load()`, cached by the file's stamp through `io` (see `key`)."""
        key = self.key(path, extra, io)
        if key is None:
            return load()
        found = self.lookup(key)
        if found is not _ABSENT:
            value: T = found
            return value
        value = load()
        self.put(key, value)
        return value


_ABSENT = object()


@functools.lru_cache(maxsize=256)
def _resolver(recorded_location: str, table_folder: str) -> PathResolver:
    """The resolver of a table's paths (immutable; building one normalises and splits both
    locations, ~30 us, which every SQL call loading the table paid twice)."""
    return PathResolver(recorded_location, table_folder)


def _manifest_budget() -> int:
    """Bytes the parsed-manifest cache may hold: $ICEDUCK_MANIFEST_CACHE_MB, default 256 MB (about
    280,000 decoded entries; a planning or `iceberg_files` pass over more decodes them again)."""
    text = os.environ.get("ICEDUCK_MANIFEST_CACHE_MB", "")
    try:
        mb = float(text) if text.strip() else 256.0
    except ValueError:
        mb = 256.0
    return max(0, int(mb * 1024 * 1024))


_METADATA = _FileCache(256)
_MANIFEST_LISTS = _FileCache(1024)
_MANIFESTS = _FileCache(16384, max_bytes=_manifest_budget(), weigh=Manifest.approx_bytes)
# Values derived from one metadata file alone (e.g. a metadata table as Arrow), keyed by its path.
_DERIVED = _FileCache(1024)


def clear_caches() -> None:
    """Forget every parsed metadata file, manifest list and manifest (for cold-cache measurements)."""
    for cache in (_METADATA, _MANIFEST_LISTS, _MANIFESTS, _DERIVED):
        cache.clear()


@dataclass(frozen=True, slots=True)
class Table:
    """An Iceberg table as read from one metadata file."""

    metadata: TableMetadata
    metadata_location: str
    io: FileIO
    resolver: PathResolver
    name: str | None = None

    # -- loading ---------------------------------------------------------------------------

    @classmethod
    def load(
        cls, arg: str, *, version: str | int | None = None, catalog: Any = None, io: FileIO | None = None
    ) -> Table:
        """Load a table from a metadata file, a table folder, or a name in `catalog`."""
        loc = locate_table(arg, version=version, catalog=catalog, io=io)
        return cls.from_location(loc, io=io)

    @classmethod
    def from_location(cls, loc: TableLocation, *, io: FileIO | None = None) -> Table:
        fio = io or default_io()
        path = loc.metadata_location
        metadata = _METADATA.get(path, lambda: read_table_metadata(fio.read(path), path=path, lazy=True), io=fio)
        return cls(metadata, loc.metadata_location, fio, _resolver(metadata.location, loc.table_folder), loc.name)

    # -- files -----------------------------------------------------------------------------

    def resolve(self, path: str) -> str:
        """Where a path recorded in the metadata is on this machine. A local path outside a moved
        table's location is read where it was recorded; only when no file is there and the folder
        it was in moved along with the table (`PathResolver.local_beside`: one exact candidate) is
        it read from there."""
        found = self.resolver.resolve(path)
        beside = self.resolver.local_beside(path)
        if beside is not None and not self.io.exists(found) and self.io.exists(beside):
            return beside
        return found

    def read(self, path: str) -> bytes:
        """The bytes of a file the metadata references."""
        return self.io.read(self.resolve(path))

    def derived(self, name: Hashable, compute: Callable[[Table], T]) -> T:
        """`compute(self)`, cached per metadata file: for values that depend on the metadata file alone."""
        return _DERIVED.get(self.metadata_location, lambda: compute(self), name, self.io)

    # -- snapshots -------------------------------------------------------------------------

    def snapshot(
        self,
        *,
        snapshot_id: int | None = None,
        as_of: dt.datetime | int | None = None,
        ref: str | None = None,
    ) -> Snapshot | None:
        """The snapshot to read: by id, by branch or tag, as of a time, or the current one (maybe None)."""
        given = [x for x in (snapshot_id, as_of, ref) if x is not None]
        if len(given) > 1:
            raise IcebergError("give at most one of snapshot_id, as_of and ref")
        md = self.metadata
        where = self.name or self.metadata_location
        if snapshot_id is not None:
            snap = md.snapshot_by_id(snapshot_id)
            if snap is None:
                raise IcebergError(f"{where}: no snapshot with id {snapshot_id}")
            return snap
        if ref is not None:
            snap = md.snapshot_for_ref(ref)
            if snap is None:
                known = ", ".join(sorted(md.refs)) or "none"
                raise IcebergError(f"{where}: no branch or tag named {ref!r} (refs: {known})")
            return snap
        if as_of is not None:
            ms = _to_millis(as_of)
            snap = md.snapshot_as_of(ms)
            if snap is None:
                # '-infinity' arrives as the start of datetime's range (0001-01-01)
                when = (
                    "-infinity"
                    if ms <= _FIRST_MS
                    else dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat()
                )
                raise IcebergError(f"{where}: no snapshot was current at {when}")
            return snap
        return md.current_snapshot()

    # -- manifests -------------------------------------------------------------------------

    def manifests(self, snapshot: Snapshot | None) -> tuple[ManifestFile, ...]:
        """The manifests of a snapshot (none for an empty table)."""
        if snapshot is None:
            return ()
        if snapshot.manifest_list is None:
            return tuple(self._v1_manifest(snapshot, p) for p in snapshot.manifests or ())
        path = self.resolve(snapshot.manifest_list)
        return _MANIFEST_LISTS.get(path, lambda: self._read_manifest_list(path, snapshot), io=self.io)

    def _v1_manifest(self, snapshot: Snapshot, recorded: str) -> ManifestFile:
        """A manifest-list entry for a v1 snapshot that lists manifest paths directly.

        Such manifests hold data files only, with sequence number 0; their entries carry their own
        snapshot ids. The partition spec id comes from the manifest's own metadata.
        """
        path = self.resolve(recorded)
        data = self._read_file(path, "manifest")
        meta = read_manifest(data, path=path).metadata
        return ManifestFile(
            manifest_path=recorded,
            manifest_length=len(data),
            partition_spec_id=meta.partition_spec_id,
            content=0,
            sequence_number=0,
            min_sequence_number=0,
            added_snapshot_id=snapshot.snapshot_id,
            added_files_count=None,
            existing_files_count=None,
            deleted_files_count=None,
            added_rows_count=None,
            existing_rows_count=None,
            deleted_rows_count=None,
        )

    def _read_file(self, path: str, what: str, listed: str = "") -> bytes:
        """The bytes of one of the table's metadata files; a missing one is named with the table
        (and `listed`: where it is named)."""
        try:
            return self.io.read(path)
        except FileNotFoundInTableError as e:
            raise FileNotFoundInTableError(
                f"{what} not found: {path}{listed} (table {self.metadata_location})"
            ) from e
        except IsADirectoryError:
            raise InvalidMetadataError(
                f"{what} {path!r}{listed} is a folder, not a file (table {self.metadata_location})"
            ) from None

    def _read_manifest_list(self, path: str, snapshot: Snapshot) -> tuple[ManifestFile, ...]:
        data = self._read_file(path, "manifest list")
        manifests = read_manifest_list(data, path=path)
        if self.metadata.format_version >= 2 and snapshot.sequence_number is not None:
            check_sequence_numbers(
                manifests,
                snapshot_sequence_number=snapshot.sequence_number,
                added_sequence_numbers={
                    m.added_snapshot_id: added.sequence_number or 0
                    for m in manifests
                    if (added := self.metadata.snapshot_by_id(m.added_snapshot_id)) is not None
                },
                path=path,
            )
        return manifests

    def manifest(self, manifest: ManifestFile) -> Manifest:
        """A manifest's entries, with snapshot ids, sequence numbers and first row ids inherited."""
        path = self.resolve(manifest.manifest_path)
        return _MANIFESTS.get(path, lambda: self._load_manifest(manifest, path), _inherited(manifest), self.io)

    def _manifest_bytes(self, manifest: ManifestFile, path: str) -> bytes:
        listed = f", listed in {manifest.listed_in}" if manifest.listed_in else ""
        return self._read_file(path, "manifest", listed)

    def _load_manifest(self, manifest: ManifestFile, path: str) -> Manifest:
        return read_manifest(self._manifest_bytes(manifest, path), path=path, manifest=manifest)

    def read_manifests(self, manifests: Sequence[ManifestFile]) -> list[Manifest]:
        """`manifest(m)` of each, in order. Those the cache lacks are read concurrently when remote
        (one request each, in parallel) and decoded together (`spec.manifest.read_manifests`: one
        polars call for the manifests sharing an Avro schema, instead of one each). The first
        failing manifest (in order) raises, as a loop over `manifest` would."""
        if len(manifests) < 2:
            return [self.manifest(m) for m in manifests]
        # Decoding builds columns of values (no reference cycles): the cyclic collector waits.
        with gc_paused():
            return self._read_manifests(manifests)

    def _read_manifests(self, manifests: Sequence[ManifestFile]) -> list[Manifest]:
        out: list[Manifest | None] = []
        todo: list[tuple[int, ManifestFile, str, tuple[str, int, int, Any] | None]] = []
        for i, mf in enumerate(manifests):
            path = self.resolve(mf.manifest_path)
            key = _MANIFESTS.key(path, _inherited(mf), self.io)
            found = _ABSENT if key is None else _MANIFESTS.lookup(key)
            if isinstance(found, Manifest):
                out.append(found)
            else:
                out.append(None)
                todo.append((i, mf, path, key))
        if todo:
            fetched = self._fetch_manifests([(mf, path) for _, mf, path, _ in todo])
            # Manifests before the first unreadable one decode (and may raise first); then it raises.
            items: list[tuple[bytes, str, ManifestFile]] = []
            for (_, mf, path, _), data in zip(todo, fetched, strict=True):
                if isinstance(data, Exception):
                    read_manifests(items)
                    raise data
                items.append((data, path, mf))
            for (i, _, _, key), m in zip(todo, self._decode_manifests(items), strict=True):
                out[i] = m
                if key is not None:
                    _MANIFESTS.put(key, m)
        return [m for m in out if m is not None]

    @staticmethod
    def _decode_manifests(items: list[tuple[bytes, str, ManifestFile]]) -> list[Manifest]:
        """`read_manifests(items)`, split in two halves decoded on two threads when there are enough
        to pay for it: zlib inflates one half's blocks outside the GIL while the other half is
        decoded (polars itself holds the GIL; a split costs a second polars call, ~0.3 ms)."""
        if len(items) < DECODE_SPLIT or (os.cpu_count() or 1) < 2:
            return read_manifests(items)
        half = (len(items) + 1) // 2
        return [m for part in _decoding_pool().map(read_manifests, (items[:half], items[half:])) for m in part]

    def _fetch_manifests(self, items: Sequence[tuple[ManifestFile, str]]) -> list[bytes | Exception]:
        """The bytes of each manifest, or the error reading it raised; remote ones concurrently."""

        def fetch(item: tuple[ManifestFile, str]) -> bytes | Exception:
            try:
                return self._manifest_bytes(*item)
            except Exception as e:  # raised in order by the caller
                return e

        if all(split_scheme(path)[0] in (None, "file") for _, path in items):
            return [fetch(item) for item in items]
        return list(_decoding_pool().map(fetch, items))

    def iter_manifests(
        self, manifests: Sequence[ManifestFile], *, chunk: int = MANIFEST_CHUNK
    ) -> Iterator[tuple[ManifestFile, Manifest]]:
        """`(m, manifest(m))` for each, in order, decoded `chunk` at a time (concurrently within a
        chunk): memory holds one chunk of decoded manifests beyond what the byte-bounded cache
        keeps, however many the snapshot lists."""
        for start in range(0, len(manifests), chunk):
            part = manifests[start : start + chunk]
            yield from zip(part, self.read_manifests(part), strict=True)

    def entries(self, snapshot: Snapshot | None, *, include_deleted: bool = False) -> Iterator[ManifestEntry]:
        """Every manifest entry of a snapshot, live ones only unless `include_deleted`."""
        for _, m in self.iter_manifests(self.manifests(snapshot)):
            for entry in m.entries:
                if include_deleted or entry.status != 2:
                    yield entry


def _inherited(manifest: ManifestFile) -> tuple[int | None, int | None, int | None]:
    """What a manifest's entries inherit from its manifest-list entry: part of its cache key."""
    return (manifest.added_snapshot_id, manifest.sequence_number, manifest.first_row_id)


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _decoding_pool() -> ThreadPoolExecutor:
    """One shared pool (threads made on first use): a worker per core, at most 4."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = futures.ThreadPoolExecutor(
                max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="iceduck-manifests"
            )
        return _POOL


_FIRST_MS = int(dt.datetime.min.replace(tzinfo=dt.UTC).timestamp() * 1000)


def _to_millis(as_of: dt.datetime | int) -> int:
    if isinstance(as_of, int):
        return as_of
    if as_of.tzinfo is None:
        as_of = as_of.replace(tzinfo=dt.UTC)
    return int(as_of.timestamp() * 1000)
