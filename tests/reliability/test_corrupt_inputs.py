"""Damaged tables give one clear error naming the file and the problem, through the SQL functions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

TABLE = "duckdb-iceberg/data/persistent/hive_partitioned_table"


@pytest.fixture
def table_copy(conformance: Path, tmp_path: Path) -> Path:
    """A private copy of a small two-snapshot table (relative locations resolve against the copy)."""
    dest = tmp_path / "hive_partitioned_table"
    shutil.copytree(conformance / TABLE, dest)
    return dest


def _current_metadata(table: Path) -> Path:
    return table / "metadata" / "v4.metadata.json"


def _first_manifest(con: duckdb.DuckDBPyConnection, table: Path) -> Path:
    (path,) = con.sql(f"SELECT path FROM iceberg_manifests('{table}') LIMIT 1").fetchall()[0]
    return table / path.split("hive_partitioned_table/", 1)[1]


def test_format_version_4_is_refused(con: duckdb.DuckDBPyConnection, table_copy: Path) -> None:
    meta = _current_metadata(table_copy)
    doc = json.loads(meta.read_text())
    doc["format-version"] = 4
    meta.write_text(json.dumps(doc))
    with pytest.raises(duckdb.Error, match=r"unsupported format-version 4 in .*v4\.metadata\.json"):
        con.sql(f"SELECT * FROM iceberg_snapshots('{meta}')").fetchall()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("summary", {"operation": "append", "added-records": 3}, "'summary' must be a map of strings"),
        ("sequence-number", 1.5, "'sequence-number' must be an integer"),
        ("manifest-list", None, "missing 'manifest-list'"),
    ],
)
def test_a_damaged_older_snapshot_fails_every_snapshot_listing(
    con: duckdb.DuckDBPyConnection, table_copy: Path, key: str, value: object, message: str
) -> None:
    # iceberg_snapshots reads snapshots' fields straight from the JSON; every snapshot is still
    # checked as parsing checks it, whichever columns the query reads (no row from a snapshot that
    # cannot be interpreted exactly), and the error is one line naming the file.
    meta = _current_metadata(table_copy)
    doc = json.loads(meta.read_text())
    (older,) = [s for s in doc["snapshots"] if s["snapshot-id"] != doc["current-snapshot-id"]]
    older[key] = value
    meta.write_text(json.dumps(doc))
    for columns in ("snapshot_id", "count(*)", "sequence_number, committed_at", "*"):
        with pytest.raises(duckdb.Error) as info:
            con.sql(f"SELECT {columns} FROM iceberg_snapshots('{meta}')").fetchall()
        text = str(info.value)
        assert message in text and str(meta) in text and "\n" not in text.strip(), text
        assert "__iceduck" not in text and "Traceback" not in text


def test_truncated_manifest_names_the_manifest(con: duckdb.DuckDBPyConnection, table_copy: Path) -> None:
    manifest = _first_manifest(con, table_copy)
    data = manifest.read_bytes()
    manifest.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(duckdb.Error, match=rf"{manifest.name}.*(truncated|corrupt)"):
        con.sql(f"SELECT * FROM iceberg_files('{table_copy}')").fetchall()


def test_missing_manifest_list_names_the_file(con: duckdb.DuckDBPyConnection, table_copy: Path) -> None:
    (mlist,) = con.sql(f"SELECT manifest_list FROM iceberg_snapshots('{table_copy}') WHERE is_current").fetchall()[0]
    real = table_copy / mlist.split("hive_partitioned_table/", 1)[1]
    real.unlink()
    with pytest.raises(duckdb.Error, match=rf"manifest list not found: .*{real.name}"):
        con.sql(f"SELECT * FROM iceberg_files('{table_copy}')").fetchall()
    # metadata-only functions still work: the metadata file itself is intact
    assert len(con.sql(f"SELECT * FROM iceberg_snapshots('{table_copy}')").fetchall()) == 2


def test_missing_table_says_what_was_tried(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    with pytest.raises(duckdb.Error, match="nope"):
        con.sql(f"SELECT * FROM iceberg_snapshots('{tmp_path / 'nope'}')").fetchall()


def test_moved_table_reads_from_its_new_place(con: duckdb.DuckDBPyConnection, table_copy: Path) -> None:
    # The copy's metadata records the corpus' relative location; every file resolves inside the copy.
    rows = con.sql(f"SELECT sum(record_count), count(*) FROM iceberg_files('{table_copy}')").fetchall()
    assert rows == [(6, 6)]
