"""Statement recognition without a lake: the tokenizer, statement heads and parsed statements.

Independent truth: DuckDB's own parser (`extract_statements`) for how a script splits, and statements
written out by hand for what each parses to. Names are checked over generated identifiers with every
quoting and letter case DuckDB accepts.
"""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iceduck.sql import parse as p
from iceduck.sql.tokens import IDENT, STRING, SqlSyntaxError, quote_name, split_statements, tokenize


def parsed(sql: str) -> p.Statement:
    return p.parse(sql, tokenize(sql))


def head(sql: str) -> p.Target | None:
    return p.target(tokenize(sql))


# -- tokenizer ------------------------------------------------------------------------------------


def test_tokens_decode_strings_names_and_skip_comments() -> None:
    sql = '''SELECT 'it''s', E'a\\nb', $x$ ; $x$, "Odd ""name""" -- gone ; 'x'
    /* outer /* inner ; */ still comment */ FROM t;'''
    tokens = tokenize(sql)
    assert [(t.kind, t.text) for t in tokens if t.kind in (STRING, IDENT)] == [
        (STRING, "it's"),
        (STRING, "a\nb"),
        (STRING, " ; "),
        (IDENT, 'Odd "name"'),
    ]
    assert [t.text for t in tokens if t.kind == "word"] == ["SELECT", "FROM", "t"]
    # offsets slice the original text
    assert all(sql[t.start : t.end] for t in tokens)
    ident = next(t for t in tokens if t.kind == IDENT)
    assert sql[ident.start : ident.end] == '"Odd ""name"""'


@pytest.mark.parametrize("bad", ["SELECT 'open", 'SELECT "open', "SELECT 1 /* open", "SELECT $a$ open"])
def test_unterminated_text_is_a_syntax_error(bad: str) -> None:
    with pytest.raises(SqlSyntaxError, match="unterminated"):
        tokenize(bad)


_FRAGMENTS = [
    "SELECT 1",
    "SELECT 'a;b'",
    'SELECT 1 AS "x;y"',
    "SELECT 2 -- c;\n",
    "SELECT /* ; /* ; */ ; */ 3",
    "SELECT $$;$$",
    "SELECT [1, 2][1]",
    "SELECT {'a': ';'}",
    "CREATE TABLE t (a INT, b VARCHAR)",
    "INSERT INTO t VALUES (1, ';')",
    "SELECT E'\\';'",
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=5), st.sampled_from([";", ";\n", " ; "]))
def test_split_statements_agrees_with_duckdb(fragments: list[str], sep: str) -> None:
    script = sep.join(fragments) + ";"
    ours = split_statements(script)
    theirs = duckdb.connect().extract_statements(script)
    assert len(ours) == len(theirs) == len(fragments)
    assert [s.rstrip(";").strip() for s in ours] == [s.query.rstrip(";").strip() for s in theirs]


def test_split_statements_handles_what_duckdb_refuses() -> None:
    assert split_statements("DROP TABLE ns.t PURGE; SELECT ';' ; ") == [
        "DROP TABLE ns.t PURGE;",
        "SELECT ';' ;",
    ]


# -- names: quoting and case ----------------------------------------------------------------------

_NAME = st.text(alphabet=st.sampled_from("abcXYZ_09 -\"'é"), min_size=1, max_size=12).filter(
    lambda s: s.strip() == s and "." not in s
)


def _spell(name: str, quote: bool, flip: bool) -> str:
    """`name` as it may appear in SQL: quoted (always valid) or bare when it is a plain word."""
    bare = quote_name(name)
    if quote or bare.startswith('"'):
        return '"' + name.replace('"', '""') + '"'
    return name.swapcase() if flip else name


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_NAME, min_size=1, max_size=3), st.lists(st.booleans(), min_size=3, max_size=3), st.booleans()
)
def test_names_survive_quoting_and_case(parts: list[str], quotes: list[bool], flip: bool) -> None:
    written = ".".join(_spell(part, q, flip) for part, q in zip(parts, quotes, strict=False))
    for sql, kind in [
        (f"INSERT INTO {written} VALUES (1)", p.KIND_INSERT),
        (f"delete from {written} where x = 1", p.KIND_DELETE),
        (f"Update {written} SET x = 1", p.KIND_UPDATE),
        (f"ALTER TABLE IF EXISTS {written} ADD COLUMN y INT", p.KIND_ALTER),
        (f"CREATE TABLE IF NOT EXISTS {written} (x INT)", p.KIND_CREATE_TABLE),
        (f"DROP TABLE {written}", p.KIND_DROP_TABLE),
        (f"TRUNCATE TABLE {written}", p.KIND_TRUNCATE),
        (f"/* c */ CREATE SCHEMA {written}", p.KIND_CREATE_SCHEMA),
    ]:
        target = head(sql)
        assert target is not None, sql
        assert target.kind == kind
        got = target.name.parts
        assert len(got) == len(parts)
        for g, want, q in zip(got, parts, quotes, strict=False):
            # DuckDB matches names case-insensitively; quoted names keep their case exactly
            assert g == want if (q or quote_name(want).startswith('"')) else g.lower() == want.lower()


# -- heads ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "kind", "parts"),
    [
        ("CREATE OR REPLACE TABLE a.b AS SELECT 1", p.KIND_CREATE_TABLE, ("a", "b")),
        ("INSERT OR REPLACE INTO a.b VALUES (1)", p.KIND_INSERT, ("a", "b")),
        (
            "MERGE INTO lake.a.b USING c ON true WHEN MATCHED THEN DELETE",
            p.KIND_MERGE,
            ("lake", "a", "b"),
        ),
        ("COPY a.b FROM 'x.csv'", p.KIND_UNSUPPORTED, ("a", "b")),
        ("WITH x AS (SELECT 1) INSERT INTO a.b SELECT * FROM x", p.KIND_UNSUPPORTED, ("a", "b")),
        ("TRUNCATE a.b", p.KIND_TRUNCATE, ("a", "b")),
        ("DROP SCHEMA IF EXISTS lake.a CASCADE", p.KIND_DROP_SCHEMA, ("lake", "a")),
    ],
)
def test_heads(sql: str, kind: str, parts: tuple[str, ...]) -> None:
    assert head(sql) == p.Target(kind, p.Name(parts))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM a.b",
        "CREATE TEMP TABLE a (x INT)",
        "CREATE VIEW a.v AS SELECT 1",
        "COPY a.b TO 'x.csv'",
        "WITH x AS (SELECT 1) SELECT * FROM x",
        "DROP VIEW a.b",
        "PRAGMA version",
        "",
    ],
)
def test_other_statements_have_no_head(sql: str) -> None:
    assert head(sql) is None


# -- whole statements -----------------------------------------------------------------------------


def test_create_table_with_everything() -> None:
    sql = """create table if not exists lake.demo."Services" (
        id BIGINT NOT NULL, -- the key
        "day" DATE, tags VARCHAR[], price DECIMAL(10, 2) DEFAULT 1.50
    ) PARTITIONED BY (day("day"), bucket(16, id)) SORTED BY (id DESC NULLS LAST)
      WITH ('format-version' = '2', "write.delete.mode" = 'copy-on-write', commit.retry.num-retries = 3);"""
    assert parsed(sql) == p.CreateTable(
        name=p.Name(("lake", "demo", "Services")),
        if_not_exists=True,
        columns=(
            'id BIGINT NOT NULL, -- the key\n        "day" DATE, tags VARCHAR[], price DECIMAL(10, 2) DEFAULT 1.50'
        ),
        partition_by=('day("day")', "bucket(16, id)"),
        sort_by=("id DESC NULLS LAST",),
        options=(
            ("format-version", "2"),
            ("write.delete.mode", "copy-on-write"),
            ("commit.retry.num-retries", "3"),
        ),
    )


def test_create_table_as() -> None:
    assert parsed(
        "CREATE TABLE ns.t PARTITIONED BY (d) AS SELECT 1 AS x, DATE '2024-01-01' AS d WITH NO DATA"
    ) == (
        p.CreateTable(
            p.Name(("ns", "t")),
            query="SELECT 1 AS x, DATE '2024-01-01' AS d",
            with_data=False,
            partition_by=("d",),
        )
    )
    assert parsed("CREATE TABLE ns.t AS (WITH q AS (SELECT 1) SELECT * FROM q);").query == (
        "(WITH q AS (SELECT 1) SELECT * FROM q)"
    )


def test_insert_forms() -> None:
    assert parsed("INSERT INTO ns.t VALUES (1, 'a;b'), (2, NULL);") == p.Insert(
        p.Name(("ns", "t")), query="VALUES (1, 'a;b'), (2, NULL)"
    )
    assert parsed('INSERT INTO ns.t ("B", a) SELECT 1, 2') == p.Insert(
        p.Name(("ns", "t")), columns=("B", "a"), query="SELECT 1, 2"
    )
    assert parsed("INSERT INTO ns.t BY NAME SELECT 1 AS a") == p.Insert(
        p.Name(("ns", "t")), by_name=True, query="SELECT 1 AS a"
    )
    assert parsed("INSERT INTO ns.t (SELECT 1)") == p.Insert(p.Name(("ns", "t")), query="(SELECT 1)")
    assert parsed("INSERT INTO ns.t DEFAULT VALUES") == p.Insert(p.Name(("ns", "t")))
    assert parsed("INSERT INTO ns.t SELECT * FROM a JOIN b ON a.x = b.x").query == (
        "SELECT * FROM a JOIN b ON a.x = b.x"
    )


def test_delete_update_truncate() -> None:
    assert parsed("DELETE FROM ns.t") == p.Delete(p.Name(("ns", "t")))
    assert parsed("DELETE FROM ns.t WHERE d = DATE '2026-10-02' AND x IN (SELECT 1);") == p.Delete(
        p.Name(("ns", "t")), "d = DATE '2026-10-02' AND x IN (SELECT 1)"
    )
    assert parsed(
        'UPDATE ns.t SET a = CASE WHEN b > 1 THEN 0 ELSE a END, "B" = (SELECT max(y) FROM u WHERE z), '
        "c = extract(year FROM d) WHERE id = 7"
    ) == p.Update(
        p.Name(("ns", "t")),
        (
            ("a", "CASE WHEN b > 1 THEN 0 ELSE a END"),
            ("B", "(SELECT max(y) FROM u WHERE z)"),
            ("c", "extract(year FROM d)"),
        ),
        "id = 7",
    )
    assert parsed("TRUNCATE TABLE ns.t") == p.Truncate(p.Name(("ns", "t")))


@pytest.mark.parametrize(
    ("sql", "action"),
    [
        ("ALTER TABLE ns.t ADD COLUMN c INTEGER DEFAULT 5", p.AddColumn("c INTEGER DEFAULT 5")),
        ("ALTER TABLE ns.t ADD IF NOT EXISTS c INT", p.AddColumn("c INT", if_not_exists=True)),
        ("ALTER TABLE ns.t DROP COLUMN IF EXISTS c", p.DropColumn("c", if_exists=True)),
        ("ALTER TABLE ns.t DROP s.inner", p.DropColumn("s.inner")),
        ('ALTER TABLE ns.t RENAME COLUMN a TO "B"', p.RenameColumn("a", "B")),
        ("ALTER TABLE ns.t RENAME a TO b", p.RenameColumn("a", "b")),
        ("ALTER TABLE ns.t ALTER COLUMN a TYPE BIGINT", p.AlterColumnType("a", "BIGINT")),
        ("ALTER TABLE ns.t ALTER a SET DATA TYPE DECIMAL(12, 2)", p.AlterColumnType("a", "DECIMAL(12, 2)")),
        ("ALTER TABLE ns.t SET PARTITIONED BY (month(ts), b)", p.SetPartitioning(("month(ts)", "b"))),
        ("ALTER TABLE ns.t RESET PARTITIONED BY", p.SetPartitioning(())),
        ("ALTER TABLE ns.t SET SORTED BY (a DESC)", p.SetSortOrder(("a DESC",))),
        (
            "ALTER TABLE ns.t SET ('k' = 'v', 'format-version' = 3)",
            p.SetProperties((("k", "v"), ("format-version", "3"))),
        ),
        ("ALTER TABLE ns.t RESET ('k', 'l')", p.ResetProperties(("k", "l"))),
        ("ALTER TABLE ns.t RENAME TO other.t2", p.RenameTable(p.Name(("other", "t2")))),
    ],
)
def test_alter_actions(sql: str, action: p.AlterAction) -> None:
    assert parsed(sql) == p.AlterTable(p.Name(("ns", "t")), action)


def test_drop_forms() -> None:
    assert parsed("DROP TABLE IF EXISTS lake.ns.t PURGE") == p.DropTable(
        p.Name(("lake", "ns", "t")), True, True
    )
    assert parsed("DROP TABLE ns.t CASCADE") == p.DropTable(p.Name(("ns", "t")))
    assert parsed("DROP SCHEMA ns CASCADE") == p.DropSchema(p.Name(("ns",)), cascade=True)
    assert parsed("CREATE SCHEMA IF NOT EXISTS lake.ns") == p.CreateSchema(p.Name(("lake", "ns")), True)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("INSERT INTO ns.t VALUES (1) RETURNING *", "RETURNING is not supported"),
        ("INSERT INTO ns.t VALUES (1) ON CONFLICT DO NOTHING", "ON CONFLICT is not supported"),
        ("INSERT OR REPLACE INTO ns.t VALUES (1)", "INSERT OR REPLACE is not supported"),
        ("DELETE FROM ns.t AS x WHERE x.a = 1", "alias is not supported"),
        ("DELETE FROM ns.t USING u WHERE a = u.a", "USING is not supported"),
        ("UPDATE ns.t SET a = u.a FROM u WHERE b = u.b", "FROM is not supported"),
        ("UPDATE ns.t SET (a, b) = (1, 2)", r"SET \(a, b\)"),
        ("UPDATE ns.t SET a = DEFAULT", "DEFAULT is not supported"),
        ("UPDATE ns.t SET a = 1, A = 2", "set twice"),
        ("CREATE TABLE ns.t", "expected a column list"),
        ("ALTER TABLE ns.t ALTER COLUMN a SET NOT NULL", "not supported"),
        ("ALTER TABLE ns.t ALTER COLUMN a TYPE BIGINT USING a::BIGINT", "USING is not supported"),
        ("ALTER TABLE ns.t OWNER TO x", "not supported"),
    ],
)
def test_unsupported_forms_are_named(sql: str, message: str) -> None:
    with pytest.raises(SqlSyntaxError, match=message):
        parsed(sql)
