"""Expressions: NOT removal, binding, and the soundness of every pruning evaluator.

Independent truth: DuckDB itself evaluates the predicates on the same rows (the row evaluator must
agree with it, NaN and NULL included), and the pruning evaluators are checked by property: whenever
one says a file, partition or manifest cannot match, no row in it satisfies the predicate.
"""

from __future__ import annotations

import datetime as dt
import math
import struct
from decimal import Decimal
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iceduck import expr as ex
from iceduck.expr.visitors import MetricsEvaluator, PartitionEvaluator, SummaryEvaluator, project
from iceduck.spec.manifest import DataFile
from iceduck.spec.manifest_list import PartitionFieldSummary
from iceduck.spec.partitioning import PartitionField, PartitionSpec
from iceduck.spec.transforms import Operation, parse_transform
from iceduck.spec.types import DATE, DOUBLE, INT, LONG, STRING, TIMESTAMP, DecimalType, NestedField, Schema
from iceduck.spec.values import to_bytes

SCHEMA = Schema(
    (
        NestedField(1, "i", LONG),
        NestedField(2, "s", STRING),
        NestedField(3, "f", DOUBLE),
    )
)
OPS = ["=", "!=", "<", "<=", ">", ">="]

ints = st.one_of(st.none(), st.integers(-5, 5))
strings = st.one_of(st.none(), st.sampled_from(["", "a", "ab", "b", "ba", "é"]))
floats = st.one_of(st.none(), st.sampled_from([-1.5, 0.0, 1.0, 2.5, math.inf, -math.inf, math.nan]))


def _leaf(column: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[ex.Predicate]:
    literal = values.filter(lambda v: v is not None and not (isinstance(v, float) and math.isnan(v)))
    return st.one_of(
        st.builds(lambda op, v: ex.compare(op, column, v), st.sampled_from(OPS), literal),
        st.builds(lambda vs: ex.in_(column, vs), st.lists(literal, min_size=1, max_size=3)),
        st.builds(lambda vs: ex.not_in(column, vs), st.lists(literal, min_size=1, max_size=3)),
        st.just(ex.is_null(column)),
        st.just(ex.not_null(column)),
    )


leaves = st.one_of(_leaf("i", ints), _leaf("s", strings), _leaf("f", floats))
predicates = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.builds(ex.and_, children, children),
        st.builds(ex.or_, children, children),
        st.builds(ex.not_, children),
    ),
    max_leaves=6,
)
rows = st.fixed_dictionaries({1: ints, 2: strings, 3: floats})


def _sql(p: ex.Predicate) -> str:
    """The predicate as SQL, for DuckDB to evaluate."""
    if isinstance(p, ex.And):
        return f"({_sql(p.left)} AND {_sql(p.right)})"
    if isinstance(p, ex.Or):
        return f"({_sql(p.left)} OR {_sql(p.right)})"
    if isinstance(p, ex.Not):
        return f"(NOT {_sql(p.child)})"
    if isinstance(p, ex.AlwaysTrue | ex.AlwaysFalse):
        return str(p)
    column = str(p.term)
    if isinstance(p, ex.Unary):
        return f"({column} IS {'NOT ' if p.op == Operation.NOT_NULL else ''}NULL)"
    if isinstance(p, ex.Comparison):
        symbol = {"eq": "=", "not_eq": "!=", "lt": "<", "lt_eq": "<=", "gt": ">", "gt_eq": ">="}[p.op.value]
        return f"({column} {symbol} {_lit(p.value)})"
    assert isinstance(p, ex.SetPredicate)
    values = ", ".join(_lit(v) for v in sorted(p.values, key=repr))
    return f"({column} {'NOT IN' if p.op == Operation.NOT_IN else 'IN'} ({values}))"


def _lit(v: Any) -> str:
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, float):
        return f"'{v}'::DOUBLE"
    return str(v)


@pytest.fixture(scope="module")
def con() -> Any:
    c = duckdb.connect()
    yield c
    c.close()


def _duck(con: Any, p: ex.Predicate, row: dict[int, Any]) -> bool:
    result = con.execute(
        f"SELECT coalesce({_sql(p)}, false) FROM (SELECT ?::BIGINT AS i, ?::VARCHAR AS s, ?::DOUBLE AS f)",
        [row[1], row[2], row[3]],
    ).fetchone()
    return bool(result[0])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(p=predicates, row=rows)
def test_row_evaluator_agrees_with_duckdb(con: Any, p: ex.Predicate, row: dict[int, Any]) -> None:
    bound = ex.bind(p, SCHEMA)
    assert ex.evaluate(bound, row) == _duck(con, p, row)


@settings(max_examples=300, deadline=None)
@given(p=predicates, row=rows)
def test_rewrite_not_keeps_the_selected_rows(p: ex.Predicate, row: dict[int, Any]) -> None:
    names = {"i": 1, "s": 2, "f": 3}
    by_name = {name: row[fid] for name, fid in names.items()}
    plain = _bind_no_rewrite(p)
    assert ex.evaluate(plain, row) == ex.evaluate(ex.bind(ex.rewrite_not(p), SCHEMA), row), by_name
    assert not any(isinstance(n, ex.Not) for n in _nodes(ex.rewrite_not(p)))


def _bind_no_rewrite(p: ex.Predicate) -> ex.Predicate:
    if isinstance(p, ex.And):
        return ex.And(_bind_no_rewrite(p.left), _bind_no_rewrite(p.right))
    if isinstance(p, ex.Or):
        return ex.Or(_bind_no_rewrite(p.left), _bind_no_rewrite(p.right))
    if isinstance(p, ex.Not):
        return ex.Not(_bind_no_rewrite(p.child))
    return ex.bind(p, SCHEMA)


def _nodes(p: ex.Predicate) -> list[ex.Predicate]:
    out = [p]
    if isinstance(p, ex.And | ex.Or):
        out += _nodes(p.left) + _nodes(p.right)
    elif isinstance(p, ex.Not):
        out += _nodes(p.child)
    return out


def test_bind_converts_values_and_resolves_names() -> None:
    schema = Schema(
        (
            NestedField(1, "d", DATE),
            NestedField(2, "ts", TIMESTAMP),
            NestedField(3, "n", DecimalType(9, 2)),
            NestedField(4, "x", INT),
        )
    )
    p = ex.bind(ex.equal("d", dt.date(1970, 1, 3)), schema)
    assert isinstance(p, ex.Comparison) and p.value == 2 and p.term == ex.BoundReference(1, "d", DATE)
    p = ex.bind(ex.greater_than("ts", dt.datetime(1970, 1, 1, 0, 0, 1)), schema)
    assert isinstance(p, ex.Comparison) and p.value == 1_000_000
    p = ex.bind(ex.equal("n", Decimal("1.5")), schema)
    assert isinstance(p, ex.Comparison) and p.value == Decimal("1.50")
    # values with no exact counterpart in the column type keep every row (inclusive)
    assert ex.bind(ex.equal("x", 2.5), schema) == ex.TRUE
    assert ex.bind(ex.equal("n", Decimal("1.555")), schema) == ex.TRUE
    assert ex.bind(ex.equal("x", 2**40), schema) == ex.TRUE
    # ... and under NOT too: NOT is pushed down before the leaf is dropped
    assert ex.bind(ex.not_(ex.equal("x", 2.5)), schema) == ex.TRUE
    with pytest.raises(Exception, match="'nope' not found"):
        ex.bind(ex.equal("nope", 1), schema)


def test_struct_fields_bind_by_path() -> None:
    from iceduck.spec.types import StructType

    schema = Schema((NestedField(1, "a", StructType((NestedField(2, "b", LONG),))),))
    p = ex.bind(ex.Comparison(Operation.EQ, ex.Reference(("a", "b")), 3), schema)
    assert isinstance(p, ex.Comparison) and p.term.field_id == 2  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# Soundness of the pruning evaluators
# ---------------------------------------------------------------------------------------------


def _metrics(values: list[Any], t: Any, fid: int) -> dict[str, Any]:
    real = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    nans = sum(1 for v in values if isinstance(v, float) and math.isnan(v))
    out: dict[str, Any] = {
        "value_counts": {fid: len(values)},
        "null_value_counts": {fid: sum(v is None for v in values)},
        "nan_value_counts": {fid: nans} if t == DOUBLE else {},
    }
    if real:
        out["lower_bounds"] = {fid: to_bytes(t, min(real))}
        out["upper_bounds"] = {fid: to_bytes(t, max(real))}
    return out


@settings(max_examples=400, deadline=None)
@given(p=predicates, file_rows=st.lists(rows, min_size=1, max_size=6))
def test_metrics_evaluator_never_prunes_a_matching_file(
    p: ex.Predicate, file_rows: list[dict[int, Any]]
) -> None:
    bound = ex.bind(p, SCHEMA)
    stats: dict[str, dict[int, Any]] = {"value_counts": {}, "null_value_counts": {}, "nan_value_counts": {}}
    stats |= {"lower_bounds": {}, "upper_bounds": {}}
    for fid, t in ((1, LONG), (2, STRING), (3, DOUBLE)):
        for k, v in _metrics([r[fid] for r in file_rows], t, fid).items():
            stats[k].update(v)
    d = DataFile(0, "f.parquet", "PARQUET", 0, (), len(file_rows), 1, **stats)  # type: ignore[arg-type]
    reason = MetricsEvaluator(bound, SCHEMA).reason(d)
    if reason is not None:
        assert not any(ex.evaluate(bound, r) for r in file_rows), reason


def _f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


TRANSFORMS = ["identity", "bucket[4]", "truncate[3]", "day", "month", "year", "void"]
day_values = st.one_of(st.none(), st.integers(-800, 800))  # dates as days


@settings(max_examples=400, deadline=None)
@given(
    transform=st.sampled_from(TRANSFORMS),
    op=st.sampled_from([*OPS, "in", "not_in", "is_null", "not_null"]),
    literal=st.integers(-800, 800),
    extra=st.lists(st.integers(-800, 800), max_size=3),
    values=st.lists(day_values, min_size=1, max_size=8),
)
def test_partition_projection_is_inclusive(
    transform: str, op: str, literal: int, extra: list[int], values: list[int | None]
) -> None:
    if transform == "truncate[3]":
        source_type: Any = LONG
    else:
        source_type = DATE
    schema = Schema((NestedField(1, "x", source_type),))
    t = parse_transform(transform)
    spec = PartitionSpec(1, (PartitionField((1,), 1000, "p", t),))
    if op in ("in", "not_in"):
        p = ex.in_("x", [literal, *extra]) if op == "in" else ex.not_in("x", [literal, *extra])
    elif op in ("is_null", "not_null"):
        p = ex.is_null("x") if op == "is_null" else ex.not_null("x")
    else:
        p = ex.compare(op, "x", literal)
    bound = ex.bind(p, schema)
    projected = project(bound, spec, schema)
    evaluator = PartitionEvaluator(projected, spec)
    fn = t.bind(source_type)
    for v in values:
        partition = (fn(v),)
        if evaluator.reason(partition) is not None:
            assert not ex.evaluate(bound, {1: v}), (transform, p, v, partition, projected)
    # manifest summaries over the same partition values
    parts = [fn(v) for v in values]
    real = [x for x in parts if x is not None]
    result_type = t.result_type(source_type)
    summary = PartitionFieldSummary(
        contains_null=any(x is None for x in parts),
        contains_nan=False,
        lower_bound=to_bytes(result_type, min(real)) if real and result_type.name != "unknown" else None,
        upper_bound=to_bytes(result_type, max(real)) if real and result_type.name != "unknown" else None,
    )
    if SummaryEvaluator(projected, spec, schema).reason((summary,)) is not None:
        assert not any(ex.evaluate(bound, {1: v}) for v in values), (transform, p, values)


def test_nan_rows_keep_files_for_greater_than() -> None:
    """DuckDB sorts NaN above every number: `f > 10` selects NaN rows, so a file whose upper
    bound is 1 but that holds NaNs must be kept."""
    bound = ex.bind(ex.greater_than("f", 10.0), SCHEMA)
    stats = _metrics([1.0, math.nan], DOUBLE, 3)
    d = DataFile(0, "f.parquet", "PARQUET", 0, (), 2, 1, **stats)
    assert MetricsEvaluator(bound, SCHEMA).reason(d) is None
    stats = _metrics([1.0, 0.5], DOUBLE, 3)
    d = DataFile(0, "f.parquet", "PARQUET", 0, (), 2, 1, **stats)
    assert "upper bound" in (MetricsEvaluator(bound, SCHEMA).reason(d) or "")


def test_files_without_metrics_are_kept() -> None:
    bound = ex.bind(ex.equal("i", 3), SCHEMA)
    d = DataFile(0, "f.parquet", "PARQUET", 0, (), 10, 1)
    assert MetricsEvaluator(bound, SCHEMA).reason(d) is None


def test_metrics_of_untrusted_fields_are_not_used() -> None:
    bound = ex.bind(ex.is_null("i"), SCHEMA)
    d = DataFile(0, "f.parquet", "PARQUET", 0, (), 2, 1, value_counts={1: 2}, null_value_counts={1: 0})
    assert MetricsEvaluator(bound, SCHEMA).reason(d) is not None
    assert MetricsEvaluator(bound, SCHEMA, trusted=frozenset({2})).reason(d) is None


def test_float_literals_bind_exactly() -> None:
    schema = Schema((NestedField(1, "f", parse_float()),))
    assert ex.bind(ex.equal("f", _f32(1.23)), schema) != ex.TRUE
    assert ex.bind(ex.equal("f", 1.23), schema) == ex.TRUE  # not a float32 value: no pruning


def parse_float() -> Any:
    from iceduck.spec.types import FLOAT

    return FLOAT
