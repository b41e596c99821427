"""Partition transforms computed by DuckDB (iceduck.write.partition, iceduck.write.bucket) equal the spec.

Independent truth: the spec's Appendix B hash examples, the `mmh3` C library (Murmur3 x86_32,
installed with PyIceberg), PyIceberg's own transforms, and the reference peer's `iceberg_bucket`.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import duckdb
import mmh3
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iceduck.spec.transforms import parse_transform
from iceduck.spec.types import (
    BINARY,
    DATE,
    INT,
    LONG,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_NS,
    TIMESTAMPTZ,
    UUID,
    DecimalType,
    IcebergType,
)
from iceduck.spec.values import from_python
from iceduck.vocabulary import duck_literal
from iceduck.write.bucket import bucket_of_hashes, hash_binary, hash_longs, register_bucket_functions
from iceduck.write.partition import floor_div, floor_mod, key_sql, parse_key, transform_sql
from tests.support.peer import Peer


@pytest.fixture(scope="module")
def con() -> Any:
    c = duckdb.connect()
    c.execute("SET TimeZone = 'UTC'")
    register_bucket_functions(c)
    yield c
    c.close()


def _signed(h: int) -> int:
    return h - (1 << 32) if h >= 1 << 31 else h


# Appendix B: "32-bit hash requirements" examples.
SPEC_HASHES = [
    (INT, 34, 2017239379),
    (LONG, 34, 2017239379),
    (DecimalType(4, 2), Decimal("14.20"), -500754589),
    (DATE, 17486, -653330422),  # 2017-11-16
    (TIME, 81068000000, -662762989),  # 22:31:08
    (TIMESTAMP, 1510871468000000, -2047944441),  # 2017-11-16T22:31:08
    (TIMESTAMPTZ, 1510871468000000, -2047944441),
    (TIMESTAMP_NS, 1510871468000001000, -1207196810),  # 2017-11-16T22:31:08.000001001
    (STRING, "iceberg", 1210000089),
    (UUID, uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), 1488055340),
    (BINARY, bytes([0, 1, 2, 3]), -188683207),
]


def test_vectorised_hashes_match_the_spec_examples() -> None:
    longs = np.array([34, 17486, 81068000000, 1510871468000000, 1510871468000001], dtype=np.int64)
    assert [_signed(int(h)) for h in hash_longs(longs)] == [
        2017239379, -653330422, -662762989, -2047944441, -1207196810,
    ]  # fmt: skip
    data = [b"iceberg", bytes([0, 1, 2, 3]), uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7").bytes]
    arr = pa.array(data, pa.large_binary())
    hashes = hash_binary(np.frombuffer(arr.buffers()[2], np.uint8), np.frombuffer(arr.buffers()[1], np.int64))
    assert [_signed(int(h)) for h in hashes] == [1210000089, -188683207, 1488055340]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=30))
def test_binary_hash_equals_mmh3(values: list[bytes]) -> None:
    arr = pa.array(values, pa.large_binary())
    buffers = arr.buffers()
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    got = [_signed(int(h)) for h in hash_binary(data, np.frombuffer(buffers[1], np.int64))]
    assert got == [mmh3.hash(v, signed=True) for v in values]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=30))
def test_long_hash_equals_mmh3(values: list[int]) -> None:
    got = [_signed(int(h)) for h in hash_longs(np.array(values, dtype=np.int64))]
    assert got == [mmh3.hash(v.to_bytes(8, "little", signed=True), signed=True) for v in values]


def test_bucket_of_hashes_clears_the_sign_bit() -> None:
    hashes = np.array([0xFFFFFFFF, 0x80000000, 5], dtype=np.uint32)
    assert bucket_of_hashes(hashes, 16).tolist() == [(0x7FFFFFFF) % 16, 0, 5]


def _sql_value(con: Any, t: IcebergType, value: Any, transform: str) -> Any:
    sql = transform_sql(parse_transform(transform), t, "v")
    return con.execute(f"SELECT {sql} FROM (SELECT {duck_literal(t, value)} AS v)").fetchone()[0]


@pytest.mark.parametrize(("t", "value", "expected_hash"), SPEC_HASHES, ids=[str(c[0]) for c in SPEC_HASHES])
def test_bucket_sql_matches_spec_hash(con: Any, t: IcebergType, value: Any, expected_hash: int) -> None:
    for n in (1, 7, 16, 1000):
        assert _sql_value(con, t, value, f"bucket[{n}]") == (expected_hash & 0x7FFFFFFF) % n


_INTS = st.integers(-(2**31) + 100, 2**31 - 1)  # truncate[10] of -2**31 leaves the int range
_LONGS = st.integers(-(2**63), 2**63 - 1)
_DAYS = st.integers(-200_000, 200_000)
_MICROS = st.integers(-(10**16), 10**16)
_TEXT = st.text(max_size=12)
_DEC = st.decimals(min_value=-(10**6), max_value=10**6, places=2, allow_nan=False, allow_infinity=False)

CASES: list[tuple[IcebergType, Any, list[str]]] = [
    (INT, _INTS, ["identity", "bucket[16]", "truncate[10]", "truncate[3]"]),
    (LONG, _LONGS.filter(lambda v: abs(v) < 2**62), ["identity", "bucket[100]", "truncate[7]"]),
    (DecimalType(9, 2), _DEC, ["identity", "bucket[8]", "truncate[50]"]),
    (DATE, _DAYS, ["identity", "year", "month", "day", "bucket[11]"]),
    (TIMESTAMP, _MICROS, ["year", "month", "day", "hour", "bucket[11]"]),
    (TIMESTAMPTZ, _MICROS, ["year", "month", "day", "hour", "identity"]),
    (TIMESTAMP_NS, st.integers(-(10**18), 9 * 10**18), ["year", "month", "day", "hour", "bucket[5]"]),
    (TIME, st.integers(0, 86_400_000_000 - 1), ["identity", "bucket[3]"]),
    (STRING, _TEXT, ["identity", "bucket[16]", "truncate[3]"]),
    (BINARY, st.binary(max_size=10), ["identity", "bucket[16]", "truncate[2]"]),
    (UUID, st.uuids(), ["identity", "bucket[16]"]),
]


@pytest.mark.parametrize(("t", "strategy", "transforms"), CASES, ids=[str(c[0]) for c in CASES])
def test_transform_sql_equals_the_python_transforms(
    con: Any, t: IcebergType, strategy: Any, transforms: list[str]
) -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(strategy, min_size=1, max_size=20))
    def check(values: list[Any]) -> None:
        if t == STRING:
            values = [v for v in values if "\x00" not in v] or ["x"]
        literals = ", ".join(f"({duck_literal(t, v)})" for v in values)
        for name in transforms:
            transform = parse_transform(name)
            result_type = transform.result_type(t)
            sql = transform_sql(transform, t, "v")
            key = key_sql(sql, result_type)
            rows = con.execute(f"SELECT {sql}, {key} FROM (VALUES {literals}) AS x(v)").fetchall()
            expected = [transform.apply(t, v) for v in values]
            got = [
                from_python(result_type, r[0]) if result_type.name != "date" else _days(r[0]) for r in rows
            ]
            assert got == expected, name
            assert [parse_key(r[1], result_type) for r in rows] == expected, name

    check()


def _days(value: Any) -> Any:
    if value is None or isinstance(value, int):
        return value
    return (value - dt.date(1970, 1, 1)).days


def test_floor_arithmetic_differs_from_truncation(con: Any) -> None:
    rows = con.execute(f"SELECT {floor_div('-7', 2)}, {floor_mod('-7', 2)}, -7 // 2").fetchone()
    assert rows == (-4, 1, -3)


def test_partition_keys_round_trip_nulls_and_odd_strings(con: Any) -> None:
    for value in [None, "", "n", "v", "a/b=c", "日本", "null"]:
        lit = duck_literal(STRING, value)
        (key,) = con.execute(f"SELECT {key_sql(lit, STRING)}").fetchone()
        assert parse_key(key, STRING) == value


@pytest.mark.peer
def test_bucket_values_equal_the_reference_peer(con: Any, peer: Peer) -> None:
    cases = [
        ("BIGINT", "34", LONG, 34),
        ("BIGINT", "-1234567890123", LONG, -1234567890123),
        ("VARCHAR", "'iceberg'", STRING, "iceberg"),
        ("VARCHAR", "'日本語のテキスト'", STRING, "日本語のテキスト"),
        ("DATE", "DATE '2017-11-16'", DATE, 17486),
        ("TIMESTAMP", "TIMESTAMP '2017-11-16 22:31:08'", TIMESTAMP, 1510871468000000),
    ]
    for duck, literal, t, value in cases:
        for n in (4, 16, 1000):
            (expected,) = peer.query(f"SELECT iceberg_bucket({n}, CAST({literal} AS {duck}))")[0:1][0]
            assert _sql_value(con, t, value, f"bucket[{n}]") == expected, (literal, n)
