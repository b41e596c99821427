"""The shell's Tab completion in context: what may follow the text before the cursor.

`complete(before, names)` is pure (text and a snapshot of DuckDB's catalog in, candidates out), so
the rules are testable without a terminal; `catalog_names(con)` takes the snapshot.

* After a dot, the names inside what precedes it: `lake.` -> the lake's namespaces, `lake.shop.` ->
  its tables and views, `shop.` -> tables of a schema `shop` in any database (a lake namespace
  reads as `shop.t` too), `orders.` or `lake.shop.orders.` -> the relation's columns.
* After FROM, JOIN, INTO, UPDATE, TABLE, DESCRIBE and the like: relations, schemas and databases.
* Elsewhere: keywords, functions, columns and relation names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

# keywords after which a relation name comes
_RELATION_CONTEXT = frozenset(
    {"FROM", "JOIN", "INTO", "UPDATE", "TABLE", "DESCRIBE", "SUMMARIZE", "USING", "VIEW", "USE", "MERGE"}
)
# the dotted word being typed: identifiers (or double-quoted ones) joined by dots, possibly ending in one
_DOTTED = re.compile(r'((?:(?:"[^"]*"|[A-Za-z_][A-Za-z0-9_$]*)\.)*)("?[A-Za-z0-9_$]*)$')
_LAST_WORD = re.compile(r"([A-Za-z_]+)\s*(?:,\s*)?$")


@dataclass(frozen=True, slots=True)
class CatalogNames:
    """What completion may offer, read from DuckDB's catalog at one moment."""

    keywords: tuple[str, ...]
    functions: tuple[str, ...]
    databases: tuple[str, ...]
    schemas: tuple[tuple[str, str], ...]  # (database, schema)
    relations: tuple[tuple[str, str, str], ...]  # (database, schema, name)
    columns: tuple[tuple[str, str, str, str], ...]  # (database, schema, relation, column)


def catalog_names(con: duckdb.DuckDBPyConnection) -> CatalogNames:
    """A snapshot of the names DuckDB knows on `con`, iceduck's internal objects left out."""
    hidden = "NOT internal AND {col} NOT LIKE '\\_\\_iceduck%' ESCAPE '\\'"

    def rows(sql: str) -> list[tuple[str, ...]]:
        return [tuple(r) for r in con.execute(sql).fetchall()]

    relations = rows(
        f"SELECT database_name, schema_name, table_name FROM duckdb_tables() WHERE {hidden.format(col='table_name')} "
        f"UNION SELECT database_name, schema_name, view_name FROM duckdb_views() "
        f"WHERE {hidden.format(col='view_name')}"
    )
    return CatalogNames(
        keywords=tuple(r[0].upper() for r in rows("SELECT keyword_name FROM duckdb_keywords()")),
        functions=tuple(
            r[0]
            for r in rows(
                "SELECT DISTINCT function_name FROM duckdb_functions() "
                "WHERE function_name NOT LIKE '\\_\\_%' ESCAPE '\\'"
            )
        ),
        databases=tuple(
            r[0] for r in rows("SELECT database_name FROM duckdb_databases() WHERE NOT internal")
        ),
        schemas=tuple((r[0], r[1]) for r in rows("SELECT database_name, schema_name FROM duckdb_schemas()")),
        relations=tuple((r[0], r[1], r[2]) for r in relations),
        columns=tuple(
            (r[0], r[1], r[2], r[3])
            for r in rows(
                "SELECT database_name, schema_name, table_name, column_name FROM duckdb_columns() "
                f"WHERE {hidden.format(col='table_name')}"
            )
        ),
    )


def complete(before: str, names: CatalogNames) -> tuple[str, list[str]]:
    """The word being typed at the end of `before` and the names that may complete it, sorted."""
    m = _DOTTED.search(before)
    assert m is not None  # the pattern matches the empty string at the end
    qualifier = [_unquote(p) for p in _split_dots(m.group(1))]
    word = m.group(2)
    partial = word.lstrip('"').lower()
    if qualifier:
        found = _inside(qualifier, names)
    else:
        head = before[: m.start()]
        last = _LAST_WORD.search(head)
        if last is not None and last.group(1).upper() in _RELATION_CONTEXT:
            found = {r[2] for r in names.relations} | {s[1] for s in names.schemas} | set(names.databases)
        else:
            known = {k.lower() for k in names.keywords}
            found = set(names.keywords) | {
                n
                for n in (*names.functions, *(c[3] for c in names.columns), *(r[2] for r in names.relations))
                if n.lower() not in known
            }
    return word, sorted((n for n in found if n.lower().startswith(partial)), key=str.lower)


def _inside(qualifier: list[str], names: CatalogNames) -> set[str]:
    """The names one level below a dotted qualifier (every reading DuckDB could give it)."""
    q = [p.lower() for p in qualifier]
    found: set[str] = set()
    if len(q) == 1:
        found |= {s for d, s in names.schemas if d.lower() == q[0]}
        found |= {r for _, s, r in names.relations if s.lower() == q[0]}
        found |= {c for _, _, r, c in names.columns if r.lower() == q[0]}
    elif len(q) == 2:
        found |= {r for d, s, r in names.relations if (d.lower(), s.lower()) == (q[0], q[1])}
        found |= {c for _, s, r, c in names.columns if (s.lower(), r.lower()) == (q[0], q[1])}
    elif len(q) == 3:
        found |= {c for d, s, r, c in names.columns if (d.lower(), s.lower(), r.lower()) == tuple(q)}
    return found


def _split_dots(text: str) -> list[str]:
    parts = re.findall(r'"[^"]*"|[^.]+', text)
    return [p for p in parts if p]


def _unquote(part: str) -> str:
    return part[1:-1] if part.startswith('"') and part.endswith('"') else part
