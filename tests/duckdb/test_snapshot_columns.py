"""iceberg_snapshots fills only the columns a query reads: every projection agrees with the full rows
and with the table builder's snapshots."""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from tests.support.tablebuilder import TableBuilder


def test_projected_snapshot_columns_agree_with_the_full_rows(
    table_builder: Callable[..., TableBuilder], con: duckdb.DuckDBPyConnection
) -> None:
    b = table_builder(format_version=2)
    for _ in range(3):
        b.add_data_file(rows=2)
        b.commit()
    t = b.metadata_path
    full = con.execute(f"SELECT * FROM iceberg_snapshots('{t}') ORDER BY sequence_number").fetchall()
    names = [d[0] for d in con.execute(f"SELECT * FROM iceberg_snapshots('{t}') LIMIT 0").description]
    assert [r[names.index("snapshot_id")] for r in full] == [c.snapshot_id for c in b.commits]
    for cols in (["sequence_number", "snapshot_id"], ["summary"], ["operation", "parent_id", "is_current"]):
        got = con.execute(
            f"SELECT {', '.join(cols)} FROM iceberg_snapshots('{t}') ORDER BY sequence_number"
        ).fetchall()
        assert got == [tuple(r[names.index(c)] for c in cols) for r in full], cols
    assert all(r[names.index("summary")] for r in full)  # the full rows do carry summaries
