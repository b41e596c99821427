"""A write whose values DuckDB cannot convert fails with DuckDB's own message, as for a DuckDB
table, not with an excerpt of the SQL iceduck's writer runs (partition values, casts)."""

from __future__ import annotations

import duckdb
import pytest

from iceduck.lake import Lake


def _error(lake: Lake, sql: str) -> duckdb.Error:
    with pytest.raises(duckdb.Error) as failure:
        lake.sql(sql)
    return failure.value


@pytest.mark.parametrize(
    "values",
    [
        "('x', now(), DATE '2020-01-01')",  # a string for an INTEGER
        "(1, 'garbage', DATE '2020-01-01')",  # not a timestamp
        "(99999999999, now(), NULL)",  # out of INTEGER's range
    ],
)
def test_insert_conversion_errors_are_duckdbs_own(lake: Lake, values: str) -> None:
    lake.sql("CREATE TABLE ns.t (a INTEGER, ts TIMESTAMPTZ, d DATE) PARTITIONED BY (day(ts))")
    lake.sql("CREATE TABLE plain (a INTEGER, ts TIMESTAMPTZ, d DATE)")  # the same in DuckDB
    ours = _error(lake, f"INSERT INTO ns.t VALUES {values}")
    theirs = _error(lake, f"INSERT INTO plain VALUES {values}")
    assert type(ours) is type(theirs)
    assert str(ours) == str(theirs).split("\n")[0]
    assert "epoch_us" not in str(ours) and "LINE" not in str(ours)
    assert lake.sql("SELECT count(*) FROM lake.ns.t").fetchall() == [(0,)]  # nothing was written


def test_an_excerpt_of_the_users_own_text_is_kept(lake: Lake) -> None:
    lake.sql("CREATE TABLE ns.t (a INTEGER)")
    text = str(_error(lake, "INSERT INTO ns.t SELECT nope FROM range(3)"))
    assert text.startswith('Binder Error: Referenced column "nope" not found in FROM clause!')
