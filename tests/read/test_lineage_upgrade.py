"""Row lineage of rows committed before a table's upgrade to v3 (table spec, "Row Lineage for Upgraded
Tables"): their files have no `first_row_id`, so `_row_id` is null, and `_last_updated_sequence_number`
is null too, as Java Iceberg 1.10 reads them (iceduck read the file's data sequence number there).
tests/interop checks the same on a table Spark upgraded."""

from __future__ import annotations

from pathlib import Path

import iceduck


def test_rows_from_before_the_upgrade_have_no_lineage(tmp_path: Path) -> None:
    with iceduck.connect(str(tmp_path / "wh")) as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql("CREATE TABLE ns.t (id BIGINT) WITH ('format-version' = '2')")
        lake.sql("INSERT INTO ns.t VALUES (1), (2)")
        lake.sql("INSERT INTO ns.t VALUES (3)")
        before = lake.sql(
            "SELECT max(snapshot_id) FILTER (WHERE sequence_number = 2) FROM iceberg_snapshots('ns.t')"
        )
        old_snapshot = before.fetchall()[0][0]
        lake.sql("ALTER TABLE ns.t SET ('format-version' = '3')")
        old = lake.sql(
            f"SELECT id, _row_id, _last_updated_sequence_number FROM iceberg_scan('ns.t', row_lineage := true, "
            f"snapshot_id := {old_snapshot}) ORDER BY id"
        ).fetchall()
        assert old == [(1, None, None), (2, None, None), (3, None, None)]
