"""PREPARE / EXECUTE / DEALLOCATE of INSERT, UPDATE, DELETE and MERGE on lake tables behave as
DuckDB's on a plain table: truth is DuckDB running the same statements on a plain table (results of
each statement and the rows after)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from iceduck.errors import IcebergError
from tests.support.rest_helpers import serving

STATEMENTS = [
    "PREPARE p AS INSERT INTO {t} VALUES (?, ?, ?)",
    "EXECUTE p(1, 'a', '2024-01-01')",
    "EXECUTE p(2, 'b', DATE '2024-02-02' + 1)",
    "EXECUTE p(3, NULL, NULL)",
    "EXECUTE p(4, 'it''s', '2024-03-03')",
    "PREPARE u AS UPDATE {t} SET v = $2 WHERE id = $1",
    "EXECUTE u(1, 'z')",
    "PREPARE named AS UPDATE {t} SET d = $day WHERE id = $key",
    "EXECUTE named(key := 3, day := '2020-02-29')",
    "PREPARE dd AS DELETE FROM {t} WHERE id = ?",
    "EXECUTE dd(2)",
    "DEALLOCATE dd",
    "PREPARE q AS SELECT count(*) FROM {t}",
    "EXECUTE q",
]


def _result(rel: Any) -> Any:
    return None if rel is None else (list(rel.columns), rel.fetchall())


def _check(lake: iceduck.Lake, name: str) -> None:
    truth = duckdb.connect()
    truth.execute("CREATE TABLE t (id INTEGER, v VARCHAR, d DATE)")
    for statement in STATEMENTS:
        expected = _result(truth.sql(statement.format(t="t")))
        got = _result(lake.sql(statement.format(t=name)))
        assert got == expected, statement
    assert sorted(lake.sql(f"SELECT * FROM {name}").fetchall()) == sorted(truth.sql("FROM t").fetchall())
    # DuckDB cannot PREPARE a MERGE ("not a preparable statement"); the lake can, with DuckDB's
    # outcome of the MERGE holding the same values
    merge = (
        "MERGE INTO {t} AS t USING (SELECT {a}::INT AS id, {b}::VARCHAR AS v) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)"
    )
    lake.sql("PREPARE m AS " + merge.format(t=name, a="?", b="?"))
    for a, b in ((4, "'merged'"), (5, "'new'")):
        expected = _result(truth.sql(merge.format(t="t", a=a, b=b)))
        assert _result(lake.sql(f"EXECUTE m({a}, {b})")) == expected
    assert sorted(lake.sql(f"SELECT * FROM {name}").fetchall()) == sorted(truth.sql("FROM t").fetchall())
    with pytest.raises((duckdb.Error, IcebergError), match="dd"):
        lake.sql("EXECUTE dd(1)")


def test_prepared_writes_on_an_embedded_lake(tmp_path: Path) -> None:
    with iceduck.connect(tmp_path / "wh") as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t (id INTEGER, v VARCHAR, d DATE)")
        _check(lake, "lake.ns.t")
        # in a script, and a later PREPARE of the same name for DuckDB replaces the lake's
        got = lake.sql("PREPARE p2 AS INSERT INTO ns.t VALUES (?, 'x', NULL); EXECUTE p2(9)")
        assert got is not None and got.fetchall() == [(1,)]
        lake.sql("PREPARE p2 AS SELECT 42")
        assert lake.sql("EXECUTE p2").fetchall() == [(42,)]


def test_prepared_writes_through_attach(tmp_path: Path) -> None:
    with serving(tmp_path / "served") as server, iceduck.connect(tmp_path / "local") as lake:
        lake.sql(
            f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )
        lake.sql("CREATE SCHEMA cat.ns")
        lake.sql("CREATE TABLE cat.ns.t (id INTEGER, v VARCHAR, d DATE)")
        _check(lake, "cat.ns.t")
