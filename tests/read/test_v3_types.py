"""v3 types in scans (issue 13): timestamp_ns / timestamptz_ns exact to the nanosecond (also in
filters), `unknown` always NULL (even where a file holds a column with its id), geometry as DuckDB
GEOMETRY and geography as BLOB, both WKB, with the CRS in iceberg_schemas' type text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import iceduck
from tests.support.register_files import FileToAdd, register_files

POINT_1_2 = bytes.fromhex("0101000000000000000000f03f0000000000000040")  # WKB of POINT(1 2)
NS = [1_700_000_000_123_456_789, -1, None]


def _field(name: str, t: pa.DataType, fid: int) -> pa.Field:
    return pa.field(name, t, metadata={"PARQUET:field_id": str(fid)})


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    iceduck.register(c)
    c.execute("SET TimeZone = 'UTC'")
    yield c
    c.close()


@pytest.fixture
def table(tmp_path: Path) -> str:
    schema = pa.schema(
        [
            _field("id", pa.int64(), 1),
            _field("tsn", pa.timestamp("ns"), 2),
            _field("tstzn", pa.timestamp("ns", tz="UTC"), 3),
            _field("g", pa.binary(), 4),
            _field("geo", pa.binary(), 5),
            _field("u", pa.int32(), 6),  # a writer that stored the unknown column anyway
        ]
    )
    data = pa.table(
        [
            pa.array([1, 2, 3], pa.int64()),
            pa.array(NS, pa.timestamp("ns")),
            pa.array(NS, pa.timestamp("ns", tz="UTC")),
            pa.array([POINT_1_2, None, POINT_1_2], pa.binary()),
            pa.array([POINT_1_2, POINT_1_2, None], pa.binary()),
            pa.array([5, 6, 7], pa.int32()),
        ],
        schema=schema,
    )
    (tmp_path / "data").mkdir()
    path = tmp_path / "data" / "types.parquet"
    pq.write_table(data, path)
    fields = [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "tsn", "type": "timestamp_ns", "required": False},
        {"id": 3, "name": "tstzn", "type": "timestamptz_ns", "required": False},
        {"id": 4, "name": "g", "type": "geometry(EPSG:4326)", "required": False},
        {"id": 5, "name": "geo", "type": "geography(OGC:CRS84, karney)", "required": False},
        {"id": 6, "name": "u", "type": "unknown", "required": False},
    ]
    return register_files(tmp_path, fields, [FileToAdd(str(path), path, "PARQUET", 3)])


def test_types_and_values(con: duckdb.DuckDBPyConnection, table: str) -> None:
    types = con.execute(
        f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM iceberg_scan('{table}'))"
    ).fetchall()
    assert types == [
        ("id", "BIGINT"),
        ("tsn", "TIMESTAMP_NS"),
        ("tstzn", "TIMESTAMPTZ_NS"),
        ("g", "GEOMETRY"),
        ("geo", "BLOB"),
        ("u", "INTEGER"),
    ]
    rows = con.execute(
        f"SELECT id, epoch_ns(tsn), epoch_ns(tstzn), g::BLOB, geo, u FROM iceberg_scan('{table}') ORDER BY id"
    ).fetchall()
    assert rows == [
        (1, NS[0], NS[0], POINT_1_2, POINT_1_2, None),
        (2, -1, -1, None, POINT_1_2, None),
        (3, None, None, POINT_1_2, None, None),
    ]


def test_nanosecond_filters_are_exact(con: duckdb.DuckDBPyConnection, table: str) -> None:
    exact = "'2023-11-14 22:13:20.123456789'::TIMESTAMP_NS"
    one_ns_later = "'2023-11-14 22:13:20.12345679'::TIMESTAMP_NS"
    for literal, expected in ((exact, [(1,)]), (one_ns_later, [])):
        got = con.execute(f"SELECT id FROM iceberg_scan('{table}') WHERE tsn = {literal}").fetchall()
        assert got == expected
        pushed = con.execute(
            f"SELECT id FROM iceberg_scan('{table}', filter := $$tsn = {literal}$$)"
        ).fetchall()
        assert pushed == expected


def test_the_crs_is_in_iceberg_schemas(con: duckdb.DuckDBPyConnection, table: str) -> None:
    got = con.execute(
        f"SELECT name, type FROM iceberg_schemas('{table}') WHERE name IN ('g', 'geo')"
    ).fetchall()
    assert sorted(got) == [("g", "geometry(EPSG:4326)"), ("geo", "geography(OGC:CRS84, karney)")]
