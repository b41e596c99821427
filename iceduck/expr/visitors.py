"""Evaluators over bound predicates: rows, partition tuples, file metrics, manifest summaries.

- `evaluate(p, row)` evaluates a bound predicate on one row (field id -> internal value) the way
  DuckDB does (three-valued logic; NaN equals NaN and sorts above all numbers). Tests use it as an
  oracle; the partition evaluator uses it on partition tuples.
- `project(p, spec, schema)` projects a bound predicate onto a partition spec's fields (inclusive:
  every matching row lies in a partition the projection selects), through each field's transform.
- `project_strict(p, spec, schema)` is the strict projection: a partition satisfying it holds only
  matching rows. `StrictMetricsEvaluator` decides whether a data file's metrics prove that *every*
  row matches; it says no whenever the metrics do not prove it. `iceduck.read.strict` asks both
  (Java's `ManifestFilterManager` does the same) to find the files a DELETE drops unread.
- `MetricsEvaluator`, `PartitionEvaluator` and `SummaryEvaluator` decide whether a data file, a
  partition or a manifest *might* hold matching rows. They answer None (might match) or a short
  reason why no row can match. They are conservative: missing or undecodable statistics keep a file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from iceduck.expr.expressions import (
    FALSE,
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundReference,
    Comparison,
    Not,
    Or,
    Predicate,
    SetPredicate,
    Unary,
    and_,
    or_,
)
from iceduck.spec.manifest import DataFile
from iceduck.spec.manifest_list import PartitionFieldSummary
from iceduck.spec.partitioning import PartitionField, PartitionSpec
from iceduck.spec.transforms import Operation
from iceduck.spec.types import IcebergType, ListType, MapType, NestedField, Schema, StructType, is_primitive
from iceduck.spec.values import from_bytes, to_human

Row = Mapping[int, Any]

# ---------------------------------------------------------------------------------------------
# DuckDB comparison semantics
# ---------------------------------------------------------------------------------------------


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _key(v: Any) -> tuple[int, Any]:
    """Sort key with DuckDB's float order: NaN above everything, equal to itself."""
    return (1, 0.0) if _is_nan(v) else (0, v)


def compare_values(op: Operation, a: Any, b: Any) -> bool:
    """`a <op> b` for two non-null values of one type, as DuckDB compares them."""
    ka, kb = _key(a), _key(b)
    if op == Operation.EQ:
        return ka == kb
    if op == Operation.NOT_EQ:
        return ka != kb
    if op == Operation.LT:
        return ka < kb
    if op == Operation.LT_EQ:
        return ka <= kb
    if op == Operation.GT:
        return ka > kb
    if op == Operation.GT_EQ:
        return ka >= kb
    if op == Operation.STARTS_WITH:
        return isinstance(a, str) and a.startswith(b)
    if op == Operation.NOT_STARTS_WITH:
        return isinstance(a, str) and not a.startswith(b)
    raise ValueError(f"not a comparison: {op}")


# ---------------------------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------------------------


def evaluate3(p: Predicate, row: Row) -> bool | None:
    """TRUE / FALSE / NULL (None) of a bound predicate on a row of internal values by field id."""
    if isinstance(p, AlwaysTrue):
        return True
    if isinstance(p, AlwaysFalse):
        return False
    if isinstance(p, And):
        a, b = evaluate3(p.left, row), evaluate3(p.right, row)
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if isinstance(p, Or):
        a, b = evaluate3(p.left, row), evaluate3(p.right, row)
        if a is True or b is True:
            return True
        return None if a is None or b is None else False
    if isinstance(p, Not):
        v = evaluate3(p.child, row)
        return None if v is None else not v
    if isinstance(p, Unary | Comparison | SetPredicate):
        term = p.term
        if not isinstance(term, BoundReference):
            raise ValueError(f"predicate is not bound: {p}")
        value = row.get(term.field_id)
        if isinstance(p, Unary):
            if p.op == Operation.IS_NULL:
                return value is None
            if p.op == Operation.NOT_NULL:
                return value is not None
            if value is None:
                return None
            return _is_nan(value) if p.op == Operation.IS_NAN else not _is_nan(value)
        if value is None:
            return None
        if isinstance(p, Comparison):
            return compare_values(p.op, value, p.value)
        inside = any(compare_values(Operation.EQ, value, v) for v in p.values)
        return inside if p.op == Operation.IN else not inside
    raise ValueError(f"cannot evaluate {p!r}")


def evaluate(p: Predicate, row: Row) -> bool:
    """Whether a row is selected (the predicate is TRUE on it)."""
    return evaluate3(p, row) is True


# ---------------------------------------------------------------------------------------------
# Partition projection
# ---------------------------------------------------------------------------------------------


def _fields_by_source(
    spec: PartitionSpec, schema: Schema
) -> dict[int, list[tuple[int, PartitionField, NestedField]]]:
    """The partition fields a projection can use, by source column id: (partition field id, the
    field, its partition-struct field), for single-source fields with a known result type."""
    types = spec.partition_type(schema)
    by_source: dict[int, list[tuple[int, PartitionField, NestedField]]] = {}
    for f, pf in zip(spec.fields, types.fields, strict=True):
        if len(f.source_ids) == 1 and pf.type.name != "unknown":
            by_source.setdefault(f.source_ids[0], []).append((f.field_id, f, pf))
    return by_source


def project(p: Predicate, spec: PartitionSpec, schema: Schema) -> Predicate:
    """Inclusive projection of a bound, NOT-free predicate onto the partition fields of `spec`.

    Leaves on columns no partition field reads become TRUE; a leaf read by several partition fields
    becomes the AND of each field's projection. Partition fields whose source column is missing
    from `schema` or whose transform is unknown are ignored.
    """
    by_source = _fields_by_source(spec, schema)

    def leaf(node: Unary | Comparison | SetPredicate) -> Predicate:
        term = node.term
        assert isinstance(term, BoundReference)
        parts: list[Predicate] = []
        for field_id, f, pf in by_source.get(term.field_id, ()):
            value: Any = None
            if isinstance(node, Comparison):
                value = node.value
            elif isinstance(node, SetPredicate):
                value = node.values
            try:
                projected = f.transform.project_inclusive(term.type, node.op.value, value)
            except Exception:  # a transform that cannot project this literal keeps every partition
                projected = None
            if projected is None:
                continue
            parts.append(_partition_leaf(projected, BoundReference(field_id, f.name, pf.type)))
        return and_(*parts)

    return map_leaves(p, leaf)


def project_strict(p: Predicate, spec: PartitionSpec, schema: Schema) -> Predicate:
    """Strict projection of a bound, NOT-free predicate onto the partition fields of `spec`: when a
    partition tuple satisfies the result, every row of that partition matches `p` (the spec's "Scan
    Planning"; Java's `Projections.strict`).

    A leaf becomes the OR of each partition field's strict projection (one field's proof is enough);
    a leaf no partition field can prove becomes FALSE, and so does one on a field whose source
    column is missing from `schema` or whose transform is unknown. ANDs and ORs carry over."""
    by_source = _fields_by_source(spec, schema)

    def leaf(node: Unary | Comparison | SetPredicate) -> Predicate:
        term = node.term
        if not isinstance(term, BoundReference):
            return FALSE
        parts: list[Predicate] = []
        for field_id, f, pf in by_source.get(term.field_id, ()):
            value: Any = node.value if isinstance(node, Comparison) else (
                node.values if isinstance(node, SetPredicate) else None
            )  # fmt: skip
            try:
                projected = f.transform.project_strict(term.type, node.op.value, value)
            except Exception:  # a transform that cannot project this literal proves nothing
                projected = None
            if projected is not None:
                parts.append(_partition_leaf(projected, BoundReference(field_id, f.name, pf.type)))
        return or_(*parts) if parts else FALSE

    return map_leaves(p, leaf)


def _partition_leaf(projected: tuple[Operation, Any], pref: BoundReference) -> Predicate:
    op, lit = projected
    if op in (Operation.IS_NULL, Operation.NOT_NULL, Operation.IS_NAN, Operation.NOT_NAN):
        return Unary(op, pref)
    if op in (Operation.IN, Operation.NOT_IN):
        return SetPredicate(op, pref, frozenset(lit))
    return Comparison(op, pref, lit)


def map_leaves(p: Predicate, fn: Callable[[Unary | Comparison | SetPredicate], Predicate]) -> Predicate:
    """`p` with every leaf replaced by `fn(leaf)`, ANDs and ORs rebuilt (NOTs must be pushed down)."""
    if isinstance(p, And):
        return and_(map_leaves(p.left, fn), map_leaves(p.right, fn))
    if isinstance(p, Or):
        return or_(map_leaves(p.left, fn), map_leaves(p.right, fn))
    if isinstance(p, Not):
        raise ValueError("project() needs a predicate without NOT (bind() removes them)")
    if isinstance(p, Unary | Comparison | SetPredicate):
        return fn(p)
    return p


class PartitionEvaluator:
    """Whether a partition tuple (values in spec field order) may hold rows of a projected predicate."""

    def __init__(self, projected: Predicate, spec: PartitionSpec) -> None:
        self.projected = projected
        self._ids = [f.field_id for f in spec.fields]

    def matches(self, partition: Sequence[Any]) -> bool:
        """Whether rows of this partition may match."""
        if isinstance(self.projected, AlwaysTrue):
            return True
        return evaluate3(self.projected, dict(zip(self._ids, partition, strict=False))) is True

    def reason(self, partition: Sequence[Any]) -> str | None:
        """None when rows may match; else why not."""
        if self.matches(partition):
            return None
        row = dict(zip(self._ids, partition, strict=False))
        return f"partition {_show_row(self.projected, row)} does not satisfy {_show(self.projected)}"


# ---------------------------------------------------------------------------------------------
# Shared helpers for statistics
# ---------------------------------------------------------------------------------------------


def _show(p: Predicate) -> str:
    if isinstance(p, And):
        return f"({_show(p.left)} AND {_show(p.right)})"
    if isinstance(p, Or):
        return f"({_show(p.left)} OR {_show(p.right)})"
    if isinstance(p, Unary):
        return f"{p.term} {'IS NULL' if p.op == Operation.IS_NULL else 'IS NOT NULL' if p.op == Operation.NOT_NULL else p.op.value.upper()}"
    if isinstance(p, Comparison):
        return f"{p.term} {_SYMBOL[p.op]} {_human(p.term, p.value)}"
    if isinstance(p, SetPredicate):
        values = ", ".join(sorted(_human(p.term, v) for v in p.values))
        return f"{p.term} {'IN' if p.op == Operation.IN else 'NOT IN'} ({values})"
    return str(p)


_SYMBOL = {
    Operation.EQ: "=",
    Operation.NOT_EQ: "!=",
    Operation.LT: "<",
    Operation.LT_EQ: "<=",
    Operation.GT: ">",
    Operation.GT_EQ: ">=",
    Operation.STARTS_WITH: "STARTS WITH",
    Operation.NOT_STARTS_WITH: "NOT STARTS WITH",
}


def _human(term: Any, value: Any) -> str:
    t = term.type if isinstance(term, BoundReference) else None
    try:
        return to_human(t, value) if t is not None else repr(value)
    except Exception:
        return repr(value)


def _show_row(p: Predicate, row: Row) -> str:
    names: dict[int, BoundReference] = {}
    stack = [p]
    while stack:
        node = stack.pop()
        if isinstance(node, And | Or):
            stack += [node.left, node.right]
        elif isinstance(node, Unary | Comparison | SetPredicate) and isinstance(node.term, BoundReference):
            names[node.term.field_id] = node.term
    return ", ".join(f"{r.name}={_human(r, row.get(fid))}" for fid, r in names.items())


class _Interval:
    """What statistics say about one column: bounds (None: unknown), null and NaN information."""

    __slots__ = ("has_nan", "has_null", "lower", "only_null", "upper")

    def __init__(
        self, lower: Any, upper: Any, has_null: bool | None, only_null: bool, has_nan: bool | None
    ) -> None:
        self.lower, self.upper = lower, upper
        self.has_null, self.only_null, self.has_nan = has_null, only_null, has_nan


def _leaf_reason(node: Unary | Comparison | SetPredicate, s: _Interval, what: str) -> str | None:
    """Why no row can satisfy `node` given the column statistics `s` (None: rows may match)."""
    term = node.term
    assert isinstance(term, BoundReference)
    floating = term.type.name in ("float", "double")
    # NaN sorts above all numbers in DuckDB: unless the statistics say "no NaN", a NaN may satisfy
    # `>`, `>=` and `!=` whatever the bounds say.
    nan_possible = floating and s.has_nan is not False
    name = term.name
    if isinstance(node, Unary):
        if node.op == Operation.IS_NULL and s.has_null is False:
            return f"{name} IS NULL but the {what} has no nulls"
        if node.op == Operation.NOT_NULL and s.only_null:
            return f"{name} IS NOT NULL but the {what} holds only nulls"
        if node.op == Operation.IS_NAN and floating and s.has_nan is False:
            return f"{name} is NaN but the {what} has no NaN"
        return None
    if s.only_null:
        return f"{_show(node)} but the {what} holds only nulls"
    lo, hi = s.lower, s.upper
    if isinstance(node, Comparison):
        v, op = node.value, node.op
        if _is_nan(v):
            return None
        if op == Operation.LT and lo is not None and not lo < v:
            return f"{_show(node)} but the lower bound is {_human(term, lo)}"
        if op == Operation.LT_EQ and lo is not None and lo > v:
            return f"{_show(node)} but the lower bound is {_human(term, lo)}"
        if op == Operation.GT and hi is not None and not hi > v and not nan_possible:
            return f"{_show(node)} but the upper bound is {_human(term, hi)}"
        if op == Operation.GT_EQ and hi is not None and hi < v and not nan_possible:
            return f"{_show(node)} but the upper bound is {_human(term, hi)}"
        if op == Operation.EQ:
            if lo is not None and v < lo:
                return f"{_show(node)} but the lower bound is {_human(term, lo)}"
            if hi is not None and v > hi:
                return f"{_show(node)} but the upper bound is {_human(term, hi)}"
        if op == Operation.NOT_EQ and lo is not None and lo == hi == v and not nan_possible:
            return f"{_show(node)} but every value is {_human(term, v)}"
        return None
    values = [v for v in node.values if not _is_nan(v)]
    if len(values) != len(node.values):
        return None
    if node.op == Operation.IN:
        if all((lo is not None and v < lo) or (hi is not None and v > hi) for v in values):
            return f"{_show(node)} but the bounds are [{_human(term, lo)}, {_human(term, hi)}]"
        return None
    if lo is not None and lo == hi and lo in node.values and not nan_possible:
        return f"{_show(node)} but every value is {_human(term, lo)}"
    return None


def _reduce(p: Predicate, leaf: Callable[[Unary | Comparison | SetPredicate], str | None]) -> str | None:
    if isinstance(p, AlwaysTrue):
        return None
    if isinstance(p, AlwaysFalse):
        return "the filter is always false"
    if isinstance(p, And):
        return _reduce(p.left, leaf) or _reduce(p.right, leaf)
    if isinstance(p, Or):
        a = _reduce(p.left, leaf)
        if a is None:
            return None
        b = _reduce(p.right, leaf)
        return None if b is None else f"{a}; and {b}"
    if isinstance(p, Unary | Comparison | SetPredicate):
        return leaf(p)
    return None


# ---------------------------------------------------------------------------------------------
# Column metrics of data files
# ---------------------------------------------------------------------------------------------


def stats_field_ids(schema: Schema) -> frozenset[int]:
    """Primitive fields whose metrics describe the column's values: not inside a list or map."""
    out: set[int] = set()

    def walk(fields: Sequence[Any]) -> None:
        for f in fields:
            if isinstance(f.type, StructType):
                walk(f.type.fields)
            elif not isinstance(f.type, ListType | MapType) and is_primitive(f.type):
                out.add(f.id)

    walk(schema.fields)
    return frozenset(out)


class MetricsEvaluator:
    """Whether a data file's column metrics allow rows matching a bound, NOT-free predicate."""

    def __init__(self, p: Predicate, schema: Schema, trusted: frozenset[int] | None = None) -> None:
        """`trusted`, when given, limits the fields whose metrics may be used."""
        self.predicate = p
        self._eligible = stats_field_ids(schema) if trusted is None else stats_field_ids(schema) & trusted

    def reason(self, data_file: DataFile) -> str | None:
        """None when the file may hold matching rows; else why it cannot."""
        if isinstance(self.predicate, AlwaysTrue):
            return None
        cache: dict[int, _Interval | None] = {}

        def leaf(node: Unary | Comparison | SetPredicate) -> str | None:
            term = node.term
            assert isinstance(term, BoundReference)
            if term.field_id not in self._eligible:
                return None
            if term.field_id not in cache:
                cache[term.field_id] = _file_interval(data_file, term)
            s = cache[term.field_id]
            return None if s is None else _leaf_reason(node, s, "file")

        return _reduce(self.predicate, leaf)


class StrictMetricsEvaluator:
    """Whether a data file's column metrics prove that *every* row matches a bound predicate (the
    file then holds only matching rows: a DELETE may drop it unread).

    Where `MetricsEvaluator` answers "might match" and keeps a file when in doubt, this answers
    "all match" and says no when in doubt: a column without complete metrics (value and null
    counts equal to the file's rows, both bounds; for float/double a NaN count), a null in a
    compared column (a comparison with NULL is not true), a nested field, a NOT, or an operation
    it has no rule for (STARTS_WITH) all answer False. Bounds may be truncated (strings): a lower
    bound is still at most every value, an upper bound at least every value."""

    def __init__(self, p: Predicate, schema: Schema) -> None:
        self.predicate = p
        self._top = frozenset(f.id for f in schema.fields if is_primitive(f.type))

    def all_match(self, data_file: DataFile) -> bool:
        """True only when the file's metrics prove every row satisfies the predicate."""
        if data_file.record_count <= 0:
            return False
        cache: dict[int, _Strict | None] = {}

        def leaf(node: Unary | Comparison | SetPredicate) -> bool:
            term = node.term
            if not isinstance(term, BoundReference) or term.field_id not in self._top:
                return False
            if term.field_id not in cache:
                cache[term.field_id] = _strict_column(data_file, term)
            column = cache[term.field_id]
            return column is not None and _leaf_all_match(node, column)

        return _all(self.predicate, leaf)


class _Strict:
    """Complete metrics of one column of a file: bounds, null, NaN and row counts."""

    __slots__ = ("lower", "nans", "nulls", "rows", "upper")

    def __init__(self, lower: Any, upper: Any, nulls: int, nans: int, rows: int) -> None:
        self.lower, self.upper, self.nulls, self.nans, self.rows = lower, upper, nulls, nans, rows


def _strict_column(d: DataFile, term: BoundReference) -> _Strict | None:
    fid = term.field_id
    values, nulls = d.value_counts.get(fid), d.null_value_counts.get(fid)
    if values is None or nulls is None or values != d.record_count or not 0 <= nulls <= values:
        return None
    nans = d.nan_value_counts.get(fid)
    if term.type.name in ("float", "double"):
        if nans is None:
            return None
    else:
        nans = 0
    lower = _decode(term.type, d.lower_bounds.get(fid))
    upper = _decode(term.type, d.upper_bounds.get(fid))
    return _Strict(lower, upper, nulls, nans, values)


def _leaf_all_match(node: Unary | Comparison | SetPredicate, c: _Strict) -> bool:
    if isinstance(node, Unary):
        if node.op == Operation.IS_NULL:
            return c.nulls == c.rows
        if node.op == Operation.NOT_NULL:
            return c.nulls == 0
        if node.op == Operation.IS_NAN:
            return c.nans == c.rows
        if node.op == Operation.NOT_NAN:
            return c.nans == 0 and c.nulls == 0
        return False
    # every row must compare true: no nulls, no NaN (NaN sorts above every number in DuckDB: rules
    # on bounds alone would not cover it), and both bounds known
    if c.nulls or c.nans or c.lower is None or c.upper is None:
        return False
    lo, hi = c.lower, c.upper
    try:
        if isinstance(node, Comparison):
            v, op = node.value, node.op
            if _is_nan(v):
                return False
            if op == Operation.LT:
                return bool(hi < v)
            if op == Operation.LT_EQ:
                return bool(hi <= v)
            if op == Operation.GT:
                return bool(lo > v)
            if op == Operation.GT_EQ:
                return bool(lo >= v)
            if op == Operation.EQ:
                return bool(lo == hi == v)
            if op == Operation.NOT_EQ:
                return bool(v < lo or v > hi)
            return False
        if any(_is_nan(v) for v in node.values):
            return False
        if node.op == Operation.IN:
            return bool(lo == hi and lo in node.values)
        if node.op == Operation.NOT_IN:
            return all(v < lo or v > hi for v in node.values)
    except TypeError:  # values of another type than the column's: no proof
        return False
    return False


def _all(p: Predicate, leaf: Callable[[Unary | Comparison | SetPredicate], bool]) -> bool:
    if isinstance(p, AlwaysTrue):
        return True
    if isinstance(p, And):
        return _all(p.left, leaf) and _all(p.right, leaf)
    if isinstance(p, Or):
        return _all(p.left, leaf) or _all(p.right, leaf)
    if isinstance(p, Unary | Comparison | SetPredicate):
        return leaf(p)
    return False  # AlwaysFalse, NOT, anything else: no proof


def _file_interval(d: DataFile, term: BoundReference) -> _Interval | None:
    fid = term.field_id
    values = d.value_counts.get(fid)
    nulls = d.null_value_counts.get(fid)
    nans = d.nan_value_counts.get(fid)
    lower = _decode(term.type, d.lower_bounds.get(fid))
    upper = _decode(term.type, d.upper_bounds.get(fid))
    if values is None and nulls is None and lower is None and upper is None:
        return None  # no metrics for this column: the column may be absent (read as a default)
    only_null = values is not None and nulls is not None and values == nulls and values > 0
    has_null = None if nulls is None else nulls > 0
    has_nan = None if nans is None else nans > 0
    if values is not None and values == 0 and d.record_count > 0:
        return None  # nothing counted although the file has rows: do not trust these metrics
    return _Interval(lower, upper, has_null, only_null, has_nan)


def _decode(t: IcebergType, data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        value = from_bytes(t, data)
    except Exception:
        return None
    return None if _is_nan(value) else value


# ---------------------------------------------------------------------------------------------
# Manifest-list partition summaries
# ---------------------------------------------------------------------------------------------


class SummaryEvaluator:
    """Whether a manifest's partition summaries allow rows of a projected partition predicate."""

    def __init__(self, projected: Predicate, spec: PartitionSpec, schema: Schema) -> None:
        self.projected = projected
        self._index = {f.field_id: i for i, f in enumerate(spec.fields)}

    def reason(self, summaries: Sequence[PartitionFieldSummary] | None) -> str | None:
        """None when the manifest may hold matching rows; else why it cannot."""
        if isinstance(self.projected, AlwaysTrue) or summaries is None:
            return None

        def leaf(node: Unary | Comparison | SetPredicate) -> str | None:
            term = node.term
            assert isinstance(term, BoundReference)
            i = self._index.get(term.field_id)
            if i is None or i >= len(summaries):
                return None
            s = summaries[i]
            lower = _decode(term.type, s.lower_bound)
            upper = _decode(term.type, s.upper_bound)
            only_null = bool(s.contains_null) and s.lower_bound is None and s.upper_bound is None
            only_null = only_null and s.contains_nan is False
            interval = _Interval(lower, upper, bool(s.contains_null), only_null, s.contains_nan)
            return _leaf_reason(node, interval, "manifest")

        return _reduce(self.projected, leaf)
