"""One DuckDB -> Iceberg type mapping for SQL and the Python API: exact or refused, never lossy.

Independent truth: the Iceberg spec's primitive types (`time` holds microseconds; there is no
bit-string or arbitrary-size integer type) and the values DuckDB itself returns."""

from __future__ import annotations

import datetime
from pathlib import Path

import pyarrow as pa
import pytest

import iceduck
from iceduck.errors import ValidationError
from iceduck.spec.types import V3_ONLY_TYPES


@pytest.fixture
def lake(tmp_path: Path) -> iceduck.Lake:
    lake = iceduck.connect(tmp_path / "wh")
    lake.create_namespace("ns")
    return lake


@pytest.mark.parametrize(
    "duck", ["TIME_NS", "BIT", "BIGNUM", "HUGEINT", "INTERVAL", "TIMETZ", "UNION(a INT)"]
)
def test_types_iceberg_cannot_hold_are_refused_by_both_front_doors(lake: iceduck.Lake, duck: str) -> None:
    with pytest.raises(ValidationError, match=r"column c\b"):
        lake.sql(f"CREATE TABLE ns.s (c {duck})")
    with pytest.raises(ValidationError, match=r"column c\b"):
        lake.create_table("ns.p", [("c", duck)])
    with pytest.raises(ValidationError, match=r"column c\b"):
        lake.create_table("ns.p", [("id", "INTEGER"), ("c", f"STRUCT(x {duck})")])
    assert lake.list_tables("ns") == ()


@pytest.mark.parametrize("duck", ["TIME_NS", "BIT", "BIGNUM"])
def test_appending_a_relation_of_such_a_type_is_refused(lake: iceduck.Lake, duck: str) -> None:
    t = lake.create_table("ns.t", [("c", "TIME")])
    before = t.metadata_location
    value = {"TIME_NS": "TIME_NS '12:00:00.000000123'", "BIT": "'101'::BIT", "BIGNUM": "1::BIGNUM"}[duck]
    with pytest.raises(ValidationError, match=r"column c\b"):
        t.append(lake.con.sql(f"SELECT {value} AS c"))
    assert t.metadata_location == before


def test_arrow_nanosecond_times_are_refused_microseconds_kept(lake: iceduck.Lake) -> None:
    t = lake.create_table("ns.t", [("c", "TIME")])
    with pytest.raises(ValidationError, match=r"time64\[ns\]"):
        t.append(pa.table({"c": pa.array([1_000_000_123], pa.time64("ns"))}))
    t.append(pa.table({"c": pa.array([datetime.time(12, 0, 0, 5)], pa.time64("us"))}))
    rows = lake.sql("SELECT c FROM lake.ns.t")
    assert rows is not None and rows.fetchall() == [(datetime.time(12, 0, 0, 5),)]


def test_both_front_doors_make_the_same_schema(lake: iceduck.Lake) -> None:
    columns = [
        ("a", "TINYINT"), ("b", "UINTEGER"), ("c", "DECIMAL(10, 2)"), ("d", "TIMESTAMP_NS"),
        ("e", "TIMESTAMP_S"), ("f", "UUID"), ("g", "VARCHAR[]"), ("h", "STRUCT(x INT, y BLOB)"),
        ("i", "MAP(VARCHAR, DOUBLE)"), ("j", "INT[3]"), ("k", "JSON"), ("l", "TIMESTAMPTZ"),
    ]  # fmt: skip
    lake.sql(
        "CREATE TABLE ns.s (" + ", ".join(f"{n} {t}" for n, t in columns) + ") WITH ('format-version' = '3')"
    )
    made = lake.create_table("ns.p", columns, format_version=3)
    sql_schema = lake.table("ns.s").schema
    assert [(f.name, str(f.type)) for f in made.schema.fields] == [
        (f.name, str(f.type)) for f in sql_schema.fields
    ]
    assert str(made.schema.find_field(4).type) == "timestamp_ns"  # type: ignore[union-attr]


def test_v3_only_types_have_one_home() -> None:
    # the spec's "added in v3" types
    assert {"timestamp_ns", "timestamptz_ns", "variant", "unknown", "geometry", "geography"} == set(
        V3_ONLY_TYPES
    )


def test_a_v2_table_refuses_v3_types_from_every_front_door(lake: iceduck.Lake) -> None:
    with pytest.raises(ValidationError, match="timestamp_ns"):
        lake.create_table("ns.p", [("c", "TIMESTAMP_NS")], format_version=2)
    t = lake.create_table("ns.q", [("id", "INTEGER")], format_version=2)
    with pytest.raises(ValidationError, match="needs format version 3"), t.update_schema() as u:
        u.add_column("c", "TIMESTAMP_NS")


def test_arrow_extension_types_are_refused_not_taken_as_their_storage(lake: iceduck.Lake) -> None:
    # DuckDB hands BIGNUM to Arrow as an opaque extension over binary: its bytes are no BLOB value
    bignum = lake.con.sql("SELECT 12345678901234567890123::BIGNUM AS c").to_arrow_table()
    assert getattr(bignum.schema.field(0).type, "extension_name", None) == "arrow.opaque"
    with pytest.raises(ValidationError, match=r"column c has Arrow extension type arrow.opaque \(bignum\)"):
        lake.create_table("ns.p", bignum.schema)
    t = lake.create_table("ns.t", [("c", "BLOB")])
    before = t.metadata_location
    with pytest.raises(ValidationError, match=r"column c has Arrow extension type arrow.opaque"):
        t.append(bignum)
    with pytest.raises(ValidationError, match=r"column c has Arrow extension type arrow.bool8"):
        t.append(pa.table({"c": pa.array([1, 0], pa.int8()).view(pa.bool8())}))
    assert t.metadata_location == before and lake.list_tables("ns") == ("t",)
    # the canonical extensions Iceberg holds exactly still map: UUID and JSON text
    u = lake.create_table("ns.u", pa.schema([("id", pa.uuid()), ("doc", pa.json_())]))
    assert [str(f.type) for f in u.schema.fields] == ["uuid", "string"]
