"""`iceberg_partitions` groups the files of a NaN partition value into one row, as Spark's
`partitions` metadata table does (NaN != NaN in Python split it into one row per file)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import iceduck


@pytest.mark.parametrize("version", [2, 3])
def test_nan_partition_is_one_row(tmp_path: Path, version: int) -> None:
    with iceduck.connect(str(tmp_path / "wh")) as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql(
            f"CREATE TABLE ns.t (id BIGINT, x DOUBLE) PARTITIONED BY (x) WITH ('format-version' = '{version}')"
        )
        lake.sql("INSERT INTO ns.t VALUES (1, 'NaN'::DOUBLE), (2, 'NaN'::DOUBLE), (3, NULL), (4, 1.0)")
        lake.sql("INSERT INTO ns.t VALUES (5, 'NaN'::DOUBLE), (6, 1.0)")
        rows = lake.sql(
            "SELECT partition['x'], record_count, file_count FROM iceberg_partitions('ns.t')"
        ).fetchall()
    # 3 partitions: NaN (rows 1, 2, 5 in two files), NULL (row 3), 1.0 (rows 4 and 6 in two files)
    nan = [r for r in rows if r[0] is not None and math.isnan(float(r[0]))]
    assert [r[1:] for r in nan] == [(3, 2)]
    assert sorted((r[0], *r[1:]) for r in rows if r not in nan and r[0] is not None) == [("1.0", 2, 2)]
    assert [r[1:] for r in rows if r[0] is None] == [(1, 1)]
    assert len(rows) == 3
