"""Java Iceberg (1.10.2 in Spark 3.5.7) reads what iceduck writes, snapshot by snapshot.

iceduck writes a handful of small tables through its SQL (every write path below), then one Spark
child reads every snapshot of each table from its newest metadata.json (as any reader does: the old
snapshots are reached through the newest file), with `_row_id` and `_last_updated_sequence_number`.
Each snapshot's rows and lineage must equal what iceduck reads for it (`iceberg_scan(...,
snapshot_id := ..., row_lineage := true)`), and Spark must refuse none.

Write paths: CREATE, CTAS (partitioned), INSERT, DELETE and UPDATE (deletion vectors on v3, position
delete files on v2), ALTER TABLE ADD COLUMN (with and without DEFAULT), DROP / RENAME COLUMN, type
promotion (int -> long, float -> double, decimal widening), SET PARTITIONED BY (partition evolution),
SET SORTED BY, SET ('format-version' = '3') (v2 -> v3 upgrade), rewrite_data_files,
rewrite_manifests, expire_snapshots; partitioned by identity, bucket, truncate, year, month, day and
hour, with NULL and NaN partition values; nested types (struct, list, map), decimals, UUIDs, binary,
timestamps with and without zone. `timestamp_ns` is left out: Spark 3.5 has no such type.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import iceduck
from tests.interop.spark_job import plain, rows_key, run_job

# one worker runs every interop test (CI: --dist loadgroup): one Spark child per module, one JVM at a time
pytestmark = pytest.mark.xdist_group("java_reference")

# table -> the statements iceduck runs (each commit is a snapshot or a metadata change)
TABLES: dict[str, list[str]] = {
    "evolve": [
        "CREATE TABLE ns.evolve (id BIGINT, name VARCHAR, score INTEGER, v FLOAT, amount DECIMAL(9, 2)) "
        "WITH ('format-version' = '3')",
        "INSERT INTO ns.evolve SELECT i, 'n' || i, i * 10, i / 2, i * 1.25 FROM range(6) t(i)",
        "INSERT INTO ns.evolve VALUES (10, 'ten', NULL, 'NaN'::FLOAT, NULL), (11, NULL, 11, -0.5, 3.5)",
        "DELETE FROM ns.evolve WHERE id = 2",
        "UPDATE ns.evolve SET name = 'upd' WHERE id IN (3, 10)",
        "ALTER TABLE ns.evolve ADD COLUMN note VARCHAR",
        "INSERT INTO ns.evolve VALUES (20, 'twenty', 20, 2.0, 2.0, 'a note')",
        "ALTER TABLE ns.evolve ADD COLUMN d INTEGER DEFAULT 7",
        "INSERT INTO ns.evolve (id, name) VALUES (21, 'defaulted')",
        "ALTER TABLE ns.evolve RENAME COLUMN name TO label",
        "ALTER TABLE ns.evolve DROP COLUMN note",
        "ALTER TABLE ns.evolve ALTER COLUMN v TYPE DOUBLE",
        "ALTER TABLE ns.evolve ALTER COLUMN amount TYPE DECIMAL(12, 2)",
        "INSERT INTO ns.evolve VALUES (30, 'thirty', 300, 0.1, 12.5, 8)",
        "DELETE FROM ns.evolve WHERE id IN (4, 30)",
        "ALTER TABLE ns.evolve SET SORTED BY (id DESC)",
        "INSERT INTO ns.evolve VALUES (40, 'sorted', 1, 1.0, 1.0, 1), (39, 'sorted', 2, 2.0, 2.0, 2)",
    ],
    # int -> long, read by Spark's vectorized reader (its default): old files are INT32, read as long
    "promoted": [
        "CREATE TABLE ns.promoted (id INTEGER, score INTEGER) WITH ('format-version' = '3')",
        "INSERT INTO ns.promoted VALUES (1, 10), (2, NULL), (3, -2147483648)",
        "ALTER TABLE ns.promoted ALTER COLUMN score TYPE BIGINT",
        "ALTER TABLE ns.promoted ALTER COLUMN id TYPE BIGINT",
        "INSERT INTO ns.promoted VALUES (30000000000, 30000000000)",
        "DELETE FROM ns.promoted WHERE id = 2",
    ],
    "ctas": [
        "CREATE TABLE ns.ctas PARTITIONED BY (bucket(4, id)) WITH ('format-version' = '3') AS "
        "SELECT i AS id, 'c' || i AS s, DATE '2024-01-01' + CAST(i AS INTEGER) AS d FROM range(12) t(i)",
        "DELETE FROM ns.ctas WHERE id % 5 = 0",
        "UPDATE ns.ctas SET s = 'u' WHERE id = 3",
    ],
    "parts": [
        "CREATE TABLE ns.parts (id BIGINT, cat VARCHAR, ts TIMESTAMP, tstz TIMESTAMPTZ, d DATE, x DOUBLE, "
        "n INTEGER) PARTITIONED BY (cat, day(ts), bucket(3, id), truncate(2, cat), hour(tstz), year(d), x) "
        "WITH ('format-version' = '3')",
        "INSERT INTO ns.parts VALUES "
        "(1, 'alpha', TIMESTAMP '2024-03-01 10:00:00', TIMESTAMPTZ '2024-03-01 10:30:00+00', DATE '2024-03-01', 1.5, 1), "
        "(2, 'alpha', TIMESTAMP '2024-03-02 11:00:00', TIMESTAMPTZ '2024-03-02 11:30:00+00', DATE '2023-03-02', 'NaN', 2), "
        "(3, NULL, NULL, NULL, NULL, NULL, 3), "
        "(4, 'beta', TIMESTAMP '1969-12-31 23:59:59', TIMESTAMPTZ '1969-12-31 23:00:00+00', DATE '1969-12-31', 'NaN', 4), "
        "(5, 'be', TIMESTAMP '2024-03-01 10:00:00', TIMESTAMPTZ '2024-03-01 10:30:00+00', DATE '2024-03-01', -0.0, 5)",
        "INSERT INTO ns.parts VALUES (6, 'alpha', TIMESTAMP '2024-03-01 12:00:00', NULL, NULL, 'NaN', 6)",
        "DELETE FROM ns.parts WHERE id = 2",
        "UPDATE ns.parts SET n = 40 WHERE id = 4",
        "ALTER TABLE ns.parts SET PARTITIONED BY (month(d), cat)",
        "INSERT INTO ns.parts VALUES (7, 'gamma', TIMESTAMP '2025-01-01 00:00:00', TIMESTAMPTZ '2025-01-01 00:00:00+00', "
        "DATE '2025-01-01', 7.0, 7)",
        "DELETE FROM ns.parts WHERE id IN (1, 7)",
    ],
    "types": [
        "CREATE TABLE ns.types (id INTEGER, st STRUCT(a INTEGER, b VARCHAR, nest STRUCT(c DOUBLE)), "
        "l INTEGER[], m MAP(VARCHAR, BIGINT), dec DECIMAL(38, 10), small DECIMAL(4, 1), u UUID, b BLOB, "
        "ts TIMESTAMP, tstz TIMESTAMPTZ, d DATE, flag BOOLEAN, ls STRUCT(x INTEGER)[]) "
        "WITH ('format-version' = '3')",
        "INSERT INTO ns.types VALUES "
        "(1, {'a': 1, 'b': 'x', 'nest': {'c': 1.5}}, [1, 2, NULL], MAP {'k': 1, 'j': NULL}, "
        "1234567890123456789012345678.0123456789, -999.9, '0db3e2a8-9d1d-42b9-aa7b-74ebe558dceb', '\\x00\\xff'::BLOB, "
        "TIMESTAMP '2024-01-01 12:34:56.789012', TIMESTAMPTZ '2024-01-01 12:34:56.789012+02', DATE '0001-01-01', "
        "true, [{'x': 1}, NULL]), "
        "(2, NULL, [], MAP {}, NULL, 0.1, NULL, NULL, NULL, NULL, DATE '9999-12-31', NULL, NULL), "
        "(3, {'a': NULL, 'b': NULL, 'nest': NULL}, NULL, NULL, -0.0000000001, NULL, "
        "'ec5911be-b0a7-458c-8438-c9a3e53cffae', ''::BLOB, TIMESTAMP '1900-01-01 00:00:00', "
        "TIMESTAMPTZ '1900-01-01 00:00:00+00', NULL, false, [])",
        "UPDATE ns.types SET st = {'a': 9, 'b': 'y', 'nest': NULL} WHERE id = 2",
    ],
    "upgraded": [
        "CREATE TABLE ns.upgraded (id BIGINT, p VARCHAR) PARTITIONED BY (p) WITH ('format-version' = '2')",
        "INSERT INTO ns.upgraded SELECT i, CASE WHEN i % 2 = 0 THEN 'even' ELSE 'odd' END FROM range(8) t(i)",
        "DELETE FROM ns.upgraded WHERE id = 3",
        "UPDATE ns.upgraded SET id = id + 100 WHERE id = 4",
        "ALTER TABLE ns.upgraded SET ('format-version' = '3')",
        "INSERT INTO ns.upgraded VALUES (50, 'odd'), (51, NULL)",
        "DELETE FROM ns.upgraded WHERE id IN (5, 50)",
        "UPDATE ns.upgraded SET p = 'moved' WHERE id = 6",
    ],
    "maint": [
        "CREATE TABLE ns.maint (id BIGINT, g VARCHAR) PARTITIONED BY (g) WITH ('format-version' = '3')",
        "INSERT INTO ns.maint SELECT i, 'a' FROM range(3) t(i)",
        "INSERT INTO ns.maint SELECT i, 'a' FROM range(3, 6) t(i)",
        "INSERT INTO ns.maint SELECT i, 'b' FROM range(6, 9) t(i)",
        "DELETE FROM ns.maint WHERE id IN (1, 7)",
        "UPDATE ns.maint SET g = 'b' WHERE id = 2",
        "SELECT * FROM iceberg_rewrite_data_files('ns.maint', rewrite_all := true, dry_run := false)",
        "SELECT * FROM iceberg_rewrite_manifests('ns.maint', dry_run := false)",
        "INSERT INTO ns.maint VALUES (100, 'c')",
        "SELECT * FROM iceberg_expire_snapshots('ns.maint', older_than := now() + INTERVAL 1 DAY, "
        "retain_last := 4, dry_run := false)",
    ],
}


def newest_metadata(table_dir: Path) -> str:
    files = glob.glob(str(table_dir / "metadata" / "*.metadata.json"))
    return max(files, key=lambda p: int(os.path.basename(p).split("-")[0].lstrip("v").split(".")[0]))


def iceduck_snapshots(lake: Any, metadata: str) -> dict[str, list[dict[str, Any]]]:
    """Every snapshot of the table at `metadata`, as iceduck reads it with its lineage columns."""
    ids = [r[0] for r in lake.sql(f"SELECT snapshot_id FROM iceberg_snapshots('{metadata}')").fetchall()]
    out = {}
    for sid in ids:
        rel = lake.sql(f"SELECT * FROM iceberg_scan('{metadata}', snapshot_id := {sid}, row_lineage := true)")
        out[str(sid)] = [dict(zip(rel.columns, row, strict=True)) for row in rel.fetchall()]
    return out


@pytest.fixture(scope="module")
def written(reference: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """iceduck's tables, what iceduck reads of each snapshot, and what Spark reads of each."""
    root = tmp_path_factory.mktemp("java_reads_iceduck")
    ours: dict[str, dict[str, list[dict[str, Any]]]] = {}
    refused: dict[str, str] = {}
    tasks = []
    with iceduck.connect(str(root / "wh")) as lake:
        lake.sql("SET TimeZone = 'UTC'")
        lake.sql("CREATE SCHEMA ns")
        for name, statements in TABLES.items():
            try:
                for statement in statements:
                    lake.sql(statement).fetchall() if statement.startswith("SELECT") else lake.sql(statement)
            except Exception as e:  # a write iceduck refuses is a failure of that table's test
                refused[name] = f"{statement[:80]}: {e}"
                continue
            metadata = newest_metadata(root / "wh" / "ns" / name)
            ours[name] = iceduck_snapshots(lake, metadata)
            # Spark's defaults: its vectorized Parquet reader
            tasks.append({"kind": "read_all", "id": name, "path": metadata, "lineage": True})
    theirs = run_job(reference, tasks, str(root / "spark"))
    return {"ours": ours, "theirs": theirs, "refused": refused}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_java_reads_every_snapshot_with_equal_rows_and_lineage(written: dict[str, Any], table: str) -> None:
    assert table not in written["refused"], written["refused"].get(table)
    theirs = written["theirs"][table]
    assert "error" not in theirs, theirs.get("error")
    ours = written["ours"][table]
    assert sorted(theirs["rows"]) == sorted(ours)  # the same snapshots
    for sid, rows in ours.items():
        got = theirs["rows"][sid]
        assert "error" not in got, f"Spark refused snapshot {sid} of {table}: {got['error']}"
        assert rows_key(got["rows"]) == rows_key(rows), f"snapshot {sid} of {table}"


def test_lineage_is_compared(written: dict[str, Any]) -> None:
    """The comparison above covers lineage: rows carry non-null `_row_id` on iceduck's v3 tables."""
    evolve = written["ours"].get("evolve") or {}
    last = max(evolve.values(), key=len, default=[])
    assert last and all(plain(r)["_row_id"] is not None for r in last)
