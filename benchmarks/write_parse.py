"""What parsing a write statement costs, three ways (issue 26, "the SQL front door on a parse tree").

    .venv/bin/python -m benchmarks.write_parse [--sqlglot PATH] [--lake]

For typical write statements and for the two large ones of the issue (a DELETE with 20,000 ORs, one
with a 50,000-item IN list) it prints the best of several runs, in milliseconds, of

* `tokenize` / `parse`: iceduck's lexer (`sql/tokens.py`, run once per statement by the router
  anyway) and the write grammar over its tokens (`sql/parse.py`);
* `duck tokenize` / `extract`: DuckDB's own lexer (`duckdb.tokenize`) and its full parse without a
  tree (`duckdb.extract_statements`);
* `duck tree`: DuckDB's parse tree of the equivalent SELECT (`json_serialize_sql`, then
  `json.loads`): `DELETE FROM t WHERE c` <-> `SELECT * FROM t WHERE c`, `UPDATE t SET a = e WHERE
  c` <-> `SELECT e AS a FROM t WHERE c`, an INSERT's query alone (DuckDB serialises SELECTs only);
* `sqlglot`: `sqlglot.parse_one(text, dialect="duckdb")` when `--sqlglot` names a folder holding
  sqlglot (pure Python) or sqlglot + sqlglotc (compiled), plus its import time.

`--lake` also times the two large DELETEs end to end on a lake table of 100,000 rows against
DuckDB's own DELETE on a plain table of the same rows (the issue's "within 2x").
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import duckdb

ORS = " OR ".join(f"id = {i}" for i in range(0, 40_000, 2))
IN_LIST = ", ".join(str(i) for i in range(0, 100_000, 2))

# (statement, its equivalent SELECT for DuckDB's tree or None when it has no expression part)
STATEMENTS: dict[str, tuple[str, str | None]] = {
    "insert values": (
        "INSERT INTO lake.ns.t VALUES (1, 'a', 2.5), (2, 'b', 3.5)",
        "VALUES (1, 'a', 2.5), (2, 'b', 3.5)",
    ),
    "insert select": (
        "INSERT INTO lake.ns.t (id, name) SELECT id, name FROM src WHERE id > 10",
        "SELECT id, name FROM src WHERE id > 10",
    ),
    "delete": (
        "DELETE FROM lake.ns.t WHERE id = 3 AND name LIKE 'x%'",
        "SELECT * FROM lake.ns.t WHERE id = 3 AND name LIKE 'x%'",
    ),
    "update": (
        "UPDATE lake.ns.t SET name = upper(name), v = v + 1 WHERE id BETWEEN 1 AND 5",
        "SELECT upper(name) AS name, v + 1 AS v FROM lake.ns.t WHERE id BETWEEN 1 AND 5",
    ),
    "alter": ("ALTER TABLE lake.ns.t ADD COLUMN c INTEGER", None),
    "create": ("CREATE TABLE lake.ns.t (id INTEGER, name VARCHAR) PARTITIONED BY (bucket(4, id))", None),
    "delete 20k OR": (f"DELETE FROM lake.ns.t WHERE {ORS}", f"SELECT * FROM lake.ns.t WHERE {ORS}"),
    "delete 50k IN": (
        f"DELETE FROM lake.ns.t WHERE id IN ({IN_LIST})",
        f"SELECT * FROM lake.ns.t WHERE id IN ({IN_LIST})",
    ),
}


def _best(f: Callable[[], Any], large: bool) -> float:
    times = []
    for _ in range(2 if large else 30):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def parse_costs(sqlglot_path: str | None) -> None:
    from iceduck.sql import parse as p
    from iceduck.sql.tokens import tokenize

    con = duckdb.connect()
    parse_one: Any = None
    if sqlglot_path is not None:
        sys.path.insert(0, sqlglot_path)
        start = time.perf_counter()
        import sqlglot

        print(
            f"sqlglot import (after duckdb): {(time.perf_counter() - start) * 1000:.0f} ms ({sqlglot.__file__})"
        )
        parse_one = sqlglot.parse_one
    columns = ["tokenize", "parse", "duck tokenize", "extract", "duck tree", "sqlglot"]
    print(f"{'statement':<15}" + "".join(f"{c:>15}" for c in columns))
    for label, (text, select) in STATEMENTS.items():
        large = "k " in label
        tokens = tokenize(text)
        row = {
            "tokenize": _best(lambda: tokenize(text), large),  # noqa: B023 - run at once
            "parse": _best(lambda: p.parse(text, tokens), large),  # noqa: B023
            "duck tokenize": _best(lambda: duckdb.tokenize(text), large),  # noqa: B023
            "extract": _best(lambda: duckdb.extract_statements(text), large),  # noqa: B023
        }
        if select is not None:
            row["duck tree"] = _best(
                lambda: json.loads(con.execute("SELECT json_serialize_sql(?)", [select]).fetchall()[0][0]),  # noqa: B023
                large,
            )
        if parse_one is not None:
            row["sqlglot"] = _best(lambda: parse_one(text, dialect="duckdb"), large)  # noqa: B023
        print(f"{label:<15}" + "".join(f"{row[c]:>15.2f}" if c in row else f"{'-':>15}" for c in columns))


def lake_deletes() -> None:
    import iceduck

    for label, where in (("delete 20k OR", ORS), ("delete 50k IN", f"id IN ({IN_LIST})")):
        with tempfile.TemporaryDirectory() as folder:
            lake = iceduck.connect(folder)
            lake.sql("CREATE SCHEMA ns")
            lake.sql("CREATE TABLE ns.t (id BIGINT, name VARCHAR)")
            lake.sql("INSERT INTO ns.t SELECT range, range::VARCHAR FROM range(100000)")
            lake.sql("DELETE FROM ns.t WHERE id = -1")  # the write stack's imports, outside the timing
            start = time.perf_counter()
            lake.sql(f"DELETE FROM ns.t WHERE {where}")
            in_lake = time.perf_counter() - start
            counted = lake.sql("SELECT count(*) FROM ns.t")
            left = counted.fetchall()[0][0] if counted is not None else None
            lake.close()
        con = duckdb.connect()
        con.execute("CREATE TABLE t AS SELECT range AS id, range::VARCHAR AS name FROM range(100000)")
        start = time.perf_counter()
        con.execute(f"DELETE FROM t WHERE {where}")
        plain = time.perf_counter() - start
        print(
            f"{label}: lake {in_lake:.2f} s, DuckDB plain table {plain:.2f} s, {in_lake / plain:.2f}x ({left} rows left)"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sqlglot", metavar="PATH", help="a folder holding sqlglot (pip install --target)")
    parser.add_argument("--lake", action="store_true", help="also time the large DELETEs on a lake table")
    args = parser.parse_args(argv)
    parse_costs(args.sqlglot)
    if args.lake:
        lake_deletes()


if __name__ == "__main__":
    main()
