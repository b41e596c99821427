"""What each statement of a text is, as DuckDB's own parser says: its `StatementType` and its text.

`extract_statements` splits a script and names each statement's kind (SELECT, INSERT, UPDATE,
DELETE, MERGE_INTO, CREATE, EXPLAIN, PREPARE, EXECUTE, CALL, TRANSACTION, ...). The router
dispatches on that answer, never on the statement's first word: a `WITH ... INSERT` is an INSERT,
a `WITH ... SELECT` a query, `SHOW TABLES` and `DESCRIBE` queries, `TRUNCATE` a DELETE,
`COMMENT ON` an ALTER, `ANALYZE` a VACUUM.

Where DuckDB's parser refuses a statement only iceduck understands (`DROP TABLE ns.t PURGE`,
`ALTER TABLE ns.t RENAME TO ns.t2`, Spark's `CALL cat.system.p(table => 'ns.t')`), the script is
split by iceduck's lexer (`sql/tokens.py`) and that statement comes back with type None: the
router reads it as a statement it may run itself. Any other syntax error is DuckDB's, raised
before anything runs.

A script's statements are kept per router (`Classifier`), keyed by the text: the parse
(~15 us for `SELECT 1`) is paid once per distinct text, so a statement repeated in a loop costs a
dictionary lookup.

What a query calls (functions, table functions, SQL value keywords) is read from its parse tree
(`called`): which of those DuckDB marks as varying (`iceduck.duckdb.builtins`) and whether all of
them are DuckDB's own.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import duckdb

from iceduck.duckdb.builtins import builtins, varies
from iceduck.sql import parse as p
from iceduck.sql.parse_tree import nodes
from iceduck.sql.tokens import SqlSyntaxError, Token, closing, split_statements, tokenize

Type = duckdb.StatementType

# Statements iceduck may run itself (their target may be a lake table or namespace, a procedure
# of the lake's, a view of its catalog, a secret it keeps): run statement by statement. None: a
# statement DuckDB's parser refuses (see the module docstring). PRAGMA: `COPY FROM DATABASE`.
_MAY_WRITE = frozenset(
    {
        Type.INSERT, Type.UPDATE, Type.DELETE, Type.MERGE_INTO, Type.CREATE, Type.DROP, Type.ALTER,
        Type.COPY, Type.COPY_DATABASE, Type.CALL, Type.VACUUM, Type.ANALYZE, Type.PRAGMA, None,
        Type.MULTI,  # `ALTER TABLE t ADD COLUMN c INT NOT NULL` is two statements to DuckDB (and PIVOT)
    }
)  # fmt: skip
# Statements whose query part the front door reads from the parse tree (`sql.read_plan`).
QUERY_TYPES = frozenset({Type.SELECT, Type.INSERT, Type.CREATE, Type.EXPLAIN, Type.PREPARE})


@dataclass(frozen=True, slots=True)
class ScriptStatement:
    """One statement of a script: its text and DuckDB's statement type (None where DuckDB's parser
    refuses a statement only iceduck understands, such as `DROP TABLE ns.t PURGE`)."""

    query: str
    type: duckdb.StatementType | None


@dataclass(frozen=True, slots=True)
class Script:
    """The statements of one text, in order."""

    statements: tuple[ScriptStatement, ...]

    @property
    def is_script(self) -> bool:
        """More than one statement."""
        return len(self.statements) > 1

    @property
    def type(self) -> duckdb.StatementType | None:
        """The type of a text of one statement (None for none, several, or one DuckDB refuses)."""
        return self.statements[0].type if len(self.statements) == 1 else None

    @property
    def may_write(self) -> bool:
        """Whether a statement of the text is one iceduck may run itself (see `_MAY_WRITE`)."""
        return any(s.type in _MAY_WRITE for s in self.statements)

    @property
    def has_transaction(self) -> bool:
        """Whether a statement is BEGIN / COMMIT / ROLLBACK (the text then runs statement by statement)."""
        return any(s.type == Type.TRANSACTION for s in self.statements)

    def has(self, *types: duckdb.StatementType | None) -> bool:
        return any(s.type in types for s in self.statements)

    @property
    def is_query(self) -> bool:
        """One statement, a query (SELECT, WITH ... SELECT, FROM, VALUES, TABLE, SHOW, DESCRIBE)."""
        return self.type == Type.SELECT


def split_script(con: duckdb.DuckDBPyConnection, text: str) -> list[ScriptStatement]:
    """The statements of `text`, as `con.extract_statements` gives them; where DuckDB's parser refuses
    the script only because of statements that may be about lake tables (`DROP TABLE ... PURGE`,
    `ALTER TABLE ... RENAME TO ns.t2`), those come back with type None. Any other syntax error is
    DuckDB's, raised before anything runs."""
    try:
        return [ScriptStatement(s.query, s.type) for s in con.extract_statements(text)]
    except duckdb.Error as error:
        original = error
    try:
        pieces = split_statements(text)
    except SqlSyntaxError:
        raise original from None
    out = []
    for piece in pieces:
        try:
            out += [ScriptStatement(s.query, s.type) for s in con.extract_statements(piece)]
        except duckdb.Error:
            if not _lake_only(tokenize(piece), piece):
                raise original from None
            out.append(ScriptStatement(piece, None))
    return out


def _lake_only(tokens: list[Token], text: str) -> bool:
    """Whether a statement DuckDB's parser refuses may be one iceduck runs: a write naming a table
    or namespace, `PREPARE q AS` one (DuckDB prepares no MERGE), a Spark procedure call."""
    if len(tokens) > 3 and tokens[0].is_word("PREPARE") and tokens[1].is_name and tokens[2].is_word("AS"):
        tokens = tokens[3:]
    return p.target(tokens) is not None or _spark_call(tokens, text)


def _spark_call(tokens: list[Token], text: str) -> bool:
    """Whether the statement is a CALL of a procedure iceduck runs (Spark's `table => 'ns.t'`
    arguments are not DuckDB syntax: `table` is a reserved word to its parser)."""
    if not tokens or not tokens[0].is_word("CALL"):
        return False
    from iceduck.sql import procedures

    return procedures.recognise(tokens, text) is not None


# Texts whose statements a router keeps.
_KEPT = 256


class Classifier:
    """`split_script` of one connection, remembered per text (see the module docstring)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self._known: OrderedDict[str, Script] = OrderedDict()

    def __call__(self, text: str) -> Script:
        known = self._known.get(text)
        if known is not None:
            self._known.move_to_end(text)
            return known
        script = Script(tuple(split_script(self.con, text)))
        self._known[text] = script
        while len(self._known) > _KEPT:
            self._known.popitem(last=False)
        return script


# -- what a query calls: from its parse tree ----------------------------------------------------------


# The SQL value keywords DuckDB's parser gives as one-part column references and its binder calls
# as functions (`SELECT current_date` with no FROM). Any other bare name is a column: a column
# named `uuid` or `random` calls nothing (taking it for the volatile function turned pruning off).
VALUE_KEYWORDS = frozenset(
    {
        "current_date", "current_time", "current_timestamp", "localtime", "localtimestamp",
        "current_user", "current_role", "session_user", "user", "current_catalog", "current_schema",
    }
)  # fmt: skip


def called(tree: Any, *, keywords: bool = True) -> Iterator[str]:
    """Lowercase names a query's tree calls: functions, window functions and table functions (their
    last name part) and, with `keywords`, the SQL value keywords (`CURRENT_TIMESTAMP`), which parse
    as one-part column references (`VALUE_KEYWORDS`)."""
    for value in nodes(tree):
        cls = value.get("class")
        if cls in ("FUNCTION", "WINDOW") and isinstance(value.get("function_name"), str):
            yield value["function_name"].lower()
        elif keywords and cls == "COLUMN_REF":
            names: list[Any] = value.get("column_names") or []
            if len(names) == 1 and str(names[0]).lower() in VALUE_KEYWORDS:
                yield str(names[0]).lower()


def calls_varying(names: Iterable[str]) -> bool:
    """Whether a name called may give a different value when the text runs again (DuckDB's catalog
    says which: `iceduck.duckdb.builtins`)."""
    return any(varies(name) for name in names)


def only_built_in(names: Iterable[str], built_in: frozenset[str]) -> bool:
    """Whether every function and table function called is in `built_in` (DuckDB's own names, see
    `built_in_names`); column names pass (they call nothing)."""
    return all(name in built_in for name in names)


def built_in_names(extra: Iterable[str] = ()) -> frozenset[str]:
    """Lowercase names that are DuckDB's own (functions, keywords, types of a fresh connection),
    plus `extra` (the table functions iceduck defines and the front door rewrites)."""
    return builtins().names | frozenset(extra)


# -- where the query part of a statement starts ---------------------------------------------------------
#
# DuckDB's parser says a statement is an INSERT, a CREATE, an EXPLAIN or a PREPARE, and serialises
# only SELECTs; where the query inside one starts is not in its Python API. These read that offset
# from the lexer's tokens, for statements DuckDB already classified (never to decide a kind).


def query_part(
    text: str, tokens: list[Token], kind: duckdb.StatementType | None, classify: Classifier
) -> tuple[str, str] | None:
    """(head, query) of a statement of DuckDB type `kind` whose query DuckDB can serialise alone:
    ("", text) for a query (DESCRIBE and SUMMARIZE are queries to DuckDB's parser), the query after `EXPLAIN [ANALYZE]` / `PREPARE name AS`, (`INSERT INTO x [(columns)] [BY NAME] `,
    its query) and (`CREATE TABLE x AS `, its query) with nothing after the query (no RETURNING, ON
    CONFLICT or WITH [NO] DATA); the CTEs heading an INSERT go with its query, which they belong
    to; else None."""
    while tokens and tokens[-1].is_op(";"):
        tokens = tokens[:-1]
    if not tokens:
        return None
    if kind == Type.SELECT:  # DESCRIBE / SUMMARIZE too: their tree holds the query described
        return "", text
    if kind in (Type.EXPLAIN, Type.PREPARE):
        i = 1
        if kind == Type.EXPLAIN and len(tokens) > 1 and tokens[1].is_word("ANALYZE"):
            i = 2
        elif kind == Type.PREPARE:
            if not (len(tokens) > 3 and tokens[1].is_name and tokens[2].is_word("AS")):
                return None
            i = 3
        if i >= len(tokens):
            return None
        rest = text[tokens[i].start :]
        try:
            inner_kind = classify(rest).type
        except duckdb.Error:
            return None
        found = query_part(rest, tokenize(rest), inner_kind, classify)
        return None if found is None else (text[: tokens[i].start] + found[0], found[1])
    if kind == Type.INSERT:
        if tokens[0].is_word("WITH"):
            after = _ctes_end(tokens)
            if after is None or not tokens[after].is_word("INSERT"):
                return None
            rest = text[tokens[after].start :]
            inner = query_part(rest, tokenize(rest), Type.INSERT, classify)
            if inner is None or not inner[1].strip() or tokenize(inner[1])[0].is_word("WITH"):
                return None
            return inner[0], text[: tokens[after].start] + inner[1]
        try:
            statement = p.parse(text, tokens)  # refuses RETURNING, ON CONFLICT, OR REPLACE, an alias
        except SqlSyntaxError:
            return None
        if not isinstance(statement, p.Insert) or statement.query is None:
            return None
        at = text.rfind(statement.query)
        return None if at < 0 else (text[:at], text[at:])
    if kind == Type.CREATE:
        query_at = _ctas_query(tokens)
        end = len(tokens)
        if query_at is None or query_at >= end or (end - query_at > 1 and tokens[end - 1].is_word("DATA")):
            return None
        return text[: tokens[query_at].start], text[tokens[query_at].start :]
    return None


def _ctas_query(tokens: list[Token]) -> int | None:
    """The index of the first token of a CREATE TABLE ... AS statement's query, or None when the
    statement is not one."""
    i, n = 0, len(tokens)
    for words in (("CREATE",), ("OR",), ("REPLACE",), ("TEMP", "TEMPORARY"), ("TABLE",)):
        if i < n and tokens[i].is_word(*words):
            i += 1
        elif words[0] in ("CREATE", "TABLE"):
            return None
    if (
        i + 2 < n
        and tokens[i].is_word("IF")
        and tokens[i + 1].is_word("NOT")
        and tokens[i + 2].is_word("EXISTS")
    ):
        i += 3
    if i >= n or not tokens[i].is_name:
        return None
    _, j = _name_at(tokens, i)
    return j + 1 if j + 1 < n and tokens[j].is_word("AS") else None


def _ctes_end(tokens: list[Token]) -> int | None:
    """The index of the first token after the CTE list of a statement starting with WITH (`WITH
    [RECURSIVE] name [(columns)] AS [NOT] [MATERIALIZED] (...), ...`), None when not read so."""
    n = len(tokens)
    j = 2 if n > 1 and tokens[1].is_word("RECURSIVE") else 1
    while True:
        if j >= n or not tokens[j].is_name:
            return None
        j += 1
        if j < n and tokens[j].is_op("("):
            close = closing(tokens, j)
            if close is None:
                return None
            j = close + 1
        if not (j < n and tokens[j].is_word("AS")):
            return None
        j += 1
        if j < n and tokens[j].is_word("NOT"):
            j += 1
        if j < n and tokens[j].is_word("MATERIALIZED"):
            j += 1
        if not (j < n and tokens[j].is_op("(")):
            return None
        close = closing(tokens, j)
        if close is None:
            return None
        j = close + 1
        if j < n and tokens[j].is_op(","):
            j += 1
            continue
        return j if j < n else None


def _name_at(tokens: list[Token], i: int) -> tuple[list[str], int]:
    """The dotted name starting at token `i`, and the index of the token after it."""
    parts = [tokens[i].text]
    j = i + 1
    while j + 1 < len(tokens) and tokens[j].is_op(".") and tokens[j + 1].is_name:
        parts.append(tokens[j + 1].text)
        j += 2
    return parts, j


__all__ = [
    "QUERY_TYPES",
    "Classifier",
    "Script",
    "ScriptStatement",
    "built_in_names",
    "called",
    "calls_varying",
    "only_built_in",
    "query_part",
    "split_script",
]
