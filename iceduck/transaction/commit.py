"""Committing a change to a catalog table: optimistic concurrency with compare-and-swap and retries.

A commit (spec "Optimistic Concurrency", "Metastore Tables"):

1. the change writes whatever does not depend on the table's current state once (data files,
   manifests of added files);
2. each attempt loads the current metadata, lets the change re-validate against it (a delete whose
   data file a concurrent commit removed fails here with `CommitConflictError`), writes the new
   manifest list and a new metadata file `<V+1>-<uuid>.metadata.json` (the version and naming of
   Java and PyIceberg) that logs the previous one in `metadata-log`;
3. the catalog swaps the table's pointer from the loaded metadata file to the new one only if it
   still points at the loaded one. If another writer got there first, the attempt's files are
   deleted and the change retries on the new state, up to `commit.retry.num-retries` (default 4)
   times with exponential backoff between `commit.retry.min-wait-ms` (100) and
   `commit.retry.max-wait-ms` (60000), within `commit.retry.total-timeout-ms` (30 minutes).

Nothing is visible before the swap; a writer that dies at any point leaves only unreferenced files.
After a successful swap, metadata files pruned from the log (`write.metadata.previous-versions-max`,
default 100) are deleted when `write.metadata.delete-after-commit.enabled` is true.

For crash tests, `ICEDUCK_TEST_CRASH_AT=<stage>` makes the process exit abruptly (`os._exit`) at
that stage: `data-written`, `snapshot-written`, `metadata-written`, `committed`.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from iceduck.catalog.locate import TableLocation, table_folder_of
from iceduck.errors import CommitConflictError, IcebergError, TableNotFoundError
from iceduck.io.fileio import FileIO, LocalFileIO
from iceduck.io.paths import base_name, join_path
from iceduck.spec.snapshots import MetadataLogEntry
from iceduck.spec.table_metadata import TableMetadata, table_metadata_to_json, validate_table_metadata
from iceduck.table import Table
from iceduck.transaction.metadata import with_metadata_log

CRASH_ENV = "ICEDUCK_TEST_CRASH_AT"


def crash_point(stage: str) -> None:
    """Exit at once (no cleanup, no flush) when the crash-test hook names this stage."""
    if os.environ.get(CRASH_ENV) == stage:
        os._exit(77)


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What a commit did. Counts are of files and rows this commit added or removed."""

    table: str
    operation: str
    snapshot_id: int | None
    sequence_number: int | None
    metadata_location: str
    added_data_files: int = 0
    removed_data_files: int = 0
    added_delete_files: int = 0
    removed_delete_files: int = 0
    added_rows: int = 0
    deleted_rows: int = 0
    updated_rows: int = 0
    attempts: int = 1
    merged: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(slots=True)
class Attempt:
    """What one attempt produced: the new metadata and the files written for it alone."""

    metadata: TableMetadata
    written: list[str] = field(default_factory=list)


class Change:
    """A change to commit. Subclasses implement `apply`; `abort` removes what `prepare` wrote."""

    operation = "change"

    def apply(self, current: Table, attempt: int) -> Attempt:
        """The new metadata based on `current` (raise `CommitConflictError` when it cannot apply)."""
        raise NotImplementedError

    def abort(self) -> None:
        """Remove files written once for every attempt (data files, added manifests)."""

    def result(self, table: str, metadata: TableMetadata, location: str, attempts: int) -> CommitResult:
        """The result reported to the caller after a successful commit."""
        snap = metadata.current_snapshot()
        return CommitResult(
            table,
            self.operation,
            snap.snapshot_id if snap is not None else None,
            snap.sequence_number if snap is not None else None,
            location,
            attempts=attempts,
        )


@dataclass(slots=True)
class RetryPolicy:
    retries: int = 4
    min_wait_ms: int = 100
    max_wait_ms: int = 60_000
    total_timeout_ms: int = 30 * 60 * 1000

    @classmethod
    def of(cls, metadata: TableMetadata) -> RetryPolicy:
        props = metadata.properties

        def get(key: str, default: int) -> int:
            try:
                return int(props.get(key, default))
            except ValueError:
                return default

        return cls(
            get("commit.retry.num-retries", 4),
            get("commit.retry.min-wait-ms", 100),
            get("commit.retry.max-wait-ms", 60_000),
            get("commit.retry.total-timeout-ms", 30 * 60 * 1000),
        )

    def wait(self, attempt: int) -> float:
        """Seconds to sleep before retry number `attempt` (1-based): exponential with jitter."""
        base = min(self.max_wait_ms, self.min_wait_ms * (2 ** (attempt - 1)))
        return random.uniform(base / 2, base) / 1000.0


def metadata_version(location: str, metadata: TableMetadata) -> int:
    """The version number a metadata file's name carries (`00003-...`, `v3...`), else the log length."""
    name = base_name(location)
    head = name.split("-", 1)[0]
    if head.isdigit():
        return int(head)
    if name.startswith("v") and name[1:].split(".", 1)[0].isdigit():
        return int(name[1:].split(".", 1)[0])
    return len(metadata.metadata_log)


def metadata_folder(metadata: TableMetadata, location: str) -> str:
    """Where new metadata files go: `write.metadata.path`, else next to the current one."""
    configured = metadata.properties.get("write.metadata.path")
    if configured:
        return configured.rstrip("/")
    return location.rsplit("/", 1)[0]


def write_metadata_file(io: FileIO, folder: str, version: int, metadata: TableMetadata) -> str:
    """Write `<folder>/<version:05d>-<uuid>.metadata.json`; returns its path."""
    validate_table_metadata(metadata)
    path = join_path(folder, f"{version:05d}-{uuid.uuid4()}.metadata.json")
    io.write_new(path, json.dumps(table_metadata_to_json(metadata), indent=2).encode())
    return path


class TableCommitter:
    """Loads a catalog table and commits changes to it."""

    def __init__(self, catalog: object, namespace: str, name: str, io: FileIO | None = None) -> None:
        self.catalog = catalog
        self.namespace = namespace
        self.name = name
        self.io = io or LocalFileIO()

    @property
    def identifier(self) -> str:
        return f"{self.namespace}.{self.name}"

    def load(self) -> Table:
        """The table as the catalog points at it now (`TableNotFoundError` if it is gone)."""
        location = self.catalog.load_table(self.namespace, self.name)  # type: ignore[attr-defined]
        return Table.from_location(
            TableLocation(location, table_folder_of(location), self.identifier), io=self.io
        )

    def commit(
        self, change: Change, base: Table | None = None, sleep: Callable[[float], None] = time.sleep
    ) -> CommitResult:
        """Commit `change`, retrying on concurrent commits; on any failure nothing of it stays."""
        expected_uuid = base.metadata.table_uuid if base is not None else None
        started = time.monotonic()
        attempt = 0
        try:
            while True:
                try:
                    current = base if (attempt == 0 and base is not None) else self.load()
                except TableNotFoundError:
                    if attempt == 0:
                        raise
                    raise TableNotFoundError(
                        f"table {self.identifier} was dropped by another writer; nothing was committed"
                    ) from None
                if expected_uuid is not None and current.metadata.table_uuid != expected_uuid:
                    raise TableNotFoundError(
                        f"table {self.identifier} was dropped and replaced by another table (uuid "
                        f"{current.metadata.table_uuid}, expected {expected_uuid}); nothing was committed"
                    )
                policy = RetryPolicy.of(current.metadata)
                try:
                    applied = change.apply(current, attempt)
                except IcebergError as e:
                    if isinstance(e, CommitConflictError | TableNotFoundError) or self._exists():
                        raise
                    # files gone because the table was dropped (and purged) meanwhile
                    raise TableNotFoundError(
                        f"table {self.identifier} was dropped by another writer; nothing was committed"
                    ) from e
                crash_point("snapshot-written")
                new_md, dropped = with_metadata_log(
                    applied.metadata, current.metadata_location, current.metadata.last_updated_ms
                )
                folder = metadata_folder(current.metadata, current.metadata_location)
                version = metadata_version(current.metadata_location, current.metadata) + 1
                path = write_metadata_file(self.io, folder, version, new_md)
                applied.written.append(path)
                crash_point("metadata-written")
                try:
                    published = self.catalog.commit(  # type: ignore[attr-defined]
                        self.namespace, self.name, current.metadata_location, path
                    )
                except CommitConflictError:
                    _remove_all(self.io, applied.written)
                    attempt += 1
                    elapsed_ms = (time.monotonic() - started) * 1000
                    if attempt > policy.retries or elapsed_ms > policy.total_timeout_ms:
                        raise CommitConflictError(
                            f"table {self.identifier}: gave up after {attempt} attempts: other writers kept "
                            f"committing first (commit.retry.num-retries = {policy.retries}); nothing was committed"
                        ) from None
                    sleep(policy.wait(attempt))
                    continue
                except TableNotFoundError:
                    _remove_all(self.io, applied.written)
                    raise TableNotFoundError(
                        f"table {self.identifier} was dropped by another writer; nothing was committed"
                    ) from None
                except BaseException:
                    _remove_all(self.io, applied.written)
                    raise
                crash_point("committed")
                if published != path:
                    _remove_all(self.io, [path])  # a folder catalog published a copy under its own name
                self._expire_metadata(new_md, dropped)
                return change.result(self.identifier, new_md, published, attempt + 1)
        except BaseException as e:
            if not (isinstance(e, SystemExit) and e.code == 77):
                change.abort()
            raise

    def _exists(self) -> bool:
        try:
            self.catalog.load_table(self.namespace, self.name)  # type: ignore[attr-defined]
        except TableNotFoundError:
            return False
        return True

    def _expire_metadata(self, metadata: TableMetadata, dropped: tuple[MetadataLogEntry, ...]) -> None:
        enabled = (
            metadata.properties.get("write.metadata.delete-after-commit.enabled", "false").lower() == "true"
        )
        if not enabled:
            return
        for entry in dropped:
            with contextlib.suppress(IcebergError, OSError):  # already gone: nothing to clean
                self.io.delete(entry.metadata_file)


def _remove_all(io: FileIO, paths: list[str]) -> None:
    for path in paths:
        with contextlib.suppress(IcebergError, OSError):
            io.delete(path)
