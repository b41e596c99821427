"""Where DuckDB binds a name: its search path, its objects by kind, and what a view's query sees.

The front door resolves a statement's table references as DuckDB's binder will (which view a name
means, whether it is a lake table's view, whether a user's view can be inlined): these are the
rules it follows, read from DuckDB's catalog (`duckdb_tables()`, `duckdb_views()`, ...,
`current_schemas(true)`) and checked against it where the reading could be inexact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import duckdb

from iceduck.sql.tokens import SqlSyntaxError, Token, closing, tokenize

# The kinds of named objects DuckDB looks up on its search path (each kind separately).
KINDS = ("relation", "function", "type", "sequence")
_KIND_QUERIES = {
    "relation": "SELECT database_name, schema_name, table_name FROM duckdb_tables() "
    "UNION ALL SELECT database_name, schema_name, view_name FROM duckdb_views()",
    "function": "SELECT database_name, schema_name, function_name FROM duckdb_functions()",
    "type": "SELECT database_name, schema_name, type_name FROM duckdb_types()",
    "sequence": "SELECT database_name, schema_name, sequence_name FROM duckdb_sequences()",
}

Path = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class UserView:
    """A DuckDB view the user made: where it lives and its query (the text after `AS`)."""

    database: str
    schema: str
    name: str
    temporary: bool
    query: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.database.lower(), self.schema.lower(), self.name.lower())


@dataclass(frozen=True, slots=True)
class Session:
    """What the front door reads of a DuckDB session before planning statements: the catalog views
    (lowercase name -> name as spelled), whether some other view calls a volatile function, whether
    strings compare byte-wise, and the TimeZone setting."""

    lake_views: dict[tuple[str, ...], tuple[str, str, str]]
    volatile_views: bool
    binary_collation: bool
    zone: str | None
    # the user's own views (lowercase (database, schema, name) -> view), the current database and
    # where a statement's unqualified names are looked up (lowercase (database, schema) entries in
    # order, before the system catalog; None when the search path could not be read exactly)
    user_views: dict[tuple[str, str, str], UserView]
    database: str
    path: Path | None


@dataclass(slots=True)
class Objects:
    """Where DuckDB's named objects live (outside the system catalog, which every search path ends
    with), each kind read on its first question (functions take ~60 ms to list, and only view
    inlining asks about them); valid for one DuckDB catalog version."""

    con: duckdb.DuckDBPyConnection
    databases: frozenset[str]
    _places: dict[str, dict[str, frozenset[tuple[str, str]]]] = field(default_factory=dict)
    _schemas: frozenset[tuple[str, str]] | None = None

    def places(self, kind: str, name: str) -> frozenset[tuple[str, str]]:
        """The lowercase (database, schema) places holding an object of `kind` called `name`."""
        found = self._places.get(kind)
        if found is None:
            where: dict[str, set[tuple[str, str]]] = {}
            for database, schema, object_name in self.con.execute(_KIND_QUERIES[kind]).fetchall():
                if str(database).lower() != "system":
                    where.setdefault(str(object_name).lower(), set()).add((str(database).lower(), str(schema).lower()))
            found = self._places[kind] = {k: frozenset(v) for k, v in where.items()}
        return found.get(name.lower(), frozenset())

    @property
    def schemas(self) -> frozenset[tuple[str, str]]:
        if self._schemas is None:
            rows = self.con.execute("SELECT database_name, schema_name FROM duckdb_schemas()").fetchall()
            self._schemas = frozenset((str(d).lower(), str(x).lower()) for d, x in rows)
        return self._schemas

    def resolve(self, path: Path, parts: tuple[str, ...], kind: str, default: str) -> tuple[str, str] | None:
        """The (database, schema) whose object of `kind` a one- or two-part name binds to on
        `path` as DuckDB's binder looks it up (`x`: the first entry holding it; `a.x`: a database
        `a` searches its schemas on the path, else its main; a schema `a` the databases on the path
        having it, else the current one), or None: not found, or `a` both a database and a schema
        (DuckDB's binder may call that ambiguous)."""
        low = tuple(p.lower() for p in parts)
        found = self.places(kind, low[-1])
        if len(low) == 1:
            candidates = list(path)
        else:
            first = low[0]
            is_database = first in self.databases
            if is_database and any(schema == first for _, schema in self.schemas):
                return None
            if is_database:
                candidates = [(d, x) for d, x in path if d == first] or [(first, "main")]
            else:
                candidates = [(d, x) for d, x in path if x == first] or [(default, first)]
        return next((place for place in candidates if place in found), None)


def view_path(view: UserView, session: Session) -> Path:
    """The (database, schema) entries DuckDB searches for a persistent view's unqualified names:
    temp.main, the view's own schema, its database's main, then the session's search path."""
    assert session.path is not None
    own = (view.database.lower(), view.schema.lower())
    return (("temp", "main"), own, (own[0], "main"), *session.path[1:])


def search_path(
    setting: str,
    database: str,
    schemas: list[str],
    databases: frozenset[str],
    is_schema: Callable[[str], bool],
) -> Path | None:
    """The (database, schema) entries DuckDB searches for a statement's unqualified names:
    temp.main, the `search_path` setting's entries, the current database's main; None when the
    setting cannot be read exactly (`current_schemas(true)`, `schemas`, must list the same
    schemas). `is_schema(name)`: whether the current database has a schema `name`."""
    entries: list[tuple[str, str]] = []
    if setting.strip():
        try:
            parts = path_entries(setting)
        except SqlSyntaxError:
            return None
        if parts is None:
            return None
        for entry in parts:
            if len(entry) == 2:
                entries.append((entry[0], entry[1]))
                continue
            (name,) = entry
            schema, is_database = is_schema(name), name in databases
            if schema == is_database:
                return None  # neither, or both: not told apart here
            entries.append((database, name) if schema else (name, "main"))
    path = (("temp", "main"), *entries, (database, "main"))
    if [schema for _, schema in path] + ["main", "pg_catalog"] != schemas:
        return None
    return path


def path_entries(setting: str) -> list[tuple[str, ...]] | None:
    """The entries of a `search_path` setting (`a,b.c`, quoted names as DuckDB writes them),
    lowercase, each of one or two parts; None for anything else."""
    tokens = tokenize(setting)
    out: list[tuple[str, ...]] = []
    current: list[str] = []
    expect_name = True
    for t in [*tokens, None]:
        if t is None or t.is_op(","):
            if expect_name or not 1 <= len(current) <= 2:
                return None
            out.append(tuple(current))
            current, expect_name = [], True
        elif expect_name and t.is_name:
            current.append(t.text.lower())
            expect_name = False
        elif not expect_name and t.is_op("."):
            expect_name = True
        else:
            return None
    return out


def view_query(sql: str) -> str | None:
    """The query of a view from DuckDB's `CREATE [TEMP] VIEW name [(columns)] AS <query>;` (DuckDB
    does not serialise a CREATE VIEW's tree; its own text of the view is read)."""
    try:
        tokens = tokenize(sql)
    except SqlSyntaxError:
        return None
    i = 0
    while i < len(tokens) and not tokens[i].is_word("VIEW"):
        i += 1
    if i + 1 >= len(tokens) or not tokens[i + 1].is_name:
        return None
    j = _after_name(tokens, i + 1)
    if j < len(tokens) and tokens[j].is_op("("):
        close = closing(tokens, j)
        if close is None:
            return None
        j = close + 1
    if not (j + 1 < len(tokens) and tokens[j].is_word("AS")):
        return None
    end = len(tokens)
    while end > j + 1 and tokens[end - 1].is_op(";"):
        end -= 1
    return sql[tokens[j + 1].start : tokens[end - 1].end]


def _after_name(tokens: list[Token], i: int) -> int:
    j = i + 1
    while j + 1 < len(tokens) and tokens[j].is_op(".") and tokens[j + 1].is_name:
        j += 2
    return j
