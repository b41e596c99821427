"""ALTER TABLE actions on a lake table's key and defaults:

* `ALTER TABLE t SET IDENTIFIER FIELDS a, b` / `DROP IDENTIFIER FIELDS [a, b]` (Spark's spelling):
  the schema's `identifier-field-ids`, the key INSERT ... ON CONFLICT / OR REPLACE use
  (`iceduck.sql.upsert`). The spec's rules apply: required primitive columns (not float/double),
  not inside an optional struct, a list or a map; Iceberg never makes a column required for it.
* `ALTER TABLE t ALTER COLUMN c SET DEFAULT <constant>` / `DROP DEFAULT`: the column's v3
  write-default (the value an INSERT omitting the column writes). The initial-default, what rows
  written before the column existed read, never changes. `SET DEFAULT NULL` removes it, as a JSON
  null default is not valid metadata. Tables before format version 3 have no defaults: refused.
"""

from __future__ import annotations

import contextlib
from typing import Any

from iceduck.errors import ValidationError
from iceduck.spec.types import Schema, StructType
from iceduck.sql import parse as p
from iceduck.sql.types import evaluate_default
from iceduck.transaction.schema_update import SchemaChanges


def alter_key_or_default(
    con: Any, changes: SchemaChanges, schema: Schema, a: p.SetDefault | p.SetIdentifierFields, identifier: str
) -> None:
    """Record the action `a` on `changes` (committed by the caller), names resolved as DuckDB does."""
    if isinstance(a, p.SetDefault):
        column = _column(schema, a.column, identifier)
        value = None
        if a.default is not None:
            field = _field(schema, column)
            with contextlib.closing(con.cursor()) as cur:
                value = evaluate_default(cur, a.default, field.type, column)
        changes.set_write_default(column, value)
        return
    current = [schema.column_name(fid) or "" for fid in schema.identifier_field_ids]
    named = [_column(schema, c, identifier) for c in a.columns]
    if not a.drop:
        changes.set_identifier_fields(named)
        return
    missing = [c for c in named if c not in current]
    if missing:
        raise ValidationError(
            f"table {identifier}: {', '.join(missing)} is not an identifier field "
            f"(identifier fields: {', '.join(current) or 'none'})"
        )
    changes.set_identifier_fields([c for c in current if c not in named] if named else [])


def _column(schema: Schema, name: str, identifier: str) -> str:
    """The column as the schema spells it: exactly, else the only case-insensitive match."""
    fields = schema.fields
    out: list[str] = []
    for part in name.split("."):
        exact = [f for f in fields if f.name == part] or [f for f in fields if f.name.lower() == part.lower()]
        if len(exact) != 1:
            raise ValidationError(
                f"table {identifier}: no column {name} (columns: {', '.join(f.name for f in schema.fields)})"
            )
        out.append(exact[0].name)
        fields = exact[0].type.fields if isinstance(exact[0].type, StructType) else ()
    return ".".join(out)


def _field(schema: Schema, dotted: str) -> Any:
    fields = schema.fields
    field: Any = None
    for part in dotted.split("."):
        field = next(f for f in fields if f.name == part)
        fields = field.type.fields if isinstance(field.type, StructType) else ()
    return field


__all__ = ["alter_key_or_default"]
