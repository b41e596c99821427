"""Partition transforms of the Iceberg table spec ("Partition Transforms", Appendix B).

A transform is an immutable value; `parse_transform` reads its text form and `str()` gives it back.
Transforms this module does not know are kept as `UnknownTransform`: they round-trip unchanged but
cannot be applied (v3 readers must tolerate them and ignore them when filtering).

Values are in the internal representation (see `iceduck.spec.values`). Every transform maps None to
None. The API takes source types as varargs (`result_type(*source_types)`, `bind(*source_types)`)
so multi-argument transforms fit in; all transforms defined so far take exactly one argument.

Projections (`project_inclusive` / `project_strict`) turn a predicate `column <op> literal` on the
source column into one on the partition value, as described in the spec's "Scan Planning":
inclusive — every row matching the predicate has a partition matching the result; strict — every
row of a partition matching the result matches the predicate. `None` means no such predicate
(i.e. "true" for inclusive, "false"/unknown for strict).
"""

from __future__ import annotations

import base64
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar
from urllib.parse import quote_plus

from iceduck.errors import ValidationError
from iceduck.spec.types import DATE, INT, UNKNOWN, DecimalType, IcebergType, is_primitive
from iceduck.spec.values import (
    MICROS_PER_DAY,
    MICROS_PER_HOUR,
    NANOS_PER_DAY,
    NANOS_PER_MICRO,
    civil_from_days,
    from_unscaled,
    iso_date,
    iso_year,
    min_bytes_signed,
    to_json,
    unscaled,
)

# ---------------------------------------------------------------------------------------------
# Murmur3 (x86, 32-bit) and the Appendix B value hash
# ---------------------------------------------------------------------------------------------

_M32 = 0xFFFFFFFF
_C1, _C2 = 0xCC9E2D51, 0x1B873593


def _mix_block(h: int, k: int) -> int:
    k = (k * _C1) & _M32
    k = ((k << 15) | (k >> 17)) & _M32
    k = (k * _C2) & _M32
    h ^= k
    h = ((h << 13) | (h >> 19)) & _M32
    return (h * 5 + 0xE6546B64) & _M32


def _finish(h: int, length: int) -> int:
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """32-bit Murmur3 hash (x86 variant) of bytes, as a signed 32-bit int."""
    h = seed & _M32
    n = len(data)
    full = n - n % 4
    for (k,) in struct.iter_unpack("<I", data[:full]):
        h = _mix_block(h, k)
    tail = data[full:]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * _C1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        h ^= (k * _C2) & _M32
    return _finish(h, n)


def hash_long(value: int) -> int:
    """Murmur3 of the 8-byte little-endian form of a long (the hash of int/long/date/time/...)."""
    v = value & 0xFFFFFFFFFFFFFFFF
    h = _mix_block(0, v & _M32)
    h = _mix_block(h, v >> 32)
    return _finish(h, 8)


def _double_bits(value: float) -> int:
    if value != value:  # every NaN hashes as the canonical NaN
        return 0x7FF8000000000000
    if value == 0.0:  # -0.0 hashes as 0.0
        return 0
    return int(struct.unpack("<q", struct.pack("<d", value))[0])


def hash_function(source_type: IcebergType) -> Callable[[Any], int]:
    """The Appendix B 32-bit hash for values of a type (non-null values in internal form).

    Covers the bucketable types plus boolean, float and double (defined by the spec for future use).
    """
    kind = source_type.name
    if kind in ("int", "long", "date", "time", "timestamp", "timestamptz"):
        return hash_long
    if kind in ("timestamp_ns", "timestamptz_ns"):
        # nanoseconds hash as microseconds (floor), so both precisions bucket alike
        return lambda v: hash_long(v // NANOS_PER_MICRO)
    if isinstance(source_type, DecimalType):
        scale = source_type.scale
        return lambda v: murmur3_32(min_bytes_signed(unscaled(v, scale)))
    if kind == "string":
        return lambda v: murmur3_32(v.encode("utf-8"))
    if kind == "uuid":
        return lambda v: murmur3_32(v.bytes)
    if kind in ("fixed", "binary"):
        return lambda v: murmur3_32(bytes(v))
    if kind == "boolean":
        return lambda v: hash_long(1 if v else 0)
    if kind in ("float", "double"):
        return lambda v: hash_long(_double_bits(float(v)))
    raise ValidationError(f"no 32-bit hash is defined for type {source_type}")


def hash_value(source_type: IcebergType, value: Any) -> int | None:
    """The Appendix B hash of one value (signed 32-bit), None for null."""
    return None if value is None else hash_function(source_type)(value)


# ---------------------------------------------------------------------------------------------
# Predicate operations for projections
# ---------------------------------------------------------------------------------------------


class Operation(StrEnum):
    """Predicate operators understood by the projections (plain strings work too)."""

    IS_NULL = "is_null"
    NOT_NULL = "not_null"
    IS_NAN = "is_nan"
    NOT_NAN = "not_nan"
    LT = "lt"
    LT_EQ = "lt_eq"
    GT = "gt"
    GT_EQ = "gt_eq"
    EQ = "eq"
    NOT_EQ = "not_eq"
    IN = "in"
    NOT_IN = "not_in"
    STARTS_WITH = "starts_with"
    NOT_STARTS_WITH = "not_starts_with"


Projection = tuple[Operation, Any] | None
_UNARY = frozenset({Operation.IS_NULL, Operation.NOT_NULL, Operation.IS_NAN, Operation.NOT_NAN})
_SETS = frozenset({Operation.IN, Operation.NOT_IN})


def _operation(op: str) -> Operation:
    try:
        return Operation(op)
    except ValueError:
        raise ValidationError(f"unknown predicate operation {op!r}") from None


def _none_safe(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else fn(v)


_BUCKET_SOURCES = frozenset(
    {"int", "long", "decimal", "date", "time", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"}
    | {"string", "uuid", "fixed", "binary"}
)
_TRUNCATE_SOURCES = frozenset({"int", "long", "decimal", "string", "binary"})
_DATE_SOURCES = frozenset({"date", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"})
_NOT_IDENTITY = frozenset({"geometry", "geography", "variant"})


# ---------------------------------------------------------------------------------------------
# Transforms
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Transform:
    """Base of all transforms. Subclasses are frozen dataclasses; `str()` is the canonical text."""

    arity: ClassVar[int] = 1

    def can_transform(self, source_type: IcebergType) -> bool:
        """Whether the transform accepts values of this source type."""
        raise NotImplementedError

    def _result(self, source_type: IcebergType) -> IcebergType:
        raise NotImplementedError

    def _bind(self, source_type: IcebergType) -> Callable[[Any], Any]:
        raise NotImplementedError

    def _check(self, source_types: tuple[IcebergType, ...]) -> IcebergType:
        if len(source_types) != self.arity:
            raise ValidationError(
                f"transform {self} takes {self.arity} source column(s), got {len(source_types)}"
            )
        source_type = source_types[0]
        if not self.can_transform(source_type):
            raise ValidationError(f"transform {self} cannot be applied to type {source_type}")
        return source_type

    def result_type(self, *source_types: IcebergType) -> IcebergType:
        """The type of the partition value produced from the source type(s)."""
        return self._result(self._check(source_types))

    def bind(self, *source_types: IcebergType) -> Callable[..., Any]:
        """A function applying the transform to values of the source type(s); bind once, call often."""
        return _none_safe(self._bind(self._check(source_types)))

    def apply(self, source_type: IcebergType, value: Any) -> Any:
        """Transform one value (internal representation in and out); None gives None."""
        return self.bind(source_type)(value)

    @property
    def preserves_order(self) -> bool:
        """Whether `a <= b` implies `t(a) <= t(b)` (so sorting by the source sorts by the result)."""
        return False

    def keeps_values(self, source_type: IcebergType) -> bool:
        """Whether the partition value is the source value itself, of the same type (identity; the
        day of a date), so every row of a file holds its partition's value in the source column."""
        return False

    def satisfies_order_of(self, other: Transform, source_type: IcebergType | None = None) -> bool:
        """Whether data ordered by this transform is also ordered by `other` (same source column).

        `source_type` enables the type-dependent truncate rules; without it they answer False.
        """
        return self == other or isinstance(other, VoidTransform)

    def to_human(self, source_type: IcebergType, value: Any) -> str:
        """Partition value as text for partition paths (`2026-10`, `2026-10-02-13`, `null`)."""
        return "null" if value is None else str(value)

    def project_inclusive(self, source_type: IcebergType, op: str, literal: Any = None) -> Projection:
        """Partition predicate matched by the partition of every row that matches `source <op> literal`.

        For IN / NOT_IN the literal is an iterable and the result holds a frozenset.
        """
        return None

    def project_strict(self, source_type: IcebergType, op: str, literal: Any = None) -> Projection:
        """Partition predicate that, when it holds, guarantees every row matches `source <op> literal`."""
        return None


def _identity_human(source_type: IcebergType, value: Any) -> str:
    if value is None:
        return "null"
    kind = source_type.name
    if kind in ("fixed", "binary"):
        return base64.b64encode(bytes(value)).decode("ascii")
    if kind == "boolean":
        return "true" if value else "false"
    if kind in ("date", "time", "uuid", "decimal") or kind in _DATE_SOURCES:
        return str(to_json(source_type, value))
    return str(value)


def _literal_set(literal: Any) -> frozenset[Any]:
    if isinstance(literal, str | bytes) or not isinstance(literal, Iterable):
        raise ValidationError(f"IN / NOT IN needs a collection of values, got {literal!r}")
    return frozenset(literal)


def _null_projection(op: Operation) -> Projection:
    # transform(x) is null exactly when x is null, so null checks carry over unchanged
    if op in (Operation.IS_NULL, Operation.NOT_NULL):
        return op, None
    return None


@dataclass(frozen=True, slots=True)
class IdentityTransform(Transform):
    """`identity`: the source value unchanged."""

    def __str__(self) -> str:
        return "identity"

    def can_transform(self, source_type: IcebergType) -> bool:
        return is_primitive(source_type) and source_type.name not in _NOT_IDENTITY

    def _result(self, source_type: IcebergType) -> IcebergType:
        return source_type

    def _bind(self, source_type: IcebergType) -> Callable[[Any], Any]:
        return lambda v: v

    @property
    def preserves_order(self) -> bool:
        return True

    def keeps_values(self, source_type: IcebergType) -> bool:
        return True

    def satisfies_order_of(self, other: Transform, source_type: IcebergType | None = None) -> bool:
        return other.preserves_order or isinstance(other, VoidTransform)

    def to_human(self, source_type: IcebergType, value: Any) -> str:
        return _identity_human(source_type, value)

    def project_inclusive(self, source_type: IcebergType, op: str, literal: Any = None) -> Projection:
        o = _operation(op)
        return (o, _literal_set(literal)) if o in _SETS else (o, literal)

    def project_strict(self, source_type: IcebergType, op: str, literal: Any = None) -> Projection:
        return self.project_inclusive(source_type, op, literal)


@dataclass(frozen=True, slots=True)
class BucketTransform(Transform):
    """`bucket[N]`: Murmur3 hash of the value (Appendix B) with the sign bit cleared, mod N."""

    num_buckets: int

    def __post_init__(self) -> None:
        if self.num_buckets <= 0:
            raise ValidationError(f"bucket count must be positive, got {self.num_buckets}")

    def __str__(self) -> str:
        return f"bucket[{self.num_buckets}]"

    def can_transform(self, source_type: IcebergType) -> bool:
        return source_type.name in _BUCKET_SOURCES

    def _result(self, source_type: IcebergType) -> IcebergType:
        return INT

    def _bind(self, source_type: IcebergType) -> Callable[[Any], Any]:
        hash_fn, n = hash_function(source_type), self.num_buckets
        return lambda v: (hash_fn(v) & 0x7FFFFFFF) % n

    def project_inclusive(self, source_type: IcebergType, op: str, literal: Any = None) -> Projection:
        o, fn = _operation(op), self.bind(source_type)
        if o == Operation.EQ:
            return o, fn(literal)
        if o == Operation.IN:
            return o, frozenset(fn(v) for v in _literal_set(literal))
        return _null_projection(o)

    def project_strict(self, source_type: IcebergType, op: str, literal: Any = None) -> Projection:
        o, fn = _operation(op), self.bind(source_type)
        if o == Operation.NOT_EQ:
            return o, fn(literal)
        if o == Operation.NOT_IN:
            return o, frozenset(fn(v) for v in _literal_set(literal))
        return _null_projection(o)


def _project_ordered(
    fn: Callable[[Any], Any],
    before: Callable[[Any], Any],
    after: Callable[[Any], Any],
    op: Operation,
    literal: Any,
    strict: bool,
) -> Projection:
    """Projection through a monotone transform whose partitions are contiguous ranges of values.

    `before` / `after` give the previous / next representable source value.
    """
    if op in _UNARY:
        return _null_projection(op)
    if not strict:
        if op == Operation.LT:
            return Operation.LT_EQ, fn(before(literal))
        if op == Operation.LT_EQ:
            return Operation.LT_EQ, fn(literal)
        if op == Operation.GT:
            return Operation.GT_EQ, fn(after(literal))
        if op == Operation.GT_EQ:
            return Operation.GT_EQ, fn(literal)
        if op == Operation.EQ:
            return Operation.EQ, fn(literal)
        if op == Operation.IN:
            return Operation.IN, frozenset(fn(v) for v in _literal_set(literal))
        return None
    if op == Operation.LT:
        return Operation.LT, fn(literal)
    if op == Operation.LT_EQ:
        return Operation.LT, fn(after(literal))
    if op == Operation.GT:
        return Operation.GT, fn(literal)
    if op == Operation.GT_EQ:
        return Operation.GT, fn(before(literal))
    if op == Operation.NOT_EQ:
        return Operation.NOT_EQ, fn(literal)
    if op == Operation.NOT_IN:
        return Operation.NOT_IN, frozenset(fn(v) for v in _literal_set(literal))
    return None


def _step(source_type: IcebergType, delta: int) -> Callable[[Any], Any]:
    """The neighbouring value of an ordered numeric/temporal type (one unit of its last digit)."""
    if isinstance(source_type, DecimalType):
        scale = source_type.scale
        return lambda v: from_unscaled(unscaled(v, scale) + delta, scale)
    return lambda v: v + delta


@dataclass(frozen=True, slots=True)
class TruncateTransform(Transform):
    """`truncate[W]`: numbers down to a multiple of W, strings to W code points, binary to W bytes."""

    width: int

    def __post_init__(self) -> None:
        if self.width <= 0:
            raise ValidationError(f"truncate width must be positive, got {self.width}")

    def __str__(self) -> str:
        return f"truncate[{self.width}]"

    def can_transform(self, source_type: IcebergType) -> bool:
        return source_type.name in _TRUNCATE_SOURCES

    def _result(self, source_type: IcebergType) -> IcebergType:
        return source_type

    def _bind(self, source_type: IcebergType) -> Callable[[Any], Any]:
        w = self.width
        if isinstance(source_type, DecimalType):
            # the width is applied to the unscaled value: W=50 at scale 2 steps by 0.50
            scale = source_type.scale
            return lambda v: from_unscaled((n := unscaled(v, scale)) - n % w, scale)
        if source_type.name in ("int", "long"):
            return lambda v: v - v % w  # Python's % is never negative for positive w
        return lambda v: v[:w]  # code points for str, bytes for bytes

    @property
    def preserves_order(self) -> bool:
        return True

    def satisfies_order_of(self, other: Transform, source_type: IcebergType | None = None) -> bool:
        if self == other or isinstance(other, VoidTransform):
            return True
        if not isinstance(other, TruncateTransform) or source_type is None:
            return False
        if source_type.name in ("string", "binary"):
            return self.width >= other.width  # a longer prefix orders by every shorter one
        # truncate[W2] is a monotone function of truncate[W1] when W1 divides W2
        return other.width % self.width == 0

    def to_human(self, source_type: IcebergType, value: Any) -> str:
        return _identity_human(source_type, value)

    def project_inclusive(self, source_type: IcebergType, op: str, literal: Any = None) -> Projection:
        return self._project(source_type, _operation(op), literal, strict=False)

    def project_strict(self, source_type: IcebergType, op: str, literal: Any = None) -> Projection:
        return self._project(source_type, _operation(op), literal, strict=True)

    def _project(self, source_type: IcebergType, op: Operation, literal: Any, strict: bool) -> Projection:
        fn = self.bind(source_type)
        if source_type.name not in ("string", "binary"):
            return _project_ordered(fn, _step(source_type, -1), _step(source_type, 1), op, literal, strict)
        return self._project_prefix(fn, op, literal, strict)

    def _project_prefix(
        self, fn: Callable[[Any], Any], op: Operation, literal: Any, strict: bool
    ) -> Projection:
        # A partition p holds exactly the values v with v[:W] == p: all values starting with p when
        # len(p) == W, and only p itself when len(p) < W. Prefixes are monotone in v.
        w = self.width
        if op in _UNARY:
            return _null_projection(op)
        if op in _SETS:
            values = _literal_set(literal)
            if op == Operation.IN and not strict:
                return op, frozenset(fn(v) for v in values)
            if op == Operation.NOT_IN and strict:
                return op, frozenset(fn(v) for v in values)
            if op == Operation.IN and all(len(v) < w for v in values):
                return op, values  # short values are their own partitions
            return None
        short = len(literal) < w
        if not strict:
            if op in (Operation.LT, Operation.LT_EQ):
                return Operation.LT_EQ, fn(literal)
            if op in (Operation.GT, Operation.GT_EQ):
                return Operation.GT_EQ, fn(literal)
            if op == Operation.EQ:
                return Operation.EQ, fn(literal)
            if op == Operation.STARTS_WITH:
                return (Operation.STARTS_WITH, literal) if short else (Operation.EQ, fn(literal))
            if op == Operation.NOT_STARTS_WITH:
                return (op, literal) if len(literal) <= w else None
            return None
        if op == Operation.LT:
            return Operation.LT, fn(literal)
        if op == Operation.LT_EQ:
            return (Operation.LT_EQ, literal) if short else (Operation.LT, fn(literal))
        if op == Operation.GT:
            return Operation.GT, fn(literal)
        if op == Operation.GT_EQ:
            return (Operation.GT_EQ, literal) if short else (Operation.GT, fn(literal))
        if op == Operation.EQ:
            return (Operation.EQ, literal) if short else None
        if op == Operation.NOT_EQ:
            return Operation.NOT_EQ, fn(literal)
        if op == Operation.STARTS_WITH:
            return (op, literal) if len(literal) <= w else None
        if op == Operation.NOT_STARTS_WITH:
            return (op, literal) if len(literal) <= w else (Operation.NOT_EQ, fn(literal))
        return None


@dataclass(frozen=True, slots=True)
class _TimeTransform(Transform):
    """Shared logic of year / month / day / hour: monotone, contiguous, coarser as `granularity` grows."""

    granularity: ClassVar[int] = 0

    def can_transform(self, source_type: IcebergType) -> bool:
        return source_type.name in _DATE_SOURCES

    def _result(self, source_type: IcebergType) -> IcebergType:
        return INT

    def _from_days(self, days: int) -> int:
        raise NotImplementedError

    def _bind(self, source_type: IcebergType) -> Callable[[Any], Any]:
        kind = source_type.name
        if kind == "date":
            return self._from_days
        per_day = NANOS_PER_DAY if kind.endswith("_ns") else MICROS_PER_DAY
        from_days = self._from_days
        return lambda v: from_days(v // per_day)

    @property
    def preserves_order(self) -> bool:
        return True

    def satisfies_order_of(self, other: Transform, source_type: IcebergType | None = None) -> bool:
        if isinstance(other, _TimeTransform):
            return self.granularity <= other.granularity
        return isinstance(other, VoidTransform)

    def project_inclusive(self, source_type: IcebergType, op: str, literal: Any = None) -> Projection:
        fn = self.bind(source_type)
        projected = _project_ordered(
            fn, _step(source_type, -1), _step(source_type, 1), _operation(op), literal, False
        )
        if isinstance(self, DayTransform) and source_type.name == "date":
            return projected  # the day of a date is the date itself: never written one high
        return _keep_one_high(projected)

    def project_strict(self, source_type: IcebergType, op: str, literal: Any = None) -> Projection:
        fn = self.bind(source_type)
        projected = _project_ordered(
            fn, _step(source_type, -1), _step(source_type, 1), _operation(op), literal, True
        )
        if isinstance(self, DayTransform) and source_type.name == "date":
            return projected  # the day of a date is the date itself: never written one high
        return _allow_one_high(projected)


def _keep_one_high(projected: Projection) -> Projection:
    """An inclusive time projection that still keeps the files Iceberg 0.10.0 and earlier wrote:
    a row of p < 0 (not at its unit's first instant) may sit in partition p + 1, so a partition
    value q <= 0 may hold rows of q - 1 (see `_allow_one_high`). Wider, never narrower: a scan of a
    spec-conforming table may read a partition more, before 1970 only."""
    if projected is None:
        return None
    op, value = projected
    if op == Operation.LT_EQ and value < 0:
        return op, value + 1  # rows of v may sit in v + 1
    if op == Operation.EQ and value < 0:
        return Operation.IN, frozenset({value, value + 1})
    if op == Operation.IN:
        return op, frozenset(value) | {v + 1 for v in value if v < 0}
    return projected  # p >= v keeps v + 1 anyway


def _allow_one_high(projected: Projection) -> Projection:
    """A strict time projection that still holds for files Iceberg 0.10.0 and earlier wrote: those
    rounded a value before 1970 toward zero, so a partition value p may hold rows of p - 1 (not at
    its first instant) when p <= 0. Java's readers allow for it the same way (`ProjectionUtil`)."""
    if projected is None:
        return None
    op, value = projected
    if op == Operation.GT and value <= 0:
        return op, value + 1  # p > v: partition v + 1 may hold rows of v
    if op == Operation.NOT_EQ and value < 0:
        return Operation.NOT_IN, frozenset({value, value + 1})
    if op == Operation.NOT_IN:
        return op, frozenset(value) | {v + 1 for v in value if v < 0}
    return projected  # p < v and null checks hold either way


@dataclass(frozen=True, slots=True)
class YearTransform(_TimeTransform):
    """`year`: years since 1970 (negative before)."""

    granularity: ClassVar[int] = 3

    def __str__(self) -> str:
        return "year"

    def _from_days(self, days: int) -> int:
        return civil_from_days(days)[0] - 1970

    def to_human(self, source_type: IcebergType, value: Any) -> str:
        return "null" if value is None else iso_year(1970 + value)


@dataclass(frozen=True, slots=True)
class MonthTransform(_TimeTransform):
    """`month`: months since 1970-01."""

    granularity: ClassVar[int] = 2

    def __str__(self) -> str:
        return "month"

    def _from_days(self, days: int) -> int:
        year, month, _ = civil_from_days(days)
        return (year - 1970) * 12 + month - 1

    def to_human(self, source_type: IcebergType, value: Any) -> str:
        if value is None:
            return "null"
        years, month = divmod(value, 12)
        return f"{iso_year(1970 + years)}-{month + 1:02d}"


@dataclass(frozen=True, slots=True)
class DayTransform(_TimeTransform):
    """`day`: days since 1970-01-01; the result type is `date`."""

    granularity: ClassVar[int] = 1

    def __str__(self) -> str:
        return "day"

    def _result(self, source_type: IcebergType) -> IcebergType:
        return DATE

    def _from_days(self, days: int) -> int:
        return days

    def keeps_values(self, source_type: IcebergType) -> bool:
        return source_type.name == "date"  # days since 1970-01-01 in and out

    def to_human(self, source_type: IcebergType, value: Any) -> str:
        return "null" if value is None else iso_date(value)


@dataclass(frozen=True, slots=True)
class HourTransform(_TimeTransform):
    """`hour`: hours since 1970-01-01 00:00 (timestamps only)."""

    granularity: ClassVar[int] = 0

    def __str__(self) -> str:
        return "hour"

    def can_transform(self, source_type: IcebergType) -> bool:
        return source_type.name in _DATE_SOURCES and source_type.name != "date"

    def _from_days(self, days: int) -> int:
        return days * 24

    def _bind(self, source_type: IcebergType) -> Callable[[Any], Any]:
        per_hour = MICROS_PER_HOUR * (NANOS_PER_MICRO if source_type.name.endswith("_ns") else 1)
        return lambda v: v // per_hour

    def to_human(self, source_type: IcebergType, value: Any) -> str:
        if value is None:
            return "null"
        days, hour = divmod(value, 24)
        return f"{iso_date(days)}-{hour:02d}"


@dataclass(frozen=True, slots=True)
class VoidTransform(Transform):
    """`void`: always null (used to drop a partition field in v1 tables)."""

    def __str__(self) -> str:
        return "void"

    def can_transform(self, source_type: IcebergType) -> bool:
        return True

    def _result(self, source_type: IcebergType) -> IcebergType:
        return source_type

    def _bind(self, source_type: IcebergType) -> Callable[[Any], Any]:
        return lambda v: None

    def satisfies_order_of(self, other: Transform, source_type: IcebergType | None = None) -> bool:
        return isinstance(other, VoidTransform)


@dataclass(frozen=True, slots=True)
class UnknownTransform(Transform):
    """A transform this version does not know; kept verbatim, never applied, ignored in filtering.

    Its `result_type` is the `unknown` type: the values stored for it cannot be interpreted.
    """

    text: str

    def __str__(self) -> str:
        return self.text

    def can_transform(self, source_type: IcebergType) -> bool:
        return False

    def result_type(self, *source_types: IcebergType) -> IcebergType:
        return UNKNOWN

    def bind(self, *source_types: IcebergType) -> Callable[..., Any]:
        raise ValidationError(f"cannot apply unknown transform {self.text!r}")


IDENTITY = IdentityTransform()
YEAR = YearTransform()
MONTH = MonthTransform()
DAY = DayTransform()
HOUR = HourTransform()
VOID = VoidTransform()

_SIMPLE: dict[str, Transform] = {str(t): t for t in (IDENTITY, YEAR, MONTH, DAY, HOUR, VOID)}
_PARAM = re.compile(r"^(bucket|truncate)\s*\[\s*(\d+)\s*\]$")


_KNOWN_WITH_WIDTH = re.compile(r"^(bucket|truncate)(\s*\[.*)?$")


def malformed_transform(text: str) -> str | None:
    """Why `text` is a known transform written wrongly (`bucket[0]`, `truncate[x]`, `bucket`), or None.

    Names this version does not know are not malformed: the spec has readers ignore them
    (`parse_transform` makes them an `UnknownTransform`). A known transform with a bad width would
    be ignored the same way, silently, although its files were partitioned by it.
    """
    t = text.strip().lower()
    m = _KNOWN_WITH_WIDTH.match(t)
    if m is None or isinstance(parse_transform(t), (BucketTransform, TruncateTransform)):
        return None
    name = m.group(1)
    return f"transform {text!r} does not parse: {name} takes a positive integer width, as in {name}[16]"


def parse_transform(text: str) -> Transform:
    """Parse a transform's text form; anything unrecognised becomes an `UnknownTransform`."""
    t = text.strip().lower()
    simple = _SIMPLE.get(t)
    if simple is not None:
        return simple
    if (m := _PARAM.match(t)) and int(m.group(2)) > 0:
        n = int(m.group(2))
        return BucketTransform(n) if m.group(1) == "bucket" else TruncateTransform(n)
    return UnknownTransform(text)


# ---------------------------------------------------------------------------------------------
# Partition paths
# ---------------------------------------------------------------------------------------------


def _escape(text: str) -> str:
    # form-encoding like java.net.URLEncoder (space -> '+', '*' kept, '~' escaped)
    return quote_plus(text, safe="*").replace("~", "%7E")


def partition_path(fields: Iterable[tuple[str, Transform, IcebergType, Any]]) -> str:
    """`name=value/...` directory path of a partition: (partition name, transform, source type, value)."""
    return "/".join(f"{_escape(name)}={_escape(t.to_human(src, value))}" for name, t, src, value in fields)
