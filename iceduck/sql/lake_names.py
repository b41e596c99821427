"""Which lake table or namespace a name of a write statement means, by the lake's rules over DuckDB's.

`LakeNames` answers for the names a write names (`INSERT INTO x`, `ALTER TABLE x`, `CREATE
SCHEMA x`), for the procedures' `table` argument and for `AT (...)`:

* `<database>.ns.t` is a lake table (unless a DuckDB database the user attached is called so);
* `ns.t` is a lake table when `ns` is a namespace of the catalog and DuckDB has no `ns.t` of its own;
* `t` is a table of the namespace `USE <database>.ns` made the default;
* catalog names match exactly, else the only case-insensitive match (DuckDB's rule).

A quoted table name holding a '.' (`s."a.c"`) is one name to DuckDB; the lake's catalogs key
tables by `namespace.table`, where it would read as table `c` in namespace `s.a`: it is refused.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass

from iceduck.errors import ValidationError
from iceduck.sql import parse as p
from iceduck.sql.lake_views import LakeViews
from iceduck.tables import Tables


class SqlError(ValidationError):
    """A statement about a lake table that cannot run as written; nothing was changed."""


@dataclass(frozen=True, slots=True)
class LakeTable:
    """A name resolved to the lake: the namespace and table as the catalog spells them."""

    namespace: str
    name: str
    namespace_exists: bool
    exists: bool

    @property
    def identifier(self) -> str:
        return f"{self.namespace}.{self.name}"


class LakeNames:
    """Name resolution for the writes of one catalog's router (see the module docstring)."""

    def __init__(self, lake: Tables, views: LakeViews, database: str, implicit: bool) -> None:
        self._lake = weakref.ref(lake)
        self.con = lake.con
        self.views = views
        self.database = database
        self.implicit = implicit

    @property
    def lake(self) -> Tables:
        lake = self._lake()
        if lake is None:  # pragma: no cover - the lake owns the only path to its router
            raise SqlError("the lake of this connection is gone")
        return lake

    def resolve(self, head: p.Target) -> LakeTable | None:
        if head.kind in (p.KIND_CREATE_SCHEMA, p.KIND_DROP_SCHEMA):
            return self.resolve_namespace(head.name, create=head.kind == p.KIND_CREATE_SCHEMA)
        table = self.resolve_table(head.name)
        if table is not None:
            check_table_name(head.name, table.name)
        return table

    def _in_lake(self, parts: tuple[str, ...], size: int) -> tuple[bool, tuple[str, ...]] | None:
        """Whether a name of an object named by `size` parts (ns.t: 2, ns: 1) may be in the lake:
        (explicit: given as `<database>.<...>`, the parts without the database), or None when it
        belongs to DuckDB (no implicit names here, a lake database DuckDB owns, another database)."""
        explicit = len(parts) > size and parts[0].lower() == self.database
        if not explicit and not self.implicit:
            return None
        if explicit:
            return None if self.views.state() == "foreign" else (True, parts[1:])
        if len(parts) > size and parts[0].lower() in self.views.duck_databases():
            return None
        return False, parts

    def resolve_table(self, name: p.Name) -> LakeTable | None:
        parts = name.parts
        if len(parts) == 1:  # after `USE lake.ns`: the table of the namespace in use
            parts = self.used_namespace() + parts
        if len(parts) < 2:
            return None
        found_in = self._in_lake(parts, 2)
        if found_in is None:
            return None
        explicit, ns_parts = found_in[0], found_in[1][:-1]
        if not explicit and self._duck_has_relation(parts):
            return None
        if self._exact_table(ns_parts, parts[-1]):
            return LakeTable(".".join(ns_parts), parts[-1], namespace_exists=True, exists=True)
        namespace = self.find_namespace(ns_parts)
        if namespace is None:
            if explicit:
                return LakeTable(".".join(ns_parts), parts[-1], namespace_exists=False, exists=False)
            return None
        found = match(self.lake.catalog.list_tables(namespace), parts[-1])
        return LakeTable(namespace, found or parts[-1], namespace_exists=True, exists=found is not None)

    def used_namespace(self) -> tuple[str, ...]:
        """(`<database>`, schema) when `USE <database>.<schema>` made a namespace of this router's
        catalog the connection's default (so a bare table name means its table), else ()."""
        database, schema = self.con.execute("SELECT current_database(), current_schema()").fetchall()[0]
        if str(database).lower() != self.database or str(schema) == "main":
            return ()
        return (self.database, str(schema))

    def _exact_table(self, ns_parts: tuple[str, ...], name: str) -> bool:
        """Whether the lake has the table spelled exactly so. `_match` prefers an exact spelling, so
        a yes is what listing would find, at one request on REST (`HEAD`) instead of listing the
        namespaces and the tables (two); a no still lists, for a spelling in another case."""
        if not ns_parts or any("." in part for part in ns_parts):
            return False
        try:
            return self.lake.catalog.table_exists(".".join(ns_parts), name)
        except ValidationError:
            return False  # a name this catalog cannot hold: listing answers (it finds nothing)

    def resolve_namespace(self, name: p.Name, *, create: bool) -> LakeTable | None:
        parts = name.parts
        found_in = self._in_lake(parts, 1)
        if found_in is None:
            return None
        explicit, ns_parts = found_in
        found = self.find_namespace(ns_parts)
        if found is None and not explicit:
            if not create:
                return None
            if len(parts) == 1 and self.duck_has_schema(parts[0]):
                return None  # DuckDB's own schema: DuckDB answers (exists already / IF NOT EXISTS)
            if len(parts) > 1 and self.find_namespace(parts[:-1]) is None:
                return None
        if any("." in part for part in ns_parts):
            raise SqlError(f"namespace {name}: names inside a namespace cannot contain '.'")
        namespace = found or ".".join(ns_parts)
        return LakeTable(namespace, "", namespace_exists=found is not None, exists=found is not None)

    def find_namespace(self, parts: tuple[str, ...]) -> str | None:
        if not parts or any("." in part for part in parts):
            return None
        current: str | None = None
        for part in parts:
            children = self.views.namespaces(current)
            leaves = {c.rsplit(".", 1)[-1]: c for c in children}
            found = match(leaves, part)
            if found is None:
                return None
            current = leaves[found]
        return current

    def duck_has_schema(self, schema: str) -> bool:
        rows = self.con.execute(
            "SELECT count(*) FROM duckdb_schemas() WHERE database_name = current_database() "
            "AND lower(schema_name) = lower(?)",
            [schema],
        ).fetchall()
        return bool(rows and rows[0][0])

    def _duck_has_relation(self, parts: tuple[str, ...]) -> bool:
        """Whether DuckDB has a table or view of its own under this name (not a lake view)."""
        if len(parts) == 2:
            where = (
                "((lower(schema_name) = lower(?) AND database_name = current_database()) "
                "OR (lower(database_name) = lower(?) AND schema_name = 'main')) AND lower(name) = lower(?)"
            )
            args = [parts[0], parts[0], parts[1]]
        elif len(parts) == 3:
            where = (
                "lower(database_name) = lower(?) AND lower(schema_name) = lower(?) AND lower(name) = lower(?)"
            )
            args = list(parts)
        else:
            return False
        rows = self.con.execute(
            "SELECT count(*) FROM (SELECT database_name, schema_name, table_name AS name FROM duckdb_tables() "
            "UNION ALL SELECT database_name, schema_name, view_name FROM duckdb_views() WHERE NOT internal) "
            f"WHERE database_name <> ? AND {where}",
            [self.database if self.views.owned else "", *args],
        ).fetchall()
        return bool(rows and rows[0][0])


def match(names: Iterable[str], wanted: str) -> str | None:
    """`wanted` among `names`: exactly, else the only case-insensitive match (DuckDB's rule)."""
    names = list(names)
    if wanted in names:
        return wanted
    folded = [n for n in names if n.lower() == wanted.lower()]
    return folded[0] if len(folded) == 1 else None


def check_table_name(name: p.Name, table: str) -> None:
    """A quoted table name holding a '.' (`s."a.c"`) is one name to DuckDB; the lake's catalogs key
    tables by `namespace.table`, where it would read as table `c` in namespace `s.a`: refused."""
    if "." in table:
        raise SqlError(f"table {name}: a lake table's name cannot contain '.'")


__all__ = ["LakeNames", "LakeTable", "SqlError", "check_table_name", "match"]
