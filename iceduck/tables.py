"""The Python write API over one catalog: namespaces, tables and handles on a DuckDB connection.

`Tables` holds a catalog, a FileIO and the DuckDB connection writes run on; `TableHandle` is one of
its tables by name (every method reloads the table's current state, every write is one commit).
`iceduck.lake.Lake` adds SQL on top (`Lake.sql`, routed by `iceduck.sql.router`, which works on this
API and so sits between the two).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import duckdb

from iceduck.catalog.base import check_namespace, split_table_name
from iceduck.errors import IcebergError, ValidationError
from iceduck.io.fileio import FileIO
from iceduck.io.paths import is_under
from iceduck.io.storage import default_io, is_remote
from iceduck.spec.partitioning import PartitionField, PartitionSpec
from iceduck.spec.snapshots import Snapshot
from iceduck.spec.sorting import SortField, SortOrder
from iceduck.spec.types import Schema
from iceduck.table import Table
from iceduck.transaction.schema_update import SchemaChanges

if TYPE_CHECKING:
    from iceduck.transaction.commit import CommitResult, TableCommitter
    from iceduck.transaction.row_level import Pruner

# The write stack (`iceduck.transaction.operations`, `row_level`, ..., the Parquet writer, commits) is imported by the
# methods that write: a session that only reads (`iceduck -c "select 1"`) does not pay for it.

T = TypeVar("T")

__all__ = ["PurgeReport", "SchemaUpdate", "TableHandle", "Tables", "purge_files"]


class SchemaUpdate(SchemaChanges):
    """Schema changes committed together when the `with` block ends without an error."""

    def __init__(self, handle: TableHandle) -> None:
        super().__init__(handle._lake.con)
        self._handle = handle
        self.result: CommitResult | None = None

    def __enter__(self) -> SchemaUpdate:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None and not self.empty:
            self.result = self.commit()

    def commit(self) -> CommitResult:
        """Commit the recorded changes now (also done by leaving the `with` block)."""
        from iceduck.transaction import evolve as ops

        return ops.update_schema(self._handle._committer(), self)


class _Current(Generic[T]):
    """A read-only attribute of a `TableHandle` read from the table as it is now (loaded on each access)."""

    __slots__ = ("read",)

    def __init__(self, read: Callable[[Table], T]) -> None:
        self.read = read

    def __get__(self, handle: TableHandle, owner: type | None = None) -> T:
        return self.read(handle.load())


class TableHandle:
    """A table of the lake's catalog, by name. Every method reloads the table's current state."""

    def __init__(self, lake: Tables, identifier: str) -> None:
        self._lake = lake
        self.namespace, self.name = split_table_name(identifier)
        self._loaded: Table | None = None

    def pinned(self, table: Table) -> TableHandle:
        """A handle whose next operation starts from `table`, just loaded (by one SQL statement), instead
        of loading it again: a REST catalog's loadTable is a request. Later operations load as usual."""
        handle = TableHandle(self._lake, self.identifier)
        handle._loaded = table
        return handle

    @property
    def identifier(self) -> str:
        """`namespace.table`."""
        return f"{self.namespace}.{self.name}"

    def __repr__(self) -> str:
        return f"TableHandle({self.identifier!r})"

    def _committer(self) -> TableCommitter:
        from iceduck.transaction.commit import TableCommitter

        loaded, self._loaded = self._loaded, None
        return TableCommitter(self._lake.catalog, self.namespace, self.name, self._lake.io, loaded=loaded)

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        cur = self._lake.con.cursor()
        try:
            yield cur
        finally:
            cur.close()

    # -- reading state -------------------------------------------------------------------------------

    def load(self) -> Table:
        """The table as it is now (`TableNotFoundError` if it does not exist)."""
        return self._committer().load()

    metadata_location = _Current[str](lambda t: t.metadata_location)
    schema = _Current[Schema](lambda t: t.metadata.schema)
    spec = _Current[PartitionSpec](lambda t: t.metadata.default_spec)
    sort_order = _Current[SortOrder](lambda t: t.metadata.default_sort_order)
    properties = _Current[Mapping[str, str]](lambda t: t.metadata.properties)
    format_version = _Current[int](lambda t: t.metadata.format_version)
    location = _Current[str](lambda t: t.metadata.location)

    def current_snapshot(self) -> Snapshot | None:
        return self.load().metadata.current_snapshot()

    # -- writing rows ------------------------------------------------------------------------------

    def append(self, data: Any, *, by_name: bool = True) -> CommitResult:
        """Append rows (Arrow table/batches/reader, DuckDB relation, pandas DataFrame); one commit."""
        from iceduck.transaction import operations as ops

        with self._cursor() as cur:
            return ops.append(self._committer(), cur, data, by_name=by_name)

    def _zone(self, where: str | None, zone: str | None) -> str | None:
        """The TimeZone `where` is read in: `zone` when given (`lake.sql` passes its session's),
        else the lake connection's, as DuckDB would read the text there (a TIMESTAMPTZ literal is
        local time in that zone). The writer's own cursor starts in DuckDB's default zone and is
        set to UTC, so its zone is never the one meant."""
        if where is None or zone is not None:
            return zone
        # `con.sql` refuses while the user holds an unfinished result of `con.execute(...)`, where
        # `con.execute` would end that result (its remaining rows lost) without a word
        try:
            ((found,),) = self._lake.con.sql("SELECT current_setting('TimeZone')").fetchall()
        except duckdb.Error as e:
            raise ValidationError(
                f"table {self.identifier}: cannot read the TimeZone its WHERE is read in from the lake's "
                f"connection ({str(e).splitlines()[0]}); finish that connection's result first, or pass zone="
            ) from None
        return str(found)

    def delete(self, where: str | None = None, *, zone: str | None = None) -> CommitResult:
        """Delete rows matching a SQL predicate over the column names (None: every row); one commit.
        `zone`: the TimeZone DuckDB reads `where` in (default: the lake connection's `TimeZone`)."""
        from iceduck.transaction import row_level as ops

        zone = self._zone(where, zone)
        with self._cursor() as cur:
            return ops.delete(
                self._committer(), cur, where, prune=self._lake.pruner(where, cur, zone),
                exact=self._lake.exact(where, cur, zone), zone=zone,
            )  # fmt: skip

    def update(
        self, set: Mapping[str, str], where: str | None = None, *, zone: str | None = None
    ) -> CommitResult:
        """`UPDATE ... SET column = <SQL expression> WHERE <predicate>`; one commit. `zone`: the
        TimeZone DuckDB reads `where` and the SET expressions in (default: the lake connection's
        `TimeZone`)."""
        from iceduck.transaction import row_level as ops

        zone = self._zone("" if where is None else where, zone)  # the SET values are read in it too
        with self._cursor() as cur:
            return ops.update(
                self._committer(), cur, set, where, prune=self._lake.pruner(where, cur, zone), zone=zone
            )

    def overwrite(
        self, data: Any, where: str | None = None, *, by_name: bool = True, zone: str | None = None
    ) -> CommitResult:
        """Replace the rows matching `where` (None: all rows) with `data`; one commit. `zone`: the
        TimeZone DuckDB reads `where` in (default: the lake connection's `TimeZone`)."""
        from iceduck.transaction import operations as ops

        zone = self._zone(where, zone)
        with self._cursor() as cur:
            return ops.overwrite(
                self._committer(), cur, data, where, by_name=by_name,
                prune=self._lake.pruner(where, cur, zone), zone=zone,
            )  # fmt: skip

    # -- evolving the table ----------------------------------------------------------------------

    def update_schema(self) -> SchemaUpdate:
        """Schema changes committed at the end of a `with` block: `add_column`, `rename_column`,
        `drop_column`, `widen_column`."""
        return SchemaUpdate(self)

    def update_spec(self, partition_by: Sequence[str | PartitionField]) -> CommitResult:
        """Partition new data by these terms (existing files keep their spec)."""
        from iceduck.transaction import evolve as ops

        return ops.update_spec(self._committer(), partition_by)

    def set_sort_order(self, sort_by: Sequence[str | SortField]) -> CommitResult:
        """Sort new data files by these terms (empty: unsorted)."""
        from iceduck.transaction import evolve as ops

        return ops.set_sort_order(self._committer(), sort_by)

    def set_properties(self, properties: Mapping[str, Any]) -> CommitResult:
        """Set table properties."""
        from iceduck.transaction import evolve as ops

        return ops.set_properties(self._committer(), properties)

    def unset_properties(self, keys: Iterable[str]) -> CommitResult:
        """Remove table properties."""
        from iceduck.transaction import evolve as ops

        return ops.unset_properties(self._committer(), keys)

    def upgrade_format_version(self, version: int = 3) -> CommitResult:
        """Upgrade the format version (one-way)."""
        from iceduck.transaction import evolve as ops

        return ops.upgrade_format_version(self._committer(), version)

    def create_tag(self, name: str, snapshot_id: int | None = None, **retention: int) -> CommitResult:
        """Tag snapshot `snapshot_id` (default: the current one) `name` (`max_ref_age_ms` may be given)."""
        from iceduck.spec.snapshots import SnapshotRefType
        from iceduck.transaction import refs

        return refs.create_ref(self._committer(), name, SnapshotRefType.TAG, snapshot_id, **retention)

    def create_branch(self, name: str, snapshot_id: int | None = None, **retention: int) -> CommitResult:
        """Branch `name` at snapshot `snapshot_id` (default: the current one); `max_ref_age_ms`,
        `max_snapshot_age_ms`, `min_snapshots_to_keep` may be given. Writes go to `main` only."""
        from iceduck.spec.snapshots import SnapshotRefType
        from iceduck.transaction import refs

        return refs.create_ref(self._committer(), name, SnapshotRefType.BRANCH, snapshot_id, **retention)

    def drop_ref(self, name: str) -> CommitResult:
        """Remove branch or tag `name` (not `main`)."""
        from iceduck.transaction import refs

        return refs.drop_ref(self._committer(), name)


class Tables:
    """The namespaces and tables of one catalog, written through one DuckDB connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection, catalog: Any, io: FileIO | None = None) -> None:
        self.con = con
        self.catalog: Any = catalog
        self.io: FileIO = io or default_io()

    def pruner(
        self, where: str | None, con: duckdb.DuckDBPyConnection, zone: str | None = None
    ) -> Pruner | None:
        """How DELETE/UPDATE/overwrite derive a pruning predicate from `where`, read in TimeZone
        `zone` (None: `con`'s) (None: they read every live file). The DuckDB binding's `Lake`
        overrides this with DuckDB's own reading of the text."""
        return None

    def exact(
        self, where: str | None, con: duckdb.DuckDBPyConnection, zone: str | None = None
    ) -> Pruner | None:
        """The predicate that is exactly `where` (read in TimeZone `zone`; None: `con`'s), for DELETE to drop wholly matching files unread
        (None: it reads every candidate file). `Lake` overrides this with DuckDB's reading."""
        return None

    # -- namespaces --------------------------------------------------------------------------------

    def create_namespace(self, namespace: str, properties: Mapping[str, str] | None = None) -> None:
        """Create a namespace (`AlreadyExistsError` if it exists)."""
        self.catalog.create_namespace(check_namespace(namespace), properties)

    def list_namespaces(self, parent: str | None = None) -> tuple[str, ...]:
        """Namespaces one level below `parent` (top level when None)."""
        return tuple(self.catalog.list_namespaces(parent))

    def drop_namespace(self, namespace: str) -> None:
        """Drop an empty namespace."""
        self.catalog.drop_namespace(namespace)

    # -- tables ------------------------------------------------------------------------------------

    def create_table(
        self,
        identifier: str,
        schema: Any,
        partition_by: Sequence[str | PartitionField] | None = None,
        sort_by: Sequence[str | SortField] | None = None,
        properties: Mapping[str, str] | None = None,
        format_version: int = 3,
        *,
        location: str | None = None,
    ) -> TableHandle:
        """Create a table. `schema`: a `pyarrow.Schema`, an iceduck `Schema`, or (name, type) pairs with
        DuckDB or Iceberg type names. Partition terms: `"col"`, `"day(ts)"`, `"bucket(16, id)"`,
        `"truncate(4, name)"`, `"void(x)"` (optionally `... AS name`)."""
        from iceduck.transaction import create as ops

        with contextlib.closing(self.con.cursor()) as cur:
            ops.create_table(
                self.catalog, identifier, schema, partition_by=partition_by, sort_by=sort_by,
                properties=properties, format_version=format_version, location=location, con=cur, io=self.io,
            )  # fmt: skip
        return TableHandle(self, identifier)

    def table(self, identifier: str) -> TableHandle:
        """A handle on an existing table (`TableNotFoundError` if there is none)."""
        handle = TableHandle(self, identifier)
        handle.load()
        return handle

    def list_tables(self, namespace: str) -> tuple[str, ...]:
        """Names of the tables in a namespace."""
        return tuple(self.catalog.list_tables(namespace))

    def drop_table(self, identifier: str, purge: bool = False) -> None:
        """Remove a table from the catalog; with `purge`, also delete the files it references inside its
        location (`purge_files`)."""
        namespace, name = split_table_name(identifier)
        table: Table | None = None
        if purge:
            table = TableHandle(self, identifier).load()
        self.catalog.drop_table(namespace, name)
        if table is not None:
            purge_files(table)

    def rename_table(self, identifier: str, new_identifier: str) -> None:
        """Rename a table (its files stay where they are)."""
        namespace, name = split_table_name(identifier)
        new_namespace, new_name = split_table_name(new_identifier)
        rename = getattr(self.catalog, "rename_table", None)
        if rename is None:
            raise ValidationError(
                f"{type(self.catalog).__name__} cannot rename tables (a folder catalog names tables by folder)"
            )
        rename(namespace, name, new_namespace, new_name)


@dataclass(frozen=True, slots=True)
class PurgeReport:
    """What a purge did: the files it asked the store to delete, and the files the table's metadata
    names that it left because they are outside the table's location or another table's."""

    deleted: tuple[str, ...]
    left: tuple[tuple[str, str], ...]  # (path, why)


def purge_files(table: Table, owner: Callable[[str], str | None] | None = None) -> PurgeReport:
    """Delete the files the table's metadata reaches (all snapshots), its metadata files, and the table
    folder when it is left empty; only files inside the table's location (the location guard,
    `iceduck.io.paths.is_under`) and, with `owner` (path -> the other table it belongs to,
    or None), not another table's. Files the metadata names elsewhere are left and reported: a
    manifest list or a statistics file may name any path, and purge must not delete it."""
    paths: set[str] = set()
    md = table.metadata
    root = table.resolver.actual_location

    def inside(path: str) -> bool:
        return is_under(path, root, strict=True)

    for snap in md.snapshots:
        listed = [table.resolve(p) for p in (snap.manifest_list, *(snap.manifests or ())) if p]
        paths.update(listed)
        if not all(inside(p) for p in listed):
            continue  # not even read: a file outside is no manifest list of this table's
        try:
            manifests = table.manifests(snap)
        except IcebergError:
            continue
        for mf in manifests:
            paths.add(table.resolve(mf.manifest_path))
            if not inside(table.resolve(mf.manifest_path)):
                continue
            try:
                for e in table.manifest(mf).entries:
                    paths.add(table.resolve(e.data_file.file_path))
            except IcebergError:
                continue
    for entry in md.metadata_log:
        paths.add(table.resolve(entry.metadata_file))
    for stats in md.statistics:
        paths.add(table.resolve(stats.statistics_path))
    for pstats in md.partition_statistics:
        paths.add(table.resolve(pstats.statistics_path))
    paths.add(table.metadata_location)
    deleted: list[str] = []
    left: list[tuple[str, str]] = []
    for path in sorted(paths):
        if not inside(path):
            left.append((path, f"outside the table location {root}"))
        elif owner is not None and (other := owner(path)) is not None:
            left.append((path, f"a file of table {other}"))
        else:
            deleted.append(path)
    with contextlib.suppress(IcebergError, OSError):
        table.io.delete_many(deleted)
    report = PurgeReport(tuple(deleted), tuple(left))
    if is_remote(root):
        return report  # object stores have no folders to remove
    for folder, _dirs, _files in sorted(os.walk(root, topdown=False), key=lambda x: -len(x[0])):
        with contextlib.suppress(OSError):
            os.rmdir(folder)  # only empty folders go
    return report
