"""Iceberg types and values as the readers hand them to DuckDB.

`default_text(t, value)` is the VARCHAR text DuckDB casts to the column type in
`read_parquet(schema := ...)`; `arrow_type(t)` the Arrow type DuckDB reads as
`iceduck.vocabulary.duck_type(t)`. (The DuckDB type names, quoting and literals themselves are in
`iceduck.vocabulary`.)
"""

from __future__ import annotations

from typing import Any

from iceduck.spec.types import (
    DecimalType,
    FixedType,
    IcebergType,
    ListType,
    MapType,
    PrimitiveType,
    StructType,
)
from iceduck.spec.values import to_human


def default_text(t: IcebergType, value: Any) -> str | None:
    """VARCHAR text of a primitive value that DuckDB casts back to the value (None for NULL)."""
    if value is None:
        return None
    return to_human(t, value)


def arrow_type(t: IcebergType) -> Any:
    """The Arrow type DuckDB reads as `duck_type(t)` (for sources that declare Iceberg columns)."""
    import pyarrow as pa

    if isinstance(t, PrimitiveType):
        simple = {
            "boolean": pa.bool_(),
            "int": pa.int32(),
            "long": pa.int64(),
            "float": pa.float32(),
            "double": pa.float64(),
            "date": pa.date32(),
            "time": pa.time64("us"),
            "timestamp": pa.timestamp("us"),
            "timestamptz": pa.timestamp("us", tz="UTC"),
            "timestamp_ns": pa.timestamp("ns"),
            "timestamptz_ns": pa.timestamp("ns", tz="UTC"),
            "string": pa.string(),
            "uuid": pa.uuid(),
            "binary": pa.binary(),
        }
        return simple.get(t.name, pa.binary())
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, FixedType):
        return pa.binary()
    if isinstance(t, StructType):
        return pa.struct([pa.field(f.name, arrow_type(f.type)) for f in t.fields])
    if isinstance(t, ListType):
        return pa.list_(arrow_type(t.element))
    if isinstance(t, MapType):
        return pa.map_(arrow_type(t.key), arrow_type(t.value))
    return pa.binary()
