"""The strict metrics evaluator: when a file's metrics say every row matches, every row does.

Independent truth: DuckDB evaluating the predicate (as SQL) on the file's rows; the metrics are
computed from the same rows as a writer records them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iceduck import expr as ex
from iceduck.expr.visitors import StrictMetricsEvaluator
from iceduck.spec.manifest import DataFile
from iceduck.spec.types import DOUBLE, LONG, STRING
from tests.expr.test_expr import SCHEMA, _metrics, _sql, predicates, rows


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    yield c
    c.close()


def _file(file_rows: list[dict[int, Any]]) -> DataFile:
    stats: dict[str, dict[int, Any]] = {"value_counts": {}, "null_value_counts": {}, "nan_value_counts": {}}
    stats |= {"lower_bounds": {}, "upper_bounds": {}}
    for fid, t in ((1, LONG), (2, STRING), (3, DOUBLE)):
        for k, v in _metrics([r[fid] for r in file_rows], t, fid).items():
            stats[k].update(v)
    return DataFile(0, "f.parquet", "PARQUET", 0, (), len(file_rows), 1, **stats)  # type: ignore[arg-type]


def _every_row_matches(
    con: duckdb.DuckDBPyConnection, p: ex.Predicate, file_rows: list[dict[int, Any]]
) -> bool:
    con.execute("CREATE OR REPLACE TEMP TABLE f (i BIGINT, s VARCHAR, f DOUBLE)")
    con.executemany("INSERT INTO f VALUES (?, ?, ?)", [[r[1], r[2], r[3]] for r in file_rows])
    result = con.execute(f"SELECT bool_and(coalesce({_sql(p)}, false)) FROM f").fetchall()
    return bool(result[0][0])


@settings(max_examples=300, deadline=None)
@given(p=predicates, file_rows=st.lists(rows, min_size=1, max_size=6))
def test_all_match_only_when_every_row_matches(
    con: duckdb.DuckDBPyConnection, p: ex.Predicate, file_rows: list[dict[int, Any]]
) -> None:
    bound = ex.bind(p, SCHEMA)
    if StrictMetricsEvaluator(bound, SCHEMA).all_match(_file(file_rows)):
        assert _every_row_matches(con, p, file_rows), (str(bound), file_rows)


# files whose bounds prove the predicate: the evaluator must say so (else DELETE reads them)
_RANGE = [{1: i, 2: "b", 3: 1.0} for i in range(3, 8)]


@pytest.mark.parametrize(
    "p",
    [
        ex.greater_than_or_equal("i", 3), ex.less_than("i", 8), ex.not_equal("i", 2), ex.not_null("i"),
        ex.and_(ex.greater_than("i", 2), ex.less_than_or_equal("i", 7)), ex.equal("s", "b"),
        ex.in_("s", ["a", "b"]), ex.not_in("i", [1, 9]), ex.or_(ex.equal("i", 100), ex.greater_than("f", 0.5)),
    ],
)  # fmt: skip
def test_bounds_that_prove_the_predicate(con: duckdb.DuckDBPyConnection, p: ex.Predicate) -> None:
    assert _every_row_matches(con, p, _RANGE)
    assert StrictMetricsEvaluator(ex.bind(p, SCHEMA), SCHEMA).all_match(_file(_RANGE))


@pytest.mark.parametrize(
    "p, file_rows",
    [
        (ex.greater_than("i", 3), _RANGE),  # the lower bound 3 does not satisfy > 3
        (ex.less_than("i", 8), [*_RANGE, {1: None, 2: "b", 3: 1.0}]),  # a null never compares true
        (ex.greater_than("f", 0.5), [*_RANGE, {1: 5, 2: "b", 3: float("nan")}]),  # NaN: no proof
        (ex.equal("s", "b"), [{1: 1, 2: "b", 3: 1.0}, {1: 2, 2: "c", 3: 1.0}]),
    ],
)
def test_no_proof_no_drop(
    con: duckdb.DuckDBPyConnection, p: ex.Predicate, file_rows: list[dict[int, Any]]
) -> None:
    assert not StrictMetricsEvaluator(ex.bind(p, SCHEMA), SCHEMA).all_match(_file(file_rows))
