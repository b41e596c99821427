"""Changes to several tables of one catalog committed together: all of them or none.

`StagingCatalog` wraps a catalog for the length of a transaction (`BEGIN ... COMMIT` in SQL,
`iceduck.sql.transactions`). Every writer keeps working as it does alone (a `TableCommitter`
plans its change and calls `commit_table`), but a commit only *stages*: the requirements are
checked against the table as the transaction left it, the updates applied, and the result written
as a staged metadata file (`staged-<uuid>.json.staged` beside the table's metadata files: not a
`*.metadata.json` name, so no reader listing the folder for the newest version takes it) that
`load_table` answers from then on. So statements inside the transaction read what earlier ones
wrote, and nobody else sees any of it.

`commit_transaction()` sends, for each table written, every update the transaction made to it,
with the requirements those updates need on the table as the transaction first read it
(`iceduck.spec.updates.requirements_for`, what Java's `Transaction` asserts): the whole set goes to
the catalog in one multi-table commit (`commit_tables`: the SQLite catalog swaps every pointer in
one database transaction; a REST catalog gets `POST .../transactions/commit`). Several statements
on one table therefore become several snapshots in one commit, as in Java, each in the history.
A table another writer changed meanwhile (its `main` moved, its schema changed) fails its
requirement and with it the whole commit: nothing is retried, nothing changes, one line names
the table and the requirement.

`rollback()` (ROLLBACK, or a failed commit) deletes what the transaction wrote: the staged
metadata files, and the manifest lists, manifests, data, delete and statistics files its
snapshots added (only inside each table's location).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from iceduck.catalog.commit import (
    CommittedTable,
    LoadedMetadata,
    TableChange,
    apply_commit,
    metadata_folder,
    read_base,
    write_metadata,
)
from iceduck.catalog.locate import TableLocation
from iceduck.errors import CommitStateUnknownError, IcebergError, ValidationError
from iceduck.io.fileio import FileIO
from iceduck.io.paths import is_under, join_path, table_folder_of
from iceduck.spec.manifest import STATUS_ADDED
from iceduck.spec.table_metadata import TableMetadata
from iceduck.spec.updates import (
    AssertCreate,
    RemoveSnapshots,
    TableRequirement,
    TableUpdate,
    requirements_for,
)
from iceduck.table import Table

__all__ = ["StagedTable", "StagingCatalog", "TransactionError"]

STAGED_PREFIX = "staged-"
STAGED_SUFFIX = ".json.staged"

# catalog operations that change something besides a table's metadata: not staged, so refused
_REFUSED = {
    "create_namespace": "CREATE SCHEMA",
    "drop_namespace": "DROP SCHEMA",
    "update_namespace_properties": "changing a namespace",
    "create_table_entry": "CREATE TABLE",
    "register_table": "registering a table",
    "drop_table": "DROP TABLE",
    "rename_table": "ALTER TABLE ... RENAME",
    "commit": "moving a table's pointer",
    "commit_all": "moving tables' pointers",
    "commit_tables": "a nested multi-table commit",
}


class TransactionError(ValidationError):
    """A statement a transaction cannot hold; the transaction is left as it was."""


@dataclass(slots=True)
class StagedTable:
    """One table the transaction wrote: where it started, where it is now, what changed it."""

    namespace: str
    name: str
    base_location: str  # the metadata file the catalog pointed at when the transaction first wrote
    base: TableMetadata
    location: str  # the latest staged metadata file
    metadata: TableMetadata
    updates: list[TableUpdate] = field(default_factory=list)
    staged_files: list[str] = field(default_factory=list)

    @property
    def identifier(self) -> str:
        return f"{self.namespace}.{self.name}"

    def change(self) -> TableChange:
        """Every update of the transaction, with what they need of the table as first read."""
        requirements: list[TableRequirement] = requirements_for(self.base, self.updates)
        return TableChange(self.namespace, self.name, tuple(requirements), tuple(self.updates))


class StagingCatalog:
    """A catalog as one open transaction sees it (see the module docstring). Anything it does not
    stage or refuse is the wrapped catalog's."""

    def __init__(self, catalog: Any, io: FileIO | None = None) -> None:
        self.catalog = catalog
        self._io: FileIO = io if io is not None else catalog.io
        self.staged: dict[tuple[str, str], StagedTable] = {}
        self.group: list[StagingCatalog] = [self]  # the stagings of one transaction (one catalog each)
        self._generation = 0

    @property
    def name(self) -> str:
        return str(self.catalog.name)

    @property
    def io(self) -> FileIO:
        return self._io

    def __getattr__(self, attr: str) -> Any:
        if attr in _REFUSED:
            what = _REFUSED[attr]

            def refused(*args: Any, **kwargs: Any) -> Any:
                raise TransactionError(
                    f"{what} cannot run inside BEGIN ... COMMIT on catalog '{self.name}': a transaction "
                    "holds changes to existing tables' data and schemas only; COMMIT or ROLLBACK first"
                )

            return refused
        return getattr(self.catalog, attr)

    def __repr__(self) -> str:
        return f"StagingCatalog({self.catalog!r}, {len(self.staged)} table(s) staged)"

    # -- what the transaction reads ---------------------------------------------------------------

    def change_token(self) -> Hashable:
        """Moves with every staged commit only: inside a transaction, a table it has not written
        reads as it was first read (DuckDB's own transactions read a snapshot too)."""
        return ("transaction", id(self), self._generation)

    def load_table(self, namespace: str, name: str) -> str:
        staged = self.staged.get((namespace, name))
        if staged is not None:
            return staged.location
        return str(self.catalog.load_table(namespace, name))

    @property
    def written(self) -> list[StagedTable]:
        """The tables the transaction wrote, in the order it first wrote them."""
        return list(self.staged.values())

    # -- what the transaction writes ----------------------------------------------------------------

    def commit_table(
        self,
        namespace: str,
        name: str,
        requirements: Sequence[TableRequirement],
        updates: Sequence[TableUpdate],
        *,
        loaded: LoadedMetadata | None = None,
        **_: Any,
    ) -> CommittedTable:
        """Stage a change: checked and applied on the table as the transaction left it, written as
        a staged metadata file; nothing reaches the catalog."""
        if any(isinstance(r, AssertCreate) for r in requirements):
            return self.__getattr__("create_table_entry")()
        if any(isinstance(u, RemoveSnapshots) for u in updates):
            raise TransactionError(
                f"table {namespace}.{name}: expiring snapshots cannot run inside BEGIN ... COMMIT (the files "
                "it deletes could not come back on ROLLBACK); run it outside the transaction"
            )
        key = (namespace, name)
        staged = self.staged.get(key)
        if staged is None:
            location = str(self.catalog.load_table(namespace, name))
            base = read_base(self._io, location, loaded)
        else:
            location, base = staged.location, staged.metadata
        new = apply_commit(base, location, requirements, updates, table=f"table {namespace}.{name}")
        path = join_path(metadata_folder(base, location), f"{STAGED_PREFIX}{uuid.uuid4()}{STAGED_SUFFIX}")
        write_metadata(self._io, path, new)
        if staged is None:
            staged = self.staged[key] = StagedTable(namespace, name, location, base, path, new)
        staged.location, staged.metadata = path, new
        staged.updates.extend(updates)
        staged.staged_files.append(path)
        self._generation += 1
        return CommittedTable(path, new, location, base)

    # -- the end of the transaction -------------------------------------------------------------------

    def commit_transaction(self) -> list[str]:
        """Commit every staged table in one catalog commit (all or nothing); the identifiers
        committed. On failure every file the transaction wrote is deleted and the error raised
        (`CommitStateUnknownError`: the files are kept, the commit may have happened)."""
        tables = self.written
        if not tables:
            return []
        changes = [t.change() for t in tables]
        try:
            if len(changes) == 1:
                c = changes[0]
                self.catalog.commit_table(c.namespace, c.name, c.requirements, c.updates)
            else:
                commit_tables = getattr(self.catalog, "commit_tables", None)
                if commit_tables is None:
                    raise TransactionError(
                        f"catalog '{self.name}' cannot commit several tables at once "
                        f"({', '.join(t.identifier for t in tables)}); nothing was committed"
                    )
                commit_tables(changes)
        except CommitStateUnknownError:
            # the commit may have happened: its files may be referenced now, keep them (only the
            # staged metadata files are never anybody's)
            self._remove_staged()
            raise
        except BaseException:
            self.rollback()
            raise
        self._remove_staged()
        return [t.identifier for t in tables]

    def rollback(self) -> None:
        """Delete everything the transaction wrote (ROLLBACK, or a commit that failed)."""
        for t in self.written:
            with contextlib.suppress(IcebergError, OSError):
                for path in added_files(t, self._io):
                    _remove(self._io, path)
        self._remove_staged()

    def _remove_staged(self) -> None:
        for t in self.written:
            for path in t.staged_files:
                _remove(self._io, path)
        self.staged.clear()
        self._generation += 1


def added_files(t: StagedTable, io: FileIO) -> list[str]:
    """The files the transaction's snapshots of `t` added (manifest lists, the manifests they wrote,
    the data and delete files those manifests add, statistics files), inside the table's location."""
    table = Table.from_location(TableLocation(t.location, table_folder_of(t.location), t.identifier), io=io)
    old = {s.snapshot_id for s in t.base.snapshots}
    new = [s for s in t.metadata.snapshots if s.snapshot_id not in old]
    ids = {s.snapshot_id for s in new}
    found: list[str] = []
    for snap in new:
        for manifest in table.manifests(snap):
            if manifest.added_snapshot_id not in ids:
                continue  # kept from before the transaction
            for entry in table.manifest(manifest).entries:
                if entry.status == STATUS_ADDED and entry.snapshot_id in ids:
                    found.append(table.resolve(entry.data_file.file_path))
            found.append(table.resolve(manifest.manifest_path))
        if snap.manifest_list is not None:
            found.append(table.resolve(snap.manifest_list))
    old_stats = {f.statistics_path for f in t.base.statistics}
    old_stats |= {f.statistics_path for f in t.base.partition_statistics}
    stats_paths = [f.statistics_path for f in t.metadata.statistics]
    stats_paths += [f.statistics_path for f in t.metadata.partition_statistics]
    found += [table.resolve(p) for p in stats_paths if p not in old_stats]
    root = table.resolver.actual_location
    return list(dict.fromkeys(p for p in found if is_under(p, root, strict=True)))


def _remove(io: FileIO, path: str) -> None:
    with contextlib.suppress(IcebergError, OSError):
        io.delete(path)
