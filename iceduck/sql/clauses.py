"""Where the clauses of a write statement start and end: one home for the rules `sql/parse.py`,
`sql/merge.py` and `sql/upsert.py` read statements by.

Why tokens and not a parse tree (measured, `benchmarks/write_parse.py`, see benchmarks/README.md
"Parsing write statements"): DuckDB 2.0.1 serialises SELECT statements only, and the tree of an
equivalent SELECT costs 0.3 ms for a short statement but 0.2-0.6 s for a 20,000-OR or 50,000-item
IN predicate, as much as DuckDB's whole DELETE of the 50,000 items on a plain table; sqlglot's
DuckDB dialect costs 0.35-2.1 s on those predicates (plus 150-280 ms to import), and keeps no tree
for Iceberg's DDL (`PARTITIONED BY` is dropped, `SET IDENTIFIER FIELDS` becomes a bare command).
The router tokenizes every statement once anyway, so a write statement's head, its clause
keywords and its names are read from those tokens by the rules below, and every expression or
query (WHERE, SET values, an INSERT's query) is handed to DuckDB as the user's own text, which
DuckDB's parser checks when it runs it.

The rules follow DuckDB's grammar where a keyword is not a clause: `IS [NOT] DISTINCT FROM` is an
operator, a `CASE ... END` is a bracket (its WHEN/THEN are not MERGE's), `ON conflict = 1` is a
join condition on a column named `conflict`, not an `ON CONFLICT` clause (that is followed by `(`
or `DO`), and `INSERT INTO t ((SELECT ...))` is a query in parentheses, not a column list.
"""

from __future__ import annotations

from iceduck.sql.tokens import OP, WORD, Token

_OPEN = frozenset("([{")
_CLOSE = frozenset(")]}")
QUERY_WORDS = ("SELECT", "WITH", "VALUES", "FROM", "TABLE")


def strip(tokens: list[Token]) -> list[Token]:
    """The tokens without the statement's closing `;`s."""
    end = len(tokens)
    while end and tokens[end - 1].is_op(";"):
        end -= 1
    return tokens if end == len(tokens) else tokens[:end]


def depths(toks: list[Token]) -> list[int]:
    """The bracket depth of each token (a closing bracket sits at its opening one's depth); `CASE
    ... END` counts as a bracket."""
    out = [0] * len(toks)
    d = 0
    for j, t in enumerate(toks):
        kind = t.kind
        if kind == OP:
            if t.text in _CLOSE:
                d = d - 1 if d else 0
            out[j] = d
            if t.text in _OPEN:
                d += 1
        elif kind == WORD and len(t.text) in (3, 4):
            word = t.text.upper()
            if word == "END":
                d = d - 1 if d else 0
            out[j] = d
            if word == "CASE":
                d += 1
        else:
            out[j] = d
    return out


def keyword(toks: list[Token], j: int, *words: str) -> bool:
    """Whether `toks[j]` is one of `words` (upper case) standing as a clause keyword: the FROM of
    `IS [NOT] DISTINCT FROM` is not (an ON opening `ON CONFLICT`: see `on_conflict`)."""
    t = toks[j]
    if not t.is_word(*words):
        return False
    return not (j > 0 and toks[j - 1].is_word("DISTINCT") and t.is_word("FROM"))


def on_conflict(toks: list[Token], j: int) -> bool:
    """Whether `toks[j]` opens an `ON CONFLICT [(columns)] DO ...` clause."""
    return (
        j >= 0
        and j + 2 < len(toks)
        and toks[j].is_word("ON")
        and toks[j + 1].is_word("CONFLICT")
        and (toks[j + 2].is_op("(") or toks[j + 2].is_word("DO"))
    )


def find(toks: list[Token], depth: list[int], start: int, end: int, *words: str) -> int | None:
    """The index of the first clause keyword among `words` at depth 0 in [start, end), or None."""
    for j in range(start, end):
        if depth[j] == 0 and toks[j].kind == WORD and keyword(toks, j, *words):
            return j
    return None


def name_end(toks: list[Token], i: int) -> int:
    """The end of the name written at `toks[i]` (its parts joined by `.`); `i` when none is there.
    Quoted parts are one part each, dots and all (`s."a.c"`: `s`, `a.c`), as in DuckDB."""
    if i >= len(toks) or not toks[i].is_name:
        return i
    i += 1
    while i + 1 < len(toks) and toks[i].is_op(".") and toks[i + 1].is_name:
        i += 2
    return i


def name_parts(toks: list[Token], start: int, end: int) -> tuple[str, ...]:
    """The parts of the name in [start, end) (see `name_end`), quotes removed."""
    return tuple(toks[j].text for j in range(start, end, 2))


def query_in_parens(toks: list[Token], i: int) -> bool:
    """Whether the `(` at `toks[i]` opens a query (`INSERT INTO t (SELECT ...)`, `((VALUES ...))`)
    rather than a column list."""
    j = i
    while j < len(toks) and toks[j].is_op("("):
        j += 1
    return j > i and j < len(toks) and toks[j].is_word(*QUERY_WORDS)


__all__ = [
    "QUERY_WORDS",
    "depths",
    "find",
    "keyword",
    "name_end",
    "name_parts",
    "on_conflict",
    "query_in_parens",
    "strip",
]
