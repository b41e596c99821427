"""INSERT with RETURNING, INSERT OR REPLACE / OR IGNORE and INSERT ... ON CONFLICT on a lake table:
DuckDB runs the statement itself, on a copy of the rows it can conflict with.

Iceberg's key is the schema's `identifier-field-ids` (set by `PRIMARY KEY (...)` at CREATE TABLE or
`ALTER TABLE ... SET IDENTIFIER FIELDS`); Iceberg does not enforce it, an upsert uses it:

1. The inserted rows are computed once, as DuckDB would (the statement's column list, BY NAME,
   DEFAULT VALUES, VALUES typed by the target's columns, write-defaults for omitted columns), into
   a DuckDB table of the target's columns.
2. The target is planned with the inserted keys (`key IN (...)`, or their range when there are
   many), so only the data files holding a conflicting row are opened; their rows whose key is
   inserted are copied into a DuckDB table with the target's columns, constraints and defaults,
   a PRIMARY KEY on the identifier fields, and the hidden columns of `iceduck.sql.merge` (data
   file, position, `_row_id`, an "updated" flag).
3. The user's statement runs on that copy with the inserted rows as its query: DuckDB's own
   conflict handling, `excluded.`, DO UPDATE ... WHERE, RETURNING, counts and errors (a key
   inserted twice, a conflict target that is not the key). DO UPDATE also sets the flag;
   INSERT OR REPLACE is spelled as the DO UPDATE DuckDB makes of it (every inserted non-key
   column from `excluded`).
4. The outcome is committed as a MERGE's is (`iceduck.transaction.merge`): replaced rows' old
   copies become deletion vectors (v3) / position deletes (v2), their new versions keep
   `_row_id`; inserted rows go to new data files; one commit.

A plain INSERT with RETURNING takes the same path without a key (no row of the table is read, any
format version): the copy starts empty.
"""

from __future__ import annotations

import uuid
import warnings
from dataclasses import dataclass
from typing import Any

import duckdb

from iceduck.catalog.base import split_table_name
from iceduck.errors import ValidationError
from iceduck.spec.types import NestedField, Schema
from iceduck.sql import clauses
from iceduck.sql.merge import HIDDEN, IN_LIST_LIMIT, _Copies, _copy_target, _outcome
from iceduck.sql.tokens import SqlSyntaxError, Token
from iceduck.sql.working import Working
from iceduck.tables import Tables
from iceduck.transaction.commit import TableCommitter
from iceduck.transaction.merge import commit_rows, no_new_files, plan_rows
from iceduck.vocabulary import quote_ident, quote_str
from iceduck.write.types import duck_type

_UPDATED = "__iceduck_merge_updated"
# key types whose values round-trip through VARCHAR independently of the session's settings
_PRUNABLE = frozenset(
    {"int", "long", "string", "date", "timestamp", "timestamp_ns", "uuid", "boolean", "time"}
)


class UpsertError(ValidationError):
    """An INSERT ... ON CONFLICT / OR REPLACE / RETURNING on a lake table that cannot run as written."""


def wants(tokens: list[Token]) -> bool:
    """Whether an INSERT on a lake table runs here: INSERT OR REPLACE / OR IGNORE, one with a target
    alias, or one with a top-level ON CONFLICT or RETURNING clause (read by `parse`, the grammar the
    plain path refuses these by)."""
    toks = clauses.strip(tokens)
    if not toks or not toks[0].is_word("INSERT"):
        return False
    try:
        s = parse("", toks)
    except SqlSyntaxError:
        return False  # the plain path names what is wrong
    return s.how is not None or s.alias is not None or s.conflict is not None or s.returning is not None


# The spans of an INSERT statement this module runs: one grammar with the plain path's (`sql/clauses`).
Insert = clauses.InsertSpans
parse = clauses.insert_spans


def key_columns(schema: Schema) -> list[str]:
    """The names of the schema's identifier fields (top-level ones; nested keys are not supported)."""
    by_id = {f.id: f.name for f in schema.fields}
    out = []
    for fid in schema.identifier_field_ids:
        if fid not in by_id:
            raise UpsertError(
                f"identifier field {schema.column_name(fid)} is nested; ON CONFLICT needs top-level key columns"
            )
        out.append(by_id[fid])
    return out


@dataclass(slots=True)
class _Named(_Copies):
    """The copies of one statement: the target's copy carries the table's own name (DuckDB's errors
    name it as they would the table), the inserted rows the same name in a second schema."""

    table: str = ""
    rows_schema: str = ""

    def name(self, table: str) -> str:
        db = quote_ident(self.database)
        if table == "target":
            return f"{db}.{quote_ident(self.schema)}.{quote_ident(self.table)}"
        if table == "source":
            return f"{db}.{quote_ident(self.rows_schema)}.{quote_ident(self.table)}"
        return f"{db}.{quote_ident(self.schema)}.{quote_ident('__iceduck_' + table)}"


class _NoFiles:
    """The plan of a plain INSERT: no row of the table is read."""

    def __init__(self) -> None:
        self.files: dict[str, Any] = {}


def run(
    con: duckdb.DuckDBPyConnection,
    lake: Tables,
    identifier: str,
    text: str,
    tokens: list[Token],
    params: Any = None,
) -> Any:
    """Run the INSERT on the lake table `identifier` (see the module docstring); returns DuckDB's
    result (its `Count`, or the RETURNING rows) as a relation."""
    s = parse(text, tokens)
    namespace, name = split_table_name(identifier)
    committer = TableCommitter(lake.catalog, namespace, name, lake.io)
    base = committer.load()
    schema = base.metadata.schema
    fields = [f for f in schema.fields if f.type.name != "unknown"]
    upsert = s.how is not None or s.conflict is not None
    keys = key_columns(schema) if upsert else []
    if upsert and not keys:
        what = f"INSERT OR {s.how}" if s.how else "INSERT ... ON CONFLICT"
        raise UpsertError(
            f"{what} INTO {identifier}: the table has no identifier fields (its key); set them with ALTER TABLE "
            f"{identifier} SET IDENTIFIER FIELDS <columns> (or PRIMARY KEY (...) at CREATE TABLE)"
        )
    working = Working(con)  # a cursor, or `con` inside DuckDB's transaction (sql/working.py)
    cur = working.cur
    database = str(cur.execute("SELECT current_database()").fetchall()[0][0])
    token = uuid.uuid4().hex
    copies = _Named(database, f"__iceduck_upsert_{token}", s.table, f"__iceduck_rows_{token}")
    for schema_name in (copies.schema, copies.rows_schema):
        cur.execute(f"CREATE SCHEMA {quote_ident(database)}.{quote_ident(schema_name)}")
    try:
        try:
            columns = _inserted_rows(con, s, fields, copies, identifier, params)
        except duckdb.Error as e:
            raise type(e)(_users_text(str(e), copies, s)) from None
        source = copies.name("source")
        state: Any = _NoFiles()
        predicate = semijoin = None
        planned = None
        inserted = int(cur.execute(f"SELECT count(*) FROM {source}").fetchall()[0][0])
        if upsert and inserted:
            predicate = _key_predicate(cur, schema, keys, source)
            pruner = lake.pruner(predicate, cur) if predicate is not None else None
            planned = pruner(schema) if pruner is not None else None
            state = plan_rows(base, identifier, "INSERT ... ON CONFLICT", planned)
            semijoin = (
                f"EXISTS (SELECT 1 FROM {source} AS __iceduck_s WHERE "
                + " AND ".join(f"__iceduck_s.{quote_ident(k)} = __iceduck_t.{quote_ident(k)}" for k in keys)
                + ")"
            )
        timezone = str(con.execute("SELECT current_setting('TimeZone')").fetchall()[0][0])
        _copy_target(cur, base, state, schema, copies, predicate, "__iceduck_t", semijoin, timezone)
        if upsert:
            _add_key(cur, copies, keys, identifier)
        statement = _rewritten(s, copies, columns, keys)
        working.users_session()
        try:
            outcome = con.execute(statement)
            if s.returning is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    table: Any = outcome.to_arrow_table()
                result: Any = table.drop_columns([c for c in table.column_names if c in HIDDEN])
            else:
                count = outcome.fetchall()
                result = int(count[0][0]) if count else 0
        except duckdb.Error as e:
            raise type(e)(_users_text(str(e), copies, s)) from None
        working.ours()
        deleted, rows_sql, updated = _outcome(cur, schema, copies, base.metadata.format_version >= 3)
        # another writer's new file holding an inserted key would make this upsert add a duplicate
        check = no_new_files(identifier, state, planned) if upsert and inserted else None
        commit_rows(committer, cur, base, state, deleted, rows_sql, updated_rows=updated, check=check)
    finally:
        for schema_name in (copies.schema, copies.rows_schema):
            working.drop(database, schema_name)
        working.close()
    if isinstance(result, int):
        return con.sql(f'SELECT CAST({result} AS BIGINT) AS "Count"')
    return con.from_arrow(result)


def _inserted_rows(
    con: Any, s: Insert, fields: list[NestedField], copies: _Named, identifier: str, params: Any
) -> list[str]:
    """Compute the inserted rows into the `source` copy (every column of the table, with its
    write-default) as DuckDB's INSERT would; returns the columns the statement gives (in order)."""
    from iceduck.sql.merge import _default

    defs = []
    for f in fields:
        d = f"{quote_ident(f.name)} {duck_type(f.type, f.name)}"
        default = _default(f)
        if default is not None:
            d += f" DEFAULT {default}"
        defs.append(d)
    source = copies.name("source")
    con.execute(f"CREATE TABLE {source} ({', '.join(defs)})")
    by_lower = {f.name.lower(): f.name for f in fields}

    def column(c: str) -> str:
        found = by_lower.get(c.lower())
        if found is None:
            raise UpsertError(
                f"INSERT INTO {identifier}: no column {c} in the table (columns: {', '.join(by_lower.values())})"
            )
        return found

    if s.body is None:
        con.execute(f"INSERT INTO {source} DEFAULT VALUES")
        return [f.name for f in fields]
    body = s.slice(s.body)
    if s.by_name:
        con.execute(f"INSERT INTO {source} BY NAME {body}", params)
        described = con.execute(f"SELECT * FROM ({body}) AS __iceduck_q LIMIT 0", params).description
        return [column(str(d[0])) for d in described]
    if s.columns is not None:
        columns = [column(c) for c in s.columns]
        con.execute(f"INSERT INTO {source} ({', '.join(quote_ident(c) for c in columns)}) {body}", params)
        return columns
    con.execute(f"INSERT INTO {source} {body}", params)
    return [f.name for f in fields]


def _key_predicate(cur: Any, schema: Schema, keys: list[str], source: str) -> str | None:
    """What the inserted keys imply for the target's rows, as SQL over its columns (None: nothing)."""
    found = []
    for k in keys:
        f = schema.field_by_name(k)
        if f is None or f.type.name not in _PRUNABLE:
            continue
        kind = duck_type(f.type, f.name)
        col = quote_ident(k)
        n, low, high = cur.execute(
            f"SELECT count(DISTINCT {col}), CAST(min({col}) AS VARCHAR), CAST(max({col}) AS VARCHAR) FROM {source}"
        ).fetchall()[0]
        if not n:
            return "false"
        if n <= IN_LIST_LIMIT:
            values = cur.execute(
                f"SELECT DISTINCT CAST({col} AS VARCHAR) FROM {source} WHERE {col} IS NOT NULL"
            )
            listed = ", ".join(f"CAST({quote_str(v)} AS {kind})" for (v,) in values.fetchall())
            found.append(f"{col} IN ({listed})")
        else:
            found.append(
                f"{col} BETWEEN CAST({quote_str(low)} AS {kind}) AND CAST({quote_str(high)} AS {kind})"
            )
    return " AND ".join(found) if found else None


def _add_key(cur: Any, copies: _Named, keys: list[str], identifier: str) -> None:
    """The identifier fields become the copy's PRIMARY KEY; rows of the table that share a key (Iceberg
    does not enforce one) are refused by name."""
    target = copies.name("target")
    cols = ", ".join(quote_ident(k) for k in keys)
    twice = cur.execute(
        f"SELECT {', '.join(f'CAST({quote_ident(k)} AS VARCHAR)' for k in keys)} FROM {target} "
        f"GROUP BY {cols} HAVING count(*) > 1 LIMIT 1"
    ).fetchall()
    if twice:
        shown = ", ".join(f"{k} = {v}" for k, v in zip(keys, twice[0], strict=True))
        raise UpsertError(
            f"{identifier}: the table holds more than one row with key {shown} (Iceberg does not enforce "
            "identifier fields); remove the duplicates before an INSERT ... ON CONFLICT / OR REPLACE"
        )
    cur.execute(f"ALTER TABLE {target} ADD PRIMARY KEY ({cols})")


def _rewritten(s: Insert, copies: _Named, columns: list[str], keys: list[str]) -> str:
    """The statement on the copies: the target's copy (bound by the name the user's statement binds
    the table by), the computed rows as its query, DO UPDATE also setting the updated flag."""
    flag = f"{_UPDATED} = true"
    alias = quote_ident(s.alias or s.table)
    head = "INSERT OR IGNORE INTO" if s.how == "IGNORE" else "INSERT INTO"
    listed = ", ".join(quote_ident(c) for c in columns)
    # BY NAME stays BY NAME: DuckDB's `excluded` then holds only the given columns
    columns_sql = "BY NAME" if s.by_name else f"({listed})"
    out = f"{head} {copies.name('target')} AS {alias} {columns_sql} SELECT {listed} FROM {copies.name('source')}"
    if s.conflict is not None:
        out += " " + _flagged_conflict(s, flag)
    elif s.how == "REPLACE":
        lowered = {k.lower() for k in keys}
        sets = [f"{quote_ident(c)} = excluded.{quote_ident(c)}" for c in columns if c.lower() not in lowered]
        out += f" ON CONFLICT DO UPDATE SET {', '.join([*sets, flag])}"
    if s.returning is not None:
        out += " " + s.slice(s.returning)
    return out


def _flagged_conflict(s: Insert, flag: str) -> str:
    """The ON CONFLICT clause as written, its DO UPDATE SET list also setting `flag`."""
    assert s.conflict is not None
    a, b = s.conflict
    toks = s.tokens
    depth = clauses.depths(toks)
    j = next(
        (
            j
            for j in range(a, b - 2)
            if depth[j] == 0
            and toks[j].is_word("DO")
            and toks[j + 1].is_word("UPDATE")
            and toks[j + 2].is_word("SET")
        ),
        None,
    )
    if j is None:
        return s.slice(s.conflict)
    where = next((k for k in range(j + 3, b) if depth[k] == 0 and toks[k].is_word("WHERE")), b)
    return f"{s.slice((a, where))}, {flag}" + (f" {s.slice((where, b))}" if where < b else "")


def _users_text(message: str, copies: _Named, s: Insert) -> str:
    """DuckDB's error about the copies, in the names the user wrote."""
    for name in (copies.schema, copies.rows_schema):
        for spelled in (
            f"{quote_ident(copies.database)}.{quote_ident(name)}.",
            f"{quote_ident(name)}.",
            f"{name}.",
        ):
            message = message.replace(spelled, "")
        message = message.replace(name, "(insert)")
    return message


__all__ = ["Insert", "UpsertError", "key_columns", "parse", "run", "wants"]
