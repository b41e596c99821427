"""Statements about the lake's catalog that DuckDB would otherwise take on its own copy and lose:
`COMMENT ON TABLE/COLUMN`, table properties and `COPY FROM DATABASE ... TO lake` (views, and the
refusal of a view where the catalog keeps none, are `sql/views.py`'s).

Without this module they ran in DuckDB and reported success while saving nothing to Iceberg (the
comment landed on the `lake.ns.t` view of this connection, the view in its `lake` database, the
copied tables nowhere). Here:

* `COMMENT ON TABLE <lake table> IS '...'` sets the table's `comment` property (NULL removes it);
  `COMMENT ON COLUMN <lake table>.<column> IS '...'` sets the field's `doc` (a new schema);
* `CALL set_iceberg_table_properties(t, {'k': 'v'})` / `CALL remove_iceberg_table_properties(t,
  ['k'])` (the DuckDB iceberg extension's names) set / remove table properties;
* `COPY FROM DATABASE <db> TO lake` creates each table of `<db>` as an Iceberg table (namespace =
  its schema, created when missing) with its rows, one commit per table; a database holding views,
  macros or sequences is refused before anything is written (they have no Iceberg form here).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb

from iceduck.errors import TableNotFoundError, ValidationError
from iceduck.sql.tokens import STRING, Token
from iceduck.sql.views import Resolved
from iceduck.tables import TableHandle, Tables
from iceduck.vocabulary import quote_ident


class CatalogDdlError(ValidationError):
    """A catalog statement on the lake that cannot run as written; nothing was changed."""


@dataclass(frozen=True, slots=True)
class Comment:
    kind: str  # TABLE, VIEW or COLUMN
    parts: tuple[str, ...]
    text: str | None


@dataclass(frozen=True, slots=True)
class CopyDatabase:
    source: str
    target: str


@dataclass(frozen=True, slots=True)
class TableProperties:
    """`CALL set_iceberg_table_properties(t, {...})` / `CALL remove_iceberg_table_properties(t, [...])`,
    the DuckDB iceberg extension's names."""

    parts: tuple[str, ...]
    argument: str  # the properties (a MAP or STRUCT) or the names (a LIST), as written
    remove: bool


Statement = Comment | CopyDatabase | TableProperties


def recognise(tokens: list[Token], text: str) -> Statement | None:
    """The statement when it is one of this module's, else None (cheap: looks at the head)."""
    toks = list(tokens)
    while toks and toks[-1].is_op(";"):
        toks.pop()
    if len(toks) < 3:
        return None
    if toks[0].is_word("COMMENT") and toks[1].is_word("ON") and toks[2].is_word("TABLE", "VIEW", "COLUMN"):
        parts, i = _name(toks, 3)
        if not parts or i + 1 >= len(toks) or not toks[i].is_word("IS"):
            return None
        value = toks[i + 1]
        if i + 2 != len(toks):
            return None
        if value.is_word("NULL"):
            return Comment(toks[2].text.upper(), parts, None)
        return Comment(toks[2].text.upper(), parts, value.text) if value.kind == STRING else None
    if (
        toks[0].is_word("CALL")
        and toks[1].is_word("SET_ICEBERG_TABLE_PROPERTIES", "REMOVE_ICEBERG_TABLE_PROPERTIES")
        and toks[2].is_op("(")
        and toks[-1].is_op(")")
    ):
        if toks[3].kind == STRING:
            parts, i = tuple(toks[3].text.split(".")), 4
        else:
            parts, i = _name(toks, 3)
        if not parts or i >= len(toks) - 1 or not toks[i].is_op(","):
            return None
        argument = text[toks[i + 1].start : toks[-2].end]
        return TableProperties(parts, argument, toks[1].is_word("REMOVE_ICEBERG_TABLE_PROPERTIES"))
    if (
        len(toks) == 6
        and toks[0].is_word("COPY")
        and toks[1].is_word("FROM")
        and toks[2].is_word("DATABASE")
        and toks[3].is_name
        and toks[4].is_word("TO")
        and toks[5].is_name
    ):
        return CopyDatabase(toks[3].text, toks[5].text)
    return None


def _name(toks: list[Token], i: int) -> tuple[tuple[str, ...], int]:
    if i >= len(toks) or not toks[i].is_name:
        return (), i
    parts = [toks[i].text]
    i += 1
    while i + 1 < len(toks) and toks[i].is_op(".") and toks[i + 1].is_name:
        parts.append(toks[i + 1].text)
        i += 2
    return tuple(parts), i


def about(s: Statement) -> str:
    """The database (first name part) the statement is about, lower-case."""
    if isinstance(s, CopyDatabase):
        return s.target.lower()
    return s.parts[0].lower()


def run(
    s: Statement,
    *,
    con: duckdb.DuckDBPyConnection,
    lake: Tables,
    database: str,
    resolve: Callable[[tuple[str, ...]], Resolved | None],
    statement: Callable[[str], Any],
    not_mine: Any,
) -> Any:
    """Run `s` when it is about the lake (`resolve`: a name to the lake table it means, or None);
    `statement` runs one SQL statement through the router; returns `not_mine` for DuckDB's own."""
    if isinstance(s, Comment):
        table_parts = s.parts[:-1] if s.kind == "COLUMN" else s.parts
        if len(table_parts) < 2:
            return not_mine
        found = resolve(table_parts)
        if found is None:
            return not_mine
        if not found.exists:
            raise TableNotFoundError(f"COMMENT ON {s.kind}: table {found.identifier} does not exist")
        handle = TableHandle(lake, found.identifier)
        if s.kind == "COLUMN":
            with handle.update_schema() as changes:
                column = _column(handle, s.parts[-1], found.identifier)
                changes.document_column(column, s.text)
        elif s.text is None:
            handle.unset_properties(["comment"])
        else:
            handle.set_properties({"comment": s.text})
        return con.sql('SELECT CAST(NULL AS BOOLEAN) AS "Success" WHERE false')
    if isinstance(s, TableProperties):
        found = resolve(s.parts)
        if found is None:
            return not_mine
        if not found.exists:
            raise TableNotFoundError(f"table {found.identifier} does not exist")
        handle = TableHandle(lake, found.identifier)
        value = json.loads(
            str(con.execute(f"SELECT CAST(to_json({s.argument}) AS VARCHAR)").fetchall()[0][0])
        )
        if s.remove:
            if not isinstance(value, list):
                raise CatalogDdlError(
                    "remove_iceberg_table_properties: give the property names as a list ['a', 'b']"
                )
            handle.unset_properties([str(v) for v in value])
        else:
            if not isinstance(value, dict):
                raise CatalogDdlError(
                    "set_iceberg_table_properties: give the properties as {'key': 'value', ...}"
                )
            handle.set_properties(
                {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
            )
        return con.sql('SELECT CAST(NULL AS BOOLEAN) AS "Success" WHERE false')
    if s.target.lower() != database:
        return not_mine
    return _copy_database(s, con=con, lake=lake, database=database, statement=statement)


def _column(handle: TableHandle, name: str, identifier: str) -> str:
    fields = handle.schema.fields
    exact = [f.name for f in fields if f.name == name] or [
        f.name for f in fields if f.name.lower() == name.lower()
    ]
    if len(exact) != 1:
        raise CatalogDdlError(f"COMMENT ON COLUMN: table {identifier} has no column {name!r}")
    return exact[0]


def _copy_database(
    s: CopyDatabase,
    *,
    con: duckdb.DuckDBPyConnection,
    lake: Tables,
    database: str,
    statement: Callable[[str], Any],
) -> Any:
    source = s.source
    others = con.execute(
        "SELECT 'view ' || view_name FROM duckdb_views() WHERE database_name = ? AND NOT internal "
        "UNION ALL SELECT 'sequence ' || sequence_name FROM duckdb_sequences() WHERE database_name = ? "
        "UNION ALL SELECT DISTINCT 'macro ' || function_name FROM duckdb_functions() WHERE database_name = ? "
        "AND NOT internal AND function_type IN ('macro', 'table_macro')",
        [source, source, source],
    ).fetchall()
    if others:
        raise CatalogDdlError(
            f"COPY FROM DATABASE {source} TO {s.target}: {source} holds {', '.join(r[0] for r in others[:5])}; "
            "an Iceberg catalog takes tables only (copy them with CREATE TABLE lake.ns.t AS SELECT ...)"
        )
    tables = con.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ? AND NOT temporary "
        "ORDER BY schema_name, table_name",
        [source],
    ).fetchall()
    if not tables:
        exists = con.execute("SELECT 1 FROM duckdb_databases() WHERE database_name = ?", [source]).fetchall()
        if not exists:
            raise CatalogDdlError(f"COPY FROM DATABASE {source}: no database {source!r} is attached")
    namespaces = set(lake.list_namespaces())
    clashes = [
        f"{schema}.{name}"
        for schema, name in tables
        if schema in namespaces and name in lake.list_tables(schema)
    ]
    if clashes:
        raise CatalogDdlError(
            f"COPY FROM DATABASE {source} TO {s.target}: table(s) {', '.join(clashes)} exist already in the catalog"
        )
    for schema, name in tables:
        if schema not in namespaces:
            lake.create_namespace(schema)
            namespaces.add(schema)
        target = f"{quote_ident(database)}.{quote_ident(schema)}.{quote_ident(name)}"
        statement(
            f"CREATE TABLE {target} AS SELECT * FROM {quote_ident(source)}.{quote_ident(schema)}.{quote_ident(name)}"
        )
    return con.sql('SELECT CAST(NULL AS BOOLEAN) AS "Success" WHERE false')
