"""iceberg_snapshots fills only the columns a query reads: every projection agrees with the full rows
and with the table builder's snapshots."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb
import pytest

from iceduck.spec.snapshots import Snapshot
from iceduck.table import clear_caches
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


@pytest.mark.parametrize("version", [2, 3])
def test_listing_snapshots_builds_no_snapshot_objects(
    table_builder: Callable[..., TableBuilder],
    con: duckdb.DuckDBPyConnection,
    monkeypatch: pytest.MonkeyPatch,
    version: int,
) -> None:
    # The rows come from each snapshot's fields as decoded (checked as parsing checks them), for
    # any projection: no model object per snapshot (10,000 of them cost more than decoding the file).
    b = table_builder(format_version=version)
    for _ in range(6):
        b.add_data_file(rows=1)
        b.commit()
    t = b.metadata_path
    built: list[int] = []
    real_init = Snapshot.__init__

    def counting_init(self: Snapshot, *args: Any, **kwargs: Any) -> None:
        built.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(Snapshot, "__init__", counting_init)
    for cols in ("sequence_number, snapshot_id", "*", "summary, operation", "first_row_id, is_current"):
        clear_caches()
        built.clear()
        rows = con.execute(f"SELECT {cols} FROM iceberg_snapshots('{t}')").fetchall()
        assert len(rows) == 6
        assert len(built) <= 1, cols  # the current snapshot, which loading the table checks
