"""A table whose data lives in folders beside it (`write.data.path` elsewhere; Java 0.13 v1 tables with
`_data`, `_data01` folders next to the table folder), recorded as plain local paths, read after the
whole tree moved: each file is found at the one place its folder moved to, as on remote storage.
Never a guess: a file still where it was recorded is read there, and a file at neither place is
refused naming the recorded path."""

from __future__ import annotations

import glob
import shutil
from pathlib import Path

import pytest

import iceduck
from iceduck.io.paths import PathResolver


def _write(root: Path) -> str:
    with iceduck.connect(str(root / "wh")) as lake:
        lake.sql("CREATE SCHEMA ns")
        data = root / "wh" / "ns" / "t_data01"
        lake.sql(f"CREATE TABLE ns.t (id BIGINT) WITH ('format-version' = '1', 'write.data.path' = '{data}')")
        lake.sql("INSERT INTO ns.t VALUES (1), (2)")
        lake.sql(f"ALTER TABLE ns.t SET ('write.data.path' = '{root / 'wh' / 'ns' / '_data'}')")
        lake.sql("INSERT INTO ns.t VALUES (3)")
    files = glob.glob(str(root / "wh" / "ns" / "t" / "metadata" / "*.metadata.json"))
    assert glob.glob(str(root / "wh" / "ns" / "t_data01" / "*.parquet"))  # beside the table folder
    return max(files)


def test_moved_table_finds_sibling_data_folders(tmp_path: Path) -> None:
    metadata = _write(tmp_path / "old")
    shutil.move(tmp_path / "old", tmp_path / "new")
    moved = metadata.replace(str(tmp_path / "old"), str(tmp_path / "new"))
    with iceduck.connect(str(tmp_path / "other")) as lake:
        rows = lake.sql(f"SELECT id FROM iceberg_scan('{moved}') ORDER BY id").fetchall()
    assert rows == [(1,), (2,), (3,)]


def test_sibling_folder_missing_is_refused_naming_the_recorded_path(tmp_path: Path) -> None:
    metadata = _write(tmp_path / "old")
    shutil.move(tmp_path / "old", tmp_path / "new")
    shutil.rmtree(tmp_path / "new" / "wh" / "ns" / "t_data01")
    moved = metadata.replace(str(tmp_path / "old"), str(tmp_path / "new"))
    with (
        iceduck.connect(str(tmp_path / "other")) as lake,
        pytest.raises(Exception, match=r"data file not found: \S*/old/wh/ns/t_data01"),
    ):
        lake.sql(f"SELECT id FROM iceberg_scan('{moved}')").fetchall()


def test_local_beside_is_one_exact_mapping() -> None:
    r = PathResolver("/old/wh/ns/t", "/new/place/wh/ns/t")
    assert r.local_beside("/old/wh/ns/t_data01/a.parquet") == "/new/place/wh/ns/t_data01/a.parquet"
    assert r.local_beside("file:///old/wh/ns/_data/x/a.parquet") == "/new/place/wh/ns/_data/x/a.parquet"
    assert r.local_beside("/old/wh/ns/t/data/a.parquet") is None  # under the location: rule 1
    # the actual location does not end with the folders below the shared one: no mapping
    assert PathResolver("/old/wh/ns/t", "/new/t2").local_beside("/old/wh/ns/_data/a.parquet") is None
    assert PathResolver("/old/wh/ns/t", "/old/wh/ns/t").local_beside("/old/wh/ns/_data/a.parquet") is None
    assert r.local_beside("s3://b/old/wh/ns/_data/a.parquet") is None  # not local


def test_a_file_still_where_it_was_recorded_is_read_there(tmp_path: Path) -> None:
    metadata = _write(tmp_path / "old")
    shutil.copytree(tmp_path / "old", tmp_path / "new")
    shutil.rmtree(tmp_path / "new" / "wh" / "ns" / "t_data01")  # the copy lacks it; the original has it
    moved = metadata.replace(str(tmp_path / "old"), str(tmp_path / "new"))
    with iceduck.connect(str(tmp_path / "other")) as lake:
        rows = lake.sql(
            f"SELECT id, _file FROM iceberg_scan('{moved}', metadata_columns := true) ORDER BY id"
        )
        got = rows.fetchall()
    assert [r[0] for r in got] == [1, 2, 3]
    assert str(tmp_path / "old" / "wh" / "ns" / "t_data01") in got[0][1]
