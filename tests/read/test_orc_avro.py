"""ORC and Avro data files (issue 13): read by Iceberg field id through a Parquet copy with the same
rows in the same order (read/copies.py), so projection, type promotion, defaults, filters, row
lineage and positions behave as for Parquet. ORC as Trino/Hive write it: field ids in the
`iceberg.id` type attribute, or none at all (Hive, read by name as Java's ORC reader does); Avro with
`field-id` on every field. Truth: the rows written (and the real Trino tables, in
tests/conformance/test_more_conformance.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pytest

import iceduck
from tests.support.register_files import FileToAdd, register_files

ROWS = [
    {
        "id": i,
        "name": None if i % 5 == 0 else f"n{i}",
        "score": i / 8,
        "day": dt.date(2024, 1, 1) + dt.timedelta(days=i),
        "amount": Decimal(i * 101) / 100,
        "tags": [f"t{i}", "x"] if i % 3 else [],
        "loc": {"city": f"c{i % 4}", "zip": 1000 + i},
    }
    for i in range(50)
]
SCHEMA = [
    {"id": 1, "name": "id", "type": "long", "required": False},  # int in the files: promoted
    {"id": 2, "name": "name", "type": "string", "required": False},
    {"id": 3, "name": "score", "type": "double", "required": False},
    {"id": 4, "name": "day", "type": "date", "required": False},
    {"id": 5, "name": "amount", "type": "decimal(9, 2)", "required": False},
    {"id": 6, "name": "tags", "type": {"type": "list", "element-id": 8, "element": "string", "element-required": False}, "required": False},
    {"id": 7, "name": "loc", "type": {"type": "struct", "fields": [
        {"id": 9, "name": "city", "type": "string", "required": False},
        {"id": 10, "name": "zip", "type": "long", "required": False}]}, "required": False},
    {"id": 11, "name": "added", "type": "int", "required": False, "initial-default": 7, "write-default": 7},
]  # fmt: skip


def _meta(fid: int) -> dict[str, str]:
    return {"iceberg.id": str(fid)}


def _arrow(with_ids: bool) -> pa.Schema:
    m = _meta if with_ids else (lambda fid: None)
    return pa.schema(
        [
            pa.field("id", pa.int32(), metadata=m(1)),
            pa.field("name", pa.string(), metadata=m(2)),
            pa.field("score", pa.float64(), metadata=m(3)),
            pa.field("day", pa.date32(), metadata=m(4)),
            pa.field("amount", pa.decimal128(9, 2), metadata=m(5)),
            pa.field("tags", pa.list_(pa.field("element", pa.string(), metadata=m(8))), metadata=m(6)),
            pa.field(
                "loc",
                pa.struct(
                    [
                        pa.field("city", pa.string(), metadata=m(9)),
                        pa.field("zip", pa.int64(), metadata=m(10)),
                    ]
                ),
                metadata=m(7),
            ),
        ]
    )


@pytest.fixture
def con(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[duckdb.DuckDBPyConnection]:
    monkeypatch.setenv("ICEDUCK_CACHE_DIR", str(tmp_path / "cache"))
    c = duckdb.connect()
    iceduck.register(c)
    yield c
    c.close()


def _expected(extra: int | None = 7) -> list[tuple[Any, ...]]:
    return [(*r.values(), extra) for r in ROWS]


def _orc_table(tmp_path: Path, with_ids: bool) -> str:
    (tmp_path / "data").mkdir(exist_ok=True)
    path = tmp_path / "data" / ("ids.orc" if with_ids else "hive.orc")
    orc.write_table(pa.Table.from_pylist(ROWS, schema=_arrow(with_ids)), path, stripe_size=4096)
    assert (b"iceberg.id" in (orc.ORCFile(path).schema.field(0).metadata or {})) == with_ids
    return register_files(tmp_path, SCHEMA, [FileToAdd(str(path), path, "ORC", len(ROWS))])


def _avro_table(tmp_path: Path) -> str:
    (tmp_path / "data").mkdir(exist_ok=True)
    path = tmp_path / "data" / "f.avro"
    opt = lambda t: ["null", t]  # noqa: E731
    schema = {
        "type": "record",
        "name": "table",
        "fields": [
            {"name": "id", "type": opt("int"), "field-id": 1},
            {"name": "name", "type": opt("string"), "field-id": 2},
            {"name": "score", "type": opt("double"), "field-id": 3},
            {"name": "day", "type": opt({"type": "int", "logicalType": "date"}), "field-id": 4},
            {"name": "amount", "type": opt({"type": "fixed", "name": "d9", "size": 4, "logicalType": "decimal", "precision": 9, "scale": 2}), "field-id": 5},
            {"name": "tags", "type": opt({"type": "array", "items": opt("string"), "element-id": 8}), "field-id": 6},
            {"name": "loc", "type": opt({"type": "record", "name": "r7", "fields": [
                {"name": "city", "type": opt("string"), "field-id": 9},
                {"name": "zip", "type": opt("long"), "field-id": 10}]}), "field-id": 7},
        ],
    }  # fmt: skip
    with open(path, "wb") as f:
        fastavro.writer(f, fastavro.parse_schema(schema), ROWS)
    return register_files(tmp_path, SCHEMA, [FileToAdd(str(path), path, "AVRO", len(ROWS))])


@pytest.mark.parametrize("form", ["orc with iceberg.id", "orc without ids (Hive)", "avro"])
def test_rows_by_field_id_with_promotion_and_defaults(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, form: str
) -> None:
    md = _avro_table(tmp_path) if form == "avro" else _orc_table(tmp_path, form.startswith("orc with"))
    got = con.execute(f"SELECT * FROM iceberg_scan('{md}') ORDER BY id").fetchall()
    assert got == _expected()
    types = con.execute(f"SELECT column_type FROM (DESCRIBE SELECT * FROM iceberg_scan('{md}'))").fetchall()
    assert types[0] == ("BIGINT",)
    # Filters, projections, row lineage (first row id + position: rows keep their file order).
    assert con.execute(
        f"SELECT count(*) FROM iceberg_scan('{md}') WHERE score > 3 AND name IS NOT NULL"
    ).fetchall() == [(sum(1 for r in ROWS if r["score"] > 3 and r["name"] is not None),)]
    lineage = con.execute(
        f"SELECT id, _row_id FROM iceberg_scan('{md}', row_lineage := true) ORDER BY id"
    ).fetchall()
    assert lineage == [(r["id"], i) for i, r in enumerate(ROWS)]
    pos = con.execute(
        f"SELECT id, _pos FROM iceberg_scan('{md}', metadata_columns := true) ORDER BY id"
    ).fetchall()
    assert pos == [(r["id"], i) for i, r in enumerate(ROWS)]


def test_a_second_scan_reuses_the_copy(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    md = _orc_table(tmp_path, True)
    con.execute(f"SELECT count(*) FROM iceberg_scan('{md}')").fetchall()
    copies = list((tmp_path / "cache").rglob("*.parquet"))
    assert len(copies) == 1
    stamp = copies[0].stat().st_mtime_ns
    assert con.execute(f"SELECT count(*) FROM iceberg_scan('{md}')").fetchall() == [(len(ROWS),)]
    assert copies[0].stat().st_mtime_ns == stamp


def test_a_damaged_orc_file_names_the_file(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    md = _orc_table(tmp_path, True)
    path = tmp_path / "data" / "ids.orc"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(duckdb.Error, match=r"ids\.orc: cannot read ORC file"):
        con.execute(f"SELECT * FROM iceberg_scan('{md}')").fetchall()
