"""Strict partition projection: a partition that satisfies the projected predicate holds only rows
that match the predicate, as DuckDB evaluates the WHERE of a DELETE (a DELETE drops such a partition's
files unread, so a wrong rule deletes rows nobody asked to delete).

Independent truth: DuckDB evaluating the predicate, written as SQL, on the values themselves (one
query per example). The values include the literals, their neighbours, the first and last values of
each value's partition (its edges), values before 1970 and NULL."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iceduck import expr as ex
from iceduck.expr.expressions import Comparison, SetPredicate, Unary
from iceduck.expr.visitors import PartitionEvaluator, project, project_strict
from iceduck.spec.partitioning import PartitionField, PartitionSpec
from iceduck.spec.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Operation,
    Transform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from iceduck.spec.types import (
    BINARY,
    DATE,
    DOUBLE,
    INT,
    LONG,
    STRING,
    TIMESTAMP,
    TIMESTAMP_NS,
    TIMESTAMPTZ,
    DecimalType,
    IcebergType,
    NestedField,
    Schema,
)
from iceduck.spec.values import MICROS_PER_DAY, NANOS_PER_DAY

DEC = DecimalType(9, 2)
_DAY = {"timestamp": MICROS_PER_DAY, "timestamptz": MICROS_PER_DAY, "timestamp_ns": NANOS_PER_DAY}
_YEARS = 3  # values range over a few years either side of 1970-01-01


# -- values of each source type (internal representation) and their SQL text ---------------------


def _sql_value(t: IcebergType, v: Any) -> str:
    if v is None:
        return "NULL"
    kind = t.name
    if kind == "int":
        return f"CAST({v} AS INTEGER)"
    if kind == "long":
        return f"CAST({v} AS BIGINT)"
    if kind == "double":
        return f"'{v!r}'::DOUBLE"
    if kind == "decimal":
        return f"'{v}'::DECIMAL(9, 2)"
    if kind == "string":
        return "'" + v.replace("'", "''") + "'"
    if kind == "binary":
        return f"from_hex('{v.hex()}')"
    if kind == "date":
        return f"(DATE '1970-01-01' + CAST({v} AS INTEGER))"
    if kind == "timestamp":
        return f"make_timestamp(CAST({v} AS BIGINT))"
    if kind == "timestamptz":
        return f"make_timestamp(CAST({v} AS BIGINT))::TIMESTAMPTZ"  # the session is in UTC
    if kind == "timestamp_ns":
        return f"make_timestamp_ns(CAST({v} AS BIGINT))"
    raise AssertionError(kind)


_CHARS = "ab\u00e9\u20ac\U0001d11e"  # one to four UTF-8 bytes each: code points are not bytes


def _values(t: IcebergType) -> st.SearchStrategy[Any]:
    kind = t.name
    if kind in ("int", "long"):
        return st.integers(-40, 40) | st.sampled_from([-(2**31), 2**31 - 1])
    if kind == "double":
        return st.sampled_from([float("nan"), float("inf"), float("-inf"), -0.0, 0.0]) | st.floats(
            -5, 5, allow_nan=False
        ).map(lambda f: round(f, 1))
    if kind == "decimal":
        return st.integers(-400, 400).map(lambda n: Decimal(n).scaleb(-2))
    if kind == "string":
        return st.text(_CHARS, max_size=5)
    if kind == "binary":
        return st.binary(max_size=4).map(lambda b: bytes(c % 4 for c in b)) | st.binary(max_size=3)
    if kind == "date":
        return st.integers(-_YEARS * 366, _YEARS * 366)
    per_day = _DAY[kind]
    days = st.integers(-_YEARS * 366, _YEARS * 366)
    offsets = st.sampled_from([0, 1, -1, per_day // 24, per_day // 2]) | st.integers(0, per_day - 1)
    return st.builds(lambda d, o: d * per_day + o, days, offsets)


def _neighbours(t: IcebergType, v: Any) -> list[Any]:
    kind = t.name
    if kind in ("int", "long", "date", "timestamp", "timestamptz", "timestamp_ns"):
        return [v - 1, v, v + 1]
    if kind == "decimal":
        return [v - Decimal("0.01"), v, v + Decimal("0.01")]
    if kind in ("string", "binary"):
        return [v, v + v[:1], v + ("a" if kind == "string" else b"\x00")]
    return [v]


def _month_start(months: int) -> int:
    return (dt.date(1970 + months // 12, months % 12 + 1, 1) - dt.date(1970, 1, 1)).days


def _edges(transform: Transform, t: IcebergType, v: Any) -> list[Any]:
    """The first and last values of v's partition (where a projection's bound is tested)."""
    p = transform.apply(t, v)
    if p is None or isinstance(transform, IdentityTransform | BucketTransform):
        return []
    if isinstance(transform, TruncateTransform):
        w = transform.width
        if t.name in ("int", "long"):
            return [p, p + w - 1]
        if t.name == "decimal":
            return [p, p + Decimal(w - 1).scaleb(-2)]
        return [p, p + ("\U0001d11e" if t.name == "string" else b"\xff"), p + p[-1:]]
    per_day = 1 if t.name == "date" else _DAY[t.name]
    if isinstance(transform, HourTransform):
        per_hour = per_day // 24
        first, after = p * per_hour, (p + 1) * per_hour
    elif isinstance(transform, DayTransform):
        first, after = p * per_day, (p + 1) * per_day
    elif isinstance(transform, MonthTransform):
        first, after = _month_start(p) * per_day, _month_start(p + 1) * per_day
    else:
        assert isinstance(transform, YearTransform)
        first, after = _month_start(12 * p) * per_day, _month_start(12 * p + 12) * per_day
    return [first, after - 1]


def _written(transform: Transform, t: IcebergType, v: Any, *, old: bool) -> Any:
    """v's partition value as a writer recorded it; `old`: as Iceberg 0.10.0 and earlier did, which
    rounded a time before 1970 toward zero (one unit high unless v starts its unit)."""
    p = transform.apply(t, v)
    if not old or p is None or not isinstance(transform, _TimeTransforms) or v >= 0:
        return p
    if isinstance(transform, DayTransform) and t.name == "date":
        return p
    return p if v == _edges(transform, t, v)[0] else p + 1


# -- transforms per source type ----------------------------------------------------------------

_TIME = [YearTransform(), MonthTransform(), DayTransform(), HourTransform()]
_TimeTransforms = YearTransform | MonthTransform | DayTransform | HourTransform


def _transforms(t: IcebergType) -> list[Transform]:
    kind = t.name
    base: list[Transform] = [IdentityTransform(), VoidTransform()]
    if kind != "double":
        base += [BucketTransform(n) for n in (1, 3)]
    if kind in ("int", "long", "decimal", "string", "binary"):
        base += [TruncateTransform(w) for w in (1, 2, 3, 10)]
    if kind == "date":
        base += _TIME[:3]
    if kind.startswith("timestamp"):
        base += _TIME
    return base


_TYPES: list[IcebergType] = [
    INT,
    LONG,
    DOUBLE,
    DEC,
    STRING,
    BINARY,
    DATE,
    TIMESTAMP,
    TIMESTAMPTZ,
    TIMESTAMP_NS,
]

_ORDERED = ["eq", "not_eq", "lt", "lt_eq", "gt", "gt_eq"]


def _leaves(t: IcebergType) -> st.SearchStrategy[ex.Predicate]:
    x = ex.ref("x")
    # a NaN literal binds inexactly (no proof), so literals are never NaN
    values = _values(t).filter(lambda v: not (isinstance(v, float) and v != v))
    comparisons = st.builds(lambda op, v: Comparison(Operation(op), x, v), st.sampled_from(_ORDERED), values)
    sets = st.builds(
        lambda op, vs: SetPredicate(Operation(op), x, frozenset(vs)),
        st.sampled_from(["in", "not_in"]),
        st.lists(values, min_size=1, max_size=3),
    )
    unary_ops = ["is_null", "not_null"] + (["is_nan", "not_nan"] if t.name == "double" else [])
    unary = st.builds(lambda op: Unary(Operation(op), x), st.sampled_from(unary_ops))
    out = comparisons | sets | unary
    if t.name == "string":
        prefix = st.builds(
            lambda op, v: Comparison(Operation(op), x, v),
            st.sampled_from(["starts_with", "not_starts_with"]),
            _values(t),
        )
        out = out | prefix
    return out


def _predicates(t: IcebergType) -> st.SearchStrategy[ex.Predicate]:
    return st.recursive(
        _leaves(t),
        lambda kids: st.builds(ex.And, kids, kids) | st.builds(ex.Or, kids, kids) | st.builds(ex.Not, kids),
        max_leaves=3,
    )


def _literals(p: ex.Predicate) -> list[Any]:
    out: list[Any] = []
    for leaf in ex.leaves(p):
        if isinstance(leaf, Comparison):
            out.append(leaf.value)
        elif isinstance(leaf, SetPredicate):
            out.extend(leaf.values)
    return out


def _sql(t: IcebergType, p: ex.Predicate) -> str:
    if isinstance(p, ex.And):
        return f"({_sql(t, p.left)} AND {_sql(t, p.right)})"
    if isinstance(p, ex.Or):
        return f"({_sql(t, p.left)} OR {_sql(t, p.right)})"
    if isinstance(p, ex.Not):
        return f"(NOT {_sql(t, p.child)})"
    assert isinstance(p, Unary | Comparison | SetPredicate)
    op = p.op.value
    if isinstance(p, Unary):
        return {
            "is_null": "(x IS NULL)",
            "not_null": "(x IS NOT NULL)",
            "is_nan": "isnan(x)",
            "not_nan": "(NOT isnan(x))",
        }[op]
    if isinstance(p, SetPredicate):
        values = ", ".join(_sql_value(t, v) for v in sorted(p.values, key=repr))
        return f"(x {'NOT IN' if op == 'not_in' else 'IN'} ({values}))"
    assert isinstance(p, Comparison)
    lit = _sql_value(t, p.value)
    if op == "starts_with":
        return f"starts_with(x, {lit})"
    if op == "not_starts_with":
        return f"(NOT starts_with(x, {lit}))"
    symbol = {"eq": "=", "not_eq": "<>", "lt": "<", "lt_eq": "<=", "gt": ">", "gt_eq": ">="}[op]
    return f"(x {symbol} {lit})"


def _schema(t: IcebergType) -> Schema:
    return Schema((NestedField(1, "x", t),))


def _sql_type(t: IcebergType) -> str:
    return {
        "int": "INTEGER",
        "long": "BIGINT",
        "double": "DOUBLE",
        "decimal": "DECIMAL(9, 2)",
        "string": "VARCHAR",
        "binary": "BLOB",
        "date": "DATE",
        "timestamp": "TIMESTAMP",
        "timestamptz": "TIMESTAMPTZ",
        "timestamp_ns": "TIMESTAMP_NS",
    }[t.name]


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    c.execute("SET TimeZone = 'UTC'")
    yield c
    c.close()


def _selected(con: duckdb.DuckDBPyConnection, t: IcebergType, p: ex.Predicate, values: list[Any]) -> set[int]:
    """The positions of the values DuckDB's WHERE selects (as a DELETE would)."""
    rows = ", ".join(f"({i}, {_sql_value(t, v)})" for i, v in enumerate(values))
    query = f"SELECT i FROM (SELECT i, CAST(v AS {_sql_type(t)}) AS x FROM (VALUES {rows}) r(i, v)) WHERE {_sql(t, p)}"
    return {r[0] for r in con.execute(query).fetchall()}


def _has_constant(p: ex.Predicate) -> bool:
    if isinstance(p, ex.AlwaysTrue | ex.AlwaysFalse):
        return True
    return any(
        _has_constant(c) for c in (getattr(p, n, None) for n in ("left", "right", "child")) if c is not None
    )


Case = tuple[IcebergType, list[Transform], ex.Predicate, list[Any], bool]


@st.composite
def _cases(draw: st.DrawFn) -> Case:
    t = draw(st.sampled_from(_TYPES))
    transforms = draw(st.lists(st.sampled_from(_transforms(t)), min_size=1, max_size=2, unique_by=str))
    p = draw(_predicates(t))
    values = draw(st.lists(_values(t), max_size=6))
    return t, transforms, p, values, draw(st.booleans())


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_cases())
def test_a_partition_the_strict_projection_accepts_holds_only_matching_rows(
    con: duckdb.DuckDBPyConnection, case: Case
) -> None:
    """`old`: the partition values are as Iceberg 0.10.0 and earlier wrote them (Java's readers allow
    for those; a DELETE of such a table must not drop a file holding a row it does not match)."""
    t, transforms, p, drawn, old = case
    schema = _schema(t)
    bound = ex.bind(p, schema)
    if _has_constant(bound):
        return  # iceduck.read.strict gives up the proof when binding was not exact
    spec = PartitionSpec(
        0, tuple(PartitionField((1,), 1000 + i, f"p{i}", tf) for i, tf in enumerate(transforms))
    )
    projected = project_strict(bound, spec, schema)
    if isinstance(projected, ex.AlwaysFalse):
        return
    evaluator = PartitionEvaluator(projected, spec)
    candidates = [None]
    for v in [*drawn, *_literals(p)]:
        for n in _neighbours(t, v):
            candidates.append(n)
            for tf in transforms:
                candidates.extend(_edges(tf, t, n))
    candidates = [v for v in candidates if _in_range(t, v)]
    partitions = [[_written(tf, t, v, old=old) for tf in transforms] for v in candidates]
    accepted = [i for i, part in enumerate(partitions) if evaluator.matches(part)]
    if not accepted:
        return
    selected = _selected(con, t, p, candidates)
    wrongly = [(candidates[i], partitions[i]) for i in accepted if i not in selected]
    assert not wrongly, (
        f"{p} on {t} by {[str(tf) for tf in transforms]}: projected {projected}; rows deleted: {wrongly}"
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_cases())
def test_a_partition_holding_a_matching_row_is_kept_by_the_inclusive_projection(
    con: duckdb.DuckDBPyConnection, case: Case
) -> None:
    """The mirror rule, for scans: a partition that holds a row the predicate matches is never
    pruned, also where an old writer put a pre-1970 row one unit high."""
    t, transforms, p, drawn, old = case
    schema = _schema(t)
    bound = ex.bind(p, schema)
    if _has_constant(bound):
        return  # an inexact literal bound to TRUE/FALSE: DuckDB's evaluation is not the bound one
    spec = PartitionSpec(
        0, tuple(PartitionField((1,), 1000 + i, f"p{i}", tf) for i, tf in enumerate(transforms))
    )
    evaluator = PartitionEvaluator(project(bound, spec, schema), spec)
    candidates = [None]
    for v in [*drawn, *_literals(p)]:
        for n in _neighbours(t, v):
            candidates.append(n)
            for tf in transforms:
                candidates.extend(_edges(tf, t, n))
    candidates = [v for v in candidates if _in_range(t, v)]
    partitions = [[_written(tf, t, v, old=old) for tf in transforms] for v in candidates]
    missed = [(candidates[i], partitions[i]) for i in sorted(_selected(con, t, p, candidates))]
    missed = [(v, part) for v, part in missed if not evaluator.matches(part)]
    assert not missed, f"{p} on {t} by {[str(tf) for tf in transforms]}: rows pruned: {missed}"


@pytest.mark.parametrize(
    ("transform", "op", "literal", "old_partition"),
    [
        (YearTransform(), "eq", -MICROS_PER_DAY, 0),  # year 1970 holds 1969-12-31
        (YearTransform(), "lt", -MICROS_PER_DAY + 1, 0),  # `ts < 1969-12-31 00:00:00.000001`
        (MonthTransform(), "in", [-MICROS_PER_DAY], 0),  # month 1970-01 holds 1969-12-31
        (HourTransform(), "lt_eq", -1, 0),  # hour 0 holds 1969-12-31 23:59:59.999999
    ],
)
def test_an_inclusive_time_projection_keeps_pre_1970_values_written_one_high(
    transform: Transform, op: str, literal: Any, old_partition: int
) -> None:
    """The partition an old writer gave a matching row is read (Java's readers allow for it too)."""
    spec = PartitionSpec(0, (PartitionField((1,), 1000, "p", transform),))
    schema = _schema(TIMESTAMP)
    leaf = (SetPredicate if op == "in" else Comparison)(Operation(op), ex.ref("x"), literal)
    evaluator = PartitionEvaluator(project(ex.bind(leaf, schema), spec, schema), spec)
    assert evaluator.matches([old_partition])
    assert evaluator.matches([old_partition - 1])  # where a spec-conforming writer puts the row


def _in_range(t: IcebergType, v: Any) -> bool:
    if v is None:
        return True
    if t.name == "int":
        return bool(-(2**31) <= v < 2**31)
    if t.name == "long":
        return bool(-(2**63) <= v < 2**63)
    if t.name == "decimal":
        return bool(abs(v) < Decimal(10) ** 7)
    return True


# -- partitions written by Iceberg 0.10.0 and earlier: a time before 1970 rounded toward zero ------

_DEC_31_1969 = -MICROS_PER_DAY  # 1969-12-31 00:00, old writers put it in year 0 (1970), not -1


@pytest.mark.parametrize(
    ("transform", "op", "literal", "old_partition"),
    [
        (YearTransform(), "not_eq", _DEC_31_1969, 0),  # `ts <> 1969-12-31`: year 1970 holds it
        (YearTransform(), "not_in", [_DEC_31_1969], 0),
        # `ts >= 1969-10-31`: month -2 holds 1969-10-30
        (MonthTransform(), "gt_eq", -62 * MICROS_PER_DAY, -2),
        # `ts > 1969-12-30 23:59:59.999999`: day -1 holds 1969-12-30 12:00
        (DayTransform(), "gt", -MICROS_PER_DAY - 1, -1),
        (HourTransform(), "not_eq", -1, 0),  # hour 0 holds 1969-12-31 23:59:59.999999
    ],
)
def test_a_strict_time_projection_allows_for_pre_1970_values_written_one_high(
    transform: Transform, op: str, literal: Any, old_partition: int
) -> None:
    """The partition an old writer gave a row the predicate does not match is not proven whole."""
    projected = transform.project_strict(TIMESTAMP, op, literal)
    assert projected is not None
    spec = PartitionSpec(0, (PartitionField((1,), 1000, "p", transform),))
    schema = _schema(TIMESTAMP)
    leaf = (SetPredicate if op == "not_in" else Comparison)(Operation(op), ex.ref("x"), literal)
    evaluator = PartitionEvaluator(project_strict(ex.bind(leaf, schema), spec, schema), spec)
    assert not evaluator.matches([old_partition])
    assert not evaluator.matches([old_partition - 1])  # nor where a spec-conforming writer puts such rows
