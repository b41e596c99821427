"""The private DuckDB hooks iceduck relies on: fail loudly here when a DuckDB release changes them."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from iceduck.duckdb import hooks
from iceduck.duckdb.functions import Param, TableFunction, install
from iceduck.duckdb.pushdown import predicate_from_filter


def _resolve(dotted: str) -> object:
    if dotted.startswith("DuckDBPyConnection."):
        return getattr(duckdb.connect(), dotted.split(".", 1)[1])
    module, _, attr = dotted.rpartition(".")
    obj: object = importlib.import_module(module) if module.count(".") <= 1 else None
    if obj is None:
        parent, _, sub = module.rpartition(".")
        obj = getattr(importlib.import_module(parent), sub)
    return getattr(obj, attr)


@pytest.mark.parametrize("dotted", hooks.PRIVATE_HOOKS)
def test_private_hook_exists(dotted: str) -> None:
    assert _resolve(dotted) is not None, f"DuckDB {duckdb.__version__} no longer has {dotted}"


def test_duckdb_minor_version_is_the_one_the_hooks_were_checked_on() -> None:
    major, minor = (int(x) for x in duckdb.__version__.split(".")[:2])
    assert (major, minor) == (2, 0), "iceduck's private hooks are checked on DuckDB 2.0.x only"


def _echo_function(calls: list[dict[str, object]]) -> TableFunction:
    def run(args: dict[str, object], columns: list[str] | None) -> pa.Table:
        calls.append(dict(args))
        n = int(args["n"] or 3)  # type: ignore[call-overload]
        return pa.table(
            {
                "t": pa.array([args["t"]] * n, pa.string()),
                "pos": pa.array(np.arange(n, dtype=np.int64)),
                "as_of": pa.array([args["as_of"]] * n, pa.timestamp("us", tz="UTC")),
            }
        )

    return TableFunction(
        "echo_fn",
        (
            Param("t", default=None),
            Param("n", "BIGINT"),
            Param("as_of", "TIMESTAMPTZ"),
            Param("all", "BOOLEAN", "false"),
        ),
        lambda: pa.schema([("t", pa.string()), ("pos", pa.int64()), ("as_of", pa.timestamp("us", tz="UTC"))]),
        run,
    )


def test_arguments_reach_python_with_their_types() -> None:
    calls: list[dict[str, object]] = []
    con = duckdb.connect()
    install(con, _echo_function(calls))
    rows = con.sql(
        "SELECT t, pos, epoch_us(as_of) FROM echo_fn('x', n := 2, as_of := TIMESTAMPTZ '2026-01-01 00:00:00+00', "
        '"all" := true) ORDER BY pos'
    ).fetchall()
    assert rows == [("x", 0, 1767225600000000), ("x", 1, 1767225600000000)]
    assert calls[-1]["all"] is True and calls[-1]["n"] == 2
    assert con.execute("SELECT count(*) FROM echo_fn('y')").fetchone() == (3,)
    assert calls[-1] == {"t": "y", "n": None, "as_of": None, "all": False}


def test_filters_projection_and_prepared_parameters() -> None:
    con = duckdb.connect()
    install(con, _echo_function([]))
    assert con.execute("SELECT sum(pos) FROM echo_fn('x', n := 1000) WHERE pos >= 500").fetchone() == (
        sum(range(500, 1000)),
    )
    con.execute("PREPARE q AS SELECT count(*) FROM echo_fn(?, n := ?)")
    assert con.execute("EXECUTE q('z', 7)").fetchone() == (7,)


def test_large_results_stream_without_per_row_python() -> None:
    con = duckdb.connect()
    install(con, _echo_function([]))
    n = 3_000_000
    assert con.execute(f"SELECT count(*), sum(pos) FROM echo_fn('x', n := {n})").fetchone() == (
        n,
        n * (n - 1) // 2,
    )


def test_per_row_argument_is_refused_clearly() -> None:
    con = duckdb.connect()
    install(con, _echo_function([]))
    with pytest.raises(duckdb.Error, match="does not support lateral join column parameters"):
        con.sql("SELECT * FROM (VALUES ('a'), ('b')) v(p), LATERAL echo_fn(v.p)").fetchall()
    assert con.execute("SELECT 1").fetchone() == (1,)  # the connection stays usable


# -- hooks used by scans -------------------------------------------------------------------------


def test_capture_filter_translates_what_duckdb_pushes() -> None:
    from iceduck import expr as ex

    schema = pa.schema(
        [("i", pa.int32()), ("f", pa.float32()), ("ts", pa.timestamp("us", tz="UTC")), ("s", pa.string())]
    )
    got = hooks.capture_filter(
        schema,
        "i + 1 = 3 AND f = 1.25 AND ts >= '2026-01-01 02:00:00+02' AND (s IN ('a', 'b') OR s IS NULL) "
        "AND NOT i BETWEEN 5 AND 7 AND s LIKE 'x%'",
        predicate_from_filter,
        timezone="Europe/Amsterdam",
    )
    assert ex.equal("i", 2) in got  # DuckDB folded the arithmetic
    assert ex.equal("f", 1.25) in got
    assert ex.greater_than_or_equal("ts", 1767225600000000) in got  # TIMESTAMPTZ as epoch micros
    assert ex.or_(ex.in_("s", ["a", "b"]), ex.is_null("s")) in got
    assert ex.or_(ex.less_than("i", 5), ex.greater_than("i", 7)) in got
    assert len(got) == 5  # LIKE is never pushed: left out
    # the session time zone gives a zone-less literal its meaning
    (utc,) = hooks.capture_filter(schema, "ts = '2026-01-01 00:00:00'", predicate_from_filter, timezone="UTC")
    (ams,) = hooks.capture_filter(
        schema, "ts = '2026-01-01 00:00:00'", predicate_from_filter, timezone="Europe/Amsterdam"
    )
    assert utc.value - ams.value == 3600 * 1_000_000  # type: ignore[attr-defined]
    with pytest.raises(duckdb.Error):
        hooks.capture_filter(schema, "nope = 1", predicate_from_filter)


def test_catalog_version_moves_on_what_may_change_a_plan_and_not_on_reads() -> None:
    """The front door keeps what it learnt about a statement while this counter stands still."""
    con = duckdb.connect()
    cursor = con.cursor()
    before = hooks.catalog_version(con)
    con.execute("SELECT 42").fetchall()
    con.sql("SELECT 1").fetchall()
    assert hooks.catalog_version(con) == before
    seen = [before]
    for statement in (
        "CREATE TABLE t (a INTEGER)",
        "INSERT INTO t VALUES (1)",
        "CREATE VIEW v AS SELECT * FROM t",
        "CREATE OR REPLACE VIEW v AS SELECT * FROM t WHERE a > 0",
        "CREATE MACRO m(x) AS x + 1",
        "SET TimeZone = 'UTC'",
        "SET VARIABLE x = 1",
        "ATTACH ':memory:' AS other",
        "EXPLAIN SELECT * FROM t",
    ):
        con.execute(statement)
        seen.append(hooks.catalog_version(con))
        assert seen[-1] > seen[-2], statement
    cursor.execute("DROP VIEW v")  # a cursor shares its connection's database
    assert hooks.catalog_version(con) > seen[-1]
    con.close()


def test_retype_relation_keeps_the_relation_and_takes_the_subclass_methods() -> None:
    """The relation DuckDB returned becomes the subclass in place: same object, same rows, and the
    subclass's overrides run (the Lake.sql damage translation stands on this)."""

    class Counting(duckdb.DuckDBPyRelation):
        __slots__ = ()
        calls = 0

        def fetchall(self) -> list[tuple[object, ...]]:
            type(self).calls += 1
            return super().fetchall()

    con = duckdb.connect()
    relation = con.sql("SELECT range AS i FROM range(3)")
    before = id(relation)
    hooks.retype_relation(relation, Counting)
    assert type(relation) is Counting and id(relation) == before
    assert relation.fetchall() == [(0,), (1,), (2,)]
    assert Counting.calls == 1
    assert relation.filter("i > 0").fetchall() == [(1,), (2,)]  # DuckDB's own methods still work


def _binding_flag(seen: list[bool]) -> Any:
    """A `binding` context for `lazy_select` recording, in `seen`, each bind a UDF sees inside it."""
    inside = [False]

    @contextlib.contextmanager
    def binding() -> Iterator[None]:
        inside[0] = True
        try:
            yield
        finally:
            inside[0] = False

    def probe() -> str:  # what a scan's UDF does: SQL for query(), made while DuckDB binds
        seen.append(inside[0])
        return "SELECT range AS i FROM range(3)"

    return binding, probe


PROBED = "SELECT i, i * 2 AS j FROM query(probe());"  # a text whose bind calls `probe`


def _probed_connection(seen: list[bool]) -> tuple[duckdb.DuckDBPyConnection, Any]:
    """A connection with `probe` (see `_binding_flag`) registered, and the `binding` context."""
    binding, probe = _binding_flag(seen)
    con = duckdb.connect()
    con.create_function("probe", probe, [], "VARCHAR", side_effects=True)
    return con, binding


def test_lazy_select_binds_once_inside_binding_and_reads_outside_it() -> None:
    """The relation is con.sql's: same columns and rows; the bind at the call runs inside
    `binding()`, every read binds the text again outside it."""
    seen: list[bool] = []
    con, binding = _probed_connection(seen)
    text = PROBED
    relation = hooks.lazy_select(con, text, binding)
    assert relation is not None
    expected = con.sql(text)
    assert (relation.columns, relation.types) == (expected.columns, expected.types)
    assert seen[0] is True  # the bind at the call
    del seen[:]
    assert relation.fetchall() == [(0, 0), (1, 2), (2, 4)]
    assert relation.fetchall() == expected.fetchall()
    assert seen and not any(seen)  # reads: outside binding()
    con.close()


@pytest.mark.parametrize(
    "text",
    [
        "CREATE TABLE made AS SELECT 1 AS x",
        "INSERT INTO kept VALUES (1)",
        "WITH v AS (SELECT 1 AS x) INSERT INTO kept SELECT x FROM v",
        "SELECT 1; INSERT INTO kept VALUES (2)",
        "SELECT nextval('seq') AS n",
        "SELECT * FROM kept WHERE x = ?",
        "PIVOT kept ON x USING count(*)",
        "SELECT * FROM no_such_table",
    ],
)
def test_lazy_select_runs_nothing_for_what_con_sql_would_run_at_the_call(text: str) -> None:
    """Statements con.sql runs at once (writes, scripts, deferred binds), takes parameters for or
    refuses: None, and nothing ran (the caller runs `con.sql`, which reports or runs them)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE kept (x INTEGER); CREATE SEQUENCE seq")
    binding, _ = _binding_flag([])
    assert hooks.lazy_select(con, text, binding) is None
    assert con.execute("SELECT count(*) FROM kept").fetchall() == [(0,)]
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'made'").fetchall() == [(0,)]
    assert con.execute("SELECT nextval('seq')").fetchall() == [(1,)]
    con.close()


def test_relation_for_binds_nothing_at_the_call_and_trusts_no_signature() -> None:
    """`relation_for` makes `lazy_select`'s relation of a text without binding it; the signature
    given only stands in: columns are asked anew at the first question, every read binds again."""
    seen: list[bool] = []
    con, binding = _probed_connection(seen)
    text = PROBED
    made = hooks.lazy_select(con, text, binding)
    assert made is not None
    signature = hooks.relation_signature(made)
    assert signature is not None
    other = hooks.lazy_select(con, "SELECT 'x' AS s", binding)
    assert other is not None
    del seen[:]
    relation = hooks.relation_for(con, text, hooks.relation_signature(other))  # a wrong signature
    assert seen == []  # nothing bound at the call
    assert (relation.columns, relation.types) == (made.columns, made.types)
    assert relation.fetchall() == [(0, 0), (1, 2), (2, 4)]
    assert relation.filter("j > 0").fetchall() == [(1, 2), (2, 4)]
    assert seen and not any(seen)
    again = hooks.relation_for(con, text, signature)
    assert again.fetchall() == made.fetchall()
    con.close()


def test_a_relation_reading_python_objects_has_no_signature_to_reuse() -> None:
    """A text reading a Python variable by name: DuckDB holds the object for that relation only."""
    con = duckdb.connect()
    held = pa.table({"x": [1, 2]})  # noqa: F841 (read by name in the statement)
    relation = con.sql("SELECT sum(x) FROM held")  # the same kind of relation lazy_select makes
    assert relation.fetchall() == [(3,)]
    assert hooks.relation_signature(relation) is None
    con.close()


def _native(con: duckdb.DuckDBPyConnection, opened: list[Any]) -> None:
    def open_row(key: Any) -> tuple[Any, ...]:
        opened.append(key)
        if key == "bad":
            raise ValueError("bad.puffin: the blob is damaged")
        if key == "bug":
            raise KeyError("a bug")
        return ([b"\x80\x01", b"", bytes(range(256)) * 1000], 7)

    hooks.register_native_source(
        con,
        hooks.NativeSource(
            name="__native_rows",
            columns=(("bits", "BLOB[]"), ("n", "BIGINT")),
            key_column="k",
            open=open_row,
            error_message=lambda e: str(e.args[0]) if isinstance(e, ValueError) else None,
            error_column="err",
        ),
    )


def test_a_native_source_row_is_built_by_duckdb_with_projection_and_key() -> None:
    """`NativeSource`: the row `open` returns, the key column, the projection honoured (`count(*)`
    reads no column yet gets its row), binary values intact, prepared keys."""
    con = duckdb.connect()
    opened: list[Any] = []
    _native(con, opened)
    rows = con.execute("SELECT bits, n, k, err FROM __native_rows WHERE k = 'a'").fetchall()
    assert rows == [([b"\x80\x01", b"", bytes(range(256)) * 1000], 7, "a", None)]
    assert con.execute("SELECT n FROM __native_rows WHERE k = 'b'").fetchall() == [(7,)]
    assert con.execute("SELECT count(*) FROM __native_rows WHERE k = 'c'").fetchall() == [(1,)]
    assert con.execute("SELECT k, len(bits) FROM __native_rows WHERE k = ?", ["d"]).fetchall() == [("d", 3)]
    assert con.execute(
        "SELECT get_bit(bits[1]::BIT, 0), get_bit(bits[1]::BIT, 1) FROM __native_rows WHERE k = 'e'"
    ).fetchall() == [(1, 0)]
    assert opened == ["a", "b", "c", "d", "e"]
    # without the key: no row (DuckDB reads the schema that way)
    assert con.execute("SELECT * FROM __native_rows").fetchall() == []
    con.close()


def test_a_native_source_failure_is_a_row_or_the_exception() -> None:
    con = duckdb.connect()
    _native(con, [])
    assert con.execute("SELECT bits, err FROM __native_rows WHERE k = 'bad'").fetchall() == [
        (None, "bad.puffin: the blob is damaged")
    ]
    with pytest.raises(duckdb.Error, match="a bug"):
        con.execute("SELECT bits, err FROM __native_rows WHERE k = 'bug'").fetchall()
    con.close()


def test_native_source_streams_of_two_connections_read_at_once() -> None:
    """Each stream is its own cursor's result: scans of four connections on four threads (interleaved
    at once) each get their own row."""
    import threading

    results: dict[int, Any] = {}

    def run(i: int) -> None:
        con = duckdb.connect()
        _native(con, [])
        results[i] = [
            con.execute(f"SELECT k, n FROM __native_rows WHERE k = 'key{i}-{j}'").fetchall()[0] for j in range(30)
        ]
        con.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: [(f"key{i}-{j}", 7) for j in range(30)] for i in range(4)}
