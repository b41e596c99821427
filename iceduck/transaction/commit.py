"""Committing a change to a catalog table: requirements + updates, compare-and-swap, retries.

A change never builds whole metadata. Each attempt plans it on the table as it is then and
produces what the REST catalog spec's `CommitTableRequest` holds:

* *updates* (`iceduck.spec.updates`: add-snapshot, set-snapshot-ref, add-schema, set-properties,
  remove-snapshots, ...), which `apply_updates` turns into the new metadata, and
* *requirements* (assert-table-uuid, assert-ref-snapshot-id, assert-current-schema-id, ...), what
  the table must still look like for the updates to be right.

A commit (spec "Optimistic Concurrency", "Metastore Tables"):

1. the change writes whatever does not depend on the table's current state once (data files,
   manifests of added files);
2. each attempt loads the current metadata and lets the change plan on it (`Change.apply`): it
   re-validates (a delete whose data file a concurrent commit removed fails here with
   `CommitConflictError`), writes the new manifest list and returns requirements and updates;
3. the catalog (`Catalog.commit_table`) checks the requirements against the metadata its pointer
   names, applies the updates, writes `<V+1>-<uuid>.metadata.json` (which logs the previous file
   in `metadata-log`) and swaps its pointer only if it did not move meanwhile. If a requirement
   fails or another writer got there first, the attempt's files are deleted and the change is
   planned again on the new state, up to `commit.retry.num-retries` (default 4) times with
   exponential backoff between `commit.retry.min-wait-ms` (100) and `commit.retry.max-wait-ms`
   (60000), within `commit.retry.total-timeout-ms` (30 minutes).

Nothing is visible before the swap; a writer that dies at any point leaves only unreferenced files.
Every successful commit reports its `CommitRecord` (base file, requirements, updates, time):
applying the updates to the base reproduces the committed metadata (`CommitRecord.replay`).

For crash tests, `ICEDUCK_TEST_CRASH_AT=<stage>` makes the process exit abruptly (`os._exit`) at
that stage: `data-written`, `snapshot-written`, `metadata-written`, `committed`
(`iceduck.catalog.commit.crash_point`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from iceduck.catalog.base import Catalog
from iceduck.catalog.commit import CRASH_ENV, CommittedTable, LoadedMetadata, crash_point
from iceduck.catalog.locate import TableLocation, table_folder_of
from iceduck.errors import CommitConflictError, CommitStateUnknownError, IcebergError, TableNotFoundError
from iceduck.io.fileio import FileIO
from iceduck.io.storage import default_io
from iceduck.spec.table_metadata import TableMetadata
from iceduck.spec.updates import (
    TableRequirement,
    TableUpdate,
    apply_updates,
    requirements_from_json,
    requirements_to_json,
    updates_from_json,
    updates_to_json,
)
from iceduck.table import Table

__all__ = [
    "CRASH_ENV",
    "Attempt",
    "Change",
    "CommitRecord",
    "CommitResult",
    "RetryPolicy",
    "TableCommitter",
    "crash_point",
    "no_change",
]


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """What one commit sent and got: for debugging, the maintenance log and replays.

    `base_metadata_location` is the metadata file the updates were applied to (None when the
    commit created the table); `last_updated_ms` the commit's time, which the catalog chose.
    """

    table: str
    base_metadata_location: str | None
    metadata_location: str
    last_updated_ms: int
    requirements: tuple[TableRequirement, ...]
    updates: tuple[TableUpdate, ...]

    def to_json(self) -> dict[str, Any]:
        """The record as JSON: the requirements and updates in the REST spec's form."""
        return {
            "table": self.table,
            "base-metadata-location": self.base_metadata_location,
            "metadata-location": self.metadata_location,
            "last-updated-ms": self.last_updated_ms,
            "requirements": requirements_to_json(self.requirements),
            "updates": updates_to_json(self.updates),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> CommitRecord:
        """A record from `to_json`'s form."""
        return cls(
            str(obj["table"]),
            obj.get("base-metadata-location"),
            str(obj["metadata-location"]),
            int(obj["last-updated-ms"]),
            tuple(requirements_from_json(obj["requirements"])),
            tuple(updates_from_json(obj["updates"])),
        )

    def replay(self, base: TableMetadata | None) -> TableMetadata:
        """The metadata this commit produced, rebuilt from `base` (the metadata in
        `base_metadata_location`) and the recorded updates."""
        return apply_updates(
            base, self.updates, metadata_location=self.base_metadata_location,
            last_updated_ms=self.last_updated_ms,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What a commit did. Counts are of files and rows this commit added or removed; `commit` is
    its record (requirements and updates), None when nothing was committed."""

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
    commit: CommitRecord | None = None


@dataclass(slots=True)
class Attempt:
    """What one attempt planned: the updates, the requirements that keep them valid, and the files
    written for this attempt alone (deleted if it does not commit)."""

    updates: Sequence[TableUpdate]
    requirements: Sequence[TableRequirement]
    written: list[str] = field(default_factory=list)


class Change:
    """A change to commit. Subclasses implement `apply`; `abort` removes what `prepare` wrote."""

    operation = "change"

    def apply(self, current: Table, attempt: int) -> Attempt:
        """Plan the change on `current`: its updates and requirements (raise
        `CommitConflictError` when it cannot apply)."""
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


class TableCommitter:
    """Loads a catalog table and commits changes to it."""

    def __init__(
        self, catalog: Catalog, namespace: str, name: str, io: FileIO | None = None, *, loaded: Table | None = None
    ) -> None:
        self.catalog = catalog
        self.namespace = namespace
        self.name = name
        self.io = io or default_io()
        self.last_commit: CommitRecord | None = None  # the record of the last successful commit
        # The state a caller read moments ago (one SQL statement): the first load returns it instead of
        # asking the catalog again. A stale base is safe: the commit's requirements refuse it and retry.
        self._loaded = loaded

    @property
    def identifier(self) -> str:
        return f"{self.namespace}.{self.name}"

    def load(self) -> Table:
        """The table as the catalog points at it now (`TableNotFoundError` if it is gone)."""
        if self._loaded is not None:
            loaded, self._loaded = self._loaded, None
            return loaded
        location = self.catalog.load_table(self.namespace, self.name)
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
                try:
                    committed: CommittedTable = self.catalog.commit_table(
                        self.namespace, self.name, applied.requirements, applied.updates,
                        loaded=LoadedMetadata(current.metadata_location, current.metadata),
                    )  # fmt: skip
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
                except CommitStateUnknownError:
                    raise  # the commit may have happened: its files may be referenced now, keep them
                except BaseException:
                    _remove_all(self.io, applied.written)
                    raise
                record = CommitRecord(
                    self.identifier,
                    committed.base_metadata_location,
                    committed.metadata_location,
                    committed.metadata.last_updated_ms,
                    tuple(applied.requirements),
                    tuple(applied.updates),
                )
                self.last_commit = record
                result = change.result(
                    self.identifier, committed.metadata, committed.metadata_location, attempt + 1
                )
                return dataclasses.replace(result, commit=record)
        except BaseException as e:
            if not ((isinstance(e, SystemExit) and e.code == 77) or isinstance(e, CommitStateUnknownError)):
                change.abort()
            raise

    def _exists(self) -> bool:
        try:
            self.catalog.load_table(self.namespace, self.name)
        except TableNotFoundError:
            return False
        return True


def _remove_all(io: FileIO, paths: list[str]) -> None:
    for path in paths:
        with contextlib.suppress(IcebergError, OSError):
            io.delete(path)


def no_change(committer: TableCommitter, table: Table, operation: str, note: str) -> CommitResult:
    """The result of an operation that commits nothing: the table's current snapshot, `note` saying why."""
    snap = table.metadata.current_snapshot()
    return CommitResult(
        committer.identifier,
        operation,
        snap.snapshot_id if snap is not None else None,
        snap.sequence_number if snap is not None else None,
        table.metadata_location,
        attempts=0,
        notes=(note,),
    )
