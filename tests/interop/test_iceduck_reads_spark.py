"""iceduck reads what Java Iceberg (1.10.2 in Spark 3.5.7) writes, and agrees with Spark's metadata tables.

One Spark child writes a few small tables in a Hadoop catalog (merge-on-read v2 with position delete
files, copy-on-write v2, v3 with deletion vectors and row lineage, a v2 table upgraded to v3, schema
and partition evolution with NULL and NaN partition values, compaction), reads every snapshot of each
(with `_row_id` / `_last_updated_sequence_number` on v3) and dumps its metadata tables (snapshots,
history, refs, files, manifests, entries, partitions). iceduck must read every snapshot with the same
rows and lineage, and its metadata functions must give the same facts.

Equality deletes are not written here: Spark SQL never writes them (Flink does); the conformance
corpus covers iceduck's reading of them.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest

import iceduck
from tests.interop.spark_job import plain, rows_key, run_job

# one worker runs every interop test (CI: --dist loadgroup): one Spark child per module, one JVM at a time
pytestmark = pytest.mark.xdist_group("java_reference")

MOR = "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read'"

# table -> (v3 at the end, Spark's statements)
TABLES: dict[str, tuple[bool, list[str]]] = {
    "mor": (False, [
        f"CREATE TABLE local.db.mor (id bigint, s string, x double) USING iceberg PARTITIONED BY (bucket(2, id)) "
        f"TBLPROPERTIES ('format-version'='2', {MOR})",
        "INSERT INTO local.db.mor VALUES (1, 'a', 1.0), (2, 'b', double('NaN')), (3, 'c', NULL), (4, 'd', 4.0)",
        "INSERT INTO local.db.mor VALUES (5, 'e', 5.0), (6, 'f', 6.0)",
        "DELETE FROM local.db.mor WHERE id IN (2, 5)",
        "UPDATE local.db.mor SET s = 'upd' WHERE id = 3",
        "MERGE INTO local.db.mor t USING (SELECT 4 AS id, 'm' AS s UNION ALL SELECT 9, 'new') u ON t.id = u.id "
        "WHEN MATCHED THEN UPDATE SET t.s = u.s WHEN NOT MATCHED THEN INSERT (id, s, x) VALUES (u.id, u.s, 9.0)",
    ]),
    "cow": (False, [
        "CREATE TABLE local.db.cow (id bigint, s string) USING iceberg TBLPROPERTIES ('format-version'='2')",
        "INSERT INTO local.db.cow VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "DELETE FROM local.db.cow WHERE id = 2",
        "UPDATE local.db.cow SET s = 'upd' WHERE id = 3",
    ]),
    "dv": (True, [
        f"CREATE TABLE local.db.dv (id bigint, s string, p string) USING iceberg PARTITIONED BY (p) "
        f"TBLPROPERTIES ('format-version'='3', {MOR})",
        "INSERT INTO local.db.dv VALUES (1, 'a', 'x'), (2, 'b', 'x'), (3, 'c', 'y'), (4, 'd', NULL)",
        "INSERT INTO local.db.dv VALUES (5, 'e', 'y'), (6, 'f', 'x')",
        "DELETE FROM local.db.dv WHERE id IN (2, 5)",
        "UPDATE local.db.dv SET s = 'upd' WHERE id IN (3, 6)",
        "DELETE FROM local.db.dv WHERE id = 1",
        "ALTER TABLE local.db.dv ADD COLUMN n int",
        "ALTER TABLE local.db.dv RENAME COLUMN s TO label",
        "INSERT INTO local.db.dv VALUES (7, 'g', 'x', 7)",
        "CALL local.system.rewrite_data_files(table => 'db.dv', options => map('rewrite-all', 'true'))",
        "UPDATE local.db.dv SET n = 70 WHERE id = 7",
    ]),
    "upgraded": (True, [
        "CREATE TABLE local.db.upgraded (id bigint, s string) USING iceberg "
        f"TBLPROPERTIES ('format-version'='2', {MOR})",
        "INSERT INTO local.db.upgraded VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "INSERT INTO local.db.upgraded VALUES (4, 'd')",
        "DELETE FROM local.db.upgraded WHERE id = 2",
        "ALTER TABLE local.db.upgraded SET TBLPROPERTIES ('format-version'='3')",
        "INSERT INTO local.db.upgraded VALUES (5, 'e')",
        "DELETE FROM local.db.upgraded WHERE id = 3",
        "UPDATE local.db.upgraded SET s = 'upd' WHERE id = 4",
    ]),
    "evolved": (False, [
        "CREATE TABLE local.db.evolved (id bigint, ts timestamp, x double, amount decimal(9, 2), n int) "
        "USING iceberg PARTITIONED BY (x) TBLPROPERTIES ('format-version'='2')",
        "INSERT INTO local.db.evolved VALUES (1, timestamp'2024-01-01 10:00:00', double('NaN'), 1.25, 1), "
        "(2, timestamp'2024-01-02 10:00:00', NULL, 2.50, 2), (3, NULL, double('NaN'), NULL, NULL)",
        "INSERT INTO local.db.evolved VALUES (4, timestamp'2024-02-01 00:00:00', double('NaN'), 4.00, 4)",
        "ALTER TABLE local.db.evolved ADD PARTITION FIELD days(ts)",
        "ALTER TABLE local.db.evolved ALTER COLUMN n TYPE bigint",
        "ALTER TABLE local.db.evolved ALTER COLUMN amount TYPE decimal(12, 2)",
        "ALTER TABLE local.db.evolved ADD COLUMN tag string",
        "INSERT INTO local.db.evolved VALUES (5, timestamp'2024-03-01 00:00:00', 5.0, 5.00, 5000000000, 't')",
        "ALTER TABLE local.db.evolved DROP COLUMN tag",
        "ALTER TABLE local.db.evolved DROP PARTITION FIELD x",
        "INSERT INTO local.db.evolved VALUES (6, timestamp'2024-03-02 00:00:00', double('NaN'), 6.00, 6)",
        "DELETE FROM local.db.evolved WHERE id = 1",
    ]),
}

# Spark metadata table -> (its columns compared, iceduck's function, the same columns there)
METADATA_TABLES: dict[str, tuple[str, str, str]] = {
    "snapshots": (
        "committed_at, snapshot_id, parent_id, operation, manifest_list, summary",
        "iceberg_snapshots",
        "committed_at, snapshot_id, parent_id, operation, manifest_list, summary",
    ),
    "history": (
        "made_current_at, snapshot_id, parent_id, is_current_ancestor",
        "iceberg_history",
        "made_current_at, snapshot_id, parent_id, is_current_ancestor",
    ),
    "refs": ("name, type, snapshot_id", "iceberg_refs", "name, type, snapshot_id"),
    "files": (
        "content, file_path, file_format, spec_id, record_count, file_size_in_bytes",
        "iceberg_files",
        "content, file_path, file_format, spec_id, record_count, file_size_in_bytes",
    ),
    "manifests": (
        "content, path, length, partition_spec_id, added_snapshot_id",
        "iceberg_manifests",
        "content, path, length, partition_spec_id, added_snapshot_id",
    ),
    "entries": (
        "status, snapshot_id, sequence_number, file_sequence_number, data_file.file_path AS file_path, "
        "data_file.record_count AS record_count",
        "iceberg_entries",
        "status, snapshot_id, sequence_number, file_sequence_number, file_path, record_count",
    ),
    "partitions": (
        "*",
        "iceberg_partitions",
        "spec_id, record_count, file_count, total_data_file_size_in_bytes, position_delete_record_count, "
        "position_delete_file_count, equality_delete_record_count, equality_delete_file_count, "
        "last_updated_snapshot_id",
    ),
}


@pytest.fixture(scope="module")
def spark_tables(reference: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("iceduck_reads_spark")
    warehouse = str(root / "wh")
    tasks: list[dict[str, Any]] = []
    for name, (v3, statements) in TABLES.items():
        tasks.append({"kind": "sql", "id": f"write:{name}", "statements": statements})
        tasks.append({"kind": "read_all", "id": f"read:{name}", "path": f"{warehouse}/db/{name}", "lineage": v3})
        for meta, (columns, _, _) in METADATA_TABLES.items():
            statement = f"SELECT {columns} FROM local.db.{name}.{meta}"
            tasks.append({"kind": "sql", "id": f"{meta}:{name}", "statements": [statement]})
    return {"warehouse": warehouse, "results": run_job(reference, tasks, warehouse)}


def current_metadata(table_dir: str) -> str:
    with open(f"{table_dir}/metadata/version-hint.text") as f:
        return f"{table_dir}/metadata/v{f.read().strip()}.metadata.json"


def _ok(results: dict[str, Any], key: str) -> Any:
    got = results[key]
    assert "error" not in got, f"Spark: {key}: {got['error']}"
    return got["rows"]


@pytest.mark.parametrize("table", sorted(TABLES))
def test_iceduck_reads_every_snapshot_spark_wrote(spark_tables: dict[str, Any], table: str) -> None:
    results = spark_tables["results"]
    _ok(results, f"write:{table}")
    theirs = _ok(results, f"read:{table}")
    v3 = TABLES[table][0]
    metadata = current_metadata(f"{spark_tables['warehouse']}/db/{table}")
    lineage = ", row_lineage := true" if v3 else ""
    with iceduck.connect(str(spark_tables["warehouse"]) + "-iceduck") as lake:
        for sid, got in theirs.items():
            assert "error" not in got, f"Spark could not read its own snapshot {sid}: {got['error']}"
            rel = lake.sql(f"SELECT * FROM iceberg_scan('{metadata}', snapshot_id := {sid}{lineage})")
            ours = [dict(zip(rel.columns, r, strict=True)) for r in rel.fetchall()]
            assert rows_key(ours) == rows_key(got["rows"]), f"snapshot {sid} of {table}"


@pytest.mark.parametrize("meta", sorted(METADATA_TABLES))
@pytest.mark.parametrize("table", sorted(TABLES))
def test_metadata_functions_agree_with_spark(spark_tables: dict[str, Any], table: str, meta: str) -> None:
    results = spark_tables["results"]
    _ok(results, f"write:{table}")
    theirs = _ok(results, f"{meta}:{table}")
    _, function, columns = METADATA_TABLES[meta]
    metadata = current_metadata(f"{spark_tables['warehouse']}/db/{table}")
    with iceduck.connect(str(spark_tables["warehouse"]) + "-iceduck") as lake:
        lake.sql("SET TimeZone = 'UTC'")
        # Spark's partitions table of an unpartitioned table has no spec_id: compare what both have
        names = [c.strip() for c in columns.split(",")]
        if theirs:
            names = [n for n in names if n in theirs[0]]
        rel = lake.sql(f"SELECT {', '.join(names)} FROM {function}('{metadata}')")
        ours = [dict(zip(rel.columns, r, strict=True)) for r in rel.fetchall()]
    keep = set(names)
    assert rows_key(_normal(meta, ours, keep)) == rows_key(_normal(meta, theirs, keep)), f"{meta} of {table}"


_CONTENT = {"DATA": 0, "POSITION_DELETES": 1, "EQUALITY_DELETES": 2, "DELETES": 1}
_STATUS = {"EXISTING": 0, "ADDED": 1, "DELETED": 2}


def _normal(meta: str, rows: list[dict[str, Any]], keep: set[str] | None = None) -> list[dict[str, Any]]:
    """Rows in one spelling: Spark numbers content and status where iceduck names them, upper-cases
    nothing, and leaves `operation` out of the summary map (it is a column of its own)."""
    out = []
    for r in rows:
        r = plain(r)
        if keep is not None:
            r = {k: v for k, v in r.items() if k in keep}
        if "content" in r:
            r["content"] = _CONTENT.get(r["content"], r["content"])
        if meta == "entries":
            r["status"] = _STATUS.get(r["status"], r["status"])
        if isinstance(r.get("file_format"), str):
            r["file_format"] = r["file_format"].upper()
        if meta == "refs":
            r["type"] = r["type"].upper()
        if meta == "snapshots":
            summary = dict(r["summary"]) if isinstance(r["summary"], list) else r["summary"]
            summary.pop("operation", None)
            r["summary"] = summary
        out.append(json.loads(json.dumps(r)))
    return out


def test_upgraded_table_lineage_is_null_before_the_upgrade(spark_tables: dict[str, Any]) -> None:
    """Spark's upgraded table: rows of the snapshots from before the upgrade have no lineage in Java,
    and so in iceduck (the test above compares every snapshot; this one says what it found)."""
    theirs = _ok(spark_tables["results"], "read:upgraded")
    pre_upgrade = [got["rows"] for got in theirs.values() if all(r["_row_id"] is None for r in got["rows"])]
    assert pre_upgrade and all(r["_last_updated_sequence_number"] is None for rows in pre_upgrade for r in rows)
