"""Where the clauses of a write statement start and end: one home for the grammar `sql/parse.py`,
`sql/merge.py`, `sql/upsert.py`, `sql/prepared.py` and `sql/procedures.py` read statements by.
`insert_spans` reads every INSERT form, `joined` every MERGE / UPDATE / DELETE form, as spans of
the statement's tokens; `name_end` is the one rule for a name as written. The plain path
(`parse.parse`) refuses what `merge` / `upsert` run (an alias, RETURNING, a source, ON CONFLICT),
and their `wants` choose them, by the same reading.

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

from collections.abc import Callable
from dataclasses import dataclass, field

from iceduck.sql.tokens import OP, WORD, SqlSyntaxError, Token

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


# -- INSERT: one grammar for the plain path (`sql/parse.py`) and the keyed one (`sql/upsert.py`) -----


@dataclass(slots=True)
class InsertSpans:
    """`INSERT [OR REPLACE|IGNORE] INTO t [AS a] [BY NAME|POSITION] [(columns)] query|DEFAULT VALUES
    [ON CONFLICT ...] [RETURNING ...]`, as the target's name and spans of the statement's tokens."""

    tokens: list[Token]
    text: str
    how: str | None  # REPLACE or IGNORE (INSERT OR ...)
    name: tuple[str, ...]  # the target's name parts as written
    alias: str | None
    by_name: bool
    columns: tuple[str, ...] | None
    body: tuple[int, int] | None  # the query; None for DEFAULT VALUES
    conflict: tuple[int, int] | None  # ON CONFLICT ... (up to RETURNING)
    returning: tuple[int, int] | None  # RETURNING ... (to the end)

    @property
    def table(self) -> str:
        """The target's last name part: what the statement binds it by."""
        return self.name[-1]

    def slice(self, span: tuple[int, int]) -> str:
        a, b = span
        if a >= b:
            return ""
        return self.text[self.tokens[a].start : self.tokens[b - 1].end]


def insert_spans(text: str, tokens: list[Token]) -> InsertSpans:
    """The parts of an INSERT statement; `SqlSyntaxError` naming what is wrong."""
    toks = strip(tokens)
    depth = depths(toks)
    i = 1
    how = None
    if i < len(toks) and toks[i].is_word("OR"):
        if i + 1 >= len(toks) or not toks[i + 1].is_word("REPLACE", "IGNORE"):
            raise SqlSyntaxError("INSERT OR: expected REPLACE or IGNORE")
        how, i = toks[i + 1].text.upper(), i + 2
    if i >= len(toks) or not toks[i].is_word("INTO"):
        raise SqlSyntaxError("expected INSERT INTO")
    end = name_end(toks, i + 1)
    if end == i + 1:
        raise SqlSyntaxError("INSERT INTO: expected a table name")
    name, i = name_parts(toks, i + 1, end), end
    alias = None
    if i + 1 < len(toks) and toks[i].is_word("AS") and toks[i + 1].is_name:
        alias, i = toks[i + 1].text, i + 2
    by_name = False
    if i + 1 < len(toks) and toks[i].is_word("BY") and toks[i + 1].is_word("NAME", "POSITION"):
        by_name, i = toks[i + 1].is_word("NAME"), i + 2
    columns = None
    if i < len(toks) and toks[i].is_op("(") and not query_in_parens(toks, i):
        close = next(
            (j for j in range(i + 1, len(toks)) if depth[j] == depth[i] and toks[j].is_op(")")), None
        )
        if close is None:
            raise SqlSyntaxError("INSERT INTO: unbalanced parentheses")
        columns = tuple(_column(text, toks, a, b) for a, b in _items(toks, depth, i + 1, close))
        i = close + 1
        if i + 1 < len(toks) and toks[i].is_word("BY") and toks[i + 1].is_word("NAME", "POSITION"):
            by_name, i = by_name or toks[i + 1].is_word("NAME"), i + 2
    stop = len(toks)
    conflict = returning = None
    for j in range(i, len(toks)):
        if depth[j] != 0 or toks[j].kind != WORD:
            continue
        if on_conflict(toks, j):
            stop = min(stop, j)
        if toks[j].is_word("RETURNING"):
            stop = min(stop, j)
            returning = (j, len(toks))
            break
    if stop < len(toks) and toks[stop].is_word("ON"):
        conflict = (stop, returning[0] if returning else len(toks))
    body: tuple[int, int] | None = (i, stop)
    if stop - i == 2 and toks[i].is_word("DEFAULT") and toks[i + 1].is_word("VALUES"):
        body = None
    elif stop == i:
        raise SqlSyntaxError(f"INSERT INTO {'.'.join(name)}: expected a query or VALUES")
    return InsertSpans(toks, text, how, name, alias, by_name, columns, body, conflict, returning)


def _items(toks: list[Token], depth: list[int], start: int, end: int) -> list[tuple[int, int]]:
    """The comma-separated items of [start, end) at that range's own depth."""
    if start >= end:
        return [(start, end)]
    level = depth[start]
    out, first = [], start
    for j in range(start, end):
        if depth[j] == level and toks[j].is_op(","):
            out.append((first, j))
            first = j + 1
    out.append((first, end))
    return out


def _column(text: str, toks: list[Token], a: int, b: int) -> str:
    if b - a != 1 or not toks[a].is_name:
        written = text[toks[a].start : toks[b - 1].end] if a < b else ""
        raise SqlSyntaxError(f"expected a column name, not {written!r}")
    return toks[a].text


# -- MERGE, UPDATE, DELETE: one grammar for the plain path (`sql/parse.py`) and `sql/merge.py` ---------


@dataclass(slots=True)
class Action:
    """A MERGE's `WHEN ... THEN <action>`: the action's span and the clause's kind and condition."""

    start: int
    end: int
    by_source: bool = False
    matched: bool = False
    condition: tuple[int, int] | None = None


@dataclass(slots=True)
class Joined:
    """A MERGE / UPDATE / DELETE statement as spans of its tokens (what `sql/merge.py` rewrites)."""

    kind: str  # MERGE, UPDATE, DELETE
    tokens: list[Token]
    text: str
    target: tuple[int, int]  # the target's name and alias
    alias: str  # what the statement calls the target
    source: tuple[int, int] | None = None  # MERGE's USING item, UPDATE's FROM, DELETE's USING
    condition: tuple[int, int] | None = None  # ON (MERGE) or WHERE
    using_columns: tuple[str, ...] = ()
    actions: list[Action] = field(default_factory=list)
    set_list: tuple[int, int] | None = None  # UPDATE's SET assignments
    returning: bool = False

    def slice(self, start: int, end: int) -> str:
        if start >= end:
            return ""
        return self.text[self.tokens[start].start : self.tokens[end - 1].end]

    @property
    def by_source(self) -> bool:
        return any(a.by_source for a in self.actions)

    @property
    def name(self) -> tuple[str, ...]:
        """The target's name parts as written."""
        start = self.target[0]
        return name_parts(self.tokens, start, name_end(self.tokens, start))

    @property
    def aliased(self) -> bool:
        """Whether the statement gives the target an alias."""
        return name_end(self.tokens, self.target[0]) != self.target[1]


def joined(text: str, tokens: list[Token]) -> Joined:
    """The spans of a MERGE / UPDATE / DELETE statement; `SqlSyntaxError` naming what is wrong."""
    toks = strip(tokens)
    depth = depths(toks)
    if toks[0].is_word("MERGE"):
        return _parse_merge(text, toks, depth)
    if toks[0].is_word("UPDATE"):
        return _parse_update(text, toks, depth)
    return _parse_delete(text, toks, depth)


def _parse_merge(text: str, toks: list[Token], depth: list[int]) -> Joined:
    if len(toks) < 2 or not toks[1].is_word("INTO"):
        raise SqlSyntaxError("expected MERGE INTO")
    start, i, alias = _target_spans(toks, 2, ("USING",))
    if i >= len(toks) or not toks[i].is_word("USING"):
        raise SqlSyntaxError("MERGE INTO: expected USING <source>")
    src = i + 1
    j = find(toks, depth, src, len(toks), "ON", "USING")
    if j is None:
        raise SqlSyntaxError("MERGE INTO: expected ON <condition> or USING (<columns>) after the source")
    if _find(toks, depth, src, j, lambda t: t.is_word("JOIN") or t.is_op(",")) is not None:
        raise SqlSyntaxError(
            "MERGE INTO: put a joined source in a subquery: USING (SELECT ... JOIN ...) AS s"
        )
    m = Joined("MERGE", toks, text, (start, i), alias, source=(src, j))
    k = find(toks, depth, j + 1, len(toks), "WHEN")
    if k is None:
        raise SqlSyntaxError("MERGE INTO: expected at least one WHEN [NOT] MATCHED clause")
    if toks[j].is_word("ON"):
        m.condition = (j + 1, k)
    else:
        if not toks[j + 1].is_op("(") or not toks[k - 1].is_op(")"):
            raise SqlSyntaxError("MERGE INTO: expected USING (<columns>)")
        names = [t for t in toks[j + 2 : k - 1] if not t.is_op(",")]
        if not names or any(not t.is_name for t in names):
            raise SqlSyntaxError("MERGE INTO: USING (...) lists column names")
        m.using_columns = tuple(t.text for t in names)
    i = k
    while i < len(toks) and toks[i].is_word("WHEN"):
        i += 1
        matched = True
        if i < len(toks) and toks[i].is_word("NOT"):
            matched, i = False, i + 1
        if i >= len(toks) or not toks[i].is_word("MATCHED"):
            raise SqlSyntaxError("MERGE INTO: expected WHEN [NOT] MATCHED")
        i += 1
        by_source = False
        if i < len(toks) and toks[i].is_word("BY"):
            if i + 1 >= len(toks) or not toks[i + 1].is_word("SOURCE", "TARGET"):
                raise SqlSyntaxError("MERGE INTO: expected BY SOURCE or BY TARGET")
            by_source = toks[i + 1].is_word("SOURCE") and not matched
            i += 2
        then = find(toks, depth, i, len(toks), "THEN")
        if then is None:
            raise SqlSyntaxError("MERGE INTO: expected THEN in a WHEN clause")
        end = find(toks, depth, then + 1, len(toks), "WHEN", "RETURNING")
        end = len(toks) if end is None else end
        condition = (i + 1, then) if toks[i].is_word("AND") else None
        m.actions.append(Action(then + 1, end, by_source, matched, condition))
        i = end
    if i < len(toks):
        if not toks[i].is_word("RETURNING"):
            raise SqlSyntaxError(f"MERGE INTO: unexpected {toks[i].text!r}")
        m.returning = True
    return m


def _parse_update(text: str, toks: list[Token], depth: list[int]) -> Joined:
    start, i, alias = _target_spans(toks, 1, ("SET",))
    if i >= len(toks) or not toks[i].is_word("SET"):
        raise SqlSyntaxError("UPDATE: expected SET")
    end = find(toks, depth, i + 1, len(toks), "FROM", "WHERE", "RETURNING")
    end = len(toks) if end is None else end
    u = Joined("UPDATE", toks, text, (start, i), alias, set_list=(i + 1, end))
    _from_where(u, depth, end, "FROM")
    return u


def _parse_delete(text: str, toks: list[Token], depth: list[int]) -> Joined:
    if len(toks) < 2 or not toks[1].is_word("FROM"):
        raise SqlSyntaxError("DELETE: expected DELETE FROM")
    start, i, alias = _target_spans(toks, 2, ("USING", "WHERE", "RETURNING"))
    d = Joined("DELETE", toks, text, (start, i), alias)
    _from_where(d, depth, i, "USING")
    return d


def _from_where(s: Joined, depth: list[int], i: int, word: str) -> None:
    toks = s.tokens
    if i < len(toks) and toks[i].is_word(word):
        end = find(toks, depth, i + 1, len(toks), "WHERE", "RETURNING")
        end = len(toks) if end is None else end
        s.source = (i + 1, end)
        i = end
    if i < len(toks) and toks[i].is_word("WHERE"):
        end = find(toks, depth, i + 1, len(toks), "RETURNING")
        end = len(toks) if end is None else end
        s.condition = (i + 1, end)
        i = end
    if i < len(toks):
        if not toks[i].is_word("RETURNING"):
            raise SqlSyntaxError(f"{s.kind}: unexpected {toks[i].text!r}")
        s.returning = True


def _target_spans(toks: list[Token], i: int, stops: tuple[str, ...]) -> tuple[int, int, str]:
    """(start, end after the name and alias, what the statement calls the target)."""
    start = i
    end = name_end(toks, i)
    if end == i:
        raise SqlSyntaxError("expected a table name")
    alias = toks[end - 1].text
    if end < len(toks) and toks[end].is_word("AS"):
        if end + 1 >= len(toks) or not toks[end + 1].is_name:
            raise SqlSyntaxError("expected an alias after AS")
        alias, end = toks[end + 1].text, end + 2
    elif end < len(toks) and toks[end].is_name and not toks[end].is_word(*stops):
        alias, end = toks[end].text, end + 1
    return start, end, alias


def _find(
    toks: list[Token], depth: list[int], start: int, end: int, pred: Callable[[Token], bool]
) -> int | None:
    for j in range(start, end):
        if depth[j] == 0 and pred(toks[j]):
            return j
    return None


__all__ = [
    "QUERY_WORDS",
    "Action",
    "InsertSpans",
    "Joined",
    "depths",
    "find",
    "insert_spans",
    "joined",
    "keyword",
    "name_end",
    "name_parts",
    "on_conflict",
    "query_in_parens",
    "strip",
]
