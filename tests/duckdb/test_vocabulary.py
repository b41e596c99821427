"""iceduck.vocabulary: DuckDB reads back exactly what the quoting, literal and type helpers write."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import uuid
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iceduck.spec.types import parse_type
from iceduck.vocabulary import duck_literal, duck_type, quote_ident, quote_str

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1)


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute("SET TimeZone = 'America/Los_Angeles'")  # literals must not depend on the session zone
    return c


_NAMES = duckdb.connect()


@settings(deadline=None)
@given(name=st.text(min_size=1, max_size=20).filter(lambda s: "\x00" not in s))
def test_any_name_quotes_to_itself(name: str) -> None:
    rel = _NAMES.sql(f"SELECT 1 AS {quote_ident(name)}, {quote_str(name)} AS v")
    assert rel.columns[0] == name
    assert rel.fetchall() == [(1, name)]


# (Iceberg type, internal value, what DuckDB's Python API returns for it)
CASES: list[tuple[str, Any, Any]] = [
    ("boolean", True, True),
    ("int", -7, -7),
    ("long", 2**62, 2**62),
    ("float", 1.5, 1.5),
    ("double", -0.1, -0.1),
    ("double", float("inf"), float("inf")),
    ("decimal(9, 2)", decimal.Decimal("-12.34"), decimal.Decimal("-12.34")),
    ("date", 19_000, dt.date(2022, 1, 8)),
    ("time", 3_600_000_001, dt.time(1, 0, 0, 1)),
    ("timestamp", 1_700_000_000_123_456, EPOCH + dt.timedelta(microseconds=1_700_000_000_123_456)),
    ("timestamptz", 1_700_000_000_123_456, dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC)),
    ("string", 'it\'s "quoted"', 'it\'s "quoted"'),
    ("uuid", uuid.UUID(int=12345), uuid.UUID(int=12345)),
    ("binary", b"\x00\xff'a", b"\x00\xff'a"),
    ("fixed[3]", b"abc", b"abc"),
]


@pytest.mark.parametrize(("type_text", "value", "expected"), CASES)
def test_typed_literals_read_back_as_the_value(
    con: duckdb.DuckDBPyConnection, type_text: str, value: Any, expected: Any
) -> None:
    t = parse_type(type_text)
    got, same_type = con.execute(
        f"SELECT v, typeof(v) = typeof(CAST(NULL AS {duck_type(t)})) FROM (SELECT {duck_literal(t, value)} AS v)"
    ).fetchone()
    if isinstance(expected, dt.datetime) and expected.tzinfo is not None:
        got = got.astimezone(UTC)
    assert got == expected
    assert same_type
    assert con.execute(f"SELECT {duck_literal(t, None)} IS NULL").fetchone() == (True,)


def test_nan_literal(con: duckdb.DuckDBPyConnection) -> None:
    (got,) = con.execute(f"SELECT {duck_literal(parse_type('double'), float('nan'))}").fetchone()
    assert math.isnan(got)


def test_nested_types_are_duckdb_types(con: duckdb.DuckDBPyConnection) -> None:
    from iceduck.spec.types import parse_schema

    schema = parse_schema(
        {
            "type": "struct",
            "fields": [
                {
                    "id": 1,
                    "name": "s",
                    "required": False,
                    "type": {
                        "type": "struct",
                        "fields": [{"id": 2, "name": 'a "b"', "required": False, "type": "long"}],
                    },
                },
                {
                    "id": 3,
                    "name": "m",
                    "required": False,
                    "type": {
                        "type": "map",
                        "key-id": 4,
                        "key": "string",
                        "value-id": 5,
                        "value": {
                            "type": "list",
                            "element-id": 6,
                            "element": "date",
                            "element-required": False,
                        },
                        "value-required": False,
                    },
                },
            ],
        }
    )
    for f in schema.fields:  # DuckDB accepts each as a type
        assert con.execute(f"SELECT CAST(NULL AS {duck_type(f.type)}) IS NULL").fetchone() == (True,)
    assert duck_type(schema.fields[0].type) == 'STRUCT("a ""b""" BIGINT)'
    assert duck_type(schema.fields[1].type) == "MAP(VARCHAR, DATE[])"
