"""The small interface every iceduck catalog offers.

A catalog maps `namespace.table` names to the location of the table's current metadata file.
Changes arrive as the REST catalog spec's requirements and updates (`commit_table`): the catalog
checks the requirements against the table's current metadata, applies the updates
(`iceduck.spec.updates.apply_updates`), writes the new metadata file and swaps the pointer
atomically (`iceduck.catalog.commit`). A REST catalog sends the same requirements and updates.

Namespaces are dotted strings (`"sales"`, `"a.b"`); table names contain no dot.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from iceduck.errors import ValidationError

if TYPE_CHECKING:  # annotations only: finding a table loads no commit machinery
    from iceduck.catalog.commit import CommittedTable, LoadedMetadata
    from iceduck.io.fileio import FileIO
    from iceduck.spec.updates import TableRequirement, TableUpdate


class NamedCatalog:
    """The `name` and `io` every catalog class exposes (the class sets `_name` and `_io`)."""

    _name: str
    _io: FileIO

    @property
    def io(self) -> FileIO:
        """The FileIO the catalog reads and writes its tables' files through."""
        return self._io

    @property
    def name(self) -> str:
        """The catalog's name (the first part of `catalog.ns.table`)."""
        return self._name

    def change_token(self) -> Hashable | None:
        """A value equal to an earlier one only if nothing changed in the catalog since (then a
        copy of what was listed still holds); None: this catalog cannot tell cheaply."""
        return None


def change_token(catalog: Any) -> Hashable | None:
    """`catalog.change_token()`, None for a catalog without one (see `NamedCatalog.change_token`)."""
    method = getattr(catalog, "change_token", None)
    return None if method is None else method()


@runtime_checkable
class Catalog(Protocol):
    """What the table layer and `locate_table` need from a catalog."""

    @property
    def name(self) -> str:
        """The catalog's name (the first part of `catalog.ns.table`)."""
        ...

    def list_namespaces(self, parent: str | None = None) -> tuple[str, ...]:
        """Namespaces one level below `parent` (top level when None), sorted."""
        ...

    def namespace_exists(self, namespace: str) -> bool:
        """True if the namespace exists."""
        ...

    def create_namespace(self, namespace: str, properties: Mapping[str, str] | None = None) -> None:
        """Create a namespace; `AlreadyExistsError` if it exists."""
        ...

    def drop_namespace(self, namespace: str) -> None:
        """Drop an empty namespace; `NamespaceNotFoundError`, or `ValidationError` if not empty."""
        ...

    def list_tables(self, namespace: str) -> tuple[str, ...]:
        """Names of the tables in `namespace`, sorted; `NamespaceNotFoundError` if absent."""
        ...

    def table_exists(self, namespace: str, name: str) -> bool:
        """True if the catalog has a table of exactly this namespace and name."""
        ...

    def load_table(self, namespace: str, name: str) -> str:
        """The current metadata location of the table; `TableNotFoundError` if absent."""
        ...

    def default_table_location(self, namespace: str, name: str) -> str:
        """Where a new table of that name goes when no location is given."""
        ...

    def create_table_entry(self, namespace: str, name: str, metadata_location: str) -> str:
        """Register a new table whose first metadata file the caller has written.

        Returns the metadata location the catalog now points at (a folder catalog publishes the
        file under its own name). `AlreadyExistsError` if the table exists.
        """
        ...

    def drop_table(self, namespace: str, name: str) -> None:
        """Remove the table from the catalog; `TableNotFoundError` if absent."""
        ...

    def commit(
        self, namespace: str, name: str, expected_metadata_location: str, new_metadata_location: str
    ) -> str:
        """Atomically move the table's pointer from `expected_...` to `new_...`.

        Returns the metadata location the catalog now points at. `CommitConflictError` naming the
        table if the current pointer is not `expected_metadata_location` (somebody else
        committed first: reload, rebase and retry).
        """
        ...

    def commit_table(
        self,
        namespace: str,
        name: str,
        requirements: Sequence[TableRequirement],
        updates: Sequence[TableUpdate],
        *,
        loaded: LoadedMetadata | None = None,
    ) -> CommittedTable:
        """Commit a change: check `requirements` against the table's current metadata (with
        `assert-create`: that there is no table), apply `updates`, publish the result.

        `CommitConflictError` naming the table and the failed requirement, or when another commit
        won the swap (nothing changed: reload, re-plan and retry); `ValidationError` for updates
        that cannot apply. `loaded` is metadata the caller has read (used when still current).
        """
        ...


def check_namespace(namespace: str) -> str:
    """`namespace` if it is a valid dotted name; `ValidationError` naming it otherwise."""
    if not isinstance(namespace, str) or not namespace or any(not part for part in namespace.split(".")):
        raise ValidationError(
            f"invalid namespace {namespace!r}: expected dotted non-empty parts like 'a' or 'a.b'"
        )
    return namespace


def check_table_name(name: str) -> str:
    """`name` if it is a valid table name (non-empty, no dot); `ValidationError` otherwise."""
    if not isinstance(name, str) or not name or "." in name:
        raise ValidationError(f"invalid table name {name!r}: expected a non-empty name without '.'")
    return name


MAX_NAME_BYTES = 255  # a name is a folder of the default table location: one path component


def check_new_name(name: Any, what: str) -> str:
    """`name` if a catalog may create a table or namespace level of that name; `ValidationError`
    otherwise. The default table location is `<warehouse>/<namespace>/<table>`, so a name is one
    folder: no `/`, not `.` or `..`, no control characters (NUL, CR, LF, ESC, DEL, ...) nor lone
    surrogates (no file system or SQLite text holds them), at most 255 bytes in UTF-8."""
    if not isinstance(name, str) or not name:
        raise ValidationError(f"invalid {what} {name!r}: expected a non-empty string")
    shown = repr(name) if len(name) <= 60 else repr(name[:60]) + "..."
    if "/" in name or name in (".", ".."):
        raise ValidationError(f"invalid {what} {shown}: a name is one folder, so no '/', '.' or '..'")
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in name):
        raise ValidationError(
            f"invalid {what} {shown}: control characters and lone surrogates are not allowed in names"
        )
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        raise ValidationError(f"invalid {what} {shown}: {size} bytes long, at most {MAX_NAME_BYTES} allowed")
    return name


def check_new_namespace(namespace: Any) -> str:
    """`namespace` if a catalog may create it: a dotted name each of whose levels is a name
    `check_new_name` accepts, the whole too (it is one folder of the default table location)."""
    check_namespace(namespace)
    for part in namespace.split("."):
        check_new_name(part, "namespace level")
    return check_new_name(namespace, "namespace")


def namespace_contents(
    tables: Sequence[str], views: Sequence[str] = (), namespaces: Sequence[str] = ()
) -> str:
    """What keeps a namespace from being dropped, each named as what it is: "table t, view v,
    namespace ns.c" (the first 10 of each kind, then how many more)."""

    def some(kind: str, names: Sequence[str]) -> list[str]:
        shown = [f"{kind} {n}" for n in names[:10]]
        return shown + ([f"{len(names) - 10} more {kind}s"] if len(names) > 10 else [])

    return ", ".join(some("table", tables) + some("view", views) + some("namespace", namespaces))


def split_table_name(identifier: str) -> tuple[str, str]:
    """`"a.b.t"` -> `("a.b", "t")`; `ValidationError` without a namespace part."""
    namespace, dot, name = identifier.rpartition(".")
    if not dot:
        raise ValidationError(f"invalid table identifier {identifier!r}: expected 'namespace.table'")
    return check_namespace(namespace), check_table_name(name)
