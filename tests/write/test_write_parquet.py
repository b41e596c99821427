"""Data files written through DuckDB's COPY (iceduck.write.parquet): field ids, metrics, file sizes,
partition fan-out, sort order, required columns.

Independent truth: the Parquet footers read by pyarrow, values recomputed with pyarrow.compute from
the rows read back, PyIceberg 0.12's metrics computed from the same footers, and the spec's
truncation rules worked by hand.
"""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.schema import Schema as PySchema

from iceduck.errors import ValidationError
from iceduck.spec.partitioning import UNPARTITIONED, PartitionField, PartitionSpec
from iceduck.spec.sorting import UNSORTED, NullOrder, SortDirection, SortField, SortOrder
from iceduck.spec.transforms import IDENTITY, parse_transform
from iceduck.spec.types import NestedField, Schema, schema_to_json
from iceduck.write.parquet import WriteTarget, prepare_connection, write_data_files
from iceduck.write.types import schema_from_arrow, schema_from_columns


@pytest.fixture
def con() -> Any:
    c = duckdb.connect()
    prepare_connection(c)
    yield c
    c.close()


def _field_ids(path: str) -> dict[str, int]:
    """Parquet column path -> field id, from the footer's schema (pyarrow)."""
    schema = pq.read_schema(path)
    out: dict[str, int] = {}

    def walk(f: pa.Field, prefix: str) -> None:
        name = f"{prefix}{f.name}"
        raw = (f.metadata or {}).get(b"PARQUET:field_id")
        if raw is not None:
            out[name] = int(raw)
        t = f.type
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(t.field(i), name + ".")
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(t.value_field, name + ".")
        elif pa.types.is_map(t):
            walk(t.key_field, name + ".")
            walk(t.item_field, name + ".")

    for f in schema:
        walk(f, "")
    return out


NESTED = "SELECT i::BIGINT AS id, {'a': i::INTEGER, 'b': 'x' || i} AS st, [i, i + 1] AS l, MAP {'k' || (i % 3): i::DOUBLE} AS m FROM range(50) t(i)"


def test_field_ids_are_written_for_nested_columns(con: Any, tmp_path: Path) -> None:
    schema = schema_from_columns(
        con,
        [
            ("id", "BIGINT"),
            ("st", "STRUCT(a INTEGER, b VARCHAR)"),
            ("l", "BIGINT[]"),
            ("m", "MAP(VARCHAR, DOUBLE)"),
        ],
    )
    (f,) = write_data_files(con, NESTED, WriteTarget(str(tmp_path), schema, UNPARTITIONED, UNSORTED))
    expected = {path: field.id for field, path in schema.walk()}
    got = _field_ids(f.file_path)
    # pyarrow names list elements "element" and map entries "key"/"value", as Iceberg does
    assert got == {k: v for k, v in expected.items()}
    assert f.record_count == 50
    assert f.file_size_in_bytes == os.path.getsize(f.file_path)
    # bounds only for primitives outside lists and maps; counts for every leaf
    st_a = schema.field_by_name("st.a").id
    elem = schema.field_by_name("l.element").id
    key = schema.field_by_name("m.key").id
    assert struct.unpack("<i", f.lower_bounds[st_a])[0] == 0
    assert struct.unpack("<i", f.upper_bounds[st_a])[0] == 49
    assert elem not in f.lower_bounds and key not in f.upper_bounds
    assert f.value_counts[elem] == 100 and f.null_value_counts[elem] == 0
    assert set(f.column_sizes) == {
        fid for fid in expected.values() if schema.find_field(fid).type.is_primitive
    }


def _iceberg_schema_json(schema: Schema) -> str:
    return json.dumps(schema_to_json(schema))


MIXED = """
SELECT i::BIGINT AS id,
       CASE WHEN i % 10 = 0 THEN NULL ELSE 'name-' || lpad(i::VARCHAR, 4, '0') END AS name,
       CASE WHEN i % 7 = 0 THEN 'nan'::DOUBLE WHEN i % 11 = 0 THEN NULL ELSE i / 3 END AS x,
       (i % 5 - 2)::FLOAT AS f,
       DATE '2020-01-01' + i::INTEGER AS d,
       TIMESTAMPTZ '2024-03-01 00:00:00+00' + to_minutes(i) AS ts,
       (i * 1.25)::DECIMAL(12, 2) AS amount,
       i % 2 = 0 AS flag,
       ('\\x00' || i::VARCHAR)::BLOB AS raw
FROM range(1000) t(i)
"""


def test_metrics_match_the_data_and_pyiceberg(con: Any, tmp_path: Path) -> None:
    schema = schema_from_columns(
        con,
        [("id", "BIGINT"), ("name", "VARCHAR"), ("x", "DOUBLE"), ("f", "FLOAT"), ("d", "DATE"), ("ts", "TIMESTAMPTZ"),
         ("amount", "DECIMAL(12, 2)"), ("flag", "BOOLEAN"), ("raw", "BLOB")],
    )  # fmt: skip
    (f,) = write_data_files(con, MIXED, WriteTarget(str(tmp_path), schema, UNPARTITIONED, UNSORTED))
    data = pq.read_table(f.file_path)
    ids = {fld.name: fld.id for fld in schema.fields}
    for name, fid in ids.items():
        column = data.column(name)
        assert f.value_counts[fid] == len(column)
        assert f.null_value_counts[fid] == column.null_count
    x = data.column("x")
    assert f.nan_value_counts[ids["x"]] == pc.sum(pc.is_nan(x)).as_py()
    assert f.nan_value_counts[ids["f"]] == 0
    finite = pc.filter(x, pc.invert(pc.is_nan(x)))
    assert struct.unpack("<d", f.lower_bounds[ids["x"]])[0] == pc.min(finite).as_py()
    assert struct.unpack("<d", f.upper_bounds[ids["x"]])[0] == pc.max(finite).as_py()
    assert struct.unpack("<q", f.lower_bounds[ids["id"]])[0] == 0
    assert struct.unpack("<q", f.upper_bounds[ids["id"]])[0] == 999
    assert f.lower_bounds[ids["name"]] == b"name-0001"
    assert f.upper_bounds[ids["name"]] == b"name-0999"
    assert struct.unpack("<i", f.lower_bounds[ids["d"]])[0] == 18262  # 2020-01-01
    assert f.lower_bounds[ids["flag"]] == b"\x00" and f.upper_bounds[ids["flag"]] == b"\x01"
    assert int.from_bytes(f.upper_bounds[ids["amount"]], "big", signed=True) == 124875  # 1248.75
    assert f.lower_bounds[ids["raw"]] == b"\x000"
    # -0.0 precedes 0.0: a zero lower bound is written as -0.0 (f holds -2.0 .. 2.0, no zero at the bounds)
    assert struct.unpack("<f", f.lower_bounds[ids["f"]])[0] == -2.0

    # PyIceberg's metrics from the same footer agree where both have them (it computes no NaN counts)
    py_schema = PySchema.model_validate_json(_iceberg_schema_json(schema))
    stats = data_file_statistics_from_parquet_metadata(
        pq.read_metadata(f.file_path),
        compute_statistics_plan(py_schema, {}),
        parquet_path_to_id_mapping(py_schema),
    )
    theirs = stats.to_serialized_dict()
    assert theirs["record_count"] == f.record_count
    assert theirs["value_counts"] == dict(f.value_counts)
    assert theirs["null_value_counts"] == dict(f.null_value_counts)
    for fid in (ids["id"], ids["name"], ids["d"], ids["ts"], ids["amount"], ids["flag"], ids["raw"]):
        assert theirs["lower_bounds"][fid] == f.lower_bounds[fid], fid
        assert theirs["upper_bounds"][fid] == f.upper_bounds[fid], fid
    assert theirs["column_sizes"] == dict(f.column_sizes)


def test_strings_are_truncated_to_16_by_default(con: Any, tmp_path: Path) -> None:
    schema = schema_from_columns(con, [("s", "VARCHAR"), ("b", "BLOB")])
    sql = "SELECT * FROM (VALUES ('abcdefghijklmnopqrstuvwxyz', 'aaaaaaaaaaaaaaaaaaaa'::BLOB), ('b', 'b'::BLOB), ('abcdefghijklmnop\U0010ffff', 'zzzzzzzzzzzzzzzz\\xFF\\xFF'::BLOB)) t(s, b)"
    (f,) = write_data_files(con, sql, WriteTarget(str(tmp_path), schema, UNPARTITIONED, UNSORTED))
    assert f.lower_bounds[1] == b"abcdefghijklmnop"  # 16 code points of the min
    assert f.upper_bounds[1] == b"b"  # the max is short: kept whole
    assert f.lower_bounds[2] == b"a" * 16
    # the max is 'zzzzzzzzzzzzzzzz\xff\xff' (18 bytes): cut to 16 and the last byte incremented
    assert f.upper_bounds[2] == b"z" * 15 + b"{"


def test_metrics_modes(con: Any, tmp_path: Path) -> None:
    schema = schema_from_columns(con, [("a", "VARCHAR"), ("b", "VARCHAR"), ("c", "VARCHAR"), ("d", "BIGINT")])
    props = {
        "write.metadata.metrics.default": "truncate(4)",
        "write.metadata.metrics.column.b": "full",
        "write.metadata.metrics.column.c": "counts",
        "write.metadata.metrics.column.d": "none",
    }
    sql = "SELECT 'abcdefgh' AS a, 'abcdefgh' AS b, 'abcdefgh' AS c, 1::BIGINT AS d"
    (f,) = write_data_files(con, sql, WriteTarget(str(tmp_path), schema, UNPARTITIONED, UNSORTED, props))
    assert f.lower_bounds[1] == b"abcd" and f.upper_bounds[1] == b"abce"
    assert f.lower_bounds[2] == b"abcdefgh" and f.upper_bounds[2] == b"abcdefgh"
    assert 3 not in f.lower_bounds and f.value_counts[3] == 1
    assert 4 not in f.value_counts and 4 not in f.lower_bounds
    with pytest.raises(ValidationError, match="invalid metrics mode"):
        write_data_files(
            con,
            sql,
            WriteTarget(
                str(tmp_path), schema, UNPARTITIONED, UNSORTED, {"write.metadata.metrics.default": "some"}
            ),
        )


def test_target_file_size_splits_files(con: Any, tmp_path: Path) -> None:
    schema = schema_from_columns(con, [("id", "BIGINT"), ("s", "VARCHAR")])
    sql = "SELECT i::BIGINT AS id, md5(i::VARCHAR) AS s FROM range(400000) t(i)"
    props = {"write.target-file-size-bytes": str(2 * 1024 * 1024), "write.parquet.row-group-limit": "20000"}
    files = write_data_files(con, sql, WriteTarget(str(tmp_path), schema, UNPARTITIONED, UNSORTED, props))
    assert len(files) > 2
    assert sum(f.record_count for f in files) == 400000
    for f in files:
        assert pq.read_metadata(f.file_path).num_rows == f.record_count
        assert f.file_path.startswith(str(tmp_path / "data") + "/")
    assert sorted(set(pq.read_table([f.file_path for f in files]).column("id").to_pylist())) == list(
        range(400000)
    )


def test_partition_fan_out_for_every_transform(con: Any, tmp_path: Path) -> None:
    schema = schema_from_columns(
        con, [("id", "BIGINT"), ("ts", "TIMESTAMP"), ("name", "VARCHAR"), ("d", "DATE"), ("x", "INTEGER")]
    )
    fields = []
    for i, (term, source) in enumerate(
        [
            ("identity", 5),
            ("bucket[4]", 1),
            ("truncate[2]", 3),
            ("year", 4),
            ("month", 2),
            ("day", 2),
            ("hour", 2),
            ("void", 1),
        ]
    ):
        fields.append(PartitionField((source,), 1000 + i, f"p{i}", parse_transform(term)))
    spec = PartitionSpec(0, tuple(fields))
    sql = (
        "SELECT i::BIGINT AS id, TIMESTAMP '2025-12-31 20:00:00' + to_hours(i * 7) AS ts, "
        "chr(97 + (i % 3)::INTEGER) || 'x' || i AS name, DATE '2025-12-30' + (i % 4)::INTEGER AS d, "
        "CASE WHEN i % 5 = 0 THEN NULL ELSE (i % 2)::INTEGER END AS x FROM range(60) t(i)"
    )
    files = write_data_files(con, sql, WriteTarget(str(tmp_path), schema, spec, UNSORTED))
    assert sum(f.record_count for f in files) == 60
    ptype = spec.partition_type(schema)
    for f in files:
        rows = pq.read_table(f.file_path).to_pylist()
        assert rows
        for row in rows:
            from iceduck.spec.values import from_python

            values = {
                fld.name: from_python(schema.field_by_name(fld.name).type, row[fld.name])
                for fld in schema.fields
            }
            expected = tuple(
                pf.transform.apply(
                    schema.find_type(pf.source_id), values[schema.find_field(pf.source_id).name]
                )
                for pf in spec.fields
            )
            assert f.partition == expected
        # the file sits in data/<partition path>/
        rel = os.path.relpath(os.path.dirname(f.file_path), tmp_path / "data")
        assert rel.split("/")[0] == ("p0=null" if f.partition[0] is None else f"p0={f.partition[0]}")
        assert rel.split("/")[-1] == "p7=null"
        assert len(rel.split("/")) == len(ptype.fields)


def test_sorted_writes_are_sorted_within_each_file(con: Any, tmp_path: Path) -> None:
    schema = schema_from_columns(con, [("id", "BIGINT"), ("g", "INTEGER"), ("v", "DOUBLE")])
    order = SortOrder(
        1,
        (
            SortField((3,), IDENTITY, SortDirection.DESC, NullOrder.NULLS_LAST),
            SortField((1,), IDENTITY, SortDirection.ASC, NullOrder.NULLS_FIRST),
        ),
    )
    sql = "SELECT i::BIGINT AS id, (i % 3)::INTEGER AS g, CASE WHEN i % 13 = 0 THEN NULL ELSE hash(i) % 100 END::DOUBLE AS v FROM range(5000) t(i)"
    for spec in (UNPARTITIONED, PartitionSpec(0, (PartitionField((2,), 1000, "g", IDENTITY),))):
        files = write_data_files(
            con, sql, WriteTarget(str(tmp_path / str(spec.spec_id + len(spec.fields))), schema, spec, order)
        )
        assert sum(f.record_count for f in files) == 5000
        for f in files:
            assert f.sort_order_id == 1
            rows = pq.read_table(f.file_path).to_pylist()
            keys = [(-(r["v"]) if r["v"] is not None else math.inf, r["id"]) for r in rows]
            assert keys == sorted(keys)


def test_required_columns_refuse_nulls_and_leave_nothing(con: Any, tmp_path: Path) -> None:
    schema = Schema(
        (
            NestedField(
                1, "id", schema_from_arrow(pa.schema([("id", pa.int64())])).fields[0].type, required=True
            ),
        )
    )
    with pytest.raises(ValidationError, match="required column id would hold 1 null"):
        write_data_files(
            con,
            "SELECT * FROM (VALUES (1::BIGINT), (NULL)) t(id)",
            WriteTarget(str(tmp_path), schema, UNPARTITIONED, UNSORTED),
        )
    assert [p for p in (tmp_path / "data").rglob("*") if p.is_file()] == []


def test_every_primitive_round_trips(con: Any, tmp_path: Path) -> None:
    columns = [
        ("b", "BOOLEAN", "true"), ("i", "INTEGER", "-7"), ("l", "BIGINT", "9007199254740993"), ("f", "FLOAT", "1.5"),
        ("d", "DOUBLE", "-2.25"), ("dec", "DECIMAL(38, 6)", "'12345678901234567890.123456'"), ("dt", "DATE", "DATE '1969-07-20'"),
        ("t", "TIME", "TIME '23:59:59.999999'"), ("ts", "TIMESTAMP", "TIMESTAMP '2001-02-03 04:05:06.789'"),
        ("tz", "TIMESTAMPTZ", "TIMESTAMPTZ '2001-02-03 04:05:06.789+02'"), ("ns", "TIMESTAMP_NS", "TIMESTAMP_NS '2001-02-03 04:05:06.123456789'"),
        ("s", "VARCHAR", "'héllo'"), ("u", "UUID", "'f79c3e09-677c-4bbd-a479-3f349cb785e7'"), ("bin", "BLOB", "'\\x00\\x01'"),
    ]  # fmt: skip
    schema = schema_from_columns(con, [(n, t) for n, t, _ in columns])
    sql = "SELECT " + ", ".join(f"CAST({v} AS {t}) AS {n}" for n, t, v in columns)
    (f,) = write_data_files(con, sql, WriteTarget(str(tmp_path), schema, UNPARTITIONED, UNSORTED))
    expected = con.execute(sql).fetchall()
    # read back by field id under other names: the ids, not the names, carry the columns
    mapping = ", ".join(
        f"{fld.id}: {{name: 'c{fld.id}', type: '{t}', default_value: NULL}}"
        for fld, (_, t, _v) in zip(schema.fields, columns, strict=True)
    )
    got = con.execute(f"SELECT * FROM read_parquet('{f.file_path}', schema := MAP {{{mapping}}})").fetchall()
    assert got == expected
    assert set(f.lower_bounds) == {fld.id for fld in schema.fields}
