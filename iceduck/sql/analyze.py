"""`ANALYZE lake.ns.t [(columns)]`: the maintenance action `analyze` run from SQL.

It writes a Puffin statistics file of theta sketches for the current snapshot and registers it
(`iceduck.maintenance.analyze`), recorded in the table's maintenance log like every action, and
returns one row per column: its name, field id, the distinct-count estimate, the snapshot the
statistics describe, the statistics file and whether the sketches were merged incrementally.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from iceduck.errors import IcebergError

SCHEMA = pa.schema(
    [
        ("column_name", pa.string()),
        ("distinct_count", pa.int64()),
        ("snapshot_id", pa.int64()),
        ("statistics_path", pa.string()),
        ("incremental", pa.bool_()),
    ]
)


def analyze_statement(
    lake: Any, con: duckdb.DuckDBPyConnection, identifier: str, columns: Sequence[str]
) -> duckdb.DuckDBPyRelation:
    """Run ANALYZE on lake table `identifier` and return its rows (see the module docstring)."""
    # the maintenance actions (and the write stack) load when a statement needs them, not at startup
    from iceduck.maintenance.actions import Maintainer

    result = Maintainer.for_lake(lake, identifier).analyze(list(columns) or None, dry_run=False)
    if result.error is not None:
        raise IcebergError(f"{identifier}: ANALYZE failed: {result.error}")
    s = result.summary
    ndv: dict[str, int] = dict(s.get("ndv", {}))
    rows = pa.table(
        {
            "column_name": list(ndv),
            "distinct_count": list(ndv.values()),
            "snapshot_id": [s.get("snapshot_id")] * len(ndv),
            "statistics_path": [s.get("statistics_path")] * len(ndv),
            "incremental": [bool(s.get("incremental"))] * len(ndv),
        },
        schema=SCHEMA,
    )
    return con.from_arrow(rows)
