"""`lake.ns.t AT (VERSION => id)` and `AT (TIMESTAMP => ts)`: DuckDB's time-travel syntax on lake tables.

DuckDB hands `AT (...)` to the catalog a table belongs to, and the views iceduck makes for a
catalog's tables (`lake.ns.t`) are not a catalog that travels ("Catalog type does not support time
travel"). The statement router rewrites the clause first: the table and its `AT (...)` become
`iceberg_scan('ns.t', snapshot_id := id)` (or `as_of := ts`), under the table's name as alias
unless the query gives one, so `t.column` keeps working. Only names that resolve to a table of
the lake are rewritten; everything else reaches DuckDB untouched.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from iceduck.sql.tokens import Token, closing
from iceduck.vocabulary import quote_ident, quote_str

# What AT's unit becomes: DuckDB's VERSION is the snapshot id, TIMESTAMP the time to travel to.
_UNITS = {"VERSION": "snapshot_id", "TIMESTAMP": "as_of"}
# Words that end a table reference instead of naming its alias.
_CLAUSE_WORDS = frozenset(
    {
        "WHERE", "GROUP", "ORDER", "LIMIT", "OFFSET", "HAVING", "QUALIFY", "WINDOW", "UNION", "EXCEPT",
        "INTERSECT", "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "NATURAL", "POSITIONAL", "ASOF",
        "ANTI", "SEMI", "ON", "USING", "SAMPLE", "TABLESAMPLE", "RETURNING", "SET", "VALUES",
        "SELECT", "FROM", "PIVOT", "UNPIVOT", "LATERAL",
    }
)  # fmt: skip

# resolve(name parts) -> the catalog identifier `ns.t` when they name a lake table, else None
Resolver = Callable[[tuple[str, ...]], str | None]


def _at_clause(tokens: list[Token], i: int) -> bool:
    """Whether an `AT ( VERSION|TIMESTAMP =>` clause starts at token `i`."""
    return (
        tokens[i].is_word("AT")
        and i + 3 < len(tokens)
        and tokens[i + 1].is_op("(")
        and tokens[i + 2].is_word(*_UNITS)
        and tokens[i + 3].is_op("=>")
    )


def mentions_time_travel(tokens: list[Token]) -> bool:
    """Cheap test: an `AT ( VERSION|TIMESTAMP =>` sequence anywhere."""
    return any(_at_clause(tokens, i) for i in range(len(tokens)))


def _name_before(tokens: list[Token], at: int) -> tuple[int, int] | None:
    """(index of the first token of the dotted name the `AT (...)` at `at` belongs to, index of the
    token after that name), or None. DuckDB's own grammar puts a table's alias before AT
    (`ns.t x AT (...)`, `ns.t AS x AT (...)`); a name right before AT is then the alias."""
    end = at - 1
    if end < 0 or not tokens[end].is_name:
        return None
    if end >= 1 and tokens[end - 1].is_word("AS"):
        end -= 2  # `name AS alias AT (...)`
    elif end >= 1 and tokens[end - 1].is_name and not tokens[end - 1].is_word(*_CLAUSE_WORDS):
        end -= 1  # `name alias AT (...)`
    if end < 0 or not tokens[end].is_name or tokens[end].is_word(*_CLAUSE_WORDS):
        return None
    start = end
    while start >= 2 and tokens[start - 1].is_op(".") and tokens[start - 2].is_name:
        start -= 2
    return start, end + 1


def rewrite_time_travel(
    text: str, tokens: list[Token], resolve: Resolver
) -> tuple[str, list[tuple[str, str]]]:
    """`text` with each `<lake table> AT (VERSION|TIMESTAMP => expr)` as an `iceberg_scan` call, and
    (catalog identifier, the clause as written) for each one rewritten."""
    travels: list[tuple[str, str]] = []
    pieces: list[str] = []
    done = 0
    for i in range(len(tokens)):
        if not _at_clause(tokens, i):
            continue
        named_at = _name_before(tokens, i)
        close = closing(tokens, i + 1)
        if named_at is None or close is None or tokens[named_at[0]].start < done:
            continue
        start, name_end = named_at
        parts = tuple(tokens[k].text for k in range(start, name_end, 2))
        identifier = resolve(parts)
        if identifier is None:
            continue  # not a lake table: DuckDB decides
        unit = _UNITS[tokens[i + 2].text.upper()]
        expr = text[tokens[i + 3].end : tokens[close].start].strip()
        call = f"iceberg_scan({quote_str(identifier)}, {unit} := {expr})"
        after = tokens[close + 1] if close + 1 < len(tokens) else None
        named = after is not None and (
            after.is_word("AS") or (after.is_name and not after.is_word(*_CLAUSE_WORDS))
        )
        if name_end < i:  # the alias DuckDB's grammar puts before AT
            alias = " " + text[tokens[name_end].start : tokens[i - 1].end]
        else:
            alias = "" if named else f" AS {quote_ident(parts[-1])}"
        pieces += [text[done : tokens[start].start], call + alias]
        travels.append((identifier, text[tokens[start].start : tokens[close].end]))
        done = tokens[close].end
    return ("".join(pieces) + text[done:] if pieces else text), travels


def as_travelled(e: duckdb.Error, travels: list[tuple[str, str]]) -> duckdb.Error:
    """An error of a rewritten statement naming the clause the user wrote (`lake.ns.t AT (VERSION
    => 42): no snapshot with id 42`), not the `iceberg_scan` call it became."""
    message = str(e)
    for identifier, written in travels:
        # the scan names the table as `db.ns.t` was given, or as its catalog knows it (`ns.t`)
        for name in (identifier, identifier.split(".", 1)[1]):
            message = message.replace(f"iceberg_scan: {name}: ", f"{written}: ")
    return e if message == str(e) else type(e)(message)
