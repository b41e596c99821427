"""`filter :=` accepts an expression over the table's columns and constants only (issue 15, item 4):
no subqueries or table functions, no user-defined, volatile or side-effecting functions, no text
that closes the WHERE clause. Accepted filters return the rows plain DuckDB returns for the same
WHERE on PyIceberg's reading of the table; refused ones run nothing (a canary UDF with a side effect
is never called), with pruning and without."""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
import pytest

from iceduck.lake import Lake, connect
from tests.support.write_helpers import pyiceberg_rows

ACCEPTED = [
    "id = 1",
    "id IN (1, 3) AND s LIKE 'a%'",
    "lower(s) = 'b' OR id BETWEEN 3 AND 4",
    "ts >= TIMESTAMP '2024-01-15'",
    "ts > now() - INTERVAL 100000 DAY",
    "CASE WHEN id > 1 THEN s = 'b' ELSE false END",
    "list_contains([1, 2], id)",
    "len(list_filter([1, 2], lambda x: x = id)) = 1",
    "s COLLATE nocase = 'A'",
    "id::VARCHAR = '3' OR s IS NULL",
]
REFUSED = {
    "1=1 AND (SELECT count(*) FROM read_csv('/etc/passwd')) > 0": "a subquery is not allowed",
    "id IN (SELECT canary())": "a subquery is not allowed",
    "EXISTS (SELECT canary())": "a subquery is not allowed",
    "canary() = 1": "function canary() is not allowed",
    "id = 1) UNION ALL SELECT canary(), NULL, NULL WHERE (true": "a filter is one expression",
    "id = 1) ORDER BY (canary()": "a filter is one expression",
    "random() < 2": "function random() is not allowed",
    "nextval('seq') > 0": "function nextval() is not allowed",
    "setseed(0.5) IS NULL": "function setseed() is not allowed",
    "count(*) > 0": "is not allowed",
    "row_number() OVER () > 0": "a window function is not allowed",
    "id = ?": "a prepared parameter is not allowed",
    "id = 1; SELECT canary()": "syntax error",
}


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Any:
    lake = connect(tmp_path_factory.mktemp("filters") / "wh")
    lake.sql("CREATE SCHEMA s")
    lake.sql("CREATE TABLE s.t (id INTEGER, s VARCHAR, ts TIMESTAMP)")
    lake.sql(
        "INSERT INTO s.t VALUES (1, 'a', '2024-01-01'), (2, 'b', '2024-02-01'), (3, NULL, '2024-03-01'), (4, 'B', NULL)"
    )
    calls: list[int] = []

    def canary() -> int:
        calls.append(1)
        return 1

    lake.con.create_function("canary", canary, [], "INTEGER", side_effects=True)
    lake.con.execute("CREATE SEQUENCE seq")
    lake.con.execute("SELECT nextval('seq')").fetchall()  # currval is 1 from here on
    lake.calls = calls  # type: ignore[attr-defined]
    yield lake
    lake.close()


def _truth(lake: Lake, where: str) -> list[int]:
    rows = pyiceberg_rows(lake.table("s.t").metadata_location)
    con = duckdb.connect()
    con.register("t", pa.Table.from_pylist(rows))
    return sorted(r[0] for r in con.execute(f"SELECT id FROM t WHERE {where}").fetchall())


@pytest.mark.parametrize("prune", [True, False])
@pytest.mark.parametrize("where", ACCEPTED)
def test_column_and_constant_filters_work(lake: Lake, where: str, prune: bool) -> None:
    md = lake.table("s.t").metadata_location
    got = lake.con.execute(
        f"SELECT id FROM iceberg_scan(?, filter := ?, prune := {str(prune).lower()}) ORDER BY id", [md, where]
    ).fetchall()
    assert [r[0] for r in got] == _truth(lake, where)


@pytest.mark.parametrize("prune", [True, False])
@pytest.mark.parametrize("where", sorted(REFUSED))
def test_anything_else_is_refused_before_it_runs(lake: Lake, where: str, prune: bool) -> None:
    md = lake.table("s.t").metadata_location
    calls = lake.calls  # type: ignore[attr-defined]
    calls.clear()
    with pytest.raises(duckdb.Error) as e:
        lake.con.execute(
            f"SELECT id FROM iceberg_scan(?, filter := ?, prune := {str(prune).lower()})", [md, where]
        ).fetchall()
    first = str(e.value).splitlines()[0]
    assert "invalid filter" in first and REFUSED[where] in first, first
    assert "Traceback" not in str(e.value)
    assert calls == []  # nothing of the filter ran
    # a refused nextval() did not advance the sequence either
    assert lake.con.execute("SELECT currval('seq')").fetchone() == (1,)
