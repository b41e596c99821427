"""Variant columns (issue 13, class 3) as engines write them: Parquet's VARIANT-annotated group
(Iceberg >= 1.10.1, DuckDB; shredded into a typed_value where the writer chose to), and the same
`{metadata, value[, typed_value]}` group without the annotation (Spark 4.0, Iceberg 1.10.0), which
DuckDB alone returns as a raw struct. Every form must read as DuckDB VARIANT values equal, with
their types, to the values written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import iceduck
from tests.support.register_files import FileToAdd, register_files

VALUES = """
SELECT i AS id, CASE i
    WHEN 0 THEN 42::VARIANT
    WHEN 1 THEN 'hello'::VARIANT
    WHEN 2 THEN {'a': 1, 'b': [true, false], 'c': 2.5::DECIMAL(4, 2), 'd': {'e': 'nested'}}::VARIANT
    WHEN 3 THEN 'null'::JSON::VARIANT
    WHEN 4 THEN DATE '2024-01-02'::VARIANT
    WHEN 5 THEN TIMESTAMPTZ '2024-05-06 07:08:09.123456+00'::VARIANT
    WHEN 6 THEN [1, 2, 3]::VARIANT
    WHEN 7 THEN 1.5::DOUBLE::VARIANT
    WHEN 8 THEN '\\xAA\\xBB'::BLOB::VARIANT
    ELSE 7::INTEGER::VARIANT END AS v
FROM range(12) t(i)"""
SCHEMA = [
    {"id": 1, "name": "id", "type": "long", "required": False},
    {"id": 2, "name": "v", "type": "variant", "required": False},
]


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    iceduck.register(c)
    c.execute("SET TimeZone = 'UTC'")
    yield c
    c.close()


def _truth(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    return con.execute(f"SELECT id, v::VARCHAR, variant_typeof(v) FROM ({VALUES}) ORDER BY id").fetchall()


def _with_ids(table: pa.Table) -> pa.Table:
    fields = [
        pa.field("id", pa.int64(), metadata={"PARQUET:field_id": "1"}),
        pa.field("v", table.schema.field("v").type, metadata={"PARQUET:field_id": "2"}),
    ]
    return pa.table(table.columns, schema=pa.schema(fields))


def _table(tmp_path: Path, name: str, write: Any) -> str:
    folder = tmp_path / name
    (folder / "data").mkdir(parents=True)
    path = folder / "data" / f"{name}.parquet"
    write(path)
    assert pq.ParquetFile(path).metadata.num_rows == 12
    return register_files(folder, SCHEMA, [FileToAdd(str(path), path, "PARQUET", 12)])


def _annotated(con: duckdb.DuckDBPyConnection) -> Any:
    def write(path: Path) -> None:
        con.execute(f"COPY ({VALUES}) TO '{path}' (FIELD_IDS {{id: 1, v: 2}})")
        assert "(Variant(1))" in str(pq.ParquetFile(path).schema)

    return write


def _spark4(con: duckdb.DuckDBPyConnection) -> Any:
    # Spark 4.0: an unannotated group of two binaries, the spec's encoding in them.
    def write(path: Path) -> None:
        raw = con.sql(
            f"SELECT id, variant_to_parquet_variant(v)::STRUCT(metadata BLOB, value BLOB) AS v FROM ({VALUES})"
        ).to_arrow_table()
        pq.write_table(_with_ids(raw), path)
        assert "Variant" not in str(pq.ParquetFile(path).schema)

    return write


def _shredded_plain(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> Any:
    # The annotated file's columns (DuckDB shreds integers into typed_value) without the annotation.
    def write(path: Path) -> None:
        src = tmp_path / "src.parquet"
        con.execute(f"COPY (SELECT * FROM ({VALUES}) ) TO '{src}'")
        table = pq.read_table(src)
        assert "typed_value" in str(table.schema)
        pq.write_table(_with_ids(table), path)
        assert "Variant" not in str(pq.ParquetFile(path).schema)

    return write


@pytest.mark.parametrize("form", ["annotated", "spark4", "shredded_plain"])
def test_variant_values_read_with_their_types(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, form: str
) -> None:
    writers = {
        "annotated": _annotated(con),
        "spark4": _spark4(con),
        "shredded_plain": _shredded_plain(con, tmp_path),
    }
    md = _table(tmp_path, form, writers[form])
    got = con.execute(
        f"SELECT id, v::VARCHAR, variant_typeof(v) FROM iceberg_scan('{md}') ORDER BY id"
    ).fetchall()
    assert got == _truth(con)
    assert con.execute(f"SELECT typeof(v) FROM iceberg_scan('{md}') LIMIT 1").fetchall() == [("VARIANT",)]
    # Extraction works on the decoded values.
    assert con.execute(
        f"SELECT variant_extract(v, 'd')::VARCHAR FROM iceberg_scan('{md}') WHERE id = 2"
    ).fetchall() == [("{'e': nested}",)]


def test_shredded_objects_without_the_annotation_are_refused(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    def write(path: Path) -> None:
        typed = pa.struct([("a", pa.struct([("value", pa.binary()), ("typed_value", pa.int64())]))])
        group = pa.struct([("metadata", pa.binary()), ("value", pa.binary()), ("typed_value", typed)])
        rows = [
            {
                "metadata": b"\x01\x01\x00\x01a",
                "value": None,
                "typed_value": {"a": {"value": None, "typed_value": i}},
            }
            for i in range(12)
        ]
        pq.write_table(
            _with_ids(pa.table({"id": pa.array(range(12), pa.int64()), "v": pa.array(rows, group)})), path
        )

    md = _table(tmp_path, "objects", write)
    with pytest.raises(
        duckdb.Error,
        match=r"objects\.parquet: shredded variant objects and arrays without the Parquet VARIANT annotation",
    ):
        con.execute(f"SELECT * FROM iceberg_scan('{md}')").fetchall()
