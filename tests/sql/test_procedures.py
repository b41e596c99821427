"""Spark's Iceberg procedures through CALL on a lake.

Truth: the rows each snapshot held (read before the procedure), the files on disk and in the
metadata (listed independently of the procedure's own counts), Spark's result column names
(checked against Spark itself in test_dml_java.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import iceduck
from iceduck.errors import IcebergError
from iceduck.spec.snapshots import SnapshotRef
from iceduck.spec.updates import SetSnapshotRef
from iceduck.transaction.changes import MetadataChange
from iceduck.transaction.commit import TableCommitter


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[iceduck.Lake]:
    lake = iceduck.connect(tmp_path / "wh")
    lake.sql("CREATE SCHEMA ns")
    lake.sql("CREATE TABLE ns.t (id INTEGER, v VARCHAR)")
    for i in range(4):
        lake.sql(f"INSERT INTO ns.t VALUES ({i}, 'v{i}')")
    yield lake
    lake.close()


def _snapshots(lake: iceduck.Lake) -> list[int]:
    return [
        r[0]
        for r in lake.sql(
            "SELECT snapshot_id FROM iceberg_snapshots('ns.t') ORDER BY sequence_number"
        ).fetchall()
    ]


def _rows(lake: iceduck.Lake, at: int | None = None) -> list[tuple[Any, ...]]:
    suffix = f" AT (VERSION => {at})" if at is not None else ""
    return sorted(lake.sql(f"SELECT * FROM lake.ns.t{suffix}").fetchall())


def _call(lake: iceduck.Lake, statement: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    rel = lake.sql(statement)
    assert rel is not None
    return list(rel.columns), rel.fetchall()


def test_rollback_and_set_current_snapshot(lake: iceduck.Lake) -> None:
    snaps = _snapshots(lake)
    second = _rows(lake, snaps[1])
    columns, rows = _call(lake, f"CALL system.rollback_to_snapshot('ns.t', {snaps[1]})")
    assert columns == ["previous_snapshot_id", "current_snapshot_id"] and rows == [(snaps[3], snaps[1])]
    assert _rows(lake) == second
    # the later snapshots are no ancestors any more: rollback refuses, set_current_snapshot does it
    with pytest.raises(IcebergError, match="not an ancestor"):
        lake.sql(f"CALL system.rollback_to_snapshot(table => 'ns.t', snapshot_id => {snaps[3]})")
    columns, rows = _call(
        lake, f"CALL lake.system.set_current_snapshot(table => 'lake.ns.t', snapshot_id => {snaps[3]})"
    )
    assert rows == [(snaps[1], snaps[3])]
    assert len(_rows(lake)) == 4
    # rollback_to_timestamp: the newest ancestor older than the timestamp
    stamps = dict(
        lake.sql("SELECT snapshot_id, epoch_ms(committed_at) FROM iceberg_snapshots('ns.t')").fetchall()
    )
    at = stamps[snaps[2]] + 1
    _, rows = _call(lake, f"CALL system.rollback_to_timestamp('ns.t', make_timestamp({at * 1000}))")
    assert rows == [(snaps[3], snaps[2])]
    assert _rows(lake) == _rows(lake, snaps[2])


def test_fast_forward(lake: iceduck.Lake) -> None:
    snaps = _snapshots(lake)
    committer = TableCommitter(lake.catalog, "ns", "t", lake.io)
    committer.commit(MetadataChange("branch", lambda md: [SetSnapshotRef("audit", SnapshotRef(snaps[1]))]))
    columns, rows = _call(lake, "CALL system.fast_forward(table => 'ns.t', branch => 'audit', to => 'main')")
    assert columns == ["branch_updated", "previous_ref", "updated_ref"] and rows == [
        ("audit", snaps[1], snaps[3])
    ]
    assert committer.load().metadata.refs["audit"].snapshot_id == snaps[3]
    with pytest.raises(IcebergError, match="no branch 'nope'"):
        lake.sql("CALL system.fast_forward('ns.t', 'nope', 'main')")


def _files(lake: iceduck.Lake) -> set[str]:
    root = Path(lake.table("ns.t").location.removeprefix("file://"))
    return {str(p) for p in root.rglob("*") if p.is_file()}


def test_maintenance_procedures_with_spark_columns(lake: iceduck.Lake) -> None:
    before_rows = _rows(lake)
    columns, rows = _call(
        lake, "CALL system.rewrite_data_files(table => 'ns.t', options => map {'min-input-files': '2'})"
    )
    assert columns == [
        "rewritten_data_files_count", "added_data_files_count", "rewritten_bytes_count",
        "failed_data_files_count", "removed_delete_files_count",
    ]  # fmt: skip
    assert rows[0][:2] == (4, 1) and rows[0][3:] == (0, 0)
    assert _rows(lake) == before_rows
    manifests = lake.sql("SELECT count(*) FROM iceberg_manifests('ns.t')").fetchall()[0][0]
    columns, rows = _call(lake, "CALL system.rewrite_manifests('ns.t')")
    assert columns == ["rewritten_manifests_count", "added_manifests_count"]
    assert rows == [(manifests, lake.sql("SELECT count(*) FROM iceberg_manifests('ns.t')").fetchall()[0][0])]
    on_disk = _files(lake)
    columns, rows = _call(
        lake,
        "CALL system.expire_snapshots(table => 'ns.t', older_than => now() + INTERVAL 1 MINUTE, retain_last => 1)",
    )
    assert columns[0] == "deleted_data_files_count" and columns[-1] == "deleted_statistics_files_count"
    gone = on_disk - _files(lake)
    assert rows[0][0] == sum(p.endswith(".parquet") for p in gone) == 4
    assert rows[0][3] + rows[0][4] == sum(p.endswith(".avro") for p in gone)
    assert _rows(lake) == before_rows
    _, again = _call(lake, "CALL system.expire_snapshots('ns.t', now() + INTERVAL 1 MINUTE, 1)")
    assert again == [(0, 0, 0, 0, 0, 0)]  # nothing left to expire: Spark's zeros, no error
    # an orphan, old enough: listed by a dry run, then removed
    orphan = Path(lake.table("ns.t").location.removeprefix("file://")) / "data" / "stray.parquet"
    orphan.write_bytes(b"x")
    old = time.time() - 10 * 86400
    os.utime(orphan, (old, old))
    assert _call(lake, "CALL system.remove_orphan_files(table => 'ns.t', dry_run => true)")[1] == [
        (str(orphan),)
    ]
    assert orphan.exists()
    columns, rows = _call(lake, "CALL system.remove_orphan_files('ns.t')")
    assert columns == ["orphan_file_location"] and rows == [(str(orphan),)] and not orphan.exists()


def test_unknown_procedures_are_one_line(lake: iceduck.Lake) -> None:
    for statement, message in [
        ("CALL system.cherrypick_snapshot('ns.t', 1)", "not supported by iceduck"),
        ("CALL iceberg_to_ducklake('lake', 'dl')", "DuckDB's iceberg extension.*never installs"),
        ("CALL system.migrate('ns.t')", "no such procedure in iceduck"),
        ("CALL system.expire_snapshots(tbl => 'ns.t')", "no argument 'tbl'"),
        ("CALL system.rollback_to_snapshot('ns.nope', 1)", "ns.nope does not exist"),
        ("CALL system.rollback_to_snapshot('ns.t', 42)", "no snapshot 42"),
    ]:
        with pytest.raises(IcebergError, match=message) as e:
            lake.sql(statement)
        assert "\n" not in str(e.value)
    assert len(_rows(lake)) == 4


def test_a_script_and_the_shell_take_spark_calls_with_named_arguments(lake: iceduck.Lake) -> None:
    import io

    from iceduck.shell import Shell

    snaps = _snapshots(lake)
    # DuckDB's parser refuses `table => ...` (a reserved word): a script holding it still splits
    script = f"SELECT 1; CALL system.rollback_to_snapshot(table => 'ns.t', snapshot_id => {snaps[1]}); SELECT 2"
    rel = lake.sql(script)
    assert rel is not None and rel.fetchall() == [(2,)]
    assert _snapshots(lake) == snaps and len(_rows(lake)) == 2  # the rollback ran, between the queries
    out, err = io.StringIO(), io.StringIO()
    Shell(lake, out, err).run_text(
        f"USE lake.ns;\nCALL system.set_current_snapshot(table => 'ns.t', snapshot_id => {snaps[3]});\n"
    )
    assert err.getvalue() == "" and str(snaps[3]) in out.getvalue()
    assert len(_rows(lake)) == 4
