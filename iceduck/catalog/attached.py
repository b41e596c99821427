"""A lake's catalog with other catalogs attached under database names, as DuckDB's ATTACH does.

`ATTACH 'wh' AS cat (TYPE iceberg, ENDPOINT ...)` makes the REST catalog's tables `cat.ns.t`. The
SQL functions of a connection resolve table names through one catalog (`duckdb.context.Context`),
so the lake registers them with an `AttachedCatalogs` around its own catalog: a name whose first
part is an attached database goes to that catalog (`cat.demo.t` -> `demo.t` there); every other
name, and every attribute this class does not route, is the lake's own catalog's.

`locate_table` hands `cat.demo.t` over as namespace `cat.demo` and table `t` (the first part is
neither the lake's catalog name nor `lake`), so routing by the namespace's first part is enough.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from iceduck.catalog.commit import CommittedTable, LoadedMetadata
from iceduck.spec.updates import TableRequirement, TableUpdate

__all__ = ["AttachedCatalogs"]


class AttachedCatalogs:
    """The lake's catalog (`main`) plus catalogs attached by database name (see the module docstring)."""

    def __init__(self, main: Any) -> None:
        self.main = main
        self._attached: dict[str, Any] = {}
        self._lock = threading.Lock()

    # -- attaching ------------------------------------------------------------------------------

    def attach(self, database: str, catalog: Any) -> None:
        """Make `catalog`'s tables `<database>.<namespace>.<table>` (database names compare case-insensitively)."""
        with self._lock:
            self._attached[database.lower()] = catalog

    def detach(self, database: str) -> Any:
        """Forget the catalog attached as `database`; returns it (None if there was none)."""
        with self._lock:
            return self._attached.pop(database.lower(), None)

    def attached(self) -> dict[str, Any]:
        """Database name (lower case) -> catalog, for every attached catalog."""
        with self._lock:
            return dict(self._attached)

    def get(self, database: str) -> Any:
        """The catalog attached as `database`, or None."""
        with self._lock:
            return self._attached.get(database.lower())

    def route(self, namespace: str) -> tuple[Any, str]:
        """The catalog a namespace belongs to and the namespace as that catalog names it."""
        first, dot, rest = namespace.partition(".")
        if dot:
            catalog = self.get(first)
            if catalog is not None:
                return catalog, rest
        return self.main, namespace

    # -- the catalog interface, routed ------------------------------------------------------------

    @property
    def name(self) -> str:
        return str(self.main.name)

    def list_namespaces(self, parent: str | None = None) -> tuple[str, ...]:
        if parent is None:
            return tuple(self.main.list_namespaces(None))
        catalog, ns = self.route(parent)
        return tuple(catalog.list_namespaces(ns))

    def namespace_exists(self, namespace: str) -> bool:
        catalog, ns = self.route(namespace)
        return bool(catalog.namespace_exists(ns))

    def namespace_properties(self, namespace: str) -> dict[str, str]:
        catalog, ns = self.route(namespace)
        return dict(catalog.namespace_properties(ns))

    def list_tables(self, namespace: str) -> tuple[str, ...]:
        catalog, ns = self.route(namespace)
        return tuple(catalog.list_tables(ns))

    def table_exists(self, namespace: str, name: str) -> bool:
        catalog, ns = self.route(namespace)
        return bool(catalog.table_exists(ns, name))

    def load_table(self, namespace: str, name: str) -> str:
        catalog, ns = self.route(namespace)
        return str(catalog.load_table(ns, name))

    def default_table_location(self, namespace: str, name: str) -> str:
        catalog, ns = self.route(namespace)
        return str(catalog.default_table_location(ns, name))

    def commit(
        self, namespace: str, name: str, expected_metadata_location: str, new_metadata_location: str
    ) -> str:
        catalog, ns = self.route(namespace)
        return str(catalog.commit(ns, name, expected_metadata_location, new_metadata_location))

    def commit_table(
        self,
        namespace: str,
        name: str,
        requirements: Sequence[TableRequirement],
        updates: Sequence[TableUpdate],
        *,
        loaded: LoadedMetadata | None = None,
    ) -> CommittedTable:
        catalog, ns = self.route(namespace)
        committed: CommittedTable = catalog.commit_table(ns, name, requirements, updates, loaded=loaded)
        return committed

    def table_config(self, namespace: str, name: str) -> Mapping[str, str]:
        catalog, ns = self.route(namespace)
        config = getattr(catalog, "table_config", None)
        return dict(config(ns, name)) if config is not None else {}

    def __getattr__(self, attribute: str) -> Any:
        # Everything else (the SQLite file, the warehouse folder, namespace properties, ...) is the
        # lake's own catalog's: only names reach attached catalogs.
        if attribute.startswith("__") or attribute in ("main", "_attached", "_lock"):
            raise AttributeError(attribute)
        return getattr(self.main, attribute)

    def __repr__(self) -> str:
        return f"AttachedCatalogs({self.main!r}, {sorted(self.attached())})"
