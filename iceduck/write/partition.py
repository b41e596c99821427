"""Partition transforms as DuckDB SQL, and partition values through `COPY ... PARTITION_BY`.

`transform_sql(transform, source_type, column)` is the SQL of a transform's result in the internal
representation (ints for bucket/year/month/day/hour; the source type for identity and truncate).
Integer arithmetic only: DuckDB's `//` and `%` truncate toward zero, the spec's transforms floor,
so `floor_div` / `floor_mod` spell the floor forms out. Bucket calls the vectorised Murmur3 UDFs of
`iceduck.write.bucket`.

For the fan-out, each partition value becomes a text key (`key_sql`): `n` for null, else `v` and an
unambiguous text (hex for strings and binary). `COPY ... (PARTITION_BY (...), RETURN_STATS)` reports
the keys of every file it writes, and `parse_key` turns them back into values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from iceduck.errors import ValidationError
from iceduck.spec.partitioning import PartitionSpec
from iceduck.spec.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from iceduck.spec.types import DecimalType, IcebergType, Schema, StructType
from iceduck.vocabulary import quote_ident, quote_str
from iceduck.write import bucket
from iceduck.write.duck_values import from_duck_text

_MICROS_PER_DAY = 86_400_000_000
_MICROS_PER_HOUR = 3_600_000_000


def floor_div(a: str, b: int) -> str:
    """SQL of floor(a / b) for integers (b > 0), exact at any magnitude."""
    return f"(({a}) - {floor_mod(a, b)}) // {b}"


def floor_mod(a: str, b: int) -> str:
    """SQL of the non-negative remainder of a / b (b > 0)."""
    return f"(((({a}) % {b}) + {b}) % {b})"


def column_sql(schema: Schema, field_id: int) -> str:
    """SQL reading the column with this field id (struct_extract for fields nested in structs)."""
    path: list[str] = []
    if not _find_path(schema.fields, field_id, path):
        raise ValidationError(f"field id {field_id} is not a column of the schema")
    sql = quote_ident(path[0])
    for name in path[1:]:
        sql = f"struct_extract({sql}, {quote_str(name)})"
    return sql


def _find_path(fields: Any, field_id: int, path: list[str]) -> bool:
    for f in fields:
        if f.id == field_id:
            path.append(f.name)
            return True
        if isinstance(f.type, StructType):
            path.append(f.name)
            if _find_path(f.type.fields, field_id, path):
                return True
            path.pop()
    return False


def _epoch(source_type: IcebergType, col: str) -> tuple[str, int]:
    """SQL of a date/timestamp as (integer count, units per day)."""
    kind = source_type.name
    if kind == "date":
        return f"CAST(date_diff('day', DATE '1970-01-01', {col}) AS BIGINT)", 1
    if kind in ("timestamp_ns", "timestamptz_ns"):
        return f"epoch_ns({col})", _MICROS_PER_DAY * 1000
    return f"epoch_us({col})", _MICROS_PER_DAY


def _civil_date(source_type: IcebergType, col: str) -> str:
    """SQL of the (UTC) calendar date of a date or timestamp, by whole days since the epoch (DuckDB's
    own conversions of negative nanosecond timestamps round toward zero)."""
    if source_type.name == "date":
        return col
    count, per_day = _epoch(source_type, col)
    return f"(DATE '1970-01-01' + CAST({floor_div(count, per_day)} AS INTEGER))"


def transform_sql(transform: Transform, source_type: IcebergType, col: str) -> str:
    """SQL computing `transform` of the column expression `col` (NULL stays NULL)."""
    transform.result_type(source_type)  # ValidationError when the transform cannot apply
    kind = source_type.name
    if isinstance(transform, IdentityTransform):
        return col
    if isinstance(transform, VoidTransform):
        return "NULL"
    if isinstance(transform, YearTransform):
        return f"CAST(year({_civil_date(source_type, col)}) - 1970 AS INTEGER)"
    if isinstance(transform, MonthTransform):
        civil = _civil_date(source_type, col)
        return f"CAST((year({civil}) - 1970) * 12 + month({civil}) - 1 AS INTEGER)"
    if isinstance(transform, DayTransform):
        count, per_day = _epoch(source_type, col)
        return f"CAST({count if per_day == 1 else floor_div(count, per_day)} AS INTEGER)"
    if isinstance(transform, HourTransform):
        count, per_day = _epoch(source_type, col)
        return f"CAST({floor_div(count, per_day // 24)} AS INTEGER)"
    if isinstance(transform, TruncateTransform):
        w = transform.width
        if kind in ("int", "long"):
            # computed one size wider: `(v % w) + w` must not overflow near the type's limits
            wide = f"CAST({col} AS {'BIGINT' if kind == 'int' else 'HUGEINT'})"
            return f"CAST({wide} - {floor_mod(wide, w)} AS {'INTEGER' if kind == 'int' else 'BIGINT'})"
        if isinstance(source_type, DecimalType):
            step = f"CAST({w} AS DECIMAL(38, 0)) / {10**source_type.scale}"
            unit = f"CAST({step} AS DECIMAL(38, {source_type.scale}))"
            typed = f"DECIMAL({source_type.precision}, {source_type.scale})"
            return f"CAST(({col}) - ((({col}) % {unit}) + {unit}) % {unit} AS {typed})"
        if kind == "string":
            return f"left({col}, {w})"
        if kind == "binary":
            return f"({col})[1:{w}]"
    if isinstance(transform, BucketTransform):
        n = transform.num_buckets
        if kind in ("int", "long"):
            return f"{bucket.LONG_FUNCTION}(CAST({col} AS BIGINT), {n})"
        if kind == "date":
            return f"{bucket.LONG_FUNCTION}({_epoch(source_type, col)[0]}, {n})"
        if kind == "time":
            return f"{bucket.LONG_FUNCTION}(date_diff('microsecond', TIME '00:00:00', {col}), {n})"
        if kind in ("timestamp", "timestamptz"):
            return f"{bucket.LONG_FUNCTION}(epoch_us({col}), {n})"
        if kind in ("timestamp_ns", "timestamptz_ns"):
            # nanosecond values hash as their (floored) microseconds
            return f"{bucket.LONG_FUNCTION}({floor_div(f'epoch_ns({col})', 1000)}, {n})"
        if kind == "string":
            return f"{bucket.STRING_FUNCTION}({col}, {n})"
        if kind == "binary":
            return f"{bucket.BYTES_FUNCTION}({col}, {n})"
        if kind == "uuid":
            return f"{bucket.BYTES_FUNCTION}(unhex(replace(CAST({col} AS VARCHAR), '-', '')), {n})"
        if isinstance(source_type, DecimalType):
            return f"{bucket.DECIMAL_FUNCTION}(CAST({col} AS VARCHAR), {n})"
    raise ValidationError(f"iceduck cannot write partition transform {transform} of type {source_type}")


def key_sql(value_sql: str, result_type: IcebergType) -> str:
    """The text partition key of a partition value (see the module docstring)."""
    if result_type.name in ("string", "binary"):
        text = f"hex({value_sql})"
    else:
        text = f"CAST({value_sql} AS VARCHAR)"
    return f"CASE WHEN ({value_sql}) IS NULL THEN 'n' ELSE 'v' || {text} END"


def parse_key(text: str, result_type: IcebergType) -> Any:
    """The partition value of a text key written by `key_sql`."""
    if text == "n":
        return None
    if not text.startswith("v"):
        raise ValidationError(f"unexpected partition key {text!r}")
    body = text[1:]
    if result_type.name == "string":
        return bytes.fromhex(body).decode("utf-8")
    if result_type.name == "date" and body.lstrip("-").isdigit():
        return int(body)  # the day transform's value: days since 1970-01-01 as an integer
    return from_duck_text(result_type, body)


@dataclass(frozen=True, slots=True)
class PartitionColumn:
    """One partition field as the writer computes it: its SQL and types (source None: void of a
    dropped column)."""

    name: str
    sql: str
    transform: Transform
    source_type: IcebergType | None
    result_type: IcebergType | None


def partition_columns(spec: PartitionSpec, schema: Schema) -> list[PartitionColumn]:
    """How to compute each partition field of `spec` over rows of `schema`; `ValidationError` for
    transforms iceduck cannot compute (unknown or multi-argument ones: writers may not use them)."""
    out = []
    for pf in spec.fields:
        if len(pf.source_ids) != 1:
            raise ValidationError(
                f"partition field {pf.name}: iceduck cannot write multi-argument transforms"
            )
        source = schema.find_type(pf.source_id)
        if source is None:
            if isinstance(pf.transform, VoidTransform):
                out.append(PartitionColumn(pf.name, "NULL", pf.transform, None, None))
                continue
            raise ValidationError(
                f"partition field {pf.name} reads field id {pf.source_id}, which the current schema lacks"
            )
        sql = transform_sql(pf.transform, source, column_sql(schema, pf.source_id))
        out.append(PartitionColumn(pf.name, sql, pf.transform, source, pf.transform.result_type(source)))
    return out
