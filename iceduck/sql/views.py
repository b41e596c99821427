"""Iceberg views in SQL: `CREATE [OR REPLACE] VIEW lake.ns.v AS ...`, `CREATE VIEW IF NOT EXISTS`,
`DROP VIEW [IF EXISTS]`, `ALTER VIEW ... RENAME TO`, and the catalog's views as DuckDB views.

A view named into the lake (`lake.ns.v`, `ns.v` for a namespace of the catalog, `v` after `USE
lake.ns`) becomes an Iceberg view in the catalog (`iceduck.catalog.views`): its query is stored as
a `sql` representation of dialect `duckdb`, with the schema DuckDB binds it to, default namespace
the view's own. References to the lake's tables lose the database name (`lake.ns.t` is stored as
`ns.t`, as DuckDB stores a view of its own database), so the text means the same to every engine
reading the catalog, whatever it calls it. A query reading anything outside the catalog (a DuckDB
table, another attached database) is refused: no other process could read that view.

Every view of the catalog is a DuckDB view `lake.<ns>.<v>` over its stored SQL (the `duckdb`
representation, else the first other dialect DuckDB can bind, its `default-catalog` name dropped
the same way), with the columns of the view's schema; so reading one reads the tables' current
snapshots at query time, in this process and the next. A view no SQL of which DuckDB can read is
still listed, and reading it fails with one line naming the view and its dialects.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import duckdb

from iceduck._version import __version__
from iceduck.catalog.views import LoadedView, holds_views
from iceduck.errors import (
    AlreadyExistsError,
    IcebergError,
    NamespaceNotFoundError,
    TableNotFoundError,
    ValidationError,
)
from iceduck.spec import view_metadata as vm
from iceduck.spec.types import DecimalType, NestedField, Schema
from iceduck.sql.discovery import INTERNAL_PREFIX
from iceduck.sql.tokens import STRING, Token, tokenize
from iceduck.sql.types import SqlTypeError, iceberg_type, make_schema
from iceduck.vocabulary import duck_type, quote_ident, quote_str


class ViewError(ValidationError):
    """A view statement on the lake that cannot run as written; nothing was changed."""


class Resolved(Protocol):
    """A name the front door resolved into the lake (the router's `LakeTable`): the namespace and
    object as the catalog spells them, whether they exist. The one protocol of `sql/views.py` and
    `sql/catalog_ddl.py`."""

    @property
    def namespace(self) -> str: ...

    @property
    def identifier(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def namespace_exists(self) -> bool: ...

    @property
    def exists(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class CreateView:
    parts: tuple[str, ...]
    query: str | None  # None: a shape this module does not read (refused once the name is the lake's)
    columns: tuple[str, ...]
    replace: bool
    if_not_exists: bool


@dataclass(frozen=True, slots=True)
class DropView:
    parts: tuple[str, ...]
    if_exists: bool


@dataclass(frozen=True, slots=True)
class RenameView:
    parts: tuple[str, ...]
    new_parts: tuple[str, ...]
    if_exists: bool


@dataclass(frozen=True, slots=True)
class CommentView:
    """`COMMENT ON VIEW v IS '...'`: the view's `comment` property (NULL removes it)."""

    parts: tuple[str, ...]
    text: str | None


Statement = CreateView | DropView | RenameView | CommentView


# -- recognising ---------------------------------------------------------------------------------


def recognise(tokens: list[Token], text: str) -> Statement | None:
    """The statement when it is a view statement this module may take, else None (cheap)."""
    toks = list(tokens)
    while toks and toks[-1].is_op(";"):
        toks.pop()
    if len(toks) < 3:
        return None
    head = toks[0]
    if head.is_word("COMMENT") and toks[1].is_word("ON") and toks[2].is_word("VIEW"):
        parts, i = _name(toks, 3)
        if not parts or i + 2 != len(toks) or not toks[i].is_word("IS"):
            return None
        value = toks[i + 1]
        if value.is_word("NULL"):
            return CommentView(parts, None)
        return CommentView(parts, value.text) if value.kind == STRING else None
    if head.is_word("CREATE"):
        i = 1
        replace = False
        if toks[i].is_word("OR") and i + 1 < len(toks) and toks[i + 1].is_word("REPLACE"):
            replace, i = True, i + 2
        if i >= len(toks) or not toks[i].is_word("VIEW"):
            return None  # TEMP views, MATERIALIZED, tables: not ours
        i += 1
        if_not_exists = _words(toks, i, "IF", "NOT", "EXISTS")
        if if_not_exists:
            i += 3
        parts, i = _name(toks, i)
        if not parts:
            return None
        unread = CreateView(parts, None, (), replace, if_not_exists)
        columns: list[str] = []
        if i < len(toks) and toks[i].is_op("("):
            i += 1
            while i < len(toks) and toks[i].is_name:
                columns.append(toks[i].text)
                i += 1
                if i < len(toks) and toks[i].is_op(","):
                    i += 1
                elif i < len(toks) and not toks[i].is_op(")"):
                    return unread  # `(a b)`: not a column list
            if i >= len(toks) or not toks[i].is_op(")"):
                return unread
            i += 1
        if i + 1 >= len(toks) or not toks[i].is_word("AS"):
            return unread
        query = text[toks[i + 1].start : toks[-1].end]
        return CreateView(parts, query, tuple(columns), replace, if_not_exists)
    if head.is_word("DROP") and toks[1].is_word("VIEW"):
        i = 2
        if_exists = _words(toks, i, "IF", "EXISTS")
        if if_exists:
            i += 2
        parts, i = _name(toks, i)
        if not parts:
            return None
        if i < len(toks) and toks[i].is_word("CASCADE", "RESTRICT"):
            i += 1
        return DropView(parts, if_exists) if i == len(toks) else None
    if head.is_word("ALTER") and toks[1].is_word("VIEW"):
        i = 2
        if_exists = _words(toks, i, "IF", "EXISTS")
        if if_exists:
            i += 2
        parts, i = _name(toks, i)
        if not parts or not _words(toks, i, "RENAME", "TO"):
            return None
        new_parts, j = _name(toks, i + 2)
        return RenameView(parts, new_parts, if_exists) if new_parts and j == len(toks) else None
    return None


def _words(toks: list[Token], i: int, *words: str) -> bool:
    return i + len(words) <= len(toks) and all(toks[i + k].is_word(w) for k, w in enumerate(words))


def _name(toks: list[Token], i: int) -> tuple[tuple[str, ...], int]:
    if i >= len(toks) or not toks[i].is_name:
        return (), i
    parts = [toks[i].text]
    i += 1
    while i + 1 < len(toks) and toks[i].is_op(".") and toks[i + 1].is_name:
        parts.append(toks[i + 1].text)
        i += 2
    return tuple(parts), i


def about(s: Statement) -> tuple[str, ...]:
    return s.parts


# -- running ------------------------------------------------------------------------------------


def run(
    s: Statement,
    *,
    con: duckdb.DuckDBPyConnection,
    catalog: Any,
    database: str,
    resolve: Callable[[tuple[str, ...]], Resolved | None],
    refresh: Callable[[], None],
    not_mine: Any,
) -> Any:
    """Run `s` when it names a view of the lake (`resolve`: a name to the lake object it means,
    or None for DuckDB's own); `refresh` makes the `lake.*` DuckDB views match the catalog."""
    found = resolve(s.parts)
    if found is None:
        return not_mine
    identifier = f"{found.namespace}.{found.name}"
    if not found.namespace_exists:
        raise NamespaceNotFoundError(f"view {identifier}: namespace '{found.namespace}' does not exist")
    if not holds_views(catalog):
        raise ViewError(
            f"view {identifier}: catalog {getattr(catalog, 'name', '?')!r} cannot hold Iceberg views "
            "(a folder or bucket catalog, or an old SQLite catalog file); create the view in DuckDB instead "
            "(CREATE VIEW v AS SELECT ... FROM lake.ns.t)"
        )
    namespace, name = found.namespace, _view_spelling(catalog, found.namespace, found.name)
    done = con.sql('SELECT CAST(NULL AS BOOLEAN) AS "Success" WHERE false')
    if isinstance(s, DropView):
        if not catalog.view_exists(namespace, name):
            if found.exists:
                raise ViewError(f"DROP VIEW {identifier}: {identifier} is a table (use DROP TABLE)")
            if s.if_exists:
                return done
            raise TableNotFoundError(f"view {identifier} does not exist")
        catalog.drop_view(namespace, name)
        refresh()
        return done
    if isinstance(s, CommentView):
        if not catalog.view_exists(namespace, name):
            raise TableNotFoundError(f"COMMENT ON VIEW: view {identifier} does not exist")
        base = catalog.load_view(namespace, name)
        change: vm.ViewUpdate = (
            vm.RemoveProperties((vm.COMMENT,)) if s.text is None else vm.SetProperties({vm.COMMENT: s.text})
        )
        catalog.commit_view(namespace, name, [vm.AssertViewUUID(base.metadata.view_uuid)], [change])
        refresh()
        return done
    if isinstance(s, RenameView):
        if not catalog.view_exists(namespace, name):
            if s.if_exists:
                return done
            raise TableNotFoundError(f"view {identifier} does not exist")
        target = resolve(s.new_parts if len(s.new_parts) > 1 else (*s.parts[:-1], s.new_parts[0]))
        if target is None:
            raise ViewError(
                f"ALTER VIEW {identifier} RENAME TO {'.'.join(s.new_parts)}: the new name is not in the lake"
            )
        if not target.namespace_exists:
            raise NamespaceNotFoundError(f"namespace '{target.namespace}' does not exist")
        catalog.rename_view(namespace, name, target.namespace, target.name)
        refresh()
        return done
    if s.query is None:
        raise ViewError(
            f"CREATE VIEW {identifier}: iceduck reads `CREATE [OR REPLACE] VIEW [IF NOT EXISTS] name "
            "[(column, ...)] AS query` only"
        )
    if found.exists:
        raise AlreadyExistsError(f"CREATE VIEW {identifier}: a table of that name exists already")
    exists = catalog.view_exists(namespace, name)
    if exists and s.if_not_exists:
        return done
    if exists and not s.replace:
        raise AlreadyExistsError(f"view {identifier} exists already (use CREATE OR REPLACE VIEW)")
    refresh()  # the lake.* views the query reads are the catalog's current ones
    sql = portable_sql(con, s.query, database, namespace, identifier)
    schema = _bound_schema(con, database, namespace, sql, s.columns, identifier)
    version = vm.ViewVersion(
        version_id=1,
        timestamp_ms=int(time.time() * 1000),
        schema_id=0,
        representations=(vm.ViewRepresentation(sql, vm.DUCKDB_DIALECT),),
        default_namespace=tuple(namespace.split(".")),
        summary={
            "engine-name": "duckdb",
            "engine-version": duckdb.__version__,
            "iceduck-version": __version__,
        },
    )
    if exists:
        base = catalog.load_view(namespace, name)
        catalog.commit_view(
            namespace,
            name,
            [vm.AssertViewUUID(base.metadata.view_uuid)],
            vm.replace_version_updates(base.metadata, schema=schema, version=version),
        )
    else:
        catalog.create_view(namespace, name, schema=schema, version=version)
    refresh()
    return done


def _view_spelling(catalog: Any, namespace: str, name: str) -> str:
    """The view's name as the catalog spells it (a case-insensitive match), else `name`."""
    try:
        names = catalog.list_views(namespace)
    except (NamespaceNotFoundError, ValidationError):
        return name
    if name in names:
        return name
    folded = [n for n in names if n.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else name


# -- the stored SQL -------------------------------------------------------------------------------


# table functions a view may call: they read nothing (`read_text`, `query`, `glob`, ... read files,
# URLs or run SQL of their own: a view calling one reads outside the catalog)
_PURE_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})


def _tree_refs(node: Any, refs: list[tuple[int, list[str]]], ctes: set[str]) -> None:
    if isinstance(node, dict):
        if node.get("type") == "BASE_TABLE":
            path = (node.get("qualified_name") or {}).get("path") or [node.get("table_name", "")]
            refs.append((int(node.get("query_location", -1)), [str(p) for p in path]))
        if node.get("type") == "TABLE_FUNCTION":
            function = str((node.get("function") or {}).get("function_name", "?"))
            if function.lower() not in _PURE_TABLE_FUNCTIONS:
                refs.append((-1, [f"{function}(...)"]))
        cte_map = node.get("cte_map")
        if isinstance(cte_map, dict):
            for entry in cte_map.get("map") or []:
                if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                    ctes.add(entry["key"].lower())
        for value in node.values():
            _tree_refs(value, refs, ctes)
    elif isinstance(node, list):
        for value in node:
            _tree_refs(value, refs, ctes)


def table_references(
    con: duckdb.DuckDBPyConnection, sql: str
) -> tuple[list[tuple[int, list[str]]], set[str]] | None:
    """(character offset, name parts) of every table a query names (and every table function other
    than `range`-like ones, as `name(...)`), and its CTE names; None when DuckDB cannot serialise
    the query or it is not exactly one statement."""
    with contextlib.closing(con.cursor()) as cur:
        try:
            text = cur.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0]
        except duckdb.Error:
            return None
    tree = json.loads(text)
    if tree.get("error") or len(tree.get("statements") or ()) != 1:
        return None
    refs: list[tuple[int, list[str]]] = []
    ctes: set[str] = set()
    _tree_refs(tree.get("statements"), refs, ctes)
    encoded = sql.encode()
    out = []
    for location, path in refs:
        offset = len(encoded[:location].decode(errors="ignore")) if 0 <= location <= len(encoded) else -1
        out.append((offset, path))
    return out, ctes


def strip_catalog(con: duckdb.DuckDBPyConnection, sql: str, names: set[str]) -> str:
    """`sql` with the catalog part dropped from three-part table names whose catalog is one of
    `names` (lower-case): `lake.ns.t` -> `ns.t`."""
    found = table_references(con, sql)
    if found is None:
        return sql
    tokens = tokenize(sql)
    by_start = {t.start: i for i, t in enumerate(tokens)}
    cuts: list[tuple[int, int]] = []
    for offset, path in found[0]:
        if len(path) != 3 or path[0].lower() not in names:
            continue
        i = by_start.get(offset)
        if i is None or i + 1 >= len(tokens) or not tokens[i].is_name or not tokens[i + 1].is_op("."):
            continue
        cuts.append((tokens[i].start, tokens[i + 1].end))
    for start, end in sorted(cuts, reverse=True):
        sql = sql[:start] + sql[end:]
    return sql


def portable_sql(
    con: duckdb.DuckDBPyConnection, query: str, database: str, namespace: str, identifier: str
) -> str:
    """The query as stored: the lake's database name dropped from its table names; `ViewError`
    when it reads anything that is not a table or view of the catalog."""
    sql = strip_catalog(con, query.strip(), {database})
    found = table_references(con, sql)
    if found is None:
        raise ViewError(f"CREATE VIEW {identifier}: the query is not one SELECT statement DuckDB can check")
    refs, ctes = found
    relations = {
        (str(s).lower(), str(n).lower())
        for s, n in con.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ? "
            "UNION ALL SELECT schema_name, view_name FROM duckdb_views() WHERE database_name = ? AND NOT internal",
            [database, database],
        ).fetchall()
    }
    for _, path in refs:
        lowered = [p.lower() for p in path]
        if len(lowered) == 1 and lowered[0] in ctes:
            continue
        if len(lowered) == 1 and (namespace.lower(), lowered[0]) in relations:
            continue
        if len(lowered) == 2 and (lowered[0], lowered[1]) in relations:
            continue
        raise ViewError(
            f"CREATE VIEW {identifier}: the query reads {'.'.join(path)}, which is not a table or view of the "
            f"{database} catalog; an Iceberg view may read only the catalog's tables and views (another "
            "process could not read it)"
        )
    return sql


def stored_sql_problem(con: duckdb.DuckDBPyConnection, sql: str, database: str) -> str | None:
    """Why a view's stored SQL (its catalog names stripped) may not become a DuckDB view here, else
    None: it must be one SELECT statement reading only tables and views of `database` (another
    writer may have stored `SELECT 1; COPY ... TO '<file>'` or `FROM read_text('<file>')`, which
    would run in this process with its rights)."""
    found = table_references(con, sql)
    if found is None:
        return "it is not one SELECT statement"
    refs, ctes = found
    relations = {
        (str(s).lower(), str(n).lower())
        for s, n in con.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ? "
            "UNION ALL SELECT schema_name, view_name FROM duckdb_views() WHERE database_name = ? AND NOT internal",
            [database, database],
        ).fetchall()
    }
    names = {n for _, n in relations}
    for _, path in refs:
        lowered = tuple(p.lower() for p in path)
        if (len(lowered) == 1 and (lowered[0] in ctes or lowered[0] in names)) or lowered in relations:
            continue
        return f"it reads {'.'.join(path)}, which is not a table or view of the catalog"
    return None


@contextlib.contextmanager
def _scratch_view(con: duckdb.DuckDBPyConnection, database: str, namespace: str, sql: str) -> Iterator[str]:
    name = f"{INTERNAL_PREFIX}viewcheck_{uuid.uuid4().hex[:12]}"
    qualified = f"{quote_ident(database)}.{quote_ident(namespace)}.{quote_ident(name)}"
    con.execute(f"CREATE VIEW {qualified} AS {sql}")
    try:
        yield qualified
    finally:
        con.execute(f"DROP VIEW IF EXISTS {qualified}")


# DuckDB integer types wider than Iceberg's long: the view's schema says decimal(38, 0), which holds
# every value (`sum` of a BIGINT column is a HUGEINT in DuckDB, a long or a decimal elsewhere)
_WIDE_INTEGERS = frozenset({"HUGEINT", "UHUGEINT", "UBIGINT"})


def _view_fields(rel: duckdb.DuckDBPyRelation) -> list[NestedField]:
    fields = []
    for name, t in zip(rel.columns, rel.types, strict=True):
        if str(t) in _WIDE_INTEGERS:
            fields.append(NestedField(0, name, DecimalType(38, 0)))
            continue
        try:
            fields.append(NestedField(0, name, iceberg_type(t, name)))
        except SqlTypeError as e:
            raise SqlTypeError(f"{e} (CAST the column in the view's query)") from None
    return fields


def _bound_schema(
    con: duckdb.DuckDBPyConnection,
    database: str,
    namespace: str,
    sql: str,
    columns: tuple[str, ...],
    identifier: str,
) -> Schema:
    """The schema the stored SQL binds to inside the lake's database (as every process will bind it)."""
    try:
        with _scratch_view(con, database, namespace, sql) as scratch:
            rel = con.sql(f"SELECT * FROM {scratch}")
            fields = _view_fields(rel)
    except duckdb.Error as e:
        raise ViewError(f"CREATE VIEW {identifier}: {str(e).splitlines()[0]}") from None
    except SqlTypeError as e:
        raise ViewError(f"CREATE VIEW {identifier}: {e}") from None
    if len(columns) > len(fields):
        raise ViewError(
            f"CREATE VIEW {identifier}: {len(columns)} column names given for a query of {len(fields)} columns"
        )
    renamed = [
        type(f)(f.id, columns[i] if i < len(columns) else f.name, f.type, f.required)
        for i, f in enumerate(fields)
    ]
    try:
        return make_schema(renamed)
    except (SqlTypeError, ValidationError) as e:
        raise ViewError(f"CREATE VIEW {identifier}: {e}") from None


# -- the catalog's views as DuckDB views ---------------------------------------------------------------

_LOADED: dict[str, LoadedView] = {}  # metadata location -> the view read from it (files never change)


@dataclass(frozen=True, slots=True)
class UnreadableView:
    """A view of the catalog whose metadata cannot be read (its file gone or damaged): it is still
    listed, as a table whose metadata file is gone is, and reading it fails with `why`."""

    namespace: str
    name: str
    why: str


def catalog_views(catalog: Any, unreadable: list[UnreadableView] | None = None) -> list[LoadedView]:
    """Every view of the catalog with its current metadata (files read once per location); the views
    whose metadata cannot be read go to `unreadable` (without it, the error is raised)."""
    if not holds_views(catalog):
        return []
    listed: list[tuple[str, str, str | None]] = []
    every = getattr(catalog, "list_all_views", None)
    if every is not None:
        listed = [(ns, name, location) for ns, name, location in every()]
    else:
        pending = list(catalog.list_namespaces())
        while pending:
            ns = pending.pop(0)
            pending.extend(catalog.list_namespaces(ns))
            listed.extend((ns, name, None) for name in catalog.list_views(ns))
    out = []
    for ns, name, location in listed:
        cached = _LOADED.get(location) if location is not None else None
        if cached is not None and (cached.namespace, cached.name) == (ns, name):
            out.append(cached)
            continue
        try:
            loaded = catalog.load_view(ns, name)
        except (TableNotFoundError, NamespaceNotFoundError):
            continue  # dropped meanwhile
        except IcebergError as e:
            if unreadable is None:
                raise
            unreadable.append(UnreadableView(ns, name, f"Iceberg view {ns}.{name} cannot be read: {e}"))
            continue
        if len(_LOADED) > 4096:
            _LOADED.clear()
        _LOADED[loaded.metadata_location] = loaded
        out.append(loaded)
    return out


def listing(catalog: Any) -> frozenset[tuple[str, ...]]:
    """What the views' DuckDB side depends on: (namespace, name, metadata location) of each view
    (on a catalog that cannot list them in one read, such as REST: the names only, one request
    per namespace, no view loaded; a view another process replaced shows at the next change)."""
    if not holds_views(catalog):
        return frozenset()
    every = getattr(catalog, "list_all_views", None)
    if every is not None:
        return frozenset(("view", *row) for row in every())
    found: set[tuple[str, ...]] = set()
    pending = list(catalog.list_namespaces())
    while pending:
        ns = pending.pop(0)
        pending.extend(catalog.list_namespaces(ns))
        found.update(("view", ns, name) for name in catalog.list_views(ns))
    return frozenset(found)


def views_in(catalog: Any, namespace: str) -> tuple[str, ...]:
    """The views of `namespace` (none on a catalog without views)."""
    return tuple(catalog.list_views(namespace)) if holds_views(catalog) else ()


def drop_all(catalog: Any, namespace: str, names: tuple[str, ...]) -> None:
    """Drop these views of `namespace` (DROP SCHEMA ... CASCADE)."""
    for name in names:
        catalog.drop_view(namespace, name)


def _candidates(view: LoadedView, database: str) -> list[tuple[str, str]]:
    """(dialect, SQL) to try, the duckdb one first."""
    version = view.metadata.current_version
    reps = sorted(version.representations, key=lambda r: r.dialect.lower() != vm.DUCKDB_DIALECT)
    return [(r.dialect, r.sql) for r in reps]


def _create_statement(view: LoadedView, database: str, sql: str) -> str:
    columns = ", ".join(quote_ident(f.name) for f in view.metadata.schema.fields)
    target = f"{quote_ident(database)}.{quote_ident(view.namespace)}.{quote_ident(view.name)}"
    return f"CREATE OR REPLACE VIEW {target} ({columns}) AS {sql}"


def _comment(con: duckdb.DuckDBPyConnection, view: LoadedView, database: str) -> None:
    text = view.metadata.properties.get(vm.COMMENT)
    if text is not None:
        target = f"{quote_ident(database)}.{quote_ident(view.namespace)}.{quote_ident(view.name)}"
        con.execute(f"COMMENT ON VIEW {target} IS {quote_str(text)}")


def _failing_statement(view: LoadedView, database: str, why: str) -> str:
    columns = (
        ", ".join(
            f"CAST(NULL AS {_duck_type_or_varchar(f.type)}) AS {quote_ident(f.name)}"
            for f in view.metadata.schema.fields
        )
        or "NULL AS nothing"
    )
    target = f"{quote_ident(database)}.{quote_ident(view.namespace)}.{quote_ident(view.name)}"
    return (
        f"CREATE OR REPLACE VIEW {target} AS SELECT {columns} WHERE CAST(error({quote_str(why)}) AS BOOLEAN)"
    )


def _duck_type_or_varchar(t: Any) -> str:
    try:
        return duck_type(t)
    except Exception:
        return "VARCHAR"


def attach(con: duckdb.DuckDBPyConnection, catalog: Any, database: str) -> list[str]:
    """Create the DuckDB view `<database>.<ns>.<v>` of every view of the catalog (after the
    tables' views exist; a view over another view after that one); returns their names. A view
    whose metadata cannot be read is one whose reading fails, naming it and why (its file)."""
    unreadable: list[UnreadableView] = []
    views = catalog_views(catalog, unreadable)
    created: list[str] = []
    for u in unreadable:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(database)}.{quote_ident(u.namespace)}")
        target = f"{quote_ident(database)}.{quote_ident(u.namespace)}.{quote_ident(u.name)}"
        con.execute(
            f"CREATE OR REPLACE VIEW {target} AS SELECT NULL AS unreadable "
            f"WHERE CAST(error({quote_str(u.why[:2000])}) AS BOOLEAN)"
        )
        created.append(f"{database}.{u.namespace}.{u.name}")
    pending: list[tuple[LoadedView, str]] = [(v, "") for v in views]
    while pending:
        left: list[tuple[LoadedView, str]] = []
        for view, _ in pending:
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(database)}.{quote_ident(view.namespace)}")
            errors = []
            for dialect, sql in _candidates(view, database):
                catalog_name = view.metadata.current_version.default_catalog
                names = {database} | ({catalog_name.lower()} if catalog_name else set())
                stored = strip_catalog(con, sql, names)
                problem = stored_sql_problem(con, stored, database)
                if problem is not None:
                    errors.append(f"{dialect}: {problem}")
                    continue
                try:
                    con.execute(_create_statement(view, database, stored))
                    _comment(con, view, database)
                    break
                except duckdb.Error as e:
                    errors.append(f"{dialect}: {str(e).splitlines()[0]}")
            else:
                left.append((view, "; ".join(errors)))
                continue
            created.append(f"{database}.{view.namespace}.{view.name}")
        if len(left) == len(pending):
            for view, why in left:
                dialects = ", ".join(view.metadata.current_version.dialects)
                message = (
                    f"Iceberg view {view.identifier} cannot be read by DuckDB: its SQL ({dialects}) does not "
                    f"bind here ({why})"
                )
                con.execute(_failing_statement(view, database, message[:2000]))
                created.append(f"{database}.{view.namespace}.{view.name}")
            break
        pending = left
    return created
