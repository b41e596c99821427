"""Iceberg `int` columns are written as Java writes them: plain INT32, no INT(32) annotation.

Java Iceberg's vectorized reader (Spark's default) fails on an INT32 column annotated INT(32) once
the column is promoted to long; tests/interop/test_java_reads_iceduck.py checks that with Spark.
Here: the footer iceduck leaves (DuckDB's own `parquet_schema`), the rows (DuckDB and pyarrow read
the same values), the file size recorded, and the footer rewrite itself on edge cases.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

import iceduck
from iceduck.write.parquet_footer import FooterError, bare_int32_footer, strip_int32_annotations


def _schema(con: duckdb.DuckDBPyConnection, path: str) -> dict[str, tuple[str | None, str | None]]:
    rows = con.execute(f"SELECT name, type, converted_type FROM parquet_schema('{path}')").fetchall()
    return {name: (ptype, converted) for name, ptype, converted in rows}


def test_iceduck_writes_int_columns_as_bare_int32(tmp_path: Path) -> None:
    with iceduck.connect(str(tmp_path / "wh")) as lake:
        lake.sql("CREATE SCHEMA ns")
        lake.sql(
            "CREATE TABLE ns.t (id INTEGER, s STRUCT(a INTEGER, b SMALLINT), l INTEGER[], "
            "m MAP(INTEGER, INTEGER), big BIGINT, d DATE, dec DECIMAL(9, 2)) WITH ('format-version' = '3')"
        )
        lake.sql(
            "INSERT INTO ns.t SELECT i, {'a': -i, 'b': i}, [i, NULL], MAP {i: i * 2}, i * 3000000000, "
            "DATE '2024-01-01' + i::INTEGER, i * 1.5 FROM range(-3, 200) t(i)"
        )
        want = lake.sql("SELECT * FROM lake.ns.t ORDER BY id").fetchall()
        assert len(want) == 203 and want[0][0] == -3
        files = lake.sql("SELECT file_path, file_size_in_bytes FROM iceberg_files('ns.t')").fetchall()
        assert len(files) == 1
        path, size = files[0]
        assert size == os.path.getsize(path)  # the manifest records the rewritten size
        con = duckdb.connect()
        schema = _schema(con, path)
        for column in ("id", "a", "element", "key", "value"):
            assert schema[column] == ("INT32", None), column  # bare, as Java writes `int`
        # Iceberg has no 16-bit int: SMALLINT is written as `int` too
        assert schema["b"] == ("INT32", None)
        assert schema["big"][0] == "INT64" and schema["d"] == ("INT32", "DATE")
        assert schema["dec"] == ("INT32", "DECIMAL")  # other INT32 annotations stay
        raw = con.execute(f"SELECT id, s, l, big, d FROM '{path}' ORDER BY id").fetchall()
        assert raw == [(r[0], r[1], r[2], r[4], r[5]) for r in want]
        # pyarrow reads the bare INT32 as int32
        assert pq.read_table(path).column("id").type.bit_width == 32


def test_the_rewrite_keeps_data_pages_and_statistics(tmp_path: Path) -> None:
    con = duckdb.connect()
    path = str(tmp_path / "f.parquet")
    con.execute(
        f"COPY (SELECT i::INTEGER AS a, i::SMALLINT AS s, 'x' || i AS t, i::BIGINT AS b FROM range(5000) t(i)) "
        f"TO '{path}' (FORMAT parquet, FIELD_IDS {{a: 1, s: 2, t: 3, b: 4}}, ROW_GROUP_SIZE 1000)"
    )
    before = con.execute(f"SELECT * FROM '{path}'").fetchall()
    stats = con.execute(
        f"SELECT stats_min, stats_max FROM parquet_metadata('{path}') ORDER BY ALL"
    ).fetchall()
    size = os.path.getsize(path)
    new = strip_int32_annotations(path)
    assert new == os.path.getsize(path) < size
    assert _schema(con, path)["a"] == ("INT32", None)
    assert _schema(con, path)["s"] == ("INT32", "INT_16")  # only INT(32) goes
    assert con.execute(f"SELECT * FROM '{path}'").fetchall() == before
    assert (
        con.execute(f"SELECT stats_min, stats_max FROM parquet_metadata('{path}') ORDER BY ALL").fetchall()
        == stats
    )
    assert pq.ParquetFile(path).metadata.num_row_groups > 1
    assert strip_int32_annotations(path) == new  # nothing left to do: unchanged


def test_footer_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1" + b"\x00" * 10 + (200).to_bytes(4, "little") + b"PAR1")
    with pytest.raises(FooterError, match=r"bad\.parquet"):
        strip_int32_annotations(str(bad))
    assert bare_int32_footer(b"\x00") is None  # an empty struct: no schema, nothing to change
