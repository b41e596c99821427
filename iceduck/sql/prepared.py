"""`PREPARE p AS INSERT/UPDATE/DELETE/MERGE ... <lake table>` and `EXECUTE p(...)`.

DuckDB cannot prepare a write into a lake table (it is a view of DuckDB's, the write an Iceberg
commit), so the router keeps such statements itself: PREPARE names one (replacing any statement,
DuckDB's or its own, of that name), EXECUTE evaluates its arguments in DuckDB and runs the statement
through the router with each parameter (`?`, `?N`, `$N`, `$name`) spelled as the value's literal
(`CAST('<text>' AS <its DuckDB type>)`, exactly the value DuckDB would bind), DEALLOCATE forgets it.
Every other PREPARE / EXECUTE / DEALLOCATE is DuckDB's.
"""

from __future__ import annotations

import contextlib
from typing import Any

import duckdb

from iceduck.errors import ValidationError
from iceduck.sql import clauses
from iceduck.sql import parse as p
from iceduck.sql.tokens import PARAM, SqlSyntaxError, Token, closing, split_arguments, tokenize
from iceduck.vocabulary import quote_ident, quote_str

_WRITES = (p.KIND_INSERT, p.KIND_UPDATE, p.KIND_DELETE, p.KIND_MERGE)


class PreparedError(ValidationError):
    """An EXECUTE of a prepared lake write that cannot run as given."""


def handle(router: Any, text: str, tokens: list[Token], not_mine: Any) -> Any:
    """Run a PREPARE / EXECUTE / DEALLOCATE of a lake write; `not_mine` for DuckDB's own."""
    toks = clauses.strip(tokens)
    if len(toks) < 2:
        return not_mine
    kept: dict[str, str] = router.prepared_writes
    if toks[0].is_word("PREPARE"):
        if len(toks) < 4 or not toks[1].is_name or not toks[2].is_word("AS"):
            return not_mine
        name = toks[1].text.lower()
        kept.pop(name, None)
        inner = text[toks[3].start : toks[-1].end]
        head = p.target(tokenize(inner))
        if head is None or head.kind not in _WRITES:
            return not_mine
        table = router.names.resolve(head)
        front = router.front
        # a table of a catalog attached with ATTACH ... (TYPE iceberg): its router runs the EXECUTE
        attached = front is not None and front.travelling_table(head.name.parts) is not None
        if table is None and not attached:
            return not_mine
        with contextlib.suppress(duckdb.Error):  # DuckDB's statement of that name is replaced
            router.con.execute(f"DEALLOCATE PREPARE {quote_ident(toks[1].text)}")
        kept[name] = inner
        return _success(router.con)
    if toks[0].is_word("DEALLOCATE"):
        i = 2 if toks[1].is_word("PREPARE") else 1
        if i >= len(toks) or kept.pop(toks[i].text.lower(), None) is None:
            return not_mine
        return _success(router.con)
    if not toks[0].is_word("EXECUTE") or not toks[1].is_name:
        return not_mine
    statement = kept.get(toks[1].text.lower())
    if statement is None:
        return not_mine
    expressions: list[tuple[str | None, str]] = []
    if len(toks) > 2:
        if not toks[2].is_op("(") or closing(toks, 2) != len(toks) - 1:
            raise PreparedError(f"EXECUTE {toks[1].text}: expected (arguments)")
        expressions = _split(text, toks[3:-1])
    return router.statement(_bound(router.con, statement, expressions, toks[1].text), None)


def _success(con: Any) -> Any:
    """What DuckDB returns for PREPARE and DEALLOCATE: an empty `Success` column."""
    return con.sql('SELECT CAST(NULL AS BOOLEAN) AS "Success" WHERE false')


def _split(text: str, toks: list[Token]) -> list[tuple[str | None, str]]:
    split = split_arguments(text, toks, ":=", "=")
    if split is None:
        raise PreparedError("EXECUTE: an empty argument")
    return [(None if name is None else name.lower(), value) for name, value in split]


def _bound(con: Any, statement: str, arguments: list[tuple[str | None, str]], name: str) -> str:
    """`statement` with each parameter replaced by the literal of its argument's value."""
    literals: list[str] = []
    for _, expression in arguments:
        try:
            kind, value = con.execute(
                f"SELECT typeof(({expression})), CAST(({expression}) AS VARCHAR)"
            ).fetchall()[0]
        except duckdb.Error as e:
            raise PreparedError(f"EXECUTE {name}: argument {expression}: {e}") from None
        literals.append("NULL" if value is None else f"CAST({quote_str(str(value))} AS {kind})")
    named = {n: lit for (n, _), lit in zip(arguments, literals, strict=True) if n is not None}
    positional = [lit for (n, _), lit in zip(arguments, literals, strict=True) if n is None]
    try:
        tokens = tokenize(statement)
    except SqlSyntaxError:
        return statement
    out, done, next_plain = [], 0, 0
    for t in tokens:
        if t.kind != PARAM:
            continue
        spelled = t.text
        key = spelled[1:]
        if spelled == "?":
            index, lookup = next_plain, None
            next_plain += 1
        elif key.isdigit():
            index, lookup = int(key) - 1, None
        else:
            index, lookup = -1, key.lower()
        if lookup is not None:
            if lookup not in named:
                raise PreparedError(f"EXECUTE {name}: no value for parameter ${key}")
            literal = named[lookup]
        else:
            if not 0 <= index < len(positional):
                raise PreparedError(
                    f"EXECUTE {name}: the statement needs more parameters than the {len(positional)} given"
                )
            literal = positional[index]
        out += [statement[done : t.start], literal]
        done = t.end
    return "".join(out) + statement[done:]


__all__ = ["PreparedError", "handle"]
