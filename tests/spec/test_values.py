"""Single-value serialization: spec examples, PyIceberg and DuckDB as independent truth, properties."""

from __future__ import annotations

import datetime as dt
import math
import struct
import uuid
from decimal import Decimal
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg import conversions as pyc
from pyiceberg import types as pyt

from iceduck.errors import InvalidMetadataError, UnsupportedFormatError, ValidationError
from iceduck.spec import values as v
from iceduck.spec.types import (
    BINARY,
    BOOLEAN,
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_NS,
    TIMESTAMPTZ,
    TIMESTAMPTZ_NS,
    UNKNOWN,
    UUID,
    VARIANT,
    DecimalType,
    FixedType,
    GeographyType,
    GeometryType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    StructType,
)

DAY_US = 86_400_000_000
TS_2017 = 1_510_871_468_000_000  # 2017-11-16T22:31:08 in micros (Appendix B test value)

# ---------------------------------------------------------------------------------------------
# Strategies: internal values per type
# ---------------------------------------------------------------------------------------------

ints = st.integers(-(2**31), 2**31 - 1)
longs = st.integers(-(2**63), 2**63 - 1)
# datetime's years 1..9999 (so PyIceberg and Python can serve as truth)
dates = st.integers(-719_162, 2_932_896)
times = st.integers(0, DAY_US - 1)
timestamps = st.integers(-719_162 * DAY_US, 2_932_897 * DAY_US - 1)
timestamps_ns = st.integers(-(2**63), 2**63 - 1)
floats32 = st.floats(width=32, allow_nan=False)
doubles = st.floats(allow_nan=False)
uuids = st.uuids()


@st.composite
def decimals(draw: st.DrawFn) -> tuple[DecimalType, Decimal]:
    precision = draw(st.integers(1, 38))
    scale = draw(st.integers(0, precision))
    n = draw(st.integers(-(10**precision) + 1, 10**precision - 1))
    return DecimalType(precision, scale), v.from_unscaled(n, scale)


def _typed(t: IcebergType, values: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[IcebergType, Any]]:
    return values.map(lambda x: (t, x))


typed_values = st.one_of(
    _typed(BOOLEAN, st.booleans()),
    _typed(INT, ints),
    _typed(LONG, longs),
    _typed(FLOAT, floats32),
    _typed(DOUBLE, doubles),
    _typed(DATE, dates),
    _typed(TIME, times),
    _typed(TIMESTAMP, timestamps),
    _typed(TIMESTAMPTZ, timestamps),
    _typed(TIMESTAMP_NS, timestamps_ns),
    _typed(TIMESTAMPTZ_NS, timestamps_ns),
    _typed(STRING, st.text()),
    _typed(UUID, uuids),
    _typed(BINARY, st.binary()),
    st.integers(1, 40).flatmap(lambda n: _typed(FixedType(n), st.binary(min_size=n, max_size=n))),
    decimals(),
)

# ---------------------------------------------------------------------------------------------
# Binary form: spec examples and promotion rules
# ---------------------------------------------------------------------------------------------


def test_binary_examples_from_spec() -> None:
    assert v.to_bytes(INT, 34) == b"\x22\x00\x00\x00"
    assert v.to_bytes(LONG, 34) == b"\x22" + b"\x00" * 7
    assert v.to_bytes(BOOLEAN, True) == b"\x01"
    assert v.to_bytes(BOOLEAN, False) == b"\x00"
    assert v.to_bytes(DOUBLE, 1.0) == struct.pack("<d", 1.0)
    # 14.20 -> unscaled 1420 = 0x058C, two bytes; -128 fits one byte, 128 needs two
    assert v.to_bytes(DecimalType(4, 2), Decimal("14.20")) == b"\x05\x8c"
    assert v.to_bytes(DecimalType(3, 0), Decimal("-128")) == b"\x80"
    assert v.to_bytes(DecimalType(3, 0), Decimal("128")) == b"\x00\x80"
    assert v.to_bytes(DecimalType(3, 0), Decimal("0")) == b"\x00"
    u = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
    assert v.to_bytes(UUID, u) == bytes.fromhex("F79C3E09677C4BBDA4793F349CB785E7")
    assert v.to_bytes(STRING, "iceberg") == b"iceberg"
    assert v.to_bytes(DATE, 17486) == struct.pack("<i", 17486)
    assert v.from_bytes(DecimalType(4, 2), b"\x05\x8c") == Decimal("14.20")
    assert v.from_bytes(BOOLEAN, b"\x07") is True  # any non-zero byte is true


def test_bounds_written_before_type_promotion() -> None:
    # Schema evolution table: the current type decodes the old width.
    assert v.from_bytes(LONG, struct.pack("<i", -5)) == -5
    assert v.from_bytes(LONG, struct.pack("<q", 2**40)) == 2**40
    assert v.from_bytes(DOUBLE, struct.pack("<f", 1.5)) == 1.5
    assert v.from_bytes(DOUBLE, struct.pack("<f", 0.1)) == struct.unpack("<f", struct.pack("<f", 0.1))[0]
    assert v.from_bytes(TIMESTAMP, struct.pack("<i", 17486)) == 17486 * DAY_US
    assert v.from_bytes(TIMESTAMP_NS, struct.pack("<i", -1)) == -DAY_US * 1000
    # a wider decimal reads bytes written for a narrower precision
    assert v.from_bytes(DecimalType(38, 2), b"\x05\x8c") == Decimal("14.20")


def test_binary_length_errors_name_the_file() -> None:
    with pytest.raises(InvalidMetadataError, match=r"m\.avro: int value must have 4 bytes, found 3"):
        v.from_bytes(INT, b"\x01\x02\x03", path="m.avro")
    with pytest.raises(InvalidMetadataError, match="8 bytes"):
        v.from_bytes(TIMESTAMPTZ, b"\x01\x02\x03\x04")
    with pytest.raises(InvalidMetadataError, match="UTF-8"):
        v.from_bytes(STRING, b"\xff\xfe")
    with pytest.raises(UnsupportedFormatError, match="variant"):
        v.from_bytes(VARIANT, b"\x01")
    with pytest.raises(InvalidMetadataError, match="unknown has no binary"):
        v.from_bytes(UNKNOWN, b"")
    with pytest.raises(ValidationError):
        v.to_bytes(INT, 2**31)
    with pytest.raises(ValidationError, match="more than 2 digits"):
        v.to_bytes(DecimalType(9, 2), Decimal("1.234"))
    with pytest.raises(ValidationError, match="does not fit"):
        v.to_bytes(DecimalType(3, 2), Decimal("10.00"))


def test_geospatial_bound_points() -> None:
    geo = GeometryType()
    assert v.from_bytes(geo, struct.pack("<2d", 1.5, -2.0)) == (1.5, -2.0)
    assert v.from_bytes(GeographyType(), struct.pack("<3d", 10, 20, 30)) == (10.0, 20.0, 30.0)
    xyzm = v.from_bytes(geo, struct.pack("<4d", 1, 2, math.nan, 4))
    assert xyzm[:2] == (1.0, 2.0) and math.isnan(xyzm[2]) and xyzm[3] == 4.0
    assert v.to_bytes(geo, (1.5, -2.0)) == struct.pack("<2d", 1.5, -2.0)
    assert v.to_human(geo, (30.0, 10.0)) == "POINT (30 10)"
    assert v.to_human(geo, (1.5, 2.0, 3.0)) == "POINT Z (1.5 2 3)"
    assert v.to_human(geo, xyzm) == "POINT M (1 2 4)"
    assert v.to_human(geo, (1.0, 2.0, 3.0, 4.0)) == "POINT ZM (1 2 3 4)"
    with pytest.raises(InvalidMetadataError):
        v.from_bytes(geo, b"\x00" * 8)


_PYICEBERG_TYPES: dict[str, Any] = {
    "boolean": pyt.BooleanType(),
    "int": pyt.IntegerType(),
    "long": pyt.LongType(),
    "float": pyt.FloatType(),
    "double": pyt.DoubleType(),
    "date": pyt.DateType(),
    "time": pyt.TimeType(),
    "timestamp": pyt.TimestampType(),
    "timestamptz": pyt.TimestamptzType(),
    "timestamp_ns": pyt.TimestampNanoType(),
    "timestamptz_ns": pyt.TimestamptzNanoType(),
    "string": pyt.StringType(),
    "uuid": pyt.UUIDType(),
    "binary": pyt.BinaryType(),
}


def pyiceberg_type(t: IcebergType) -> Any:
    if isinstance(t, DecimalType):
        return pyt.DecimalType(t.precision, t.scale)
    if isinstance(t, FixedType):
        return pyt.FixedType(t.length)
    return _PYICEBERG_TYPES[t.name]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b)  # distinguishes -0.0 from 0.0
    return type(a) is type(b) and a == b


@given(typed_values)
@settings(max_examples=400)
def test_binary_round_trip_and_pyiceberg_agree(tv: tuple[IcebergType, Any]) -> None:
    t, value = tv
    data = v.to_bytes(t, value)
    assert _same(v.from_bytes(t, data), value)
    py_value = value.bytes if t.name == "uuid" else value
    assert data == pyc.to_bytes(pyiceberg_type(t), py_value)
    if t.name != "uuid":  # PyIceberg keeps uuids as bytes
        assert _same(v.from_bytes(t, data), pyc.from_bytes(pyiceberg_type(t), data))


# ---------------------------------------------------------------------------------------------
# JSON form
# ---------------------------------------------------------------------------------------------


def test_json_examples_from_spec() -> None:
    u = "f79c3e09-677c-4bbd-a479-3f349cb785e7"
    examples: list[tuple[IcebergType, Any, Any]] = [
        (BOOLEAN, True, True),
        (INT, 34, 34),
        (LONG, 34, 34),
        (FLOAT, 1.0, 1.0),
        (DOUBLE, 1.0, 1.0),
        (DecimalType(4, 2), "14.20", Decimal("14.20")),
        (DATE, "2017-11-16", 17486),
        (TIME, "22:31:08.123456", 81_068_123_456),
        (TIMESTAMP, "2017-11-16T22:31:08.123456", TS_2017 + 123_456),
        (TIMESTAMPTZ, "2017-11-16T22:31:08.123456+00:00", TS_2017 + 123_456),
        (TIMESTAMP_NS, "2017-11-16T22:31:08.123456789", (TS_2017 + 123_456) * 1000 + 789),
        (TIMESTAMPTZ_NS, "2017-11-16T22:31:08.123456789+00:00", (TS_2017 + 123_456) * 1000 + 789),
        (STRING, "iceberg", "iceberg"),
        (UUID, u, uuid.UUID(u)),
        (FixedType(4), "000102ff", b"\x00\x01\x02\xff"),
        (BINARY, "000102ff", b"\x00\x01\x02\xff"),
    ]
    for t, text, value in examples:
        assert v.from_json(t, text) == value, t
        assert v.to_json(t, value) == text, t
    # a decimal written in scientific notation (the spec's "2E+20") reads at the type's scale
    assert v.from_json(DecimalType(21, 0), "2E+20") == Decimal(2 * 10**20)
    assert v.from_json(DecimalType(10, 2), "1E+2") == Decimal("100.00")
    assert v.to_json(DecimalType(10, 2), Decimal("100.00")) == "100.00"
    assert v.to_json(DecimalType(10, 0), Decimal("-7")) == "-7"


def test_json_timestamps_with_offsets_and_edges() -> None:
    # an offset is converted to UTC; 'Z' is accepted on read
    assert v.from_json(TIMESTAMPTZ, "2017-11-16T14:31:08-08:00") == TS_2017
    assert v.from_json(TIMESTAMPTZ, "2017-11-16T22:31:08Z") == TS_2017
    assert v.from_json(TIMESTAMP, "1969-12-31T23:59:59.999999") == -1
    assert v.to_json(TIMESTAMP, -1) == "1969-12-31T23:59:59.999999"
    assert v.to_json(TIMESTAMP_NS, -1) == "1969-12-31T23:59:59.999999999"
    assert v.to_json(DATE, v.days_from_civil(-1, 12, 31)) == "-0001-12-31"
    assert v.from_json(DATE, "-0001-12-31") == v.days_from_civil(-1, 12, 31)
    assert v.to_json(DATE, v.days_from_civil(10000, 1, 1)) == "+10000-01-01"
    assert v.from_json(TIME, "22:31") == (22 * 60 + 31) * 60 * 1_000_000
    with pytest.raises(ValidationError, match="must include a zone"):
        v.from_json(TIMESTAMPTZ, "2017-11-16T22:31:08")
    with pytest.raises(ValidationError, match="must not include a zone"):
        v.from_json(TIMESTAMP, "2017-11-16T22:31:08+00:00")
    with pytest.raises(ValidationError, match="more than 6"):
        v.from_json(TIMESTAMP, "2017-11-16T22:31:08.1234567")
    with pytest.raises(ValidationError, match="valid date"):
        v.from_json(DATE, "2017-02-29")
    assert v.from_json(DATE, "2016-02-29") == 16860


def test_json_nested_defaults() -> None:
    point = StructType((NestedField(1, "x", INT), NestedField(2, "y", STRING)))
    assert v.from_json(point, {"1": 1, "2": "bar"}) == {1: 1, 2: "bar"}
    assert v.to_json(point, {1: 1, 2: "bar"}) == {"1": 1, "2": "bar"}
    assert v.from_json(point, {}) == {}  # "use each field's default"
    ints_list = ListType(3, INT)
    assert v.from_json(ints_list, [1, 2, 3]) == [1, 2, 3]
    assert v.to_json(ints_list, [1, 2, 3]) == [1, 2, 3]
    m = MapType(4, STRING, 5, DATE)
    parsed = v.from_json(m, {"keys": ["a", "b"], "values": ["2017-11-16", None]})
    assert parsed == {"a": 17486, "b": None}
    assert v.to_json(m, parsed) == {"keys": ["a", "b"], "values": ["2017-11-16", None]}
    assert v.from_json(UNKNOWN, None) is None and v.from_json(VARIANT, None) is None
    with pytest.raises(ValidationError):
        v.from_json(UNKNOWN, 1)
    with pytest.raises(ValidationError, match="no field with id 9"):
        v.from_json(point, {"9": 1})
    with pytest.raises(ValidationError):
        v.from_json(INT, "34")
    with pytest.raises(ValidationError):
        v.from_json(FixedType(3), "0001")


def _pyiceberg_json_value(t: IcebergType, value: Any) -> Any:
    """The Python object PyIceberg's from_json returns for an internal value (its own convention)."""
    if t.name in ("date", "time", "timestamp", "timestamptz"):
        return v.to_python(t, value)
    return value


@given(typed_values.filter(lambda tv: "_ns" not in tv[0].name))
@settings(max_examples=400)
def test_json_round_trip_and_pyiceberg_reads_it(tv: tuple[IcebergType, Any]) -> None:
    t, value = tv
    obj = v.to_json(t, value)
    back = v.from_json(t, obj)
    if t.name == "float":
        assert back == value and struct.pack("<f", back) == struct.pack("<f", value)
    else:
        assert _same(back, value)
    theirs = pyc.from_json(pyiceberg_type(t), obj)
    if t.name == "float":  # like Java, the JSON holds the shortest digits of the 32-bit value
        theirs = struct.unpack("<f", struct.pack("<f", theirs))[0]
    assert theirs == _pyiceberg_json_value(t, value)
    # and the other direction: what PyIceberg writes, iceduck reads
    if t.name != "float":  # PyIceberg writes the widened double digits of a float
        assert _same(v.from_json(t, pyc.to_json(pyiceberg_type(t), _pyiceberg_json_value(t, value))), value)


@given(timestamps_ns, st.booleans())
def test_json_round_trip_nanos(value: int, zoned: bool) -> None:
    t = TIMESTAMPTZ_NS if zoned else TIMESTAMP_NS
    text = v.to_json(t, value)
    assert v.from_json(t, text) == value
    assert text.endswith("+00:00") == zoned


@given(st.integers(-(10**8), 10**8))
def test_calendar_matches_python(days: int) -> None:
    y, m, d = v.civil_from_days(days)
    assert v.days_from_civil(y, m, d) == days
    if -719_162 <= days <= 2_932_896:
        assert (y, m, d) == (lambda x: (x.year, x.month, x.day))(dt.date(1970, 1, 1) + dt.timedelta(days))


# ---------------------------------------------------------------------------------------------
# Human-readable text, checked against DuckDB's own VARCHAR casts
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def duck() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    return con


def test_human_examples(duck: duckdb.DuckDBPyConnection) -> None:
    assert v.to_human(DATE, v.from_json(DATE, "2026-10-02")) == "2026-10-02"
    ts = v.from_json(TIMESTAMP, "2026-10-02T12:34:56.123456")
    assert v.to_human(TIMESTAMP, ts) == "2026-10-02 12:34:56.123456"
    assert v.to_human(TIMESTAMPTZ, ts) == "2026-10-02 12:34:56.123456+00"
    assert v.to_human(TIMESTAMP, ts - 123_456) == "2026-10-02 12:34:56"
    assert v.to_human(TIMESTAMP_NS, ts * 1000 + 789) == "2026-10-02 12:34:56.123456789"
    assert v.to_human(DecimalType(4, 2), Decimal("14.20")) == "14.20"
    assert v.to_human(DecimalType(2, 2), Decimal("-0.50")) == "-.50"  # DuckDB omits the 0 when P == S
    assert v.to_human(BINARY, b"\x01\x02") == "\\x01\\x02"
    assert v.to_human(BINARY, b"a'\\") == "a\\x27\\x5C"
    assert v.to_human(UUID, uuid.UUID("F79C3E09-677C-4BBD-A479-3F349CB785E7")) == (
        "f79c3e09-677c-4bbd-a479-3f349cb785e7"
    )
    assert v.to_human(FLOAT, struct.unpack("<f", struct.pack("<f", 0.1))[0]) == "0.1"
    assert v.to_human(DATE, v.days_from_civil(-44, 3, 15)) == "0045-03-15 (BC)"
    assert v.to_human(INT, None) == "null"
    point = StructType((NestedField(1, "x", INT), NestedField(2, "s", STRING)))
    row = duck.execute("SELECT {'x': 1, 's': 'a'}::VARCHAR").fetchone()
    assert row is not None and v.to_human(point, {1: 1, 2: "a"}) == row[0]
    assert v.to_human(ListType(3, STRING), ["a", "b"]) == "[a, b]"
    assert v.to_human(MapType(4, STRING, 5, INT), {"a": 1}) == "{a=1}"


def _duck_expr(t: IcebergType, value: Any) -> tuple[str, list[Any]]:
    """A DuckDB expression producing the value as the matching DuckDB type, built independently."""
    kind = t.name
    if isinstance(t, DecimalType):
        return f"?::VARCHAR::DECIMAL({t.precision}, {t.scale})", [format(value, "f")]
    simple = {
        "boolean": "?::BOOLEAN",
        "int": "?::INTEGER",
        "long": "?::BIGINT",
        "float": "?::DOUBLE::FLOAT",
        "double": "?::DOUBLE",
        "date": "(DATE '1970-01-01' + ?::INTEGER)",
        "time": "(TIME '00:00:00' + to_microseconds(?::BIGINT))",
        "timestamp": "make_timestamp(?::BIGINT)",
        "timestamptz": "make_timestamp(?::BIGINT)::TIMESTAMPTZ",
        "timestamp_ns": "make_timestamp_ns(?::BIGINT)",
        "string": "?::VARCHAR",
        "uuid": "?::VARCHAR::UUID",
        "binary": "?::BLOB",
        "fixed": "?::BLOB",
    }
    if kind == "uuid":
        return simple[kind], [str(value)]
    return simple[kind], [value]


# DuckDB's TIMESTAMP covers 290309 BC .. 294247 AD; stay inside it
duck_timestamps = st.integers(-9_000_000_000_000_000_000 // 1000, 9_000_000_000_000_000_000 // 1000)
duck_values = st.one_of(
    _typed(BOOLEAN, st.booleans()),
    _typed(INT, ints),
    _typed(LONG, longs),
    _typed(FLOAT, floats32),
    _typed(DOUBLE, st.floats()),
    _typed(DATE, st.integers(-100_000_000, 100_000_000)),
    _typed(TIME, times),
    _typed(TIMESTAMP, duck_timestamps),
    _typed(TIMESTAMPTZ, duck_timestamps),
    _typed(TIMESTAMP_NS, st.integers(-(2**63) + 2, 2**63 - 2)),  # the ends mean +-infinity
    _typed(STRING, st.text().filter(lambda s: "\x00" not in s)),
    _typed(UUID, uuids),
    _typed(BINARY, st.binary()),
    decimals(),
)


@given(duck_values)
@settings(max_examples=600, deadline=None)
def test_human_matches_duckdb_cast(duck: duckdb.DuckDBPyConnection, tv: tuple[IcebergType, Any]) -> None:
    t, value = tv
    expr, params = _duck_expr(t, value)
    expected = duck.execute(f"SELECT ({expr})::VARCHAR", params).fetchone()[0]  # type: ignore[index]
    assert v.to_human(t, value) == expected


@given(st.integers(-(2**63), 2**63 - 1))
def test_human_matches_duckdb_timestamptz_ns_text(n: int) -> None:
    # DuckDB has no nanosecond TIMESTAMPTZ; the text is the timestamp_ns text with the UTC suffix
    assert v.to_human(TIMESTAMPTZ_NS, n) == v.to_human(TIMESTAMP_NS, n) + "+00"


# ---------------------------------------------------------------------------------------------
# Python objects
# ---------------------------------------------------------------------------------------------


def test_python_objects() -> None:
    assert v.to_python(DATE, 17486) == dt.date(2017, 11, 16)
    assert v.to_python(TIME, 81_068_000_001) == dt.time(22, 31, 8, 1)
    assert v.to_python(TIMESTAMP, TS_2017) == dt.datetime(2017, 11, 16, 22, 31, 8)
    assert v.to_python(TIMESTAMPTZ, TS_2017) == dt.datetime(2017, 11, 16, 22, 31, 8, tzinfo=dt.UTC)
    assert v.to_python(TIMESTAMP_NS, -1) == dt.datetime(1969, 12, 31, 23, 59, 59, 999_999)
    aware = dt.datetime(2017, 11, 16, 14, 31, 8, tzinfo=dt.timezone(dt.timedelta(hours=-8)))
    assert v.from_python(TIMESTAMPTZ, aware) == TS_2017
    assert v.from_python(TIMESTAMPTZ_NS, aware) == TS_2017 * 1000
    assert v.from_python(DecimalType(5, 2), 1.5) == Decimal("1.50")
    with pytest.raises(ValidationError):
        v.to_python(DATE, 10**8)


@given(typed_values)
def test_python_round_trip(tv: tuple[IcebergType, Any]) -> None:
    t, value = tv
    if t.name.endswith("_ns"):
        value -= value % 1000  # datetime holds microseconds
        if not -62_135_596_800 * 10**9 <= value < 253_402_300_800 * 10**9:
            return
    assert _same(v.from_python(t, v.to_python(t, value)), value)


# ---------------------------------------------------------------------------------------------
# Truncated metric bounds
# ---------------------------------------------------------------------------------------------


def test_truncated_bound_examples() -> None:
    assert v.truncate_lower_bound(STRING, "iceberg", 3) == "ice"
    assert v.truncate_upper_bound(STRING, "iceberg", 3) == "icf"
    assert v.truncate_upper_bound(STRING, "ice", 3) == "ice"
    assert v.truncate_upper_bound(STRING, "a\U0010ffffz", 2) == "b"
    assert v.truncate_upper_bound(STRING, "\U0010ffff\U0010ffffz", 2) is None
    assert v.truncate_upper_bound(STRING, "a\ud7ffz", 2) == "a\ue000"  # skips the surrogates
    assert v.truncate_lower_bound(STRING, "\U0001f600\U0001f600", 1) == "\U0001f600"  # code points
    assert v.truncate_upper_bound(BINARY, b"\x01\x02\x03\x04\x05", 3) == b"\x01\x02\x04"
    assert v.truncate_upper_bound(BINARY, b"\x01\xff\xff\x04", 3) == b"\x02"
    assert v.truncate_upper_bound(BINARY, b"\xff\xff\xff\x04", 3) is None
    assert v.truncate_lower_bound(BINARY, b"\x01\x02\x03\x04\x05", 3) == b"\x01\x02\x03"
    assert v.truncate_upper_bound(INT, 5, 3) == 5


def _utf8_order(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


@given(st.text(st.characters(exclude_categories=["Cs"])), st.integers(1, 8))
def test_truncated_string_bounds_enclose_every_value_with_the_prefix(s: str, width: int) -> None:
    low = v.truncate_lower_bound(STRING, s, width)
    high = v.truncate_upper_bound(STRING, s, width)
    assert len(low) <= width and _utf8_order(low) <= _utf8_order(s)
    if high is None:
        assert len(s) > width and all(ord(c) == 0x10FFFF for c in s[:width])
        return
    assert len(high) <= width
    high.encode("utf-8")  # valid UTF-8, no surrogates
    assert _utf8_order(high) >= _utf8_order(s)
    if len(s) > width:  # cut: above anything sharing its first `width` code points
        assert _utf8_order(high) >= _utf8_order(s[:width] + "\U0010ffff" * 3)
    else:
        assert high == s


@given(st.binary(), st.integers(1, 8))
def test_truncated_binary_bounds(data: bytes, width: int) -> None:
    low = v.truncate_lower_bound(BINARY, data, width)
    high = v.truncate_upper_bound(BINARY, data, width)
    assert low == data[:width] and low <= data
    if high is None:
        assert len(data) > width and data[:width] == b"\xff" * width
        return
    assert len(high) <= width and high >= data
    if len(data) > width:
        assert high >= data[:width] + b"\xff" * 5
    else:
        assert high == data
