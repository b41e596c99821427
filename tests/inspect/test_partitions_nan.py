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


def test_partitions_of_evolved_specs_group_by_the_unified_partition(tmp_path: Path) -> None:
    """As Java Iceberg's `partitions` table: a partition is a value of the union of every spec's
    partition fields (by field id, null where a spec lacks the field), so `x` null under spec `(x)`
    and `ts_day` null under a later spec `(day(ts))` are one partition, named by its newest file."""
    with iceduck.connect(str(tmp_path / "wh")) as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql(
            "CREATE TABLE ns.t (id BIGINT, x DOUBLE, ts TIMESTAMP) PARTITIONED BY (x) WITH ('format-version' = '2')"
        )
        lake.sql("INSERT INTO ns.t VALUES (1, NULL, TIMESTAMP '2024-01-01 10:00:00'), (2, 1.0, NULL)")
        lake.sql("ALTER TABLE ns.t SET PARTITIONED BY (day(ts))")
        lake.sql("INSERT INTO ns.t VALUES (3, 5.0, NULL), (4, 6.0, TIMESTAMP '2024-01-02 10:00:00')")
        rows = lake.sql("SELECT spec_id, record_count, file_count FROM iceberg_partitions('ns.t')").fetchall()
    # {x: null, ts_day: null}: id 1 (spec 0) and id 3 (spec 1); {x: 1.0, ts_day: null}: id 2;
    # {x: null, ts_day: 2024-01-02}: id 4
    assert sorted(rows) == [(0, 1, 1), (1, 1, 1), (1, 2, 2)]
