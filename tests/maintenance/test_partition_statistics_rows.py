"""`iceberg_partition_statistics`: a snapshot's partition statistics file read when one is
registered, computed otherwise; a registered file that is not what the metadata says is one clear
error naming it (issue 30). Spark's own file is read in tests/java/test_java_statistics.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from iceduck.lake import Lake

LAKE_NAMESPACES = ("s",)
_COUNTS = "data_record_count, data_file_count, position_delete_record_count, dv_count"


def _table(lake: Lake) -> None:
    lake.sql("CREATE TABLE s.t (id BIGINT, d DATE, x DOUBLE) PARTITIONED BY (day(d), bucket(4, id))")
    lake.sql("INSERT INTO s.t SELECT i, DATE '2026-01-01' + (i % 3)::INT, i / 3 FROM range(30) t(i)")
    lake.sql("INSERT INTO s.t VALUES (101, NULL, 'NaN'::DOUBLE)")
    lake.sql("DELETE FROM s.t WHERE id % 5 = 0")


def _rows(lake: Lake, extra: str = "") -> list[tuple[object, ...]]:
    return lake.sql(
        f"SELECT partition, {_COUNTS}, statistics_file FROM iceberg_partition_statistics('s.t'{extra}) ORDER BY ALL"
    ).fetchall()


def test_computed_rows_agree_with_iceberg_partitions_and_with_the_file_analyze_writes(lake: Lake) -> None:
    _table(lake)
    computed = _rows(lake)
    assert {r[-1] for r in computed} == {None}
    # independent truth: iceberg_partitions adds up the same manifests its own way
    partitions = lake.sql(
        "SELECT partition, record_count, file_count, position_delete_record_count, dv_count "
        "FROM iceberg_partitions('s.t') ORDER BY ALL"
    ).fetchall()
    assert [r[:5] for r in computed] == partitions
    # and the table's rows: those stored less those its deletion vectors delete
    (count,) = lake.sql("SELECT count(*) FROM lake.s.t").fetchall()[0]
    assert count == 25 and sum(r[1] for r in computed) - sum(r[3] for r in computed) == count
    lake.sql("ANALYZE s.t")
    read = _rows(lake)
    (path,) = {r[-1] for r in read}
    assert path is not None and Path(path).name.endswith(".parquet")
    assert [r[:-1] for r in read] == [r[:-1] for r in computed]


@pytest.mark.local_only("damages the statistics file in place through its local path")
def test_a_registered_file_that_differs_from_its_registration_is_one_clear_error(lake: Lake) -> None:
    _table(lake)
    lake.sql("ANALYZE s.t")
    (path,) = {r[-1] for r in _rows(lake)}
    assert isinstance(path, str)
    Path(path).write_bytes(Path(path).read_bytes() + b"x")
    with pytest.raises(Exception) as e:
        _rows(lake)
    message = str(e.value).splitlines()[0]
    assert path in message and "but the table metadata says file-size-in-bytes" in message
    assert "Traceback" not in message


def test_an_older_snapshot_keeps_reading_its_own_file(lake: Lake) -> None:
    _table(lake)
    lake.sql("ANALYZE s.t")
    analyzed = lake.sql("SELECT snapshot_id FROM iceberg_snapshots('s.t') ORDER BY sequence_number DESC LIMIT 1").fetchall()[0][0]
    before = _rows(lake)
    lake.sql("INSERT INTO s.t VALUES (7, DATE '2026-01-01', 1.0)")
    assert {r[-1] for r in _rows(lake)} == {None}  # the new snapshot has no file: computed
    assert _rows(lake, f", snapshot_id := {analyzed}") == before
