"""Partition transforms: spec examples (Appendix B, truncate table), PyIceberg as truth, properties."""

from __future__ import annotations

import datetime as dt
import operator
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import mmh3
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pyiceberg import transforms as pyx
from pyiceberg import types as pyt

from iceduck.errors import ValidationError
from iceduck.spec import transforms as tr
from iceduck.spec import values as v
from iceduck.spec.transforms import Operation as Op
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
)

DAY_US = 86_400_000_000

_PYICEBERG_TYPES: dict[str, Any] = {
    "int": pyt.IntegerType(),
    "long": pyt.LongType(),
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


@st.composite
def decimals(draw: st.DrawFn) -> tuple[DecimalType, Decimal]:
    precision = draw(st.integers(1, 38))
    scale = draw(st.integers(0, precision))
    n = draw(st.integers(-(10**precision) + 1, 10**precision - 1))
    return DecimalType(precision, scale), v.from_unscaled(n, scale)


# ---------------------------------------------------------------------------------------------
# Parsing and canonical text
# ---------------------------------------------------------------------------------------------


def test_parse_and_canonical_text() -> None:
    for text in ("identity", "bucket[16]", "truncate[4]", "year", "month", "day", "hour", "void"):
        assert str(tr.parse_transform(text)) == text
    assert tr.parse_transform(" Bucket[ 16 ] ") == tr.BucketTransform(16)
    assert tr.parse_transform("truncate[10]") == tr.TruncateTransform(10)
    assert tr.parse_transform("YEAR") is tr.YEAR
    for odd in ("zorder", "bucket[0]", "bucket[x]", "truncate", "geohash[3]"):
        t = tr.parse_transform(odd)
        assert t == tr.UnknownTransform(odd) and str(t) == odd
        assert t.result_type(INT) == UNKNOWN
        assert t.project_inclusive(INT, "eq", 1) is None  # ignored in filtering
        with pytest.raises(ValidationError, match="unknown transform"):
            t.apply(INT, 1)
    with pytest.raises(ValidationError):
        tr.BucketTransform(0)


def test_transforms_are_frozen_hashable_values() -> None:
    assert {tr.BucketTransform(4), tr.BucketTransform(4), tr.DAY, tr.DayTransform()} == {
        tr.BucketTransform(4),
        tr.DAY,
    }
    with pytest.raises(AttributeError):
        tr.BucketTransform(4).num_buckets = 5  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# Appendix B: hashes and buckets
# ---------------------------------------------------------------------------------------------

TS = v.from_json(TIMESTAMP, "2017-11-16T22:31:08")


def test_hash_values_from_spec_appendix_b() -> None:
    u = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
    cases: list[tuple[IcebergType, Any, int]] = [
        (INT, 34, 2017239379),
        (LONG, 34, 2017239379),
        (DecimalType(4, 2), Decimal("14.20"), -500754589),
        (DATE, v.from_json(DATE, "2017-11-16"), -653330422),
        (TIME, v.from_json(TIME, "22:31:08"), -662762989),
        (TIMESTAMP, TS, -2047944441),
        (TIMESTAMP, v.from_json(TIMESTAMP, "2017-11-16T22:31:08.000001"), -1207196810),
        (TIMESTAMPTZ, v.from_json(TIMESTAMPTZ, "2017-11-16T14:31:08-08:00"), -2047944441),
        (TIMESTAMPTZ, v.from_json(TIMESTAMPTZ, "2017-11-16T14:31:08.000001-08:00"), -1207196810),
        (TIMESTAMP_NS, v.from_json(TIMESTAMP_NS, "2017-11-16T22:31:08"), -2047944441),
        (TIMESTAMP_NS, v.from_json(TIMESTAMP_NS, "2017-11-16T22:31:08.000001001"), -1207196810),
        (TIMESTAMPTZ_NS, v.from_json(TIMESTAMPTZ_NS, "2017-11-16T14:31:08-08:00"), -2047944441),
        (TIMESTAMPTZ_NS, v.from_json(TIMESTAMPTZ_NS, "2017-11-16T14:31:08.000001001-08:00"), -1207196810),
        (STRING, "iceberg", 1210000089),
        (UUID, u, 1488055340),
        (FixedType(4), b"\x00\x01\x02\x03", -188683207),
        (BINARY, b"\x00\x01\x02\x03", -188683207),
        # not bucketable today, but the spec fixes their hash
        (BOOLEAN, True, 1392991556),
        (FLOAT, 1.0, -142385009),
        (FLOAT, 0.0, 1669671676),
        (FLOAT, -0.0, 1669671676),
        (DOUBLE, 1.0, -142385009),
        (DOUBLE, -0.0, 1669671676),
        (STRING, "34", -427558391),  # from the schema evolution section
    ]
    for t, value, expected in cases:
        assert tr.hash_value(t, value) == expected, (t, value)
    assert tr.hash_value(INT, None) is None
    # bucket_N(x) = (hash & Integer.MAX_VALUE) % N
    assert tr.BucketTransform(100).apply(STRING, "iceberg") == 1210000089 % 100
    assert tr.BucketTransform(16).apply(DecimalType(4, 2), Decimal("14.20")) == (-500754589 & 0x7FFFFFFF) % 16


@given(st.binary(max_size=64), st.integers(0, 2**32 - 1))
def test_murmur3_matches_mmh3(data: bytes, seed: int) -> None:
    assert tr.murmur3_32(data, seed) == mmh3.hash(data, seed)


@given(st.integers(-(2**63), 2**63 - 1))
def test_hash_long_is_murmur_of_little_endian_bytes(n: int) -> None:
    assert tr.hash_long(n) == mmh3.hash(n.to_bytes(8, "little", signed=True))


ints = st.integers(-(2**31), 2**31 - 1)
longs = st.integers(-(2**63), 2**63 - 1)
dates = st.integers(-719_162, 2_932_896)  # years 1..9999, PyIceberg uses datetime
timestamps = st.integers(-719_162 * DAY_US, 2_932_897 * DAY_US - 1)
timestamps_ns = st.integers(-719_162 * DAY_US * 1000, 2_932_897 * DAY_US * 1000 - 1)


def _typed(t: IcebergType, values: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[IcebergType, Any]]:
    return values.map(lambda x: (t, x))


bucketable = st.one_of(
    _typed(INT, ints),
    _typed(LONG, longs),
    _typed(DATE, dates),
    _typed(TIME, st.integers(0, DAY_US - 1)),
    _typed(TIMESTAMP, timestamps),
    _typed(TIMESTAMPTZ, timestamps),
    _typed(TIMESTAMP_NS, timestamps_ns),
    _typed(TIMESTAMPTZ_NS, timestamps_ns),
    _typed(STRING, st.text()),
    _typed(UUID, st.uuids()),
    _typed(BINARY, st.binary()),
    st.integers(1, 20).flatmap(lambda n: _typed(FixedType(n), st.binary(min_size=n, max_size=n))),
    decimals(),
)


@given(bucketable, st.integers(1, 10_000))
@settings(max_examples=400)
def test_bucket_agrees_with_pyiceberg(tv: tuple[IcebergType, Any], n: int) -> None:
    t, value = tv
    ours = tr.BucketTransform(n).apply(t, value)
    theirs = pyx.BucketTransform(n).transform(pyiceberg_type(t))(value)
    assert ours == theirs
    assert 0 <= ours < n


@given(ints)
def test_int_and_long_bucket_alike(n: int) -> None:
    # promotion int -> long must not move rows between buckets
    assert tr.BucketTransform(7).apply(INT, n) == tr.BucketTransform(7).apply(LONG, n)


@given(timestamps)
def test_timestamp_ns_buckets_like_micros(micros: int) -> None:
    b = tr.BucketTransform(13)
    for extra in (0, 1, 999):
        assert b.apply(TIMESTAMP_NS, micros * 1000 + extra) == b.apply(TIMESTAMP, micros)


# ---------------------------------------------------------------------------------------------
# Truncate
# ---------------------------------------------------------------------------------------------


def test_truncate_examples_from_spec() -> None:
    t10 = tr.TruncateTransform(10)
    assert t10.apply(INT, 1) == 0
    assert t10.apply(INT, -1) == -10
    assert t10.apply(LONG, 1) == 0
    assert t10.apply(LONG, -1) == -10
    assert tr.TruncateTransform(50).apply(DecimalType(9, 2), Decimal("10.65")) == Decimal("10.50")
    assert tr.TruncateTransform(3).apply(STRING, "iceberg") == "ice"
    assert tr.TruncateTransform(3).apply(BINARY, b"\x01\x02\x03\x04\x05") == b"\x01\x02\x03"
    # strings are cut at code points, never inside one
    assert tr.TruncateTransform(2).apply(STRING, "\U0001f600\u00e9x") == "\U0001f600\u00e9"
    assert tr.TruncateTransform(5).apply(STRING, "ab") == "ab"
    assert tr.TruncateTransform(10).apply(INT, None) is None


truncatable = st.one_of(
    _typed(INT, ints),
    _typed(LONG, longs),
    _typed(STRING, st.text()),
    _typed(BINARY, st.binary()),
    decimals(),
)


@given(truncatable, st.integers(1, 1000))
@settings(max_examples=400)
def test_truncate_agrees_with_pyiceberg(tv: tuple[IcebergType, Any], width: int) -> None:
    t, value = tv
    ours = tr.TruncateTransform(width).apply(t, value)
    theirs = pyx.TruncateTransform(width).transform(pyiceberg_type(t))(value)
    assert ours == theirs
    if isinstance(t, DecimalType):  # and the result keeps the column's scale
        assert ours.as_tuple().exponent == -t.scale


# ---------------------------------------------------------------------------------------------
# Temporal transforms
# ---------------------------------------------------------------------------------------------

temporal = st.one_of(
    _typed(DATE, dates),
    _typed(TIMESTAMP, timestamps),
    _typed(TIMESTAMPTZ, timestamps),
    _typed(TIMESTAMP_NS, timestamps_ns),
    _typed(TIMESTAMPTZ_NS, timestamps_ns),
)
PY_TEMPORAL: dict[str, Any] = {
    "year": pyx.YearTransform(),
    "month": pyx.MonthTransform(),
    "day": pyx.DayTransform(),
}


@given(temporal, st.sampled_from(["year", "month", "day", "hour"]))
@settings(max_examples=500)
def test_temporal_agrees_with_pyiceberg(tv: tuple[IcebergType, Any], name: str) -> None:
    t, value = tv
    ours_t = tr.parse_transform(name)
    if name == "hour" and t == DATE:
        assert not ours_t.can_transform(DATE)
        return
    theirs_t = PY_TEMPORAL.get(name, pyx.HourTransform())
    ours = ours_t.apply(t, value)
    theirs = theirs_t.transform(pyiceberg_type(t))(value)
    assert ours == theirs
    assert ours_t.to_human(t, ours) == theirs_t.to_human_string(pyiceberg_type(t), ours)


@given(temporal)
def test_temporal_against_python_calendar(tv: tuple[IcebergType, Any]) -> None:
    t, value = tv
    if t == DATE:
        when = dt.datetime(1970, 1, 1) + dt.timedelta(days=value)
    else:
        micros = value // 1000 if t.name.endswith("_ns") else value
        when = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
    assert tr.YEAR.apply(t, value) == when.year - 1970
    assert tr.MONTH.apply(t, value) == (when.year - 1970) * 12 + when.month - 1
    assert tr.DAY.apply(t, value) == (when.date() - dt.date(1970, 1, 1)).days
    if t != DATE:
        assert tr.HOUR.apply(t, value) == (when - dt.datetime(1970, 1, 1)) // dt.timedelta(hours=1)


def test_temporal_before_1970_floors() -> None:
    minus_1us = -1  # 1969-12-31 23:59:59.999999
    assert tr.YEAR.apply(TIMESTAMP, minus_1us) == -1
    assert tr.MONTH.apply(TIMESTAMP, minus_1us) == -1
    assert tr.DAY.apply(TIMESTAMP, minus_1us) == -1
    assert tr.HOUR.apply(TIMESTAMP, minus_1us) == -1
    assert tr.HOUR.apply(TIMESTAMP_NS, -1) == -1
    assert tr.DAY.apply(DATE, -1) == -1
    assert tr.MONTH.apply(DATE, v.from_json(DATE, "1969-01-01")) == -12
    assert tr.YEAR.to_human(TIMESTAMP, -1) == "1969"
    assert tr.MONTH.to_human(TIMESTAMP, -1) == "1969-12"
    assert tr.DAY.to_human(TIMESTAMP, -1) == "1969-12-31"
    assert tr.HOUR.to_human(TIMESTAMP, -1) == "1969-12-31-23"


def test_human_partition_values() -> None:
    ts = v.from_json(TIMESTAMP, "2026-10-02T13:45:00")
    assert tr.YEAR.to_human(TIMESTAMP, tr.YEAR.apply(TIMESTAMP, ts)) == "2026"
    assert tr.MONTH.to_human(TIMESTAMP, tr.MONTH.apply(TIMESTAMP, ts)) == "2026-10"
    assert tr.DAY.to_human(TIMESTAMP, tr.DAY.apply(TIMESTAMP, ts)) == "2026-10-02"
    assert tr.HOUR.to_human(TIMESTAMP, tr.HOUR.apply(TIMESTAMP, ts)) == "2026-10-02-13"
    assert tr.IDENTITY.to_human(DATE, 17486) == "2017-11-16"
    assert tr.IDENTITY.to_human(TIMESTAMP, TS) == "2017-11-16T22:31:08.000000"
    assert tr.IDENTITY.to_human(BINARY, b"\x01\x02") == "AQI="
    assert tr.IDENTITY.to_human(DecimalType(4, 2), Decimal("14.20")) == "14.20"
    assert tr.BucketTransform(4).to_human(INT, 3) == "3"
    assert tr.VOID.to_human(INT, None) == "null"
    assert tr.IDENTITY.to_human(STRING, None) == "null"


def test_partition_path() -> None:
    ts = v.from_json(TIMESTAMP, "2026-10-02T13:45:00")
    path = tr.partition_path(
        [
            ("ts_day", tr.DAY, TIMESTAMP, tr.DAY.apply(TIMESTAMP, ts)),
            ("id_bucket", tr.BucketTransform(16), LONG, 5),
            ("name", tr.IDENTITY, STRING, "a b/c~*"),
            ("n", tr.IDENTITY, STRING, None),
        ]
    )
    assert path == "ts_day=2026-10-02/id_bucket=5/name=a+b%2Fc%7E*/n=null"


# ---------------------------------------------------------------------------------------------
# Types: which sources each transform takes, and the result types
# ---------------------------------------------------------------------------------------------

ALL_PRIMITIVES: list[IcebergType] = [
    BOOLEAN, INT, LONG, FLOAT, DOUBLE, DecimalType(9, 2), DATE, TIME, TIMESTAMP, TIMESTAMPTZ,
    TIMESTAMP_NS, TIMESTAMPTZ_NS, STRING, UUID, FixedType(4), BINARY, UNKNOWN, VARIANT,
    GeometryType(), GeographyType(),
]  # fmt: skip


def test_source_types_per_spec_table() -> None:
    def accepted(t: tr.Transform) -> set[str]:
        return {x.name for x in ALL_PRIMITIVES if t.can_transform(x)}

    timestamps_all = {"timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"}
    assert accepted(tr.IDENTITY) == {x.name for x in ALL_PRIMITIVES} - {"geometry", "geography", "variant"}
    assert accepted(tr.BucketTransform(2)) == {
        "int", "long", "decimal", "date", "time", "string", "uuid", "fixed", "binary"
    } | timestamps_all  # fmt: skip
    assert accepted(tr.TruncateTransform(2)) == {"int", "long", "decimal", "string", "binary"}
    for t in (tr.YEAR, tr.MONTH, tr.DAY):
        assert accepted(t) == {"date"} | timestamps_all
    assert accepted(tr.HOUR) == timestamps_all
    assert accepted(tr.VOID) == {x.name for x in ALL_PRIMITIVES}
    assert not tr.IDENTITY.can_transform(ListType(1, INT))


def test_result_types() -> None:
    dec = DecimalType(9, 2)
    assert tr.IDENTITY.result_type(dec) == dec
    assert tr.BucketTransform(8).result_type(STRING) == INT
    assert tr.TruncateTransform(8).result_type(dec) == dec
    assert tr.YEAR.result_type(TIMESTAMP) == INT
    assert tr.MONTH.result_type(DATE) == INT
    assert tr.DAY.result_type(TIMESTAMPTZ_NS) == DATE
    assert tr.HOUR.result_type(TIMESTAMP) == INT
    assert tr.VOID.result_type(STRING) == STRING
    assert tr.VOID.apply(STRING, "x") is None
    with pytest.raises(ValidationError, match="cannot be applied to type float"):
        tr.BucketTransform(8).result_type(FLOAT)
    with pytest.raises(ValidationError, match="takes 1 source column"):
        tr.IDENTITY.result_type(INT, LONG)


# ---------------------------------------------------------------------------------------------
# Order: preservation and satisfaction
# ---------------------------------------------------------------------------------------------

DEC = DecimalType(20, 3)
ORDERED_SOURCES: dict[IcebergType, st.SearchStrategy[Any]] = {
    INT: ints,
    LONG: longs,
    STRING: st.text(max_size=6),
    BINARY: st.binary(max_size=6),
    DATE: dates,
    TIMESTAMP: timestamps,
    TIMESTAMP_NS: timestamps_ns,
    DEC: st.integers(-(10**20) + 1, 10**20 - 1).map(lambda n: v.from_unscaled(n, 3)),
}


def _order_key(t: IcebergType, x: Any) -> Any:
    return x.encode("utf-8", "surrogatepass") if t.name == "string" else x


def _applicable(t: IcebergType) -> list[tr.Transform]:
    candidates: list[tr.Transform] = [
        tr.IDENTITY, tr.YEAR, tr.MONTH, tr.DAY, tr.HOUR, tr.VOID, tr.BucketTransform(5),
        *(tr.TruncateTransform(w) for w in (1, 2, 3, 4, 10, 20)),
    ]  # fmt: skip
    return [c for c in candidates if c.can_transform(t)]


@given(st.data())
@settings(max_examples=300)
def test_order_preserving_transforms_are_monotone(data: st.DataObject) -> None:
    t = data.draw(st.sampled_from(list(ORDERED_SOURCES)))
    a, b = data.draw(ORDERED_SOURCES[t]), data.draw(ORDERED_SOURCES[t])
    if _order_key(t, b) < _order_key(t, a):
        a, b = b, a
    for transform in _applicable(t):
        if transform.preserves_order:
            fa, fb = transform.apply(t, a), transform.apply(t, b)
            rt = transform.result_type(t)
            assert _order_key(rt, fa) <= _order_key(rt, fb), transform


def test_preserves_order_flags() -> None:
    assert tr.IDENTITY.preserves_order and tr.DAY.preserves_order and tr.TruncateTransform(3).preserves_order
    assert not tr.BucketTransform(3).preserves_order and not tr.VOID.preserves_order


def test_satisfies_order_of_examples() -> None:
    assert tr.HOUR.satisfies_order_of(tr.DAY) and tr.DAY.satisfies_order_of(tr.YEAR)
    assert not tr.YEAR.satisfies_order_of(tr.MONTH)
    assert tr.IDENTITY.satisfies_order_of(tr.TruncateTransform(3))
    assert not tr.IDENTITY.satisfies_order_of(tr.BucketTransform(3))
    assert tr.BucketTransform(3).satisfies_order_of(tr.BucketTransform(3))
    assert not tr.BucketTransform(3).satisfies_order_of(tr.BucketTransform(6))
    assert tr.TruncateTransform(4).satisfies_order_of(tr.TruncateTransform(2), STRING)
    assert not tr.TruncateTransform(2).satisfies_order_of(tr.TruncateTransform(4), STRING)
    assert tr.TruncateTransform(2).satisfies_order_of(tr.TruncateTransform(4), INT)
    assert not tr.TruncateTransform(4).satisfies_order_of(tr.TruncateTransform(6), INT)
    assert not tr.TruncateTransform(2).satisfies_order_of(tr.TruncateTransform(4))  # type unknown
    assert tr.DAY.satisfies_order_of(tr.VOID)


@given(st.data())
@settings(max_examples=300)
def test_satisfies_order_of_holds_on_sorted_data(data: st.DataObject) -> None:
    t = data.draw(st.sampled_from(list(ORDERED_SOURCES)))
    items = data.draw(st.lists(ORDERED_SOURCES[t], min_size=1, max_size=8))
    transforms = _applicable(t)
    for a in transforms:

        def sort_key(x: Any, a: tr.Transform = a) -> Any:
            return _order_key(a.result_type(t), a.apply(t, x)) if a != tr.VOID else 0

        rows = sorted(items, key=sort_key)
        for b in transforms:
            if b != tr.VOID and a.satisfies_order_of(b, t):
                keys = [_order_key(b.result_type(t), b.apply(t, x)) for x in rows]
                assert keys == sorted(keys), (a, b)


# ---------------------------------------------------------------------------------------------
# Projections
# ---------------------------------------------------------------------------------------------

_BINARY_OPS: dict[Op, Callable[[Any, Any], bool]] = {
    Op.LT: operator.lt,
    Op.LT_EQ: operator.le,
    Op.GT: operator.gt,
    Op.GT_EQ: operator.ge,
    Op.EQ: operator.eq,
    Op.NOT_EQ: operator.ne,
    Op.IN: lambda x, s: x in s,
    Op.NOT_IN: lambda x, s: x not in s,
    Op.STARTS_WITH: lambda x, s: x.startswith(s),
    Op.NOT_STARTS_WITH: lambda x, s: not x.startswith(s),
}


def _holds(t: IcebergType, op: Op, x: Any, literal: Any) -> bool:
    if op == Op.IS_NULL:
        return x is None
    if op == Op.NOT_NULL:
        return x is not None
    if x is None:
        return False
    if op in (Op.IN, Op.NOT_IN):
        return _BINARY_OPS[op](x, literal)
    # strings compare as UTF-8 bytes (code points) in Iceberg
    return _BINARY_OPS[op](_order_key(t, x), _order_key(t, literal))


# small domains, so literals and values often share partitions and hit the edges
PROJECTABLE: dict[IcebergType, st.SearchStrategy[Any]] = {
    INT: st.integers(-300, 300),
    LONG: st.integers(-(10**6), 10**6),
    STRING: st.text("ab\U0010ffff", max_size=5),
    BINARY: st.binary(max_size=4).map(lambda b: bytes(c % 3 for c in b)),
    DATE: st.integers(-800, 800),
    TIMESTAMP: st.integers(-3 * DAY_US, 3 * DAY_US) | st.sampled_from([-1, 0, 1, DAY_US, -DAY_US]),
    TIMESTAMP_NS: st.integers(-3 * DAY_US * 1000, 3 * DAY_US * 1000),
    DecimalType(5, 2): st.integers(-3000, 3000).map(lambda n: v.from_unscaled(n, 2)),
}


@given(st.data())
@settings(max_examples=1500)
def test_projections_are_sound(data: st.DataObject) -> None:
    t = data.draw(st.sampled_from(list(PROJECTABLE)))
    same = PROJECTABLE[t]
    literal = data.draw(same)
    x = data.draw(st.one_of(same, st.none()))
    op = data.draw(st.sampled_from([o for o in Op if o not in (Op.IS_NAN, Op.NOT_NAN)]))
    if op in (Op.STARTS_WITH, Op.NOT_STARTS_WITH) and t.name not in ("string", "binary"):
        return
    if op in (Op.IN, Op.NOT_IN):
        literal = frozenset([literal, *data.draw(st.lists(same, max_size=3))])
    matches = _holds(t, op, x, literal)
    for transform in _applicable(t):
        p = transform.apply(t, x)
        result_type = transform.result_type(t)
        inclusive = transform.project_inclusive(t, op, literal)
        if inclusive is not None and matches:
            assert _holds(result_type, inclusive[0], p, inclusive[1]), (transform, op, inclusive)
        strict = transform.project_strict(t, op, literal)
        if strict is not None and _holds(result_type, strict[0], p, strict[1]):
            assert matches, (transform, op, strict)


def test_projection_examples() -> None:
    x = v.from_json(TIMESTAMP, "2017-11-16T22:31:08")
    # spec: ts > X projects to ts_day >= day(X)
    assert tr.DAY.project_inclusive(TIMESTAMP, "gt", x) == (Op.GT_EQ, 17486)
    assert tr.DAY.project_inclusive(TIMESTAMP, "lt", v.from_json(TIMESTAMP, "2017-11-16T00:00:00")) == (
        Op.LT_EQ,
        17485,
    )
    assert tr.DAY.project_strict(TIMESTAMP, "lt", x) == (Op.LT, 17486)
    assert tr.DAY.project_inclusive(TIMESTAMP, "not_eq", x) is None
    assert tr.BucketTransform(16).project_inclusive(INT, "eq", 34) == (Op.EQ, (2017239379 & 0x7FFFFFFF) % 16)
    assert tr.BucketTransform(16).project_inclusive(INT, "in", [1, 2]) == (
        Op.IN,
        frozenset({tr.BucketTransform(16).apply(INT, 1), tr.BucketTransform(16).apply(INT, 2)}),
    )
    assert tr.BucketTransform(16).project_inclusive(INT, "lt", 34) is None
    assert tr.BucketTransform(16).project_strict(INT, "not_eq", 34) == (Op.NOT_EQ, 2017239379 % 16)
    t10 = tr.TruncateTransform(10)
    assert t10.project_inclusive(INT, "lt", 10) == (Op.LT_EQ, 0)
    assert t10.project_inclusive(INT, "gt", 9) == (Op.GT_EQ, 10)
    assert t10.project_strict(INT, "lt_eq", 9) == (Op.LT, 10)
    assert t10.project_inclusive(INT, "is_null") == (Op.IS_NULL, None)
    t3 = tr.TruncateTransform(3)
    assert t3.project_inclusive(STRING, "starts_with", "iceberg") == (Op.EQ, "ice")
    assert t3.project_inclusive(STRING, "starts_with", "ic") == (Op.STARTS_WITH, "ic")
    assert t3.project_strict(STRING, "starts_with", "iceberg") is None
    assert t3.project_strict(STRING, "not_starts_with", "iceberg") == (Op.NOT_EQ, "ice")
    assert tr.IDENTITY.project_strict(STRING, "starts_with", "a") == (Op.STARTS_WITH, "a")
    assert tr.IDENTITY.project_inclusive(DOUBLE, "is_nan") == (Op.IS_NAN, None)
    assert tr.VOID.project_inclusive(INT, "not_null") is None
    with pytest.raises(ValidationError, match="unknown predicate"):
        tr.IDENTITY.project_inclusive(INT, "like", 1)


@given(st.integers(-(10**9), 10**9))
def test_negative_values_project_without_off_by_one(micros: int) -> None:
    # floor semantics before 1970: the partition of the literal itself is included; and before
    # 1970 the next one too, where Iceberg 0.10.0 and earlier (rounding toward zero) put such rows
    assume(micros % DAY_US != 0)
    day = tr.DAY.apply(TIMESTAMP, micros)
    eq = (Op.EQ, day) if day >= 0 else (Op.IN, frozenset({day, day + 1}))
    assert tr.DAY.project_inclusive(TIMESTAMP, "eq", micros) == eq
    assert tr.DAY.project_inclusive(TIMESTAMP, "lt_eq", micros) == (Op.LT_EQ, day if day >= 0 else day + 1)



_KEEPS_SAMPLES: list[tuple[IcebergType, list[Any]]] = [
    (INT, [-7, 0, 41]),
    (LONG, [-(2**40), 3]),
    (DATE, [-1, 0, 19_723]),
    (TIMESTAMP, [-1, 0, 1_700_000_000_123_456]),
    (TIMESTAMP_NS, [-1, 1_700_000_000_123_456_789]),
    (STRING, ["", "abc", "abcdefgh"]),
    (DecimalType(9, 2), [Decimal("-1.25"), Decimal("3.10")]),
]


@pytest.mark.parametrize("text", ["identity", "bucket[4]", "truncate[3]", "year", "month", "day", "hour", "void"])
def test_keeps_values_only_where_the_partition_value_is_the_source_value(text: str) -> None:
    """`keeps_values` (the reader then takes a file's partition value as the column's value in
    every row): the result type is the source type and every value comes back unchanged; it
    holds for identity and the day of a date, and for nothing that changes a value."""
    t = tr.parse_transform(text)
    for source, samples in _KEEPS_SAMPLES:
        if not t.can_transform(source):
            assert not t.keeps_values(source) or text == "identity", (text, source)
            continue
        unchanged = t.result_type(source) == source and all(t.apply(source, s) == s for s in samples)
        assert t.keeps_values(source) == unchanged, (text, source)
    assert tr.parse_transform("day").keeps_values(DATE)
    assert not tr.parse_transform("day").keeps_values(TIMESTAMP)
