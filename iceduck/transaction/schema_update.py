"""Schema evolution (spec "Schema Evolution"): add, rename, drop and widen columns.

`SchemaChanges` records the changes and `apply(metadata)` builds the new schema:

* `add_column(name, type, doc, initial_default, write_default, required)`: a new field with fresh
  ids (nested ones included) after `last-column-id`; a dotted name adds a field inside a struct.
  Defaults (v3) are Python values (dates, datetimes, Decimals, ints, ...) stored in their JSON form;
  `write_default` starts as `initial_default` when not given. A required column needs a non-null
  initial default (existing rows need a value). Defaults need format version 3.
* `rename_column(name, new_name)`: same id, new name (dotted names reach nested fields).
* `drop_column(name)`: not allowed for columns the current partition spec, sort order or identifier
  fields use.
* `set_write_default(name, value)` (v3): the write-default only; the initial-default never changes
  once the field exists.
* `set_identifier_fields(names)`: the key; required primitive columns (not float/double), not inside
  an optional struct, a list or a map.
* `widen_column(name, type)`: the spec's promotions only: int -> long, float -> double,
  decimal(P, S) -> decimal(P', S) with P' > P; in v3 also date -> timestamp / timestamp_ns and
  unknown -> any type, the date ones not for partition source columns (transforms would change).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from iceduck.errors import ValidationError
from iceduck.spec.table_metadata import TableMetadata
from iceduck.spec.types import (
    V3_ONLY_TYPES,
    DecimalType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    PrimitiveType,
    Schema,
    StructType,
    parse_type,
)
from iceduck.spec.values import from_python, to_json
from iceduck.write.types import assign_fresh_ids, iceberg_type_from_arrow, iceberg_type_of_duck_text

_V3_PROMOTIONS = {("date", "timestamp"), ("date", "timestamp_ns")}


def to_iceberg_type(value: Any, con: Any = None, where: str = "") -> IcebergType:
    """An Iceberg type from an Iceberg type name (`"long"`, `"decimal(10, 2)"`), a DuckDB type name
    (`"BIGINT"`, `"VARCHAR[]"`, needs `con`), an Arrow type, or an Iceberg type."""
    if isinstance(value, PrimitiveType | DecimalType | StructType | ListType | MapType):
        return value
    if isinstance(value, pa.DataType):
        return iceberg_type_from_arrow(value, where)
    if isinstance(value, str):
        try:
            return parse_type(value.strip().lower() if value.strip().islower() else value.strip())
        except Exception:
            pass
        if con is None:
            raise ValidationError(f"{where}: unknown type {value!r}")
        return iceberg_type_of_duck_text(con, where, value)
    raise ValidationError(f"{where}: not a type: {value!r}")


def _default_json(t: IcebergType, value: Any, where: str) -> Any:
    if value is None:
        return None
    if isinstance(t, StructType):
        if value in ({}, "{}"):
            return {}
        raise ValidationError(
            f"{where}: a struct default can only be null or {{}} (field defaults go on the fields)"
        )
    try:
        return to_json(t, from_python(t, value))
    except (ValidationError, TypeError, ValueError) as e:
        raise ValidationError(f"{where}: default {value!r} does not fit type {t}: {e}") from None


class SchemaChanges:
    """Changes to apply to the current schema, in order."""

    def __init__(self, con: Any = None) -> None:
        self._ops: list[Callable[[_Builder], None]] = []
        self._con = con

    def add_column(
        self,
        name: str,
        type: Any,
        doc: str | None = None,
        initial_default: Any = None,
        write_default: Any = None,
        *,
        required: bool = False,
    ) -> SchemaChanges:
        """Add a column (dotted name: inside a struct)."""
        t = to_iceberg_type(type, self._con, name)
        self._ops.append(lambda b: b.add(name, t, doc, initial_default, write_default, required))
        return self

    def rename_column(self, name: str, new_name: str) -> SchemaChanges:
        """Rename a column (dotted name reaches nested fields; `new_name` is the last part only)."""
        self._ops.append(lambda b: b.rename(name, new_name))
        return self

    def drop_column(self, name: str) -> SchemaChanges:
        """Drop a column."""
        self._ops.append(lambda b: b.drop(name))
        return self

    def widen_column(self, name: str, type: Any) -> SchemaChanges:
        """Promote a column's type (spec-allowed promotions only)."""
        t = to_iceberg_type(type, self._con, name)
        self._ops.append(lambda b: b.widen(name, t))
        return self

    def document_column(self, name: str, doc: str | None) -> SchemaChanges:
        """Set (None: remove) a column's `doc`, its comment."""
        self._ops.append(lambda b: b.document(name, doc))
        return self

    def set_write_default(self, name: str, value: Any) -> SchemaChanges:
        """Set (None: remove) a column's write-default (v3): the value a writer gives the column when
        a row omits it. The initial-default, what rows written before the column existed read, stays."""
        self._ops.append(lambda b: b.write_default(name, value))
        return self

    def set_identifier_fields(self, names: list[str]) -> SchemaChanges:
        """Make these columns the schema's identifier fields (its key; empty: none)."""
        self._ops.append(lambda b: b.identifiers(names))
        return self

    def apply(self, md: TableMetadata) -> Schema:
        """The schema after every change, checked; `ValidationError` naming the column otherwise."""
        builder = _Builder(md)
        for op in self._ops:
            op(builder)
        return builder.schema()

    @property
    def empty(self) -> bool:
        return not self._ops


class _Builder:
    def __init__(self, md: TableMetadata) -> None:
        self.md = md
        self.fields: list[NestedField] = list(md.schema.fields)
        self.last_id = md.last_column_id
        self.identifier_ids = md.schema.identifier_field_ids

    def schema(self) -> Schema:
        return Schema(
            tuple(self.fields), schema_id=self.md.current_schema_id, identifier_field_ids=self.identifier_ids
        )

    def _replace(self, name: str, fn: Callable[[NestedField], NestedField | None]) -> None:
        parts = name.split(".")
        self.fields = _edit(self.fields, parts, fn, name)

    def add(
        self, name: str, t: IcebergType, doc: str | None, initial: Any, write: Any, required: bool
    ) -> None:
        parts = name.split(".")
        leaf = parts[-1]
        if not leaf:
            raise ValidationError(f"invalid column name {name!r}")
        if self.md.format_version < 3 and (initial is not None or write is not None):
            raise ValidationError(
                f"column {name}: default values need format version 3 (table is v{self.md.format_version})"
            )
        if t.name in V3_ONLY_TYPES and self.md.format_version < 3:
            raise ValidationError(
                f"column {name}: type {t} needs format version 3 (table is v{self.md.format_version})"
            )
        initial_json = _default_json(t, initial, name)
        write_json = _default_json(t, write if write is not None else initial, name)
        if required and initial_json is None:
            raise ValidationError(
                f"cannot add required column {name} without an initial default: existing rows would have no value"
            )
        fresh, last = assign_fresh_ids([NestedField(0, leaf, t, required, doc)], self.last_id + 1)
        new = dataclasses.replace(
            fresh[0],
            initial_default=initial_json,
            write_default=write_json,
            has_initial_default=initial_json is not None,
            has_write_default=write_json is not None,
        )
        self.last_id = last
        parent = parts[:-1]

        def insert(fields: list[NestedField]) -> list[NestedField]:
            if any(f.name == leaf for f in fields):
                raise ValidationError(f"cannot add column {name}: a column of that name exists")
            return [*fields, new]

        if not parent:
            self.fields = insert(self.fields)
        else:

            def into(f: NestedField) -> NestedField:
                if not isinstance(f.type, StructType):
                    raise ValidationError(f"cannot add {name}: {'.'.join(parent)} is not a struct")
                return dataclasses.replace(f, type=StructType(tuple(insert(list(f.type.fields)))))

            self._replace(".".join(parent), into)

    def rename(self, name: str, new_name: str) -> None:
        if not new_name or "." in new_name:
            raise ValidationError(f"invalid new name {new_name!r} for column {name}: a name without dots")
        parts = name.split(".")
        siblings = self._siblings(parts[:-1])
        if any(f.name == new_name for f in siblings if f.name != parts[-1]):
            raise ValidationError(f"cannot rename {name} to {new_name}: a column of that name exists")
        self._replace(name, lambda f: dataclasses.replace(f, name=new_name))

    def document(self, name: str, doc: str | None) -> None:
        self._find(name)
        self._replace(name, lambda f: dataclasses.replace(f, doc=doc))

    def write_default(self, name: str, value: Any) -> None:
        f = self._find(name)
        if self.md.format_version < 3:
            raise ValidationError(
                f"column {name}: default values need format version 3 (table is v{self.md.format_version}); "
                "upgrade it with ALTER TABLE ... SET ('format-version' = '3')"
            )
        default = _default_json(f.type, value, name)
        self._replace(
            name,
            lambda x: dataclasses.replace(x, write_default=default, has_write_default=default is not None),
        )

    def identifiers(self, names: list[str]) -> None:
        """The spec's rules for identifier fields: required primitives (not float or double), not
        inside an optional struct, a list or a map."""
        ids: list[int] = []
        for name in names:
            parts = name.split(".")
            fields = self.fields
            field: NestedField | None = None
            for k, part in enumerate(parts):
                field = next((f for f in fields if f.name == part), None)
                if field is None:
                    raise ValidationError(f"cannot make {name} an identifier field: no such column")
                if k < len(parts) - 1:
                    if not isinstance(field.type, StructType):
                        raise ValidationError(
                            f"cannot make {name} an identifier field: {part} is not a struct (lists and maps "
                            "cannot hold identifier fields)"
                        )
                    if not field.required:
                        raise ValidationError(
                            f"cannot make {name} an identifier field: it sits in optional struct {part}"
                        )
                    fields = list(field.type.fields)
            assert field is not None
            if not isinstance(field.type, PrimitiveType | DecimalType):
                raise ValidationError(
                    f"cannot make {name} an identifier field: {field.type} is not a primitive type"
                )
            if field.type.name in ("float", "double"):
                raise ValidationError(f"cannot make {name} an identifier field: {field.type} cannot be a key")
            if not field.required:
                raise ValidationError(
                    f"cannot make {name} an identifier field: the column is optional (identifier fields must "
                    "be required, NOT NULL)"
                )
            if field.id in ids:
                raise ValidationError(f"identifier field {name} given twice")
            ids.append(field.id)
        self.identifier_ids = tuple(ids)

    def _siblings(self, parent: list[str]) -> list[NestedField]:
        fields = self.fields
        for part in parent:
            f = next((x for x in fields if x.name == part), None)
            if f is None or not isinstance(f.type, StructType):
                raise ValidationError(f"no struct column {'.'.join(parent)!r}")
            fields = list(f.type.fields)
        return fields

    def drop(self, name: str) -> None:
        field = self._find(name)
        ids = {field.id} | {f.id for f, _ in Schema((field,)).walk()}
        md = self.md
        for pf in md.default_spec.fields:
            if set(pf.source_ids) & ids:
                raise ValidationError(
                    f"cannot drop column {name}: the current partition spec uses it ({pf.name}); change the spec first"
                )
        for sf in md.default_sort_order.fields:
            if set(sf.source_ids) & ids:
                raise ValidationError(f"cannot drop column {name}: the table's sort order uses it")
        if set(self.identifier_ids) & ids:
            raise ValidationError(f"cannot drop column {name}: it is an identifier field")
        self._replace(name, lambda f: None)
        if not self.fields:
            raise ValidationError(f"cannot drop column {name}: a table needs at least one column")

    def _find(self, name: str) -> NestedField:
        parts = name.split(".")
        for f in self._siblings(parts[:-1]):
            if f.name == parts[-1]:
                return f
        raise ValidationError(f"no column {name!r} in the table")

    def widen(self, name: str, t: IcebergType) -> None:
        field = self._find(name)
        old = field.type
        if old == t:
            return
        ok = False
        if isinstance(old, PrimitiveType) and isinstance(t, PrimitiveType):
            pair = (old.name, t.name)
            ok = pair in (("int", "long"), ("float", "double"))
            if self.md.format_version >= 3 and (pair in _V3_PROMOTIONS or old.name == "unknown"):
                ok = True
                if pair in _V3_PROMOTIONS:
                    for spec in self.md.partition_specs:
                        for pf in spec.fields:
                            # identity keeps days where the column now holds micros; bucket hashes differ
                            if field.id in pf.source_ids:
                                raise ValidationError(
                                    f"cannot widen {name} from {old} to {t}: partition field {pf.name} "
                                    f"({pf.transform}) would change value"
                                )
        elif isinstance(old, DecimalType) and isinstance(t, DecimalType):
            ok = old.scale == t.scale and t.precision > old.precision
        elif old.name == "unknown" and self.md.format_version >= 3:
            ok = True
        if not ok:
            raise ValidationError(
                f"cannot change column {name} from {old} to {t}: allowed promotions are int -> long, float -> double, "
                "decimal(P, S) -> decimal(P', S) with P' > P (v3 also date -> timestamp/timestamp_ns, unknown -> any)"
            )
        self._replace(name, lambda f: dataclasses.replace(f, type=t))


def _edit(
    fields: list[NestedField], parts: list[str], fn: Callable[[NestedField], NestedField | None], full: str
) -> list[NestedField]:
    idx = next((i for i, f in enumerate(fields) if f.name == parts[0]), None)
    if idx is None:
        raise ValidationError(f"no column {full!r} in the table")
    f = fields[idx]
    if len(parts) == 1:
        new = fn(f)
    else:
        if not isinstance(f.type, StructType):
            raise ValidationError(f"column {parts[0]!r} is not a struct; cannot reach {full!r}")
        new = dataclasses.replace(f, type=StructType(tuple(_edit(list(f.type.fields), parts[1:], fn, full))))
    out = list(fields)
    if new is None:
        del out[idx]
    else:
        out[idx] = new
    return out
