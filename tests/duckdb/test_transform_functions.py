"""iceberg_bucket / iceberg_truncate (scalar) against the DuckDB iceberg extension's, value by value.

The reference peer's functions are independent implementations of the same Iceberg transforms.
Where they differ from the spec iceduck follows the spec (its Appendix B examples are checked
here), so its buckets match what Java and Spark write: the extension hashes TIMESTAMP_NS as
nanoseconds (the spec: "Nanosecond timestamps must be converted to microsecond precision before
hashing") and gives UUIDs other buckets than the spec's example, and its truncate of the lowest
INTEGER wraps around to the highest (iceduck refuses it).
"""

from __future__ import annotations

from typing import Any

import duckdb
import pytest

import iceduck
from tests.support.peer import Peer

# (DuckDB type, value expressions); every value also goes through as NULL
VALUES: dict[str, list[str]] = {
    "INTEGER": ["0", "1", "-1", "34", "2147483647", "(-2147483600)", "1000000"],
    "BIGINT": ["0", "34", "(-9223372036854775000)", "9223372036854775807", "1234567890123"],
    "DECIMAL(9,2)": ["0", "14.20", "-14.21", "1234567.89", "-0.01"],
    "DECIMAL(38,10)": ["12345678901234567890.0123456789", "-1.5"],
    "DATE": ["'2017-11-16'", "'1970-01-01'", "'1969-12-31'", "'0001-01-01'", "'9999-12-31'"],
    "TIME": ["'22:31:08'", "'00:00:00'", "'23:59:59.999999'", "'12:00:00.5'"],
    "TIMESTAMP": ["'2017-11-16 22:31:08'", "'1970-01-01'", "'1969-12-31 23:59:59.999999'", "'2262-01-01'"],
    "TIMESTAMPTZ": [
        "'2017-11-16 14:31:08-08'",
        "'1970-01-01 00:00:00+00'",
        "'1960-06-01 12:00:00.123456+05:30'",
    ],
    "VARCHAR": ["'iceberg'", "''", "'ünïcödé ✓'", "'a longer string with spaces'", "'\\x00 not an escape'"],
    "BLOB": ["'\\x00\\x01\\x02\\x03'::BLOB", "''::BLOB", "'\\xFF\\x5C\\x27abc'::BLOB"],
}
TRUNCATABLE = ("INTEGER", "BIGINT", "DECIMAL(9,2)", "DECIMAL(38,10)", "VARCHAR", "BLOB")


@pytest.fixture(scope="module")
def con() -> Any:
    c = duckdb.connect()
    c.execute("SET TimeZone = 'America/Los_Angeles'")  # the answers must not depend on it
    iceduck.register(c)
    yield c
    c.close()


def _queries(function: str, argument: int, types: tuple[str, ...]) -> list[str]:
    out = []
    for t in types:
        values = ", ".join(f"({v}::{t})" for v in VALUES[t]) + f", (NULL::{t})"
        out.append(f"SELECT v, {function}({argument}, v) FROM (VALUES {values}) AS t(v)")
    return out


@pytest.mark.parametrize("buckets", [1, 16, 100, 2147483647])
def test_bucket_matches_the_extension(con: duckdb.DuckDBPyConnection, peer: Peer, buckets: int) -> None:
    peer.execute("SET TimeZone = 'Asia/Kolkata'")
    try:
        for sql in _queries("iceberg_bucket", buckets, tuple(VALUES)):
            assert con.sql(sql).fetchall() == peer.query(sql), sql
    finally:
        peer.reset()


@pytest.mark.parametrize("width", [1, 3, 10, 50])
def test_truncate_matches_the_extension(con: duckdb.DuckDBPyConnection, peer: Peer, width: int) -> None:
    for sql in _queries("iceberg_truncate", width, TRUNCATABLE):
        rel = con.sql(sql)
        assert rel.types[1] == rel.types[0]  # the value's own type
        assert rel.fetchall() == peer.query(sql), sql


def test_spec_values(con: duckdb.DuckDBPyConnection) -> None:
    # the spec's Appendix B hash examples, bucketed: hash & Integer.MAX_VALUE % N
    examples = {
        "34::INTEGER": 2017239379,
        "34::BIGINT": 2017239379,
        "14.20::DECIMAL(9,2)": -500754589,
        "DATE '2017-11-16'": -653330422,
        "TIME '22:31:08'": -662762989,
        "TIMESTAMP '2017-11-16 22:31:08'": -2047944441,
        "TIMESTAMPTZ '2017-11-16 14:31:08-08'": -2047944441,
        "TIMESTAMP_NS '2017-11-16 22:31:08.000001001'": -1207196810,
        "'iceberg'": 1210000089,
        "'\\x00\\x01\\x02\\x03'::BLOB": -188683207,
        "UUID 'f79c3e09-677c-4bbd-a479-3f349cb785e7'": 1488055340,
    }
    for value, spec_hash in examples.items():
        got = con.sql(f"SELECT iceberg_bucket(2147483647, {value})").fetchall()
        assert got == [((spec_hash & 0x7FFFFFFF) % 2147483647,)], value


def test_uuid_buckets_as_the_spec_says(con: duckdb.DuckDBPyConnection, peer: Peer) -> None:
    uuid = "UUID 'f79c3e09-677c-4bbd-a479-3f349cb785e7'"  # the spec's example: hash 1488055340
    assert con.sql(f"SELECT iceberg_bucket(16, {uuid})").fetchall() == [(1488055340 % 16,)]
    assert peer.query(f"SELECT iceberg_bucket(16, {uuid})") != [(1488055340 % 16,)]


def test_timestamp_ns_buckets_as_its_microseconds(con: duckdb.DuckDBPyConnection, peer: Peer) -> None:
    ns = "TIMESTAMP_NS '2020-01-01 00:00:00.123456789'"
    us = "TIMESTAMP '2020-01-01 00:00:00.123456'"
    ours = con.sql(f"SELECT iceberg_bucket(16, {ns}), iceberg_bucket(16, {us})").fetchall()
    assert ours[0][0] == ours[0][1]
    (theirs,) = peer.query(f"SELECT iceberg_bucket(16, {ns}), iceberg_bucket(16, epoch_ns({ns}))")
    assert theirs[0] == theirs[1] != ours[0][0]  # the extension hashes the nanoseconds


def _error(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    with pytest.raises(duckdb.Error) as failure:
        con.sql(sql).fetchall()
    return str(failure.value)


def test_errors(con: duckdb.DuckDBPyConnection) -> None:
    assert _error(con, "SELECT iceberg_bucket(0, 1)") == (
        "Invalid Input Error: iceberg_bucket: num_buckets must be a positive integer, got 0"
    )
    assert _error(con, "SELECT iceberg_truncate(-1, 'abc')") == (
        "Invalid Input Error: iceberg_truncate: width must be a positive integer, got -1"
    )
    assert _error(con, "SELECT iceberg_truncate(2, DATE '2020-01-01')") == (
        "Invalid Input Error: iceberg_truncate: a DATE value has no Iceberg truncate transform "
        "(it takes tinyint, smallint, integer, bigint, varchar, blob, decimal)"
    )
    assert _error(con, "SELECT iceberg_truncate(3, (-2147483648)::INTEGER)") == (
        "Invalid Input Error: iceberg_truncate: truncate[3] of -2147483648 is -2147483649, "
        "outside the range of INTEGER"
    )
    assert _error(con, "SELECT iceberg_bucket(4, 1.5::DOUBLE)").startswith(
        "Invalid Input Error: iceberg_bucket: a DOUBLE value has no Iceberg bucket transform"
    )
