"""What a user lists is theirs: SHOW TABLES and information_schema without iceduck's own objects.

iceduck's table functions read through sources DuckDB keeps as temporary views named
`__iceduck_*` (the private hook has no hidden form). The statement router rewrites the statements
that list relations so those never show, and SHOW TABLES also lists the catalog's tables
(`lake.ns.t`, which live in DuckDB's `lake` database):

* `SHOW TABLES` / `SHOW ALL TABLES` become the same listing without internal names;
* `information_schema.tables`, `.views` and `.columns` become the same relation filtered, under
  its own name (`tables`, ...) unless the query gives it an alias: found in DuckDB's parse tree
  of the statement's query (every statement DuckDB runs goes through `sql/read_plan.py`, which
  asks here first).
"""

from __future__ import annotations

import os
import re

import duckdb

from iceduck.errors import IcebergError
from iceduck.io.fileio import local_path
from iceduck.io.storage import is_remote
from iceduck.sql import parse_tree as pt
from iceduck.sql.tokens import Token
from iceduck.vocabulary import quote_ident, quote_str

INTERNAL_PREFIX = "__iceduck_"


def _not_internal(column: str) -> str:
    return f"{quote_ident(column)} NOT LIKE '\\_\\_iceduck\\_%' ESCAPE '\\'"


_SHOW_TABLES = re.compile(r"(?is)^\s*show\s+(all\s+)?tables\s*;?\s*$")
_LISTINGS = {"tables": "table_name", "views": "table_name", "columns": "table_name"}
def show_tables_sql(*, all_tables: bool) -> str:
    """SHOW [ALL] TABLES without iceduck's internal sources; SHOW TABLES adds the catalog's tables
    (`lake.ns.t`), which live in another database."""
    if all_tables:
        return f"SELECT * FROM (SHOW ALL TABLES) WHERE {_not_internal('name')}"
    return (
        f"SELECT name FROM (SELECT name FROM (SHOW TABLES) WHERE {_not_internal('name')} "
        "UNION ALL SELECT 'lake.' || schema || '.' || name FROM (SHOW ALL TABLES) WHERE database = 'lake') "
        "ORDER BY name"
    )


def lists_relations(tokens: list[Token]) -> bool:
    """Cheap test (no parse): a SHOW TABLES or a word information_schema."""
    return bool(tokens) and (
        (tokens[0].is_word("SHOW") and any(t.is_word("TABLES") for t in tokens[:3]))
        or any(t.is_name and t.text.lower() == "information_schema" for t in tokens)
    )


def hide_internal(con: duckdb.DuckDBPyConnection, text: str, query: tuple[str, str] | None) -> str:
    """`text`, one statement, listing only the user's relations (see the module docstring).
    `query`: (head, query) of the statement (`classify.query_part`), None when it has none. The
    references are found in DuckDB's parse tree: `information_schema.tables` (not catalog-qualified)
    wherever the grammar puts a table reference, never inside a string or a comment."""
    show = _SHOW_TABLES.match(text)
    if show is not None:
        return show_tables_sql(all_tables=bool(show.group(1)))
    if query is None:
        return text
    head, body = query
    tree = pt.parse_query(con, body)
    if tree is None:
        return text
    changed = False
    for ref in list(pt.table_refs(tree)):
        low = tuple(part.lower() for part in ref.parts)
        if ref.kind != pt.BASE_TABLE or ref.is_cte or len(low) != 2 or low[0] != "information_schema":
            continue
        if low[1] not in _LISTINGS:
            continue
        filtered = f"(SELECT * FROM information_schema.{low[1]} WHERE {_not_internal(_LISTINGS[low[1]])})"
        like = ref.node if ref.node.get("alias") else {**ref.node, "alias": low[1]}
        node = pt.parsed_ref(con, filtered, like)
        if node is not None:
            ref.replace(node)
            changed = True
    return head + pt.render(con, tree) if changed else text


_MISSING = re.compile(r"^Catalog Error: Table with name (?P<name>.+?) does not exist!")


def _looks_like_table(name: str) -> bool:
    """Whether a name DuckDB found no table for is an Iceberg metadata file or a local table folder
    (an object-store folder is not looked up: the hint must not cost requests or fail itself)."""
    if name.endswith(".metadata.json"):
        return True
    if is_remote(name):
        return False
    try:
        return os.path.isdir(os.path.join(local_path(name), "metadata"))
    except IcebergError:  # not a path at all
        return False


def users_error(e: duckdb.Error) -> duckdb.Error:
    """DuckDB's error about the user's statement without a "Did you mean" naming one of iceduck's
    internal objects; a missing "table" that is an Iceberg table's folder or metadata file gets the
    call that reads it instead."""
    lines = str(e).split("\n")
    kept = [line for line in lines if INTERNAL_PREFIX not in line]
    m = _MISSING.match(kept[0]) if kept else None
    if m is not None and _looks_like_table(m.group("name")):
            kept = [kept[0], f"An Iceberg table? Read it with iceberg_scan({quote_str(m.group('name'))})"]
    return e if kept == lines else type(e)("\n".join(kept))
