"""DuckDB's Parquet decoding errors name no file ("TProtocolException: Invalid data", "Out of
buffer"); through `Lake.sql` and the shell the damaged file is named (iceduck/duckdb/damage.py)."""

from __future__ import annotations

import io
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

import iceduck
from iceduck.duckdb.damage import LakeRelation, named_damage
from iceduck.errors import CorruptFileError
from iceduck.lake import Lake, connect
from iceduck.shell import Shell


def _table(tmp_path: Path) -> tuple[Lake, Path, list[Path]]:
    lake = connect(tmp_path / "wh")
    lake.sql("CREATE SCHEMA s")
    lake.sql("CREATE TABLE s.t (id BIGINT, v VARCHAR)")
    for k in range(3):  # three data files, one damaged below
        lake.sql(f"INSERT INTO s.t SELECT i, 'v' || i FROM range({k * 100}, {k * 100 + 100}) t(i)")
    handle = lake.table("s.t")
    files = sorted(Path(handle.location).rglob("*.parquet"))
    return lake, Path(str(handle.metadata_location)), files


def _page_flip(path: Path) -> bytes | None:
    """A byte flip inside a column chunk's pages that DuckDB reports with an untyped error (no file
    named), found by trying the flips in order: the bytes as damage leaves them."""
    original = path.read_bytes()
    meta = pq.ParquetFile(io.BytesIO(original)).metadata
    col = meta.row_group(0).column(0)
    start = col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset
    con = duckdb.connect()
    for at in range(start, start + min(col.total_compressed_size, 64)):
        for xor in (0xFF, 0x80, 0x01):
            damaged = original[:at] + bytes([original[at] ^ xor]) + original[at + 1 :]
            path.write_bytes(damaged)
            try:
                con.sql(f"SELECT * FROM read_parquet('{path}')").fetchall()
            except duckdb.Error as e:
                if type(e) is duckdb.Error and path.name not in str(e):
                    return damaged
    path.write_bytes(original)
    return None


def test_lake_sql_names_the_file_duckdb_could_not_decode(tmp_path: Path) -> None:
    lake, meta, files = _table(tmp_path)
    damaged = files[1]
    if _page_flip(damaged) is None:
        pytest.skip("no flip of the first page gives an untyped DuckDB error in this DuckDB build")
    # a plain connection: DuckDB's message, which names no file (no Python runs on a failed query)
    plain = duckdb.connect()
    iceduck.register(plain)
    with pytest.raises(duckdb.Error) as raw:
        plain.sql(f"SELECT * FROM iceberg_scan('{meta}')").fetchall()
    assert damaged.name not in str(raw.value)
    # the front door: one line naming the damaged file, and only it
    rel = lake.sql("SELECT * FROM lake.s.t")
    assert isinstance(rel, LakeRelation) and isinstance(rel, duckdb.DuckDBPyRelation)
    with pytest.raises(CorruptFileError) as named:
        rel.fetchall()
    message = str(named.value)
    assert message.startswith(f"{damaged}: damaged Parquet file: ") and "\n" not in message
    assert all(f.name not in message for f in files if f != damaged)
    with pytest.raises(CorruptFileError, match=damaged.name):
        lake.sql(f"SELECT count(*), sum(id) FROM iceberg_scan('{meta}')").fetchall()  # type: ignore[union-attr]
    # the shell prints that line
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(lake, out=out, err=err)
    shell.run_sql("SELECT * FROM lake.s.t;")
    assert damaged.name in err.getvalue() and "Traceback" not in err.getvalue()
    lake.close()


def test_an_error_about_the_statement_is_left_alone(tmp_path: Path) -> None:
    lake, _, _ = _table(tmp_path)
    with pytest.raises(duckdb.Error) as info:
        lake.sql("SELECT CAST(v AS INTEGER) FROM lake.s.t").fetchall()  # type: ignore[union-attr]
    assert not isinstance(info.value, CorruptFileError)
    assert named_damage(info.value) is None
    # intact files are never named, even for an untyped DuckDB error
    assert named_damage(duckdb.Error("TProtocolException: Invalid data")) is None
    lake.close()
