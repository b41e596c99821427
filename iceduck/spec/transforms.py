"""Partition transforms of the Iceberg table spec ("Partition Transforms").

A transform is an immutable value; `parse_transform` reads its text form and `str()` gives it back.
Transforms this module does not know are kept as `UnknownTransform`: they round-trip unchanged but
cannot be applied (the spec requires readers to tolerate them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from iceduck.errors import ValidationError
from iceduck.spec.types import DATE, INT, IcebergType


@dataclass(frozen=True, slots=True)
class Transform:
    """Base of all transforms. Subclasses are frozen dataclasses; `str()` is the canonical text."""

    def result_type(self, *source_types: IcebergType) -> IcebergType:
        """The type of the partition value this transform produces from the source type(s)."""
        raise NotImplementedError

    def apply(self, source_type: IcebergType, value: Any) -> Any:
        """Transform one value (internal representation in and out); None maps to None."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class IdentityTransform(Transform):
    """`identity`: the source value unchanged."""

    def __str__(self) -> str:
        return "identity"

    def result_type(self, *source_types: IcebergType) -> IcebergType:
        return source_types[0]

    def apply(self, source_type: IcebergType, value: Any) -> Any:
        return value


@dataclass(frozen=True, slots=True)
class BucketTransform(Transform):
    """`bucket[N]`: 32-bit Murmur3 hash of the value, mod N."""

    num_buckets: int

    def __str__(self) -> str:
        return f"bucket[{self.num_buckets}]"

    def result_type(self, *source_types: IcebergType) -> IcebergType:
        return INT


@dataclass(frozen=True, slots=True)
class TruncateTransform(Transform):
    """`truncate[W]`: the value truncated to width W."""

    width: int

    def __str__(self) -> str:
        return f"truncate[{self.width}]"

    def result_type(self, *source_types: IcebergType) -> IcebergType:
        return source_types[0]


@dataclass(frozen=True, slots=True)
class YearTransform(Transform):
    """`year`: years since 1970."""

    def __str__(self) -> str:
        return "year"

    def result_type(self, *source_types: IcebergType) -> IcebergType:
        return INT


@dataclass(frozen=True, slots=True)
class MonthTransform(Transform):
    """`month`: months since 1970-01."""

    def __str__(self) -> str:
        return "month"

    def result_type(self, *source_types: IcebergType) -> IcebergType:
        return INT


@dataclass(frozen=True, slots=True)
class DayTransform(Transform):
    """`day`: days since 1970-01-01 (result type date)."""

    def __str__(self) -> str:
        return "day"

    def result_type(self, *source_types: IcebergType) -> IcebergType:
        return DATE


@dataclass(frozen=True, slots=True)
class HourTransform(Transform):
    """`hour`: hours since 1970-01-01 00:00."""

    def __str__(self) -> str:
        return "hour"

    def result_type(self, *source_types: IcebergType) -> IcebergType:
        return INT


@dataclass(frozen=True, slots=True)
class VoidTransform(Transform):
    """`void`: always null."""

    def __str__(self) -> str:
        return "void"

    def result_type(self, *source_types: IcebergType) -> IcebergType:
        return source_types[0]

    def apply(self, source_type: IcebergType, value: Any) -> Any:
        return None


@dataclass(frozen=True, slots=True)
class UnknownTransform(Transform):
    """A transform this version does not know; kept verbatim, never applied."""

    text: str

    def __str__(self) -> str:
        return self.text

    def result_type(self, *source_types: IcebergType) -> IcebergType:
        raise ValidationError(f"cannot compute the result type of unknown transform {self.text!r}")

    def apply(self, source_type: IcebergType, value: Any) -> Any:
        raise ValidationError(f"cannot apply unknown transform {self.text!r}")


IDENTITY = IdentityTransform()
YEAR = YearTransform()
MONTH = MonthTransform()
DAY = DayTransform()
HOUR = HourTransform()
VOID = VoidTransform()

_SIMPLE: dict[str, Transform] = {str(t): t for t in (IDENTITY, YEAR, MONTH, DAY, HOUR, VOID)}
_PARAM = re.compile(r"^(bucket|truncate)\s*\[\s*(\d+)\s*\]$")


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
