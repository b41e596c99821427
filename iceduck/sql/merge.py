"""MERGE INTO, UPDATE ... FROM, DELETE ... USING (and UPDATE/DELETE with RETURNING, an alias or a
column reference qualified by the target's name, `t.c` / `ns.t.c`) on a lake table: DuckDB runs the
statement itself, on a copy of the rows it can touch.

1. The source is read once into a DuckDB table (a MERGE's `USING` item; an UPDATE's `FROM` or a
   DELETE's `USING` when it is one item), under the alias the statement binds it by.
2. What the source implies for the target prunes it ("dynamic file pruning"): each `target.col =
   <expression over the source>` conjunct of the ON (or WHERE) condition, and each `USING (col)`
   column, becomes `col IN (<the source's values>)` (few values) or `col BETWEEN <min> AND <max>`.
   The table is planned with that predicate, so only the data files a matching row can be in are
   opened, and only their rows that satisfy it and that some source row matches (a semi-join on
   the condition) are copied. A MERGE with a `WHEN NOT MATCHED BY
   SOURCE` clause touches rows no source row matches: it copies every live row.
3. The copy is a DuckDB table of the target's columns (types, NOT NULL, write-defaults) plus
   hidden columns: the row's data file and position, its `_row_id`, and an "updated" flag that
   every UPDATE action of the statement also sets. The user's statement runs on it as written,
   with the target and source names swapped for the copies, `*` and positional INSERT/UPDATE forms
   spelled out by column (the hidden columns are not the user's), references qualified by the
   target's schema (`ns.t.c`) spelled by the name the copy is bound by (`t.c`), so its outcome, errors and
   count are DuckDB's own.
4. The outcome is committed merge-on-read (`iceduck.transaction.merge`): the positions of deleted
   rows and the old copies of updated rows become deletion vectors (v3) / position deletes (v2);
   updated rows (keeping `_row_id`, with a new `_last_updated_sequence_number`) and inserted rows
   go to new data files; one commit.
"""

from __future__ import annotations

import re
import uuid
import warnings
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np

from iceduck.catalog.base import split_table_name
from iceduck.errors import ValidationError
from iceduck.spec.types import Schema
from iceduck.sql import clauses
from iceduck.sql.tokens import IDENT, OP, WORD, SqlSyntaxError, Token, tokenize
from iceduck.sql.working import Working
from iceduck.tables import Tables
from iceduck.transaction.commit import TableCommitter
from iceduck.transaction.merge import commit_rows, no_new_files, plan_rows
from iceduck.vocabulary import quote_ident, quote_str
from iceduck.write.matching import FILE_COLUMN, POS_COLUMN, live_rows_sql, unregister
from iceduck.write.types import LAST_UPDATED_SEQUENCE_NUMBER, ROW_ID, duck_type

_FILE = "__iceduck_merge_file"
_POS = "__iceduck_merge_pos"
_ROW = "__iceduck_merge_row_id"
_UPDATED = "__iceduck_merge_updated"
HIDDEN = (_FILE, _POS, _ROW, _UPDATED)
# More distinct source values than this prune by their range instead of the list of them.
IN_LIST_LIMIT = 256
_SCALAR = re.compile(
    r"(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|FLOAT|DOUBLE|"
    r"DECIMAL\(\d+,\d+\)|VARCHAR|DATE|TIME|TIMESTAMP|TIMESTAMP_NS|TIMESTAMP WITH TIME ZONE|UUID|BOOLEAN|BLOB)"
)
_INTEGERS = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"}
)


class MergeError(ValidationError):
    """A MERGE / UPDATE ... FROM / DELETE ... USING on a lake table that cannot run as written."""


# -- which statements come here ------------------------------------------------------------------


def wants(tokens: list[Token]) -> bool:
    """Whether an UPDATE or DELETE on a lake table runs here: one with a FROM / USING source, a
    RETURNING clause or a target alias (MERGE always does), read by `parse`, the grammar the plain
    path refuses these by."""
    toks = clauses.strip(tokens)
    if not toks:
        return False
    if toks[0].is_word("MERGE"):
        return True
    if not toks[0].is_word("UPDATE", "DELETE"):
        return False
    try:
        s = parse("", toks)
    except SqlSyntaxError:
        return False  # the plain path names what is wrong
    if s.aliased or s.source is not None or s.returning:
        return True
    # `t.c` / `ns.t.c`: the plain path evaluates SET and WHERE over rows of another name
    name, start = s.name, s.target[1]
    parts = {part.lower() for part in name}
    return any(
        t.kind in (WORD, IDENT)
        and t.text.lower() in parts
        and _qualified_reference(toks, j, name, 1) is not None
        for j, t in enumerate(toks[start:], start)
    )


# -- the statement, as spans of its tokens: `sql/clauses` (one grammar with the plain path's) ------

_Action = clauses.Action
Joined = clauses.Joined
parse = clauses.joined


def _by_last_part(text: str, tokens: list[Token]) -> tuple[str, list[Token]]:
    """The statement with its column references qualified by the target's schema (`ns.t.c`,
    `lake.ns.t.c`, as DuckDB binds them when the target has no alias) spelled by the target's last
    name part (`t.c`): the copy of the target that stands in for it is bound by that name alone.
    The source (read as written, into a copy of its own) keeps its text."""
    s = parse(text, tokens)
    name = s.name
    if s.aliased or len(name) < 2:
        return text, tokens
    toks = s.tokens
    skip = [s.target, s.source or (0, 0)]
    out: list[str] = []
    done = j = 0
    while j < len(toks):
        end = None if any(a <= j < b for a, b in skip) else _qualified_reference(toks, j, name)
        if end is None:
            j += 1
            continue
        out += [text[done : toks[j].start], quote_ident(name[-1])]
        done, j = toks[end - 1].end, end
    if not out:
        return text, tokens
    rewritten = "".join(out) + text[done:]
    return rewritten, tokenize(rewritten)


def _qualified_reference(toks: list[Token], j: int, name: tuple[str, ...], shortest: int = 2) -> int | None:
    """The end of the qualifier at `toks[j]` when a column reference starts there qualified by the
    last `shortest` or more parts of `name` (compared as DuckDB compares names: case-insensitively),
    else None."""
    if j and toks[j - 1].is_op("."):
        return None
    for k in range(len(name), shortest - 1, -1):
        end = j + 2 * k - 1  # the `.` before the column
        if end + 1 >= len(toks) or not toks[end].is_op(".") or not toks[end + 1].is_name:
            continue
        parts = name[-k:]
        if all(
            toks[j + 2 * i].is_name
            and toks[j + 2 * i].text.lower() == part.lower()
            and (i == k - 1 or toks[j + 2 * i + 1].is_op("."))
            for i, part in enumerate(parts)
        ):
            return end
    return None


# -- running one -----------------------------------------------------------------------------------


def _inserts_unmatched(s: Joined) -> bool:
    """Whether a MERGE may insert source rows no target row matched (`WHEN NOT MATCHED [BY TARGET]
    THEN INSERT`): such a row would duplicate one another writer added meanwhile."""
    return s.kind == "MERGE" and any(
        not a.matched and not a.by_source and any(t.is_word("INSERT") for t in s.tokens[a.start : a.end])
        for a in s.actions
    )


@dataclass(slots=True)
class _Copies:
    """Names of the DuckDB objects made for one statement."""

    database: str
    schema: str

    def name(self, table: str) -> str:
        return f"{quote_ident(self.database)}.{quote_ident(self.schema)}.{quote_ident(table)}"


def run(con: duckdb.DuckDBPyConnection, lake: Tables, identifier: str, text: str, tokens: list[Token]) -> Any:
    """Run the statement on the lake table `identifier` (see the module docstring); returns DuckDB's
    result of the statement (its `Count`, or the RETURNING rows) as a relation."""
    text, tokens = _by_last_part(text, tokens)
    s = parse(text, tokens)
    namespace, name = split_table_name(identifier)
    committer = TableCommitter(lake.catalog, namespace, name, lake.io)
    base = committer.load()
    schema = base.metadata.schema
    what = f"{s.kind}" + (" INTO" if s.kind == "MERGE" else "")
    working = Working(con)  # a cursor, or `con` inside DuckDB's transaction (sql/working.py)
    cur = working.cur
    database = str(cur.execute("SELECT current_database()").fetchall()[0][0])
    copies = _Copies(database, f"__iceduck_merge_{uuid.uuid4().hex}")
    cur.execute(f"CREATE SCHEMA {quote_ident(database)}.{quote_ident(copies.schema)}")
    try:
        source_alias, source_columns = _read_source(con, s, copies)
        predicate = None
        if source_alias is not None and not s.by_source:
            predicate = _source_predicate(con, s, schema, copies, source_alias, source_columns)
        elif s.kind != "MERGE" and s.source is None and s.condition is not None and s.alias == name:
            predicate = s.slice(*s.condition)  # a plain WHERE: the scan's own pruning reads it
        pruner = lake.pruner(predicate, cur) if predicate is not None else None
        planned = pruner(schema) if pruner is not None else None
        state = plan_rows(base, identifier, what, planned)
        semijoin = None
        if source_alias is not None and not s.by_source:
            t, src = quote_ident(s.alias), quote_ident(source_alias)
            condition = (
                " AND ".join(f"{t}.{quote_ident(c)} = {src}.{quote_ident(c)}" for c in s.using_columns)
                if s.using_columns
                else s.slice(*s.condition)
                if s.condition is not None
                else None
            )
            if condition:
                semijoin = f"EXISTS (SELECT 1 FROM {copies.name('source')} AS {src} WHERE {condition})"
        timezone = str(con.execute("SELECT current_setting('TimeZone')").fetchall()[0][0])
        _copy_target(
            cur, base, state, schema, copies, predicate if source_alias is not None else None,
            s.alias, semijoin, timezone,
        )  # fmt: skip
        statement = _rewritten(s, schema, copies, source_alias, source_columns)
        working.users_session()
        try:
            if s.kind == "MERGE":
                _check_cardinality(con, s, copies, source_alias, identifier)
            outcome = con.execute(statement)
            if s.returning:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the copy is the point
                    table: Any = outcome.to_arrow_table()
                result: Any = table.drop_columns([c for c in table.column_names if c in HIDDEN])
            else:
                count = outcome.fetchall()
                result = int(count[0][0]) if count else 0
        except duckdb.Error as e:
            raise type(e)(_users_text(str(e), copies, s)) from None
        working.ours()
        deleted, rows_sql, updated = _outcome(cur, schema, copies, base.metadata.format_version >= 3)
        # a row another writer added meanwhile that this MERGE would have matched would get a twin
        # from its NOT MATCHED insert (Java's "validate no conflicting data" for MERGE)
        check = no_new_files(identifier, state, planned) if _inserts_unmatched(s) else None
        commit_rows(committer, cur, base, state, deleted, rows_sql, updated_rows=updated, check=check)
    finally:
        working.drop(database, copies.schema)
        working.close()
    if isinstance(result, int):
        return con.sql(f'SELECT CAST({result} AS BIGINT) AS "Count"')
    return con.from_arrow(result)


def _check_cardinality(
    con: Any, s: Joined, copies: _Copies, source_alias: str | None, identifier: str
) -> None:
    """Refuse a MERGE whose WHEN MATCHED clauses would update or delete one target row more than once
    (it matched several source rows): the SQL standard's cardinality rule, which DuckDB adopted after
    2.0.1. Each match takes the first WHEN MATCHED clause whose condition holds, as MERGE does; a
    match whose clause does nothing (or none applies) does not count."""
    matched = [a for a in s.actions if a.matched]
    if not matched or source_alias is None:
        return
    cases = []
    for a in matched:
        doing = s.tokens[a.start].is_word("UPDATE", "DELETE")
        condition = s.slice(*a.condition) if a.condition is not None else "true"
        cases.append(f"WHEN ({condition}) THEN {'true' if doing else 'false'}")
    join = (
        f"USING ({', '.join(quote_ident(c) for c in s.using_columns)})"
        if s.using_columns
        else f"ON ({s.slice(*s.condition)})"
        if s.condition is not None
        else "ON true"
    )
    target = f"{copies.name('target')} AS {quote_ident(s.alias)}"
    source = f"{copies.name('source')} AS {quote_ident(source_alias)}"
    twice = con.execute(
        f"SELECT 1 FROM {target} JOIN {source} {join} WHERE CASE {' '.join(cases)} ELSE false END "
        f"GROUP BY {quote_ident(s.alias)}.{_FILE}, {quote_ident(s.alias)}.{_POS} HAVING count(*) > 1 LIMIT 1"
    ).fetchall()
    if twice:
        raise MergeError(
            f"MERGE INTO {identifier}: cannot affect the same target row more than once (it matched several "
            "source rows); make the source unique on the ON keys, or narrow the WHEN MATCHED conditions"
        )


def _read_source(con: Any, s: Joined, copies: _Copies) -> tuple[str | None, list[str]]:
    """Read a one-item source into a table of its own; (the alias it is bound by, its columns), or
    (None, []) when the statement has no source or one of several items (left as written)."""
    if s.source is None:
        return None, []
    a, b = s.source
    depth = clauses.depths(s.tokens[a:b])
    if any(d == 0 and (t.is_word("JOIN") or t.is_op(",")) for t, d in zip(s.tokens[a:b], depth, strict=True)):
        return None, []
    text = s.slice(a, b)
    candidates = [t.text for t, d in zip(s.tokens[a:b], depth, strict=True) if d == 0 and t.is_name]
    alias = None
    for candidate in [*reversed(candidates), "unnamed_subquery"]:
        try:
            con.execute(f"SELECT {quote_ident(candidate)}.* FROM {text} LIMIT 0")
        except duckdb.Error:
            continue
        alias = candidate
        break
    if alias is None:
        con.execute(f"SELECT * FROM {text} LIMIT 0")  # DuckDB says what is wrong with the source
        raise MergeError(f"{s.kind}: cannot tell the name the source {text!r} is bound by; give it an alias")
    con.execute(f"CREATE TABLE {copies.name('source')} AS SELECT * FROM {text}")
    columns = [str(r[0]) for r in con.execute(f"DESCRIBE {copies.name('source')}").fetchall()]
    return alias, columns


def _conjuncts(toks: list[Token]) -> list[list[Token]] | None:
    """The top-level AND-ed parts of a condition; None when it has a top-level OR."""
    depth = clauses.depths(toks)
    parts: list[list[Token]] = [[]]
    between = False
    for t, d in zip(toks, depth, strict=True):
        if d == 0 and t.is_word("OR"):
            return None
        if d == 0 and t.is_word("BETWEEN"):
            between = True
        if d == 0 and t.is_word("AND"):
            if between:
                between = False
            else:
                parts.append([])
                continue
        parts[-1].append(t)
    return [p for p in parts if p]


def _source_predicate(
    con: Any, s: Joined, schema: Schema, copies: _Copies, alias: str, source_columns: list[str]
) -> str | None:
    """What the source implies for the target's rows, as SQL over the target's column names (None:
    nothing): each `target.col = <expression over the source>` conjunct becomes a list or range."""
    pairs: list[tuple[str, str]] = []  # (target column, source expression)
    columns = {f.name.lower(): f.name for f in schema.fields}
    source_lower = {c.lower() for c in source_columns}
    for c in s.using_columns:
        if c.lower() in columns:
            pairs.append((columns[c.lower()], f"{quote_ident(alias)}.{quote_ident(c)}"))
    if s.condition is not None:
        a, b = s.condition
        for part in _conjuncts(s.tokens[a:b]) or []:
            depth = clauses.depths(part)
            eqs = [k for k, t in enumerate(part) if depth[k] == 0 and t.is_op("=", "==")]
            if len(eqs) != 1:
                continue
            k = eqs[0]
            for left, right in ((part[:k], part[k + 1 :]), (part[k + 1 :], part[:k])):
                column = _target_column(left, s.alias, columns, source_lower)
                if column is not None and right:
                    pairs.append((column, s.text[right[0].start : right[-1].end]))
                    break
    found = []
    source = f"{copies.name('source')} AS {quote_ident(alias)}"
    for column, expression in pairs:
        f = schema.field_by_name(column)
        if f is None:
            continue
        inner = f"SELECT ({expression}) AS k FROM {source}"
        try:
            row = con.execute(
                f"SELECT count(DISTINCT k), CAST(min(k) AS VARCHAR), CAST(max(k) AS VARCHAR), any_value(typeof(k)) "
                f"FROM ({inner}) WHERE k IS NOT NULL"
            ).fetchall()[0]
        except duckdb.Error:
            continue  # not an expression over the source alone
        n, low, high, kind = row
        col = quote_ident(column)
        if not n:
            return "false"  # no source value: no target row can match
        if not _SCALAR.fullmatch(str(kind)):
            continue
        if n <= IN_LIST_LIMIT:
            values = con.execute(
                f"SELECT DISTINCT CAST(k AS VARCHAR) FROM ({inner}) WHERE k IS NOT NULL"
            ).fetchall()
            found.append(f"{col} IN ({', '.join(f'CAST({quote_str(v)} AS {kind})' for (v,) in values)})")
            continue
        target_type = duck_type(f.type, f.name).upper()
        if kind == target_type or (kind in _INTEGERS and target_type in _INTEGERS):
            found.append(
                f"{col} BETWEEN CAST({quote_str(low)} AS {kind}) AND CAST({quote_str(high)} AS {kind})"
            )
    return " AND ".join(found) if found else None


def _target_column(side: list[Token], alias: str, columns: dict[str, str], source: set[str]) -> str | None:
    if len(side) == 1 and side[0].is_name and side[0].text.lower() not in source:
        return columns.get(side[0].text.lower())
    if (
        len(side) == 3
        and side[0].is_name
        and side[1].is_op(".")
        and side[2].is_name
        and side[0].text.lower() == alias.lower()
    ):
        return columns.get(side[2].text.lower())
    return None


def _copy_target(
    cur: Any,
    base: Any,
    state: Any,
    schema: Schema,
    copies: _Copies,
    predicate: str | None,
    alias: str,
    semijoin: str | None,
    timezone: str,
) -> None:
    """The live rows of the planned files (those satisfying `predicate`, and `semijoin`: SQL true for
    a row some source row matches, over the rows named `alias`) into the target's copy. The
    semi-join runs in the user's time zone, as the statement does; where the cursor cannot run it
    (it names the user's temporary objects) every row satisfying `predicate` is copied."""
    from iceduck.write.parquet import prepare_connection

    lineage = base.metadata.format_version >= 3
    fields = [f for f in schema.fields if f.type.name != "unknown"]
    defs = []
    for f in fields:
        d = f"{quote_ident(f.name)} {duck_type(f.type, f.name)}"
        if f.required:
            d += " NOT NULL"
        default = _default(f)
        if default is not None:
            d += f" DEFAULT {default}"
        defs.append(d)
    defs += [f"{_FILE} VARCHAR", f"{_POS} BIGINT", f"{_ROW} BIGINT", f"{_UPDATED} BOOLEAN DEFAULT false"]
    target = copies.name("target")
    cur.execute(f"CREATE TABLE {target} ({', '.join(defs)})")
    if state.files:
        prepare_connection(cur, base.io)
        sql, registered = live_rows_sql(cur, state, schema, list(state.files), lineage=lineage)
        try:
            cols = [f"{quote_ident(alias)}.{quote_ident(f.name)}" for f in fields]
            row = f"{quote_ident(alias)}.{quote_ident(ROW_ID)}" if lineage else "NULL"
            insert = (
                f"INSERT INTO {target} SELECT {', '.join(cols)}, {quote_ident(alias)}.{FILE_COLUMN}, "
                f"{quote_ident(alias)}.{POS_COLUMN}, {row}, false FROM ({sql}) AS {quote_ident(alias)} WHERE "
            )
            # in file order: DuckDB updates rows far faster in the order they are stored (a hash
            # join's order made a 20k-row MERGE 50x slower)
            order = f" ORDER BY {quote_ident(alias)}.{FILE_COLUMN}, {quote_ident(alias)}.{POS_COLUMN}"
            where = f"({predicate})" if predicate else "true"
            copied = False
            if semijoin is not None:
                cur.execute(f"SET TimeZone = {quote_str(timezone)}")
                try:
                    cur.execute(insert + f"{where} AND {semijoin}" + order)
                    copied = True
                except duckdb.Error:
                    pass
                finally:
                    cur.execute("SET TimeZone = 'UTC'")
            if not copied:
                cur.execute(insert + where + order)
        finally:
            unregister(cur, registered)
    cur.execute(f"CREATE TABLE {copies.name('keys')} AS SELECT {_FILE}, {_POS} FROM {target}")


def _default(f: Any) -> str | None:
    from iceduck.spec.types import DecimalType, PrimitiveType
    from iceduck.spec.values import from_json
    from iceduck.vocabulary import duck_literal

    if (
        not f.has_write_default
        or f.write_default is None
        or not isinstance(f.type, PrimitiveType | DecimalType)
    ):
        return None
    return duck_literal(f.type, from_json(f.type, f.write_default))


def _rewritten(
    s: Joined, schema: Schema, copies: _Copies, source_alias: str | None, source_columns: list[str]
) -> str:
    """The statement on the copies: target and source swapped, positional and `*` forms spelled
    out, every UPDATE action also setting the updated flag."""
    columns = [f.name for f in schema.fields if f.type.name != "unknown"]
    edits: list[tuple[int, int, str]] = [
        (s.target[0], s.target[1], f"{copies.name('target')} AS {quote_ident(s.alias)}")
    ]
    if source_alias is not None and s.source is not None:
        edits.append((s.source[0], s.source[1], f"{copies.name('source')} AS {quote_ident(source_alias)}"))
    flag = f"{_UPDATED} = true"
    if s.set_list is not None:
        a, b = s.set_list
        edits.append((a, b, f"{s.slice(a, b)}, {flag}"))
    for action in s.actions:
        replaced = _action(s, action, columns, source_alias, source_columns, flag)
        if replaced is not None:
            edits.append((action.start, action.end, replaced))
    out = []
    done = 0
    for a, b, new in sorted(edits):
        out.append(s.text[done : s.tokens[a].start])
        out.append(new)
        done = s.tokens[b - 1].end
    out.append(s.text[done : s.tokens[-1].end])
    return "".join(out)


def _action(
    s: Joined, a: _Action, columns: list[str], alias: str | None, source_columns: list[str], flag: str
) -> str | None:
    toks = s.tokens[a.start : a.end]
    if not toks:
        raise SqlSyntaxError("MERGE INTO: expected an action after THEN")
    words = [t.text.upper() if t.kind != OP else t.text for t in toks]
    src = (lambda c: f"{quote_ident(alias)}.{quote_ident(c)}") if alias is not None else None
    if toks[0].is_word("UPDATE"):
        rest = words[1:]
        if rest[:1] == ["SET"] and rest[1:] != ["*"]:
            return f"{s.slice(a.start, a.end)}, {flag}"
        if src is None:
            raise MergeError("MERGE INTO: UPDATE without SET needs a source with a name")
        if rest == ["BY", "NAME"]:
            by_lower = {c.lower(): c for c in columns}
            sets = []
            for c in source_columns:
                if c.lower() not in by_lower:
                    raise MergeError(f"MERGE INTO: Referenced update column {c} not found in table!")
                sets.append(f"{quote_ident(by_lower[c.lower()])} = {src(c)}")
        elif rest in ([], ["SET", "*"], ["BY", "POSITION"]):
            if len(source_columns) != len(columns):
                raise MergeError(
                    "MERGE INTO: Data provided for UPDATE did not match column count in table - expected "
                    f"{len(columns)} columns but got {len(source_columns)}"
                )
            sets = [f"{quote_ident(t)} = {src(c)}" for t, c in zip(columns, source_columns, strict=True)]
        else:
            return None
        return "UPDATE SET " + ", ".join([*sets, flag])
    if toks[0].is_word("INSERT"):
        rest = words[1:]
        if rest in ([], ["*"], ["BY", "POSITION"]):
            if src is None:
                raise MergeError("MERGE INTO: INSERT * needs a source with a name")
            if len(source_columns) != len(columns):
                raise MergeError(
                    f"MERGE INTO: table has {len(columns)} columns but {len(source_columns)} values were supplied"
                )
            return (
                f"INSERT ({', '.join(quote_ident(c) for c in columns)}) "
                f"VALUES ({', '.join(src(c) for c in source_columns)})"
            )
        if rest[:1] == ["VALUES"]:
            return f"INSERT ({', '.join(quote_ident(c) for c in columns)}) {s.slice(a.start + 1, a.end)}"
    return None


def _outcome(
    cur: Any, schema: Schema, copies: _Copies, lineage: bool
) -> tuple[dict[str, np.ndarray], str | None, int]:
    """(positions to delete per data file, SQL of the rows to write or None, rows updated)."""
    target, keys = copies.name("target"), copies.name("keys")
    gone = cur.execute(
        f"SELECT {_FILE}, list({_POS} ORDER BY {_POS}) FROM (SELECT {_FILE}, {_POS} FROM {keys} EXCEPT "
        f"SELECT {_FILE}, {_POS} FROM {target} WHERE {_FILE} IS NOT NULL AND NOT {_UPDATED}) GROUP BY {_FILE}"
    ).fetchall()
    deleted = {str(f): np.asarray(p, dtype=np.int64) for f, p in gone}
    counts = cur.execute(
        f"SELECT count(*) FILTER ({_FILE} IS NULL OR {_UPDATED}), count(*) FILTER ({_FILE} IS NOT NULL AND {_UPDATED}) "
        f"FROM {target}"
    ).fetchall()[0]
    rows_sql = None
    if counts[0]:
        cols = [
            f"CAST({quote_ident(f.name)} AS {duck_type(f.type, f.name)}) AS {quote_ident(f.name)}"
            for f in schema.fields
            if f.type.name != "unknown"
        ]
        if lineage:
            cols.append(f"CASE WHEN {_FILE} IS NULL THEN NULL ELSE {_ROW} END AS {quote_ident(ROW_ID)}")
            cols.append(f"CAST(NULL AS BIGINT) AS {quote_ident(LAST_UPDATED_SEQUENCE_NUMBER)}")
        rows_sql = f"SELECT {', '.join(cols)} FROM {target} WHERE {_FILE} IS NULL OR {_UPDATED}"
    return deleted, rows_sql, int(counts[1])


def _users_text(message: str, copies: _Copies, s: Joined) -> str:
    """DuckDB's error about the rewritten statement, in the names the user wrote."""
    target = s.slice(*s.target)
    for spelled in (copies.name("target"), f"{quote_ident(copies.schema)}.{quote_ident('target')}"):
        message = message.replace(spelled, target)
    return message.replace(copies.schema, "(merge)")
