"""What a user lists is theirs: SHOW TABLES and information_schema without iceduck's own objects.

iceduck's table functions read through sources DuckDB keeps as temporary views named
`__iceduck_*` (the private hook has no hidden form). The statement router rewrites the statements
that list relations so those never show, and SHOW TABLES also lists the catalog's tables
(`lake.ns.t`, which live in DuckDB's `lake` database):

* `SHOW TABLES` / `SHOW ALL TABLES` become the same listing without internal names;
* `information_schema.tables`, `.views` and `.columns` become the same relation filtered, under
  its own name (`tables`, ...) unless the query gives it an alias.
"""

from __future__ import annotations

import os
import re

import duckdb

from iceduck.errors import IcebergError
from iceduck.io.fileio import local_path
from iceduck.io.storage import is_remote
from iceduck.sql.tokens import Token
from iceduck.vocabulary import quote_ident, quote_str

INTERNAL_PREFIX = "__iceduck_"


def _not_internal(column: str) -> str:
    return f"{quote_ident(column)} NOT LIKE '\\_\\_iceduck\\_%' ESCAPE '\\'"


_SHOW_TABLES = re.compile(r"(?is)^\s*show\s+(all\s+)?tables\s*;?\s*$")
_LISTINGS = {"tables": "table_name", "views": "table_name", "columns": "table_name"}
# Words after a relation that are not its alias.
_NOT_ALIAS = frozenset(
    {
        "WHERE", "GROUP", "ORDER", "LIMIT", "OFFSET", "HAVING", "QUALIFY", "WINDOW", "UNION", "EXCEPT",
        "INTERSECT", "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "NATURAL", "POSITIONAL", "ASOF",
        "ANTI", "SEMI", "ON", "USING", "SAMPLE", "TABLESAMPLE", "RETURNING", "SET", "VALUES", "SELECT",
        "FROM", "PIVOT", "UNPIVOT", "LATERAL",
    }
)  # fmt: skip


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
    """Cheap test: a SHOW TABLES or a mention of information_schema."""
    return bool(tokens) and (
        (tokens[0].is_word("SHOW") and any(t.is_word("TABLES") for t in tokens[:3]))
        or any(t.is_name and t.text.lower() == "information_schema" for t in tokens)
    )


def hide_internal(text: str, tokens: list[Token]) -> str:
    """`text` listing only the user's relations (see the module docstring)."""
    show = _SHOW_TABLES.match(text)
    if show is not None:
        return show_tables_sql(all_tables=bool(show.group(1)))
    pieces: list[str] = []
    done = 0
    for i, t in enumerate(tokens):
        if not (
            t.is_name
            and t.text.lower() == "information_schema"
            and i + 2 < len(tokens)
            and tokens[i + 1].is_op(".")
            and tokens[i + 2].is_name
            and tokens[i + 2].text.lower() in _LISTINGS
            and not (i > 0 and tokens[i - 1].is_op("."))  # catalog-qualified: left as written
            and not (i + 3 < len(tokens) and tokens[i + 3].is_op(".", "("))
        ):
            continue
        name = tokens[i + 2].text.lower()
        after = tokens[i + 3] if i + 3 < len(tokens) else None
        named = after is not None and (
            after.is_word("AS") or (after.is_name and not after.is_word(*_NOT_ALIAS))
        )
        alias = "" if named else f" AS {quote_ident(name)}"
        filtered = f"(SELECT * FROM information_schema.{name} WHERE {_not_internal(_LISTINGS[name])}){alias}"
        pieces += [text[done : t.start], filtered]
        done = tokens[i + 2].end
    return "".join(pieces) + text[done:] if pieces else text


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
