"""Where a write statement's clauses start and end (`iceduck.sql.clauses`), read as DuckDB reads them.

Independent truth: every statement also runs, word for word, on a plain DuckDB table of the same
columns and rows; the lake must report DuckDB's count and hold DuckDB's rows. The statements are the
edges a clause finder over tokens gets wrong when it treats every keyword as a clause: the FROM of
`IS [NOT] DISTINCT FROM` (not an `UPDATE ... FROM`), a join `ON conflict = ...` over a column named
`conflict` (not `ON CONFLICT`), a query in two pairs of parentheses (not a column list), column
references qualified by the target's name (`ns.t.c`, `t.c`), and the quoting, comments, strings and
brackets around them.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb
import pytest

from iceduck.lake import Lake
from iceduck.sql import clauses
from iceduck.sql import parse as p
from iceduck.sql.tokens import tokenize

COLUMNS = 'id INTEGER, a INTEGER, b INTEGER, flag BOOLEAN, s VARCHAR, "conflict" INTEGER, "my col" INTEGER'
ROWS = "(1, 1, 2, NULL, 'x', 1, 10), (2, 3, 3, NULL, 'y', 2, 20), (3, NULL, NULL, true, 'z', 3, 30)"

STATEMENTS = [
    "UPDATE ns.t SET flag = a IS DISTINCT FROM b WHERE id < 3",
    "UPDATE ns.t SET flag = a IS NOT DISTINCT FROM b, s = 'from'",
    "UPDATE ns.t AS x SET flag = x.a IS DISTINCT FROM x.b WHERE x.id = 3",
    "DELETE FROM ns.t WHERE a IS DISTINCT FROM b",
    'INSERT INTO ns.t (id, "conflict") SELECT id + 10, c FROM src JOIN (SELECT c AS conflict FROM src) ON conflict = c',
    "INSERT INTO ns.t ((SELECT id + 20, a, b, flag, s, c, 0 FROM src))",
    "UPDATE ns.t SET s = CASE WHEN a > 1 THEN 'big' ELSE 'small' END WHERE id = 2",
    "UPDATE ns.t SET s = E'it\\'s, here', a = 7 WHERE id = 1",
    "UPDATE ns.t SET s = $q$it's -- not a comment, FROM$q$ WHERE id = 1",
    "UPDATE ns.t /* c, FROM x */ SET s = 'z' -- set\n WHERE id = 1 -- WHERE",
    'UPDATE ns.t SET "my col" = ((a + 1) * (b + (2))), s = (SELECT max(s) FROM src) WHERE id = 2',
    "UPDATE ns.`t` SET `my col` = 5, s = `s` || '`' WHERE `id` = 1",
    "DELETE FROM `ns`.`t` WHERE `conflict` = 2",
    "INSERT INTO ns.`t` (`id`, `my col`) VALUES (7, 70)",
    # column references qualified by the target's name, which DuckDB binds when it has no alias
    "UPDATE ns.t SET a = ns.t.b WHERE ns.t.id = 1",
    "UPDATE ns.t SET a = t.b + 1 WHERE t.id = 2",
    "DELETE FROM ns.t WHERE ns.t.id = 1",
    "UPDATE NS.T SET a = ns.t.b RETURNING ns.t.id, ns.t.a",
    "UPDATE ns.t SET a = ns.t.b + 1 FROM src WHERE ns.t.id = src.id",
    "DELETE FROM ns.t USING src WHERE ns.t.id = src.id",
    "MERGE INTO ns.t USING (SELECT 1 AS id, 9 AS v) src ON ns.t.id = src.id "
    "WHEN MATCHED THEN UPDATE SET a = src.v + ns.t.a WHEN NOT MATCHED THEN INSERT (id, a) VALUES (src.id, 0)",
]


def _rows(con: Any, table: str) -> list[tuple[Any, ...]]:
    return sorted(con.sql(f"SELECT * FROM {table}").fetchall(), key=repr)


@pytest.mark.parametrize("statement", STATEMENTS)
def test_write_statements_match_duckdb(lake: Lake, statement: str) -> None:
    plain = duckdb.connect()
    for con in (plain, lake):
        con.sql("CREATE TABLE src AS SELECT * FROM (VALUES (1, 1, 2, false, 'q', 1)) v(id, a, b, flag, s, c)")
    plain.execute(f"CREATE SCHEMA ns; CREATE TABLE ns.t ({COLUMNS}); INSERT INTO ns.t VALUES {ROWS}")
    lake.sql(f"CREATE TABLE ns.t ({COLUMNS})")
    lake.sql(f"INSERT INTO ns.t VALUES {ROWS}")

    expected = sorted(plain.execute(statement).fetchall(), key=repr)
    result = lake.sql(statement)
    assert (sorted(result.fetchall(), key=repr) if result is not None else None) == expected
    assert _rows(lake, "ns.t") == _rows(plain, "ns.t")


def test_update_set_values_end_where_duckdb_ends_them() -> None:
    text = "UPDATE ns.t SET f = a IS DISTINCT FROM b, g = CASE WHEN c THEN 1 END WHERE id = 1"
    s = p.parse(text, tokenize(text))
    assert s == p.Update(
        p.Name(("ns", "t")), (("f", "a IS DISTINCT FROM b"), ("g", "CASE WHEN c THEN 1 END")), "id = 1"
    )


def test_a_join_on_a_column_named_conflict_is_no_on_conflict_clause() -> None:
    text = 'INSERT INTO ns.t SELECT * FROM a JOIN b ON conflict = 1 WHERE "on" = 2'
    s = p.parse(text, tokenize(text))
    assert s == p.Insert(
        p.Name(("ns", "t")), None, False, 'SELECT * FROM a JOIN b ON conflict = 1 WHERE "on" = 2'
    )
    with pytest.raises(p.SqlSyntaxError, match="ON CONFLICT"):
        bad = "INSERT INTO ns.t SELECT 1 ON CONFLICT DO NOTHING"
        p.parse(bad, tokenize(bad))


def test_a_query_in_double_parentheses_is_no_column_list() -> None:
    text = "INSERT INTO ns.t ((SELECT 1))"
    assert p.parse(text, tokenize(text)) == p.Insert(p.Name(("ns", "t")), None, False, "((SELECT 1))")
    text = 'INSERT INTO ns.t ("select", b) VALUES (1, 2)'
    assert p.parse(text, tokenize(text)) == p.Insert(
        p.Name(("ns", "t")), ("select", "b"), False, "VALUES (1, 2)"
    )


def test_backquoted_names_are_quoted_names_and_never_empty() -> None:
    text = "DELETE FROM `ns`.`a.c` WHERE `x``y` = '`'"
    assert p.parse(text, tokenize(text)) == p.Delete(p.Name(("ns", "a.c")), "`x``y` = '`'")
    for empty in ('DELETE FROM ns."" WHERE x = 1', "DELETE FROM ns.`` WHERE x = 1"):
        with pytest.raises(p.SqlSyntaxError, match="cannot be empty"):
            tokenize(empty)
        with pytest.raises(duckdb.ParserException, match="zero-length"):
            duckdb.connect().execute(empty)


def test_a_quoted_name_with_dots_is_one_part() -> None:
    text = 'DELETE FROM s."a.c" /* WHERE */ WHERE "x y" = 1'
    toks = tokenize(text)
    assert clauses.name_parts(toks, 2, clauses.name_end(toks, 2)) == ("s", "a.c")
    assert p.parse(text, toks) == p.Delete(p.Name(("s", "a.c")), '"x y" = 1')


NAMES = [
    's."a.c"',
    '"s"."a""b"',
    "S.T",
    "ns.tÄble",
    "ns.t$1",
    "ns . t",
    "ns./* c */t",
    "db.ns.t",
    "ns.`a.c`",
    "`n``s`.t",
    "ns.t1e5",
    '"SELECT"."from"',
]


@pytest.mark.parametrize("name", NAMES)
def test_a_name_reads_as_duckdb_reads_it(name: str) -> None:
    """The parts of a table name as written are the ones DuckDB's own parse tree holds."""
    tree = json.loads(
        duckdb.execute("SELECT json_serialize_sql(?)", [f"SELECT * FROM {name}"]).fetchall()[0][0]
    )
    ref = tree["statements"][0]["node"]["from_table"]
    duck = tuple(part for part in (ref["catalog_name"], ref["schema_name"], ref["table_name"]) if part)
    text = f"DELETE FROM {name} WHERE x = 1"
    head = p.target(tokenize(text))
    assert head is not None and head.name.parts == duck
    toks = tokenize(text)
    assert clauses.name_parts(toks, 2, clauses.name_end(toks, 2)) == duck


@pytest.mark.parametrize(
    "statement",
    [
        'ALTER TABLE ns.t RENAME COLUMN "a.b" TO c',
        'ALTER TABLE ns.t DROP COLUMN "a.b"',
        'ALTER TABLE ns.t ALTER COLUMN "a.b" TYPE BIGINT',
        'ALTER TABLE ns.t SET IDENTIFIER FIELDS id, "a.b"',
    ],
)
def test_a_column_named_with_a_dot_is_refused_by_name_not_looked_up_as_a_path(statement: str) -> None:
    """`"a.b"` is one column to DuckDB; the schema layer reads `a.b` as field b of struct a, so the
    statement is refused saying so (it said "no column a.b" while listing a.b among the columns)."""
    message = r"""ALTER TABLE ns\.t: column "a\.b": a column whose name contains '\.' cannot be named"""
    with pytest.raises(p.SqlSyntaxError, match=message):
        p.parse(statement, tokenize(statement))
    text = "ALTER TABLE ns.t ALTER COLUMN s.x TYPE BIGINT"
    assert p.parse(text, tokenize(text)) == p.AlterTable(
        p.Name(("ns", "t")), p.AlterColumnType("s.x", "BIGINT")
    )
