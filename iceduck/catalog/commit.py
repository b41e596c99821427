"""What every catalog does to commit a table change given as requirements and updates.

`Catalog.commit_table(namespace, name, requirements, updates)` takes a change in the shape of the
REST `CommitTableRequest`. A catalog that keeps a pointer to the current metadata file (the SQLite
and folder catalogs) then:

1. reads the metadata the table points at now (or takes the caller's copy of that same file:
   metadata files are immutable);
2. checks the requirements against it (`CommitConflictError` naming the failed one);
3. applies the updates (`iceduck.spec.updates.apply_updates`), logging that file in `metadata-log`;
4. writes the result as a new metadata file and swaps the pointer to it only if it still points at
   the file read in 1 (else `CommitConflictError`, and the new file is deleted);
5. after the swap, deletes metadata files pruned from the log when
   `write.metadata.delete-after-commit.enabled` is true.

A caller that holds a change as requirements and updates (the REST server) may ask for more than one
`attempts`: a swap lost to another writer then starts again at 1 on that writer's state, and the
requirements decide whether the change still applies. (`iceduck.transaction`'s committer re-plans
its change instead: it retries above this module.)

`commit_tables(changes)` commits several tables' changes all or nothing (a multi-table
transaction, the REST `CommitTransactionRequest`): steps 1-3 for every table, every new metadata
file written, then one publish that swaps every pointer or none (`_publish_all`: the SQLite
catalog's one database transaction); on any failure the files written are deleted.

This module holds the parts both catalogs share: those steps in that order (`PointerCommits`, whose
`commit_table` both inherit; each supplies only how it finds and publishes metadata files), naming
and writing metadata files, reading the base, checking and applying, the clean-up, and the
crash-test hook.

For crash tests, `ICEDUCK_TEST_CRASH_AT=<stage>` makes the process exit abruptly (`os._exit`) at
that stage: `data-written`, `snapshot-written`, `metadata-written`, `committed`.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from iceduck.errors import CommitConflictError, IcebergError, TableNotFoundError, ValidationError
from iceduck.io.fileio import FileIO
from iceduck.io.paths import base_name, is_under, join_path, parent_path, table_folder_of
from iceduck.spec.metadata_rules import check_metadata_json
from iceduck.spec.table_metadata import TableMetadata, read_table_metadata, table_metadata_to_json
from iceduck.spec.updates import (
    AssertCreate,
    TableRequirement,
    TableUpdate,
    apply_updates,
    check_requirements,
    pruned_metadata_log,
)

CRASH_ENV = "ICEDUCK_TEST_CRASH_AT"
DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
METADATA_PATH = "write.metadata.path"


# (base metadata or None for a new table, the file it was read from, the new metadata) -> None or raise
MetadataCheck = Callable[[TableMetadata | None, str | None, TableMetadata], None]
# the same for one table of several: (namespace, name, base, base file, new metadata) -> None or raise
TablesCheck = Callable[[str, str, TableMetadata | None, str | None, TableMetadata], None]


@dataclass(frozen=True, slots=True)
class TableChange:
    """One table's part of a multi-table commit: the REST spec's `CommitTableRequest` with its
    identifier (`CommitTransactionRequest.table-changes` holds a list of them)."""

    namespace: str
    name: str
    requirements: tuple[TableRequirement, ...]
    updates: tuple[TableUpdate, ...]


def crash_point(stage: str) -> None:
    """Exit at once (no cleanup, no flush) when the crash-test hook names this stage."""
    if os.environ.get(CRASH_ENV) == stage:
        os._exit(77)


@dataclass(frozen=True, slots=True)
class CommittedTable:
    """A successful commit: the new metadata and its file, and the metadata the updates were
    applied to (None for a new table), which may be newer than the one the change was planned on
    when another commit came in between without breaking a requirement."""

    metadata_location: str
    metadata: TableMetadata
    base_metadata_location: str | None
    base_metadata: TableMetadata | None


@dataclass(frozen=True, slots=True)
class LoadedMetadata:
    """Metadata a caller has already read, and its file: a catalog uses it instead of reading the
    file again when the table still points there."""

    location: str
    metadata: TableMetadata


def now_ms() -> int:
    """The current time in milliseconds since the epoch (a commit's `last-updated-ms`)."""
    return int(time.time() * 1000)


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
    configured = metadata.properties.get(METADATA_PATH)
    if configured:
        return configured.rstrip("/")
    return location.rsplit("/", 1)[0]


def new_metadata_path(folder: str, version: int) -> str:
    """`<folder>/<version:05d>-<uuid>.metadata.json`, the naming of Java and PyIceberg."""
    return join_path(folder, f"{version:05d}-{uuid.uuid4()}.metadata.json")


def next_metadata_path(metadata: TableMetadata, base: TableMetadata | None, base_location: str | None) -> str:
    """Where the metadata file `metadata` goes when it follows `base` (in `base_location`): numbered
    one past it, in `write.metadata.path` or beside it; a new table's (no base) is numbered 0 in the
    `metadata/` folder of its location."""
    if base is None or base_location is None:
        return new_metadata_path(join_path(metadata.location, "metadata"), 0)
    return new_metadata_path(metadata_folder(base, base_location), metadata_version(base_location, base) + 1)


def metadata_bytes(metadata: TableMetadata) -> bytes:
    """The bytes of a metadata file (indented JSON), checked against the spec's rules first: every
    metadata file iceduck writes goes through here, so no engine is handed a form the spec forbids."""
    obj = table_metadata_to_json(metadata)
    text = json.dumps(obj, indent=2)
    check_metadata_json(obj, table=metadata.location, text=text)
    return text.encode()


def write_metadata(io: FileIO, path: str, metadata: TableMetadata) -> None:
    """Write a new metadata file (exclusive create: an existing file is never replaced)."""
    io.write_new(path, metadata_bytes(metadata))


def read_base(io: FileIO, location: str, loaded: LoadedMetadata | None) -> TableMetadata:
    """The metadata in `location`: the caller's copy when it is of that file, else read."""
    if loaded is not None and loaded.location == location:
        return loaded.metadata
    return read_table_metadata(io.read(location), path=location)


def apply_commit(
    base: TableMetadata | None,
    base_location: str | None,
    requirements: Sequence[TableRequirement],
    updates: Sequence[TableUpdate],
    *,
    table: str,
) -> TableMetadata:
    """Check `requirements` against `base` (None: no table) and apply `updates` to it."""
    check_requirements(base, requirements, table=table)
    return apply_updates(base, updates, metadata_location=base_location, last_updated_ms=now_ms())


def remove_quietly(io: FileIO, path: str) -> None:
    """Delete a file this commit wrote, ignoring errors (it may be gone already)."""
    with contextlib.suppress(IcebergError, OSError):
        io.delete(path)


def delete_pruned_metadata(io: FileIO, base: TableMetadata, new: TableMetadata, base_location: str) -> None:
    """After a commit, delete the metadata files the log no longer lists, if the table says so: only
    those inside the folder the table is in (`table_folder_of(base_location)`) or the folder of
    `base_location` itself. A log entry may name any path, and the `location` a
    registered metadata file records may be another table's folder: the location guard keeps
    files elsewhere."""
    if new.properties.get(DELETE_AFTER_COMMIT, "false").lower() != "true":
        return
    roots = (table_folder_of(base_location), parent_path(base_location))
    for entry in pruned_metadata_log(base, new, base_location):
        if any(is_under(entry.metadata_file, root, strict=True) for root in roots):
            remove_quietly(io, entry.metadata_file)


class PointerCommits:
    """`commit_table` for a catalog that keeps a pointer to each table's current metadata file.

    The steps and their order (read, check, apply, publish, clean up) are the same for every such
    catalog; a subclass says only how it names a table in messages (`_table_ref`), where the
    pointer is (`_current_location`) and how it publishes a first and a next metadata file
    (`_publish_first`, `_publish_next`).
    """

    _io: FileIO

    def _table_ref(self, namespace: str, name: str) -> str:
        """The table as error messages name it."""
        raise NotImplementedError

    def _current_location(self, namespace: str, name: str) -> str:
        """The metadata file the table points at (`TableNotFoundError` if there is no table)."""
        raise NotImplementedError

    def _publish_first(self, namespace: str, name: str, metadata: TableMetadata) -> str:
        """Write `metadata` as a new table's first metadata file and register the table; its
        location (`AlreadyExistsError` if the table exists)."""
        raise NotImplementedError

    def _publish_next(
        self, namespace: str, name: str, location: str, base: TableMetadata, metadata: TableMetadata
    ) -> str:
        """Write `metadata` and move the pointer to it from `location` (which holds `base`), passing
        the `metadata-written` and `committed` crash points; its location. `CommitConflictError`
        (nothing changed) when the pointer is no longer at `location`."""
        raise NotImplementedError

    def commit_table(
        self,
        namespace: str,
        name: str,
        requirements: Sequence[TableRequirement],
        updates: Sequence[TableUpdate],
        *,
        loaded: LoadedMetadata | None = None,
        check: MetadataCheck | None = None,
        attempts: int = 1,
    ) -> CommittedTable:
        """Commit a change given as requirements and updates (the steps above).

        With `assert-create` the updates build a new table (`AlreadyExistsError` if the name is
        taken); otherwise they apply to the metadata the table points at, if it meets the
        requirements. `CommitConflictError` when it does not or another commit moved the pointer
        first; nothing is changed then. `loaded` is metadata the caller read already. `check(base,
        base_location, new)` runs on the result before anything is written (`iceduck serve`'s
        location guard); what it raises stops the commit. With `attempts` above 1, a pointer swap
        lost to another writer starts again from step 1 on what that writer left (its requirements
        decide), up to `attempts` swaps in all: what a REST server does with a client's change.
        """
        ref = self._table_ref(namespace, name)
        if any(isinstance(r, AssertCreate) for r in requirements):
            created = apply_commit(None, None, requirements, updates, table=ref)
            if check is not None:
                check(None, None, created)
            return CommittedTable(self._publish_first(namespace, name, created), created, None, None)
        for attempt in range(1, attempts + 1):
            location = self._current_location(namespace, name)
            base = read_base(self._io, location, loaded)
            new = apply_commit(base, location, requirements, updates, table=ref)
            if check is not None:
                check(base, location, new)
            try:
                path = self._publish_next(namespace, name, location, base, new)
            except CommitConflictError:
                if attempt == attempts:
                    raise
                continue  # only the swap was lost: the requirements are checked again on the new state
            delete_pruned_metadata(self._io, base, new, location)
            return CommittedTable(path, new, location, base)
        raise ValidationError(f"{ref}: a commit needs at least one attempt, not {attempts}")

    def _publish_all(self, swaps: Sequence[tuple[str, str, str | None, str]]) -> None:
        """Move every pointer `(namespace, name, expected, new)` (`expected` None: register a new
        table) in one step, or none (`CommitConflictError` naming the table whose pointer moved)."""
        raise ValidationError(
            f"{type(self).__name__} cannot commit several tables at once: its tables have no shared "
            "pointer store to swap them together in"
        )

    def commit_tables(
        self, changes: Sequence[TableChange], *, check: TablesCheck | None = None, attempts: int = 1
    ) -> list[CommittedTable]:
        """Commit several tables' changes all or nothing: each change checked against its table's
        current metadata and applied (steps 1-3), every new metadata file written, then every
        pointer swapped in one `_publish_all`. Any failure (a requirement, a pointer another writer
        moved, `check`) deletes the files written here and leaves every table as it was; with
        `attempts` above 1 a lost swap starts again on what the other writer left, as in
        `commit_table`. The results are in the order of `changes`; metadata pruned from the logs is
        cleaned up after."""
        seen: set[tuple[str, str]] = set()
        for c in changes:
            if (c.namespace, c.name) in seen:
                raise ValidationError(f"a transaction changes {self._table_ref(c.namespace, c.name)} twice")
            seen.add((c.namespace, c.name))
        for attempt in range(1, attempts + 1):
            done: list[CommittedTable] = []
            written = False
            try:
                for c in changes:
                    done.append(self._write_next(c, check))
                written = True
                crash_point("metadata-written")
                self._publish_all(
                    [
                        (c.namespace, c.name, d.base_metadata_location, d.metadata_location)
                        for c, d in zip(changes, done, strict=True)
                    ]
                )
            except BaseException as e:
                for d in done:
                    remove_quietly(self._io, d.metadata_location)
                if written and isinstance(e, CommitConflictError) and attempt < attempts:
                    continue  # only a swap was lost: every change is checked again on the new state
                raise
            crash_point("committed")
            for d in done:
                if d.base_metadata is not None and d.base_metadata_location is not None:
                    delete_pruned_metadata(self._io, d.base_metadata, d.metadata, d.base_metadata_location)
            return done
        raise ValidationError(f"a commit needs at least one attempt, not {attempts}")

    def _write_next(self, c: TableChange, check: TablesCheck | None) -> CommittedTable:
        """Steps 1-3 for one table of `commit_tables`, and its new metadata file written."""
        ref = self._table_ref(c.namespace, c.name)
        creating = any(isinstance(r, AssertCreate) for r in c.requirements)
        location: str | None = None
        if not creating or self._exists(c.namespace, c.name):
            location = self._current_location(c.namespace, c.name)
        base = read_base(self._io, location, None) if location is not None else None
        new = apply_commit(base, location, c.requirements, c.updates, table=ref)
        if check is not None:
            check(c.namespace, c.name, base, location, new)
        path = next_metadata_path(new, base, location)
        write_metadata(self._io, path, new)
        return CommittedTable(path, new, location, base)

    def _exists(self, namespace: str, name: str) -> bool:
        """Whether the table exists (an `assert-create` of an existing table fails as a requirement)."""
        try:
            self._current_location(namespace, name)
        except TableNotFoundError:
            return False
        return True
