"""Binding a predicate to a schema: names become field ids, values the column type's internal form.

`bind(predicate, schema)` first pushes every NOT down to the leaves (negating their operations),
then binds each leaf. A leaf whose value cannot be represented *exactly* in the column's type (an
int column compared with 2.5, a NaN, a nested column) becomes TRUE. Because no negation is left at
that point, the result is an *inclusive approximation*: every row the original predicate selects
is selected by the bound one. That is what pruning needs; the exact filter is always applied by
DuckDB on the rows themselves.
"""

from __future__ import annotations

import datetime as dt
import math
import struct
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from iceduck.errors import ValidationError
from iceduck.expr.expressions import (
    FALSE,
    NEGATED,
    PREFIX,
    TRUE,
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundReference,
    Comparison,
    Not,
    Or,
    Predicate,
    SetPredicate,
    Term,
    Unary,
    and_,
    or_,
)
from iceduck.spec.transforms import Operation
from iceduck.spec.types import DecimalType, IcebergType, NestedField, Schema, StructType, is_primitive
from iceduck.spec.values import from_python

_INEXACT = object()  # marker: the value has no exact counterpart in the column type
_RANGES = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


def rewrite_not(p: Predicate) -> Predicate:
    """An equivalent predicate without NOT: negations pushed to the leaves (De Morgan, negated ops).

    Equivalent under SQL's three-valued logic: `NOT (x < 5)` and `x >= 5` select the same rows.
    """
    return _push(p, negate=False)


def _push(p: Predicate, negate: bool) -> Predicate:
    if isinstance(p, Not):
        return _push(p.child, not negate)
    if isinstance(p, And):
        parts = (_push(p.left, negate), _push(p.right, negate))
        return or_(*parts) if negate else and_(*parts)
    if isinstance(p, Or):
        parts = (_push(p.left, negate), _push(p.right, negate))
        return and_(*parts) if negate else or_(*parts)
    if isinstance(p, AlwaysTrue | AlwaysFalse):
        return (FALSE if isinstance(p, AlwaysTrue) else TRUE) if negate else p
    if not negate:
        return p
    if isinstance(p, Unary):
        return Unary(NEGATED[p.op], p.term)
    if isinstance(p, Comparison):
        return Comparison(NEGATED[p.op], p.term, p.value)
    if isinstance(p, SetPredicate):
        return SetPredicate(NEGATED[p.op], p.term, p.values)
    raise ValidationError(f"cannot negate predicate {p!r}")


def bind(p: Predicate, schema: Schema, *, case_sensitive: bool = True) -> Predicate:
    """`p` bound to `schema` (an inclusive approximation, see the module docstring).

    Raises ValidationError naming the column when a reference is not in the schema.
    """
    return _bind(rewrite_not(p), schema, case_sensitive)


def _bind(p: Predicate, schema: Schema, case_sensitive: bool) -> Predicate:
    if isinstance(p, And):
        return and_(_bind(p.left, schema, case_sensitive), _bind(p.right, schema, case_sensitive))
    if isinstance(p, Or):
        return or_(_bind(p.left, schema, case_sensitive), _bind(p.right, schema, case_sensitive))
    if isinstance(p, Unary):
        term = bind_term(p.term, schema, case_sensitive)
        if not is_primitive(term.type):
            return TRUE
        if p.op in (Operation.IS_NAN, Operation.NOT_NAN) and term.type.name not in ("float", "double"):
            return FALSE if p.op == Operation.IS_NAN else Unary(Operation.NOT_NULL, term)
        return Unary(p.op, term)
    if isinstance(p, Comparison):
        term = bind_term(p.term, schema, case_sensitive)
        if p.op in PREFIX:
            ok = term.type.name == "string" and isinstance(p.value, str)
            return Comparison(p.op, term, p.value) if ok else TRUE
        value = to_internal(term.type, p.value)
        return TRUE if value is _INEXACT else Comparison(p.op, term, value)
    if isinstance(p, SetPredicate):
        term = bind_term(p.term, schema, case_sensitive)
        values = [to_internal(term.type, v) for v in p.values]
        if any(v is _INEXACT for v in values):
            return TRUE
        return SetPredicate(p.op, term, frozenset(values))
    if isinstance(p, AlwaysTrue | AlwaysFalse):
        return p
    raise ValidationError(f"cannot bind predicate {p!r}")


def bind_term(term: Term, schema: Schema, case_sensitive: bool = True) -> BoundReference:
    """The field a reference names: each path part is a field of the struct before it."""
    if isinstance(term, BoundReference):
        return term
    fields: tuple[NestedField, ...] = schema.fields
    found: NestedField | None = None
    for i, part in enumerate(term.path):
        match = [f for f in fields if f.name == part] or (
            [] if case_sensitive else [f for f in fields if f.name.lower() == part.lower()]
        )
        if len(match) != 1:
            raise ValidationError(
                f"column {'.'.join(term.path)!r} not found in schema {schema.schema_id}"
                if not match
                else f"column {'.'.join(term.path)!r} is ambiguous without case sensitivity"
            )
        found = match[0]
        if i < len(term.path) - 1:
            if not isinstance(found.type, StructType):
                raise ValidationError(f"column {'.'.join(term.path[: i + 1])!r} is not a struct")
            fields = found.type.fields
    assert found is not None
    return BoundReference(found.id, schema.column_name(found.id) or ".".join(term.path), found.type)


def to_internal(t: IcebergType, value: Any) -> Any:
    """The internal representation of `value` as a value of type `t`, or a marker when not exact."""
    try:
        out = _convert(t, value)
    except (ValidationError, ValueError, TypeError, OverflowError, InvalidOperation, AttributeError):
        return _INEXACT
    return out


def is_exact(value: Any) -> bool:
    """False for the marker `to_internal` returns when a value has no exact counterpart."""
    return value is not _INEXACT


def _f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def _naive_datetime(v: Any) -> bool:
    return isinstance(v, dt.datetime) and v.tzinfo is None


# Which Python values stand exactly for a value of each date/time type (a zone-less type takes
# only zone-less values; a datetime is no date).
_TEMPORAL: dict[str, Callable[[Any], bool]] = {
    "date": lambda v: isinstance(v, dt.date) and not isinstance(v, dt.datetime),
    "time": lambda v: isinstance(v, dt.time) and v.tzinfo is None,
    "timestamp": _naive_datetime,
    "timestamp_ns": _naive_datetime,
    "timestamptz": lambda v: isinstance(v, dt.datetime),
    "timestamptz_ns": lambda v: isinstance(v, dt.datetime),
}


def _convert(t: IcebergType, value: Any) -> Any:
    kind = t.name
    if isinstance(value, bool) and kind != "boolean":
        return _INEXACT
    if kind == "boolean":
        return value if isinstance(value, bool) else _INEXACT
    if kind in _RANGES:
        if isinstance(value, float):
            if not value.is_integer():
                return _INEXACT
            value = int(value)
        elif isinstance(value, Decimal):
            if value != value.to_integral_value():
                return _INEXACT
            value = int(value)
        if not isinstance(value, int):
            return _INEXACT
        low, high = _RANGES[kind]
        return value if low <= value <= high else _INEXACT
    if kind in ("float", "double"):
        if isinstance(value, int | Decimal):
            f = float(value)
            if Decimal(f) != Decimal(value):
                return _INEXACT
            value = f
        if not isinstance(value, float) or math.isnan(value):
            return _INEXACT
        if kind == "float" and math.isfinite(value) and _f32(value) != value:
            return _INEXACT
        return value
    if isinstance(t, DecimalType):
        if isinstance(value, float):
            value = Decimal(value)
        if not isinstance(value, int | Decimal):
            return _INEXACT
        d = Decimal(value)
        if not d.is_finite():
            return _INEXACT
        q = d.quantize(Decimal(1).scaleb(-t.scale))
        if q != d or len(q.as_tuple().digits) > t.precision:
            return _INEXACT
        return q
    exact = _TEMPORAL.get(kind)
    if exact is not None:  # internal ints stand for themselves
        return value if isinstance(value, int) else from_python(t, value) if exact(value) else _INEXACT
    if kind == "string":
        return value if isinstance(value, str) else _INEXACT
    if kind == "uuid":
        if isinstance(value, uuid.UUID):
            return value
        return uuid.UUID(value) if isinstance(value, str) else _INEXACT
    if kind in ("fixed", "binary"):
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        return _INEXACT
    return _INEXACT
