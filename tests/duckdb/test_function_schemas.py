"""Every table function's columns, as a user's DESCRIBE shows them, are those of its declared Arrow
schema, on a connection registered the way a fresh process registers it: before pyarrow is loaded.

`register(con)` does not build the schemas (building them imports pyarrow): DuckDB reads a
placeholder while each source is registered and the real schema at every bind
(`hooks.register_source`). A schema that drifted, or a bind that kept the placeholder, shows here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import iceduck
from iceduck.duckdb.binding import all_functions
from iceduck.duckdb.functions import BIND_UDF, TableFunction
from iceduck.duckdb.maintenance import OncePerStatement
from iceduck.vocabulary import quote_ident

_DESCRIBE = """
import json, sys
import duckdb
con = duckdb.connect()
import iceduck
iceduck.register(con, catalog=sys.argv[1])
con.execute("SELECT 1").fetchall()
lazy = "pyarrow" not in sys.modules
calls = json.loads(sys.argv[2])
out = {name: [list(r[:2]) for r in con.sql(f"DESCRIBE SELECT * FROM {call}").fetchall()] for name, call in calls.items()}
print(json.dumps({"lazy": lazy, "described": out}))
"""


def _bound(fn: TableFunction) -> bool:
    """Functions whose rows come through the bind UDF and a keyed source, and whose bind only reads
    (the maintenance actions and `iceberg_health` run at most once per statement: left out)."""
    generated = fn.macro is None or BIND_UDF in fn.macro
    return generated and not isinstance(fn, OncePerStatement) and fn.name != "iceberg_maintenance_plan"


def _declared(fn: TableFunction) -> list[list[str]]:
    """The columns DuckDB gives the declared schema (with the function's SQL wrappers applied)."""
    con = duckdb.connect()
    con.register("declared", fn.schema.empty_table())
    wrap = fn.column_sql or {}
    select = ", ".join(
        f"{wrap[f.name].format(quote_ident(f.name))} AS {quote_ident(f.name)}" if f.name in wrap else quote_ident(f.name)
        for f in fn.schema
    )
    return [list(r[:2]) for r in con.sql(f"DESCRIBE SELECT {select} FROM declared").fetchall()]


@pytest.mark.local_only("a local warehouse and a fresh process")
def test_every_function_describes_as_its_declared_schema(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    lake = iceduck.connect(str(warehouse))
    lake.sql("CREATE SCHEMA rail")
    lake.sql("CREATE TABLE rail.trips (id BIGINT, station VARCHAR, d DATE) PARTITIONED BY (d)")
    lake.sql("INSERT INTO rail.trips VALUES (1, 'Utrecht', DATE '2024-01-01'), (2, 'Gouda', DATE '2024-01-02')")
    lake.close()
    functions = [fn for fn in all_functions() if _bound(fn)]
    calls = {fn.name: f"{fn.name}('{'rail' if fn.name == 'iceberg_schema_properties' else 'rail.trips'}')" for fn in functions}
    out = subprocess.run(
        [sys.executable, "-c", _DESCRIBE, str(warehouse), json.dumps(calls)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["lazy"], "register(con) loaded pyarrow"
    assert len(result["described"]) == len(functions) >= 25
    for fn in functions:
        assert result["described"][fn.name] == _declared(fn), fn.name
