"""The `<database>.<ns>.<table>` views of a catalog's tables on the lake's DuckDB connection.

`LakeViews` makes the views of a catalog (`iceduck.duckdb.catalog_views.attach_catalog_views`, and the
catalog's Iceberg views through `sql/views.py`), drops those of tables gone, and lists them again
only when the catalog's change token moved. It also knows DuckDB's databases (read again when
DuckDB's catalog version moves), which tell whether `lake` is this catalog's views or a database
the user attached under that name.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Hashable
from typing import Any

import duckdb

from iceduck.catalog.base import change_token
from iceduck.duckdb.hooks import catalog_version
from iceduck.sql import views as iceberg_views
from iceduck.sql.tokens import Token
from iceduck.tables import Tables
from iceduck.vocabulary import quote_ident

AttachViews = Callable[[duckdb.DuckDBPyConnection, Any, str], list[str]]


class LakeViews:
    """The views of one catalog in DuckDB database `database` (see the module docstring)."""

    def __init__(self, lake: Tables, attach_views: AttachViews | None, database: str) -> None:
        # A weak reference: the lake owns its router, which owns this (no cycle with a connection open).
        self._lake = weakref.ref(lake)
        self.con = lake.con
        self.attach_views = attach_views
        self.database = database
        self.owned = False  # whether the views of `database` are this catalog's (made here)
        self._view_tables: frozenset[tuple[str, ...]] | None = None
        self._catalog_token: Hashable | None = None  # the catalog's change token when last listed
        self._databases: tuple[int, frozenset[str]] | None = None

    @property
    def lake(self) -> Tables:
        lake = self._lake()
        if lake is None:  # pragma: no cover - the lake owns the only path to its router
            raise ValueError("the lake of this connection is gone")
        return lake

    def state(self) -> str:
        """'absent', 'ours' (views of this catalog) or 'foreign' (a database the user attached as `lake`)."""
        if self.database not in self.duck_databases():
            return "absent"
        if self.owned:
            return "ours"
        rows = self.con.execute(
            "SELECT count(*) FROM duckdb_views() WHERE database_name = ? AND sql LIKE '%\\_\\_iceduck\\_view\\_%' ESCAPE '\\'",
            [self.database],
        ).fetchall()
        return "ours" if rows and rows[0][0] else "foreign"

    def catalog_tables(self) -> tuple[frozenset[str], frozenset[tuple[str, ...]]]:
        namespaces: list[str] = []
        pending = list(self.namespaces())
        while pending:
            ns = pending.pop(0)
            namespaces.append(ns)
            pending.extend(self.namespaces(ns))
        tables = frozenset((ns, t) for ns in namespaces for t in self.lake.catalog.list_tables(ns))
        return frozenset(namespaces), tables | iceberg_views.listing(self.lake.catalog)

    def refresh(self, *, only_if_changed: bool = False) -> None:
        """Make `lake.<ns>.<table>` match the catalog: views for every table, none for dropped ones."""
        if self.attach_views is None:
            return
        state = self.state()
        if state == "foreign":
            return
        try:
            token = change_token(self.lake.catalog)  # read before listing: a change after it lists again
            if only_if_changed and state == "ours" and token is not None and token == self._catalog_token:
                return  # nothing committed to the catalog since it was last listed
            namespaces, tables = self.catalog_tables()
            if only_if_changed and state == "ours" and tables == self._view_tables:
                self._catalog_token = token
                return
            created = set(self.attach_views(self.con, self.lake.catalog, self.database))
            created |= set(iceberg_views.attach(self.con, self.lake.catalog, self.database))
            self.owned = True
            self._view_tables = tables
            self._catalog_token = token
            for schema, view in self.con.execute(
                "SELECT schema_name, view_name FROM duckdb_views() WHERE database_name = ? AND NOT internal",
                [self.database],
            ).fetchall():
                if f"{self.database}.{schema}.{view}" not in created:
                    self.con.execute(f"DROP VIEW IF EXISTS {qualified(self.database, schema, view)}")
            for (schema,) in self.con.execute(
                "SELECT schema_name FROM duckdb_schemas() WHERE database_name = ? AND NOT internal",
                [self.database],
            ).fetchall():
                if schema not in namespaces and schema != "main":
                    self.con.execute(f"DROP SCHEMA IF EXISTS {qualified(self.database, schema)} CASCADE")
        except Exception as e:  # the commit stands; only reading it through the views is affected
            warnings.warn(f"could not refresh the {self.database}.* views: {e}", RuntimeWarning, stacklevel=2)

    def namespaces(self, parent: str | None = None) -> tuple[str, ...]:
        return tuple(self.lake.catalog.list_namespaces(parent))

    def duck_databases(self) -> set[str]:
        """DuckDB's databases (lowercase), read again when DuckDB's catalog version moved (ATTACH
        and DETACH move it)."""
        version = catalog_version(self.con)
        if self._databases is None or self._databases[0] != version:
            rows = self.con.execute("SELECT database_name FROM duckdb_databases()").fetchall()
            self._databases = (version, frozenset(str(r[0]).lower() for r in rows))
        return set(self._databases[1])


def mentions(tokens: list[Token], database: str) -> bool:
    """Whether the tokens name something inside `database` (`database.x`): its views may need a refresh."""
    return any(
        t.is_name and t.text.lower() == database and tokens[i + 1].is_op(".")
        for i, t in enumerate(tokens[:-1])
    )


def qualified(*parts: str) -> str:
    return ".".join(quote_ident(part) for part in parts)


__all__ = ["AttachViews", "LakeViews", "mentions", "qualified"]
