"""Data files outside the table folder (issue 13, storage layouts): `write.data.path`, object-storage
hash-prefixed paths (`write.object-storage.enabled`) and several data locations, recorded as s3a://
paths the way Spark and Trino write them, on a table moved to local disk together with its bucket's
folders. Also the real Trino-era table whose data lies beside its folder (tests/conformance/test_more_conformance.py)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.register_files import FileToAdd, register_files

LOCATION = "s3a://lake-bucket/warehouse/db/events"
SCHEMA = [
    {"id": 1, "name": "id", "type": "long", "required": False},
    {"id": 2, "name": "s", "type": "string", "required": False},
]
# Recorded data paths: object storage under write.data.path, a second data location, the default one.
RECORDED = [
    "s3a://lake-bucket/data/0110/1011/0001/db/events/id_bucket=3/00000-0-a.parquet",
    "s3a://lake-bucket/archive/events/00001-0-b.parquet",
    f"{LOCATION}/data/00002-0-c.parquet",
]


def _write(path: Path, ids: range) -> FileToAdd:
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), metadata={"PARQUET:field_id": "1"}),
            pa.field("s", pa.string(), metadata={"PARQUET:field_id": "2"}),
        ]
    )
    pq.write_table(
        pa.table([pa.array(ids, pa.int64()), pa.array([f"r{i}" for i in ids])], schema=schema), path
    )
    return FileToAdd("", path, "PARQUET", len(ids))


def _bucket(root: Path) -> str:
    """The bucket copied to `root` as a whole; returns the table's metadata file."""
    files = []
    for k, recorded in enumerate(RECORDED):
        local = root / recorded.removeprefix("s3a://lake-bucket/")
        f = _write(local, range(k * 10, k * 10 + 10))
        files.append(FileToAdd(recorded, f.local_path, f.file_format, f.record_count))
    return register_files(
        root / "warehouse" / "db" / "events",
        SCHEMA,
        files,
        location=LOCATION,
        properties={"write.data.path": "s3a://lake-bucket/data", "write.object-storage.enabled": "true"},
    )


def test_files_outside_the_table_folder_are_read_on_the_moved_bucket(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    md = _bucket(tmp_path / "copy-of-lake-bucket")
    got = con.execute(
        f"SELECT id, s, _file FROM iceberg_scan('{md}', metadata_columns := true) ORDER BY id"
    ).fetchall()
    assert [(i, s) for i, s, _ in got] == [(i, f"r{i}") for i in range(30)]
    assert {f for *_, f in got} == set(RECORDED)  # _file is the path as recorded
    assert con.execute(f"SELECT count(*) FROM iceberg_scan('{md}', filter := 'id >= 25')").fetchall() == [
        (5,)
    ]


def test_a_table_moved_without_its_data_folders_names_the_missing_file(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    md = _bucket(tmp_path / "lake")
    # Only the table folder moved (to another parent name): data outside it cannot be found.
    moved = tmp_path / "elsewhere" / "events"
    moved.parent.mkdir()
    (tmp_path / "lake" / "warehouse" / "db" / "events").rename(moved)
    metadata = moved / "metadata" / Path(md).name
    with pytest.raises(duckdb.Error) as info:
        con.execute(f"SELECT * FROM iceberg_scan('{metadata}')").fetchall()
    message = str(info.value)
    assert f"{metadata}: data file not found: s3a://lake-bucket/" in message
    assert "(looked for it at " in message and "Errno" not in message


def test_a_missing_file_inside_the_table_folder_says_where_it_was_looked_for(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    md = _bucket(tmp_path / "lake")
    gone = tmp_path / "lake" / "warehouse" / "db" / "events" / "data" / "00002-0-c.parquet"
    gone.unlink()
    with pytest.raises(
        duckdb.Error, match=rf"data file not found: {RECORDED[2]} \(looked for it at {gone}\)"
    ):
        con.execute(f"SELECT * FROM iceberg_scan('{md}')").fetchall()
