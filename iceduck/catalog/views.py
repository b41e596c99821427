"""Iceberg views in a catalog: what a catalog holding views offers (`ViewCatalog`), and the SQLite
catalog's view records (`SqlViews`, mixed into `SqlCatalog`).

A view is a row of `iceberg_tables` like a table, with `iceberg_type = 'VIEW'` (Java Iceberg's
`JdbcCatalog` layout; PyIceberg 0.12's SQL catalog skips such rows as "not tables" and holds no
views itself), whose `metadata_location` names the view's current metadata file
(`<view location>/metadata/<NNNNN>-<uuid>.metadata.json`, `iceduck.spec.view_metadata`). A
catalog file of the old layout (no `iceberg_type` column) cannot tell views from tables: views
are refused there. Changes are compare-and-swap on `metadata_location`, as for tables.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from iceduck.catalog.base import check_namespace, check_table_name
from iceduck.catalog.commit import new_metadata_path, remove_quietly
from iceduck.catalog.locate import metadata_version
from iceduck.catalog.locations import check_location_free
from iceduck.errors import (
    AlreadyExistsError,
    CommitConflictError,
    TableNotFoundError,
    ValidationError,
)
from iceduck.io.paths import join_path, normalize_path
from iceduck.spec import view_metadata as vm

if TYPE_CHECKING:
    import contextlib

    from iceduck.io.fileio import FileIO
    from iceduck.spec.types import Schema

VIEW_TYPE = "VIEW"
COMMIT_ATTEMPTS = 5

# (base or None for a new view, the metadata about to be written): raises to refuse it
ViewCheck = Callable[["vm.ViewMetadata | None", "vm.ViewMetadata"], None]


class ViewNotFoundError(TableNotFoundError):
    """The catalog has no view of that name."""


@dataclass(frozen=True, slots=True)
class LoadedView:
    """A view as a catalog returns it: its current metadata file and what it holds."""

    namespace: str
    name: str
    metadata_location: str
    metadata: vm.ViewMetadata

    @property
    def identifier(self) -> str:
        return f"{self.namespace}.{self.name}"


@runtime_checkable
class ViewCatalog(Protocol):
    """What a catalog holding Iceberg views offers (the SQLite catalog and the REST client)."""

    def list_views(self, namespace: str) -> tuple[str, ...]: ...

    def view_exists(self, namespace: str, name: str) -> bool: ...

    def load_view(self, namespace: str, name: str) -> LoadedView: ...

    def create_view(
        self,
        namespace: str,
        name: str,
        *,
        schema: Schema,
        version: vm.ViewVersion,
        properties: dict[str, str] | None = None,
        location: str | None = None,
    ) -> LoadedView: ...

    def commit_view(
        self,
        namespace: str,
        name: str,
        requirements: Sequence[vm.AssertViewUUID],
        updates: Sequence[vm.ViewUpdate],
    ) -> LoadedView: ...

    def drop_view(self, namespace: str, name: str) -> None: ...

    def rename_view(self, namespace: str, name: str, new_namespace: str, new_name: str) -> None: ...


def holds_views(catalog: Any) -> bool:
    """Whether `catalog` can hold Iceberg views (an old-layout SQLite file cannot)."""
    if not isinstance(catalog, ViewCatalog):
        return False
    typed = getattr(catalog, "holds_views", True)
    return bool(typed() if callable(typed) else typed)


def view_metadata_path(metadata: vm.ViewMetadata, base_location: str | None) -> str:
    """Where the next metadata file of a view goes: `<location>/metadata/00000-<uuid>.metadata.json`
    for a new view, else beside the current file, numbered one past it."""
    if base_location is None:
        return new_metadata_path(join_path(metadata.location, "metadata"), 0)
    folder = normalize_path(base_location).rsplit("/", 1)[0]
    number = metadata_version(base_location)
    return new_metadata_path(folder, (number[0] if number else len(metadata.version_log)) + 1)


def write_view_metadata(io: FileIO, path: str, metadata: vm.ViewMetadata) -> None:
    """Write a new view metadata file (checked against the view spec; never over an existing file)."""
    io.write_new(path, vm.view_metadata_bytes(metadata))


def read_view(io: FileIO, namespace: str, name: str, location: str) -> LoadedView:
    return LoadedView(namespace, name, location, vm.read_view_metadata(io.read(location), path=location))


class SqlViews:
    """The view records of `SqlCatalog` (see the module docstring). Uses the catalog's own
    connections, names and messages."""

    # provided by SqlCatalog
    _name: str
    _io: FileIO
    _typed: bool
    _shown: str
    _database: str

    if TYPE_CHECKING:

        def _write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]: ...
        def _read(self) -> contextlib.AbstractContextManager[sqlite3.Connection]: ...
        def _require_namespace(self, conn: sqlite3.Connection, namespace: str) -> None: ...
        def default_table_location(self, namespace: str, name: str) -> str: ...

    def holds_views(self) -> bool:
        return self._typed

    def _view_ref(self, namespace: str, name: str) -> str:
        if self._shown != self._database:
            return f"view {namespace}.{name} in catalog '{self._name}'"
        return f"view {namespace}.{name} in catalog '{self._name}' ({self._database})"

    def _need_typed(self, namespace: str, name: str) -> None:
        if not self._typed:
            raise ValidationError(
                f"{self._view_ref(namespace, name)}: this catalog file has no iceberg_type column "
                "(an old layout), so it cannot tell views from tables; open it once with PyIceberg 0.12 "
                "or newer to add the column"
            )

    def _check_view_name(self, namespace: str, name: str) -> None:
        """`ValidationError` for a name no view may have; `ViewNotFoundError` where the catalog file
        cannot tell views from tables (it holds none)."""
        check_namespace(namespace)
        check_table_name(name)
        if not self._typed:
            raise ViewNotFoundError(f"{self._view_ref(namespace, name)} does not exist")

    def _view_rows(
        self, conn: Any, columns: str, where: str = "", params: tuple[Any, ...] = ()
    ) -> list[tuple[Any, ...]]:
        """`columns` of this catalog's view rows (`iceberg_type = 'VIEW'`) matching `where`, sorted by
        namespace and name: the one query of the view reads."""
        also = f" AND {where}" if where else ""
        return list(
            conn.execute(
                f"SELECT {columns} FROM iceberg_tables WHERE catalog_name = ? AND iceberg_type = ?{also} "
                "ORDER BY table_namespace, table_name",
                (self._name, VIEW_TYPE, *params),
            ).fetchall()
        )

    def list_views(self, namespace: str) -> tuple[str, ...]:
        """Names of the views directly in `namespace`, sorted; `NamespaceNotFoundError` if absent."""
        check_namespace(namespace)
        with self._read() as conn:
            self._require_namespace(conn, namespace)
            if not self._typed:
                return ()
            rows = self._view_rows(conn, "table_name", "table_namespace = ?", (namespace,))
        return tuple(str(r[0]) for r in rows)

    def list_all_views(self) -> tuple[tuple[str, str, str], ...]:
        """(namespace, name, metadata location) of every view, in one read."""
        if not self._typed:
            return ()
        with self._read() as conn:
            rows = self._view_rows(conn, "table_namespace, table_name, metadata_location")
        return tuple((str(a), str(b), str(c)) for a, b, c in rows)

    def _view_location(self, namespace: str, name: str) -> str:
        self._check_view_name(namespace, name)
        with self._read() as conn:
            rows = self._view_rows(
                conn, "metadata_location", "table_namespace = ? AND table_name = ?", (namespace, name)
            )
        row = rows[0] if rows else None
        if row is None or not row[0]:
            raise ViewNotFoundError(f"{self._view_ref(namespace, name)} does not exist")
        return str(row[0])

    def view_exists(self, namespace: str, name: str) -> bool:
        try:
            self._view_location(namespace, name)
        except ViewNotFoundError:
            return False
        return True

    def load_view(self, namespace: str, name: str) -> LoadedView:
        """The view's current metadata; `ViewNotFoundError` if there is no such view."""
        return read_view(self._io, namespace, name, self._view_location(namespace, name))

    def default_view_location(self, namespace: str, name: str) -> str:
        """Where a new view's files go: as a table of that name's (`<warehouse>/<ns>/<name>`)."""
        return self.default_table_location(namespace, name)

    def create_view(
        self,
        namespace: str,
        name: str,
        *,
        schema: Schema,
        version: vm.ViewVersion,
        properties: dict[str, str] | None = None,
        location: str | None = None,
        check: ViewCheck | None = None,
    ) -> LoadedView:
        """Write the view's first metadata file and add its row; `AlreadyExistsError` when a table
        or view has the name, `NamespaceNotFoundError` without the namespace."""
        check_namespace(namespace)
        check_table_name(name)
        self._need_typed(namespace, name)
        metadata = vm.new_view_metadata(
            location=location or self.default_view_location(namespace, name),
            schema=schema,
            version=version,
            properties=properties,
        )
        if check is not None:
            check(None, metadata)
        else:  # a table there would read the view's metadata files as its own (and delete them as orphans)
            check_location_free(self, f"view {namespace}.{name}", metadata.location, self._io)  # type: ignore[arg-type]
        with self._read() as conn:
            self._require_namespace(conn, namespace)
            taken = conn.execute(
                "SELECT iceberg_type FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? "
                "AND table_name = ?",
                (self._name, namespace, name),
            ).fetchone()
        if taken is not None:
            what = "view" if taken[0] == VIEW_TYPE else "table"
            raise AlreadyExistsError(
                f"{self._view_ref(namespace, name)}: a {what} of that name exists already"
            )
        path = view_metadata_path(metadata, None)
        write_view_metadata(self._io, path, metadata)
        try:
            with self._write() as conn:
                self._require_namespace(conn, namespace)
                conn.execute(
                    "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, "
                    "previous_metadata_location, iceberg_type) VALUES (?, ?, ?, ?, NULL, ?)",
                    (self._name, namespace, name, path, VIEW_TYPE),
                )
        except sqlite3.IntegrityError:
            remove_quietly(self._io, path)
            raise AlreadyExistsError(
                f"{self._view_ref(namespace, name)}: a table or view of that name exists already"
            ) from None
        except BaseException:
            remove_quietly(self._io, path)
            raise
        return LoadedView(namespace, name, path, metadata)

    def commit_view(
        self,
        namespace: str,
        name: str,
        requirements: Sequence[vm.AssertViewUUID],
        updates: Sequence[vm.ViewUpdate],
        *,
        check: ViewCheck | None = None,
        now_ms: int | None = None,
    ) -> LoadedView:
        """Check `requirements` on the view's current metadata, apply `updates`, write the next
        metadata file and swap the row's pointer to it (again on the new state while another
        writer won the swap); `CommitConflictError` when a requirement fails."""
        ref = f"{namespace}.{name}"
        for attempt in range(COMMIT_ATTEMPTS):
            base = self.load_view(namespace, name)
            vm.check_view_requirements(base.metadata, requirements, view=ref)
            stamp = now_ms if now_ms is not None else int(time.time() * 1000)
            metadata = vm.apply_view_updates(base.metadata, updates, now_ms=stamp)
            if check is not None:
                check(base.metadata, metadata)
            path = view_metadata_path(metadata, base.metadata_location)
            write_view_metadata(self._io, path, metadata)
            try:
                with self._write() as conn:
                    cur = conn.execute(
                        "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? "
                        "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? "
                        "AND metadata_location = ? AND iceberg_type = ?",
                        (
                            path,
                            base.metadata_location,
                            self._name,
                            namespace,
                            name,
                            base.metadata_location,
                            VIEW_TYPE,
                        ),
                    )
                    swapped = cur.rowcount == 1
            except BaseException:
                remove_quietly(self._io, path)
                raise
            if swapped:
                return LoadedView(namespace, name, path, metadata)
            remove_quietly(self._io, path)
            if attempt == COMMIT_ATTEMPTS - 1:
                break
        raise CommitConflictError(
            f"{self._view_ref(namespace, name)}: other writers kept changing the view; retry"
        )

    def drop_view(self, namespace: str, name: str) -> None:
        """Remove the view's row (its metadata files stay); `ViewNotFoundError` if absent."""
        self._check_view_name(namespace, name)
        with self._write() as conn:
            cur = conn.execute(
                "DELETE FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? "
                "AND iceberg_type = ?",
                (self._name, namespace, name, VIEW_TYPE),
            )
            if cur.rowcount < 1:
                raise ViewNotFoundError(f"{self._view_ref(namespace, name)} does not exist")

    def rename_view(self, namespace: str, name: str, new_namespace: str, new_name: str) -> None:
        """Rename the view's row; `ViewNotFoundError`, `NamespaceNotFoundError` for the target
        namespace, `AlreadyExistsError` when a table or view has the new name."""
        check_namespace(new_namespace)
        check_table_name(new_name)
        self._check_view_name(namespace, name)
        with self._write() as conn:
            self._require_namespace(conn, new_namespace)
            try:
                cur = conn.execute(
                    "UPDATE iceberg_tables SET table_namespace = ?, table_name = ? WHERE catalog_name = ? "
                    "AND table_namespace = ? AND table_name = ? AND iceberg_type = ?",
                    (new_namespace, new_name, self._name, namespace, name, VIEW_TYPE),
                )
            except sqlite3.IntegrityError:
                raise AlreadyExistsError(
                    f"cannot rename {self._view_ref(namespace, name)} to {new_namespace}.{new_name}: "
                    "a table or view of that name exists already"
                ) from None
            if cur.rowcount < 1:
                raise ViewNotFoundError(f"{self._view_ref(namespace, name)} does not exist")

    def register_view(self, namespace: str, name: str, metadata_location: str) -> LoadedView:
        """Add a view whose metadata file exists already; `AlreadyExistsError` if the name is taken."""
        check_namespace(namespace)
        check_table_name(name)
        self._need_typed(namespace, name)
        loaded = read_view(self._io, namespace, name, metadata_location)
        with self._write() as conn:
            self._require_namespace(conn, namespace)
            try:
                conn.execute(
                    "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, "
                    "previous_metadata_location, iceberg_type) VALUES (?, ?, ?, ?, NULL, ?)",
                    (self._name, namespace, name, metadata_location, VIEW_TYPE),
                )
            except sqlite3.IntegrityError:
                raise AlreadyExistsError(
                    f"{self._view_ref(namespace, name)}: a table or view of that name exists already"
                ) from None
        return loaded
