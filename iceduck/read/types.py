"""Iceberg types as DuckDB types, and values as DuckDB SQL text.

`duck_type(t)` is the DuckDB type a column of Iceberg type `t` reads as (the same mapping the
reference peer uses: `fixed` and `binary` are BLOB, `timestamptz_ns` is TIMESTAMPTZ_NS, nested types
nest). `sql_literal(t, value)` writes an internal value as a typed SQL literal that means the same
in every session time zone; `default_text(t, value)` is the VARCHAR text DuckDB casts to the column
type in `read_parquet(schema := ...)`.
"""

from __future__ import annotations

from typing import Any

from iceduck.spec.types import (
    DecimalType,
    FixedType,
    GeographyType,
    GeometryType,
    IcebergType,
    ListType,
    MapType,
    PrimitiveType,
    StructType,
)
from iceduck.spec.values import to_human

_PRIMITIVES = {
    "boolean": "BOOLEAN",
    "int": "INTEGER",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "date": "DATE",
    "time": "TIME",
    "timestamp": "TIMESTAMP",
    "timestamptz": "TIMESTAMPTZ",
    "timestamp_ns": "TIMESTAMP_NS",
    "timestamptz_ns": "TIMESTAMPTZ_NS",
    "string": "VARCHAR",
    "uuid": "UUID",
    "binary": "BLOB",
    "variant": "VARIANT",
    "unknown": "INTEGER",  # always NULL; DuckDB's NULL type cannot be a column type of a table
}


def quote_ident(name: str) -> str:
    """A SQL identifier, always quoted."""
    return '"' + name.replace('"', '""') + '"'


def quote_str(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def duck_type(t: IcebergType) -> str:
    """The DuckDB type (SQL text) of an Iceberg type."""
    if isinstance(t, PrimitiveType):
        return _PRIMITIVES[t.name]
    if isinstance(t, DecimalType):
        return f"DECIMAL({t.precision}, {t.scale})"
    if isinstance(t, FixedType):
        return "BLOB"
    if isinstance(t, GeometryType | GeographyType):
        return "GEOMETRY" if isinstance(t, GeometryType) else "BLOB"
    if isinstance(t, StructType):
        return "STRUCT(" + ", ".join(f"{quote_ident(f.name)} {duck_type(f.type)}" for f in t.fields) + ")"
    if isinstance(t, ListType):
        return f"{duck_type(t.element)}[]"
    if isinstance(t, MapType):
        return f"MAP({duck_type(t.key)}, {duck_type(t.value)})"
    raise TypeError(f"no DuckDB type for {t}")


def default_text(t: IcebergType, value: Any) -> str | None:
    """VARCHAR text of a primitive value that DuckDB casts back to the value (None for NULL)."""
    if value is None:
        return None
    return to_human(t, value)


def sql_literal(t: IcebergType, value: Any) -> str:
    """A typed SQL literal of an internal value (NULL for None)."""
    if value is None:
        return f"CAST(NULL AS {duck_type(t)})"
    if t.name == "boolean":
        return "true" if value else "false"
    if t.name in ("int", "long"):
        return f"CAST({int(value)} AS {duck_type(t)})"
    return f"CAST({quote_str(to_human(t, value))} AS {duck_type(t)})"


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
