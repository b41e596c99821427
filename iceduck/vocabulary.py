"""DuckDB's vocabulary, in one place: quoted identifiers, string and typed literals, and the DuckDB
type of each Iceberg type.

Every layer that writes SQL text for DuckDB (reading, writing, the SQL router, the binding) uses
these; the module depends on the Iceberg spec alone, so it sits just above `spec/` and below all of
them.

- `quote_ident(name)`: always double-quoted, so no column name can collide with a keyword.
- `quote_str(text)`: a single-quoted string literal.
- `duck_type(t)`: the DuckDB type a column of Iceberg type `t` reads as (the reference peer's
  mapping: `fixed` and `binary` are BLOB, `timestamptz_ns` is TIMESTAMPTZ_NS, nested types nest).
  Writing refuses some of these types (`iceduck.write.types.duck_type` says which and why).
- `duck_literal(t, value)`: an internal value as a typed literal that means the same in every
  session time zone (NULL for None).
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

PRIMITIVE_DUCK_TYPES = {
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
    """`name` as a double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def quote_str(text: str) -> str:
    """`text` as a single-quoted SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def duck_type(t: IcebergType) -> str:
    """The DuckDB type (SQL text) a column of Iceberg type `t` reads as."""
    if isinstance(t, PrimitiveType):
        return PRIMITIVE_DUCK_TYPES[t.name]
    if isinstance(t, DecimalType):
        return f"DECIMAL({t.precision}, {t.scale})"
    if isinstance(t, FixedType):
        return "BLOB"
    if isinstance(t, GeometryType):
        return "GEOMETRY"
    if isinstance(t, GeographyType):
        return "BLOB"
    if isinstance(t, StructType):
        return "STRUCT(" + ", ".join(f"{quote_ident(f.name)} {duck_type(f.type)}" for f in t.fields) + ")"
    if isinstance(t, ListType):
        return f"{duck_type(t.element)}[]"
    if isinstance(t, MapType):
        return f"MAP({duck_type(t.key)}, {duck_type(t.value)})"
    raise TypeError(f"no DuckDB type for {t}")


def duck_literal(t: IcebergType, value: Any) -> str:
    """A typed SQL literal of an internal value of type `t` (a typed NULL for None)."""
    if value is None:
        return f"CAST(NULL AS {duck_type(t)})"
    if t.name == "boolean":
        return "true" if value else "false"
    if t.name in ("int", "long"):
        return f"CAST({int(value)} AS {duck_type(t)})"
    return f"CAST({quote_str(to_human(t, value))} AS {duck_type(t)})"


# A keyed source (duckdb/hooks.py) reports a failure the user can act on as one row holding the
# message in this column, every other column NULL; SQL reads such a source through `keyed_rows`,
# which fails on that row with DuckDB's own one-line `Invalid Input Error: <message>` (a Python
# exception would come wrapped in DuckDB's text naming the internal source, on every connection).
SOURCE_ERROR_COLUMN = "__error"


def keyed_rows(source: str, key_column: str, key: str, columns: str = "*") -> str:
    """The query of a keyed source's rows for `key` that fails on a failure row.

    The check sits under `OFFSET 0`, which DuckDB pushes no filter through: a filter of the
    caller's (`WHERE record_count > 5`) evaluated before the check would drop the failure row, whose
    columns are NULL, and the statement would quietly return the rows read before the failure.
    `x IS NULL OR error(x)` evaluates `error()` only on rows the NULL test leaves (a CASE costs
    more per row)."""
    failed = f"({SOURCE_ERROR_COLUMN} IS NULL OR error({SOURCE_ERROR_COLUMN}))"
    return f"SELECT {columns} FROM {source} WHERE {key_column} = {quote_str(key)} AND {failed} OFFSET 0"
