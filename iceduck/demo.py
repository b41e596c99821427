"""`iceduck demo`: build a small Iceberg v3 table with SQL and print its tree of files.

The table is built the way a user would, through `Lake.sql`: a day-partitioned table, an INSERT
of three days, an INSERT of a fourth, and a DELETE (three commits after the CREATE). The tree is
then read back with iceduck's SQL functions, from the current metadata.json through its snapshots,
the current manifest list and its manifests, down to the data files and the Puffin file holding
the deletion vectors, with the facts that matter at each level (sizes, counts, sequence numbers,
partition values, row ids).

Running it again drops the demo table (with its files) and builds it afresh, but only a table
the demo made (it carries the property `iceduck.demo`): a user's own `demo.services` is left alone.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from typing import TextIO

from iceduck.commands import Command, register_command, without_duckdb_progress_bar
from iceduck.describe import _Rows, tree
from iceduck.errors import IcebergError
from iceduck.lake import Lake, connect

NAMESPACE = "demo"
TABLE = f"{NAMESPACE}.services"
DEMO_PROPERTY = "iceduck.demo"  # marks the table as the demo's own, so a rerun may drop it


class DemoRefused(IcebergError):
    """The demo's table name is taken by a table the demo did not make."""


_ROWS = """SELECT i AS service_id,
       DATE '2026-10-01' + ((i - 1) // 1000)::INTEGER AS service_date,
       ['Amsterdam', 'Utrecht', 'Rotterdam', 'Den Haag', 'Eindhoven'][1 + i % 5] AS station,
       ((i * 7919) % 31)::INTEGER AS delay_min
FROM range({start}, {stop}) AS t(i)"""

# (what it does, the statement)
STEPS: tuple[tuple[str, str], ...] = (
    ("a namespace in the catalog", f"CREATE SCHEMA IF NOT EXISTS {NAMESPACE}"),
    (
        "a format v3 table, one partition per service day",
        f"""CREATE TABLE {TABLE} (
    service_id BIGINT,
    service_date DATE,
    station VARCHAR,
    delay_min INTEGER
) PARTITIONED BY (day(service_date))
  WITH ('iceduck.demo' = 'true')""",
    ),
    ("commit 1: three days of services", f"INSERT INTO {TABLE}\n{_ROWS.format(start=1, stop=3001)}"),
    ("commit 2: a fourth day", f"INSERT INTO {TABLE}\n{_ROWS.format(start=3001, stop=4001)}"),
    (
        "commit 3: delete the worst delays from the 2nd on (deletion vectors, no data file rewritten)",
        f"DELETE FROM {TABLE} WHERE delay_min >= 29 AND service_date >= DATE '2026-10-02'",
    ),
)


def build(lake: Lake, out: TextIO) -> None:
    """Run the demo's statements on the lake, echoing each one and its row count."""
    if NAMESPACE in lake.list_namespaces() and "services" in lake.list_tables(NAMESPACE):
        if lake.table(TABLE).properties.get(DEMO_PROPERTY) != "true":
            raise DemoRefused(
                f"{TABLE} exists in {lake.warehouse.resolve()} and was not made by `iceduck demo`: "
                "leaving it alone (use another --warehouse for the demo)"
            )
        lake.sql(f"DROP TABLE {TABLE} PURGE")
        out.write(f"-- {TABLE} existed: dropped it and its files, building it again\n\n")
    for what, statement in STEPS:
        out.write(f"-- {what}\n")
        out.write("D " + statement.replace("\n", "\n  ") + ";\n")
        rel = lake.sql(statement)
        rows = rel.fetchall() if rel is not None else []
        if rows and rel is not None and rel.columns == ["Count"]:
            out.write(f"  ({rows[0][0]} rows)\n")
        out.write("\n")


# -- the command ---------------------------------------------------------------------------------


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Build a small day-partitioned Iceberg v3 table (demo.services) in the warehouse with SQL, "
        "then print its tree: metadata.json, snapshots, manifest list, manifests, data files and "
        "deletion vectors. Running it again rebuilds the table."
    )


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Build the demo table in `args.warehouse` and print its tree."""
    out = out or sys.stdout
    try:
        lake = without_duckdb_progress_bar(connect(args.warehouse))
    except Exception as e:
        print(f"Error: cannot open warehouse {args.warehouse}: {e}", file=sys.stderr)
        return 1
    with lake:
        out.write(f"Building {TABLE} in the warehouse {lake.warehouse.resolve()} with SQL:\n\n")
        build(lake, out)
        out.write("\n".join(tree(lake, TABLE)) + "\n\n")
        rows = _Rows(lake)(f"SELECT count(*) AS n FROM lake.{TABLE}")[0]["n"]
        out.write(f"{TABLE} now reads as {rows} rows. Look around:\n")
        for hint in _HINTS:
            out.write(f'  {_command(args)} -c "{hint}"\n')
    return 0


_HINTS: Iterable[str] = (
    f"SELECT station, count(*), avg(delay_min) FROM lake.{TABLE} GROUP BY ALL ORDER BY 1",
    f"SELECT * FROM iceberg_snapshots('{TABLE}')",
    f"SELECT file_path, partition, record_count, readable_metrics FROM iceberg_files('{TABLE}')",
    f"SELECT * FROM iceberg_dv_positions('{TABLE}') LIMIT 10",
)


def _command(args: argparse.Namespace) -> str:
    default = os.environ.get("ICEDUCK_WAREHOUSE") or "warehouse"
    return "iceduck" if str(args.warehouse) == default else f"iceduck --warehouse {args.warehouse}"


register_command(
    Command("demo", "Build a small Iceberg table with SQL and print its tree of files", _configure, run)
)
