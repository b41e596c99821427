"""The rows an append or overwrite writes: input data (Arrow, a DuckDB relation, pandas, polars)
matched to the table's columns and written as data files.

Columns match the table's by name (exactly, else case-insensitively), or by position with
`by_name=False`; missing columns get their `write-default` (else null; a required column without
one is an error); types must fit without loss (`iceduck.write.types.compatible`, plus numeric and
string-to-uuid casts that SQL would make implicitly).
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa

from iceduck.errors import ValidationError
from iceduck.spec.types import (
    STRING,
    UNKNOWN,
    UUID,
    DecimalType,
    IcebergType,
    NestedField,
    PrimitiveType,
    Schema,
)
from iceduck.spec.values import from_json
from iceduck.table import Table
from iceduck.transaction.changes import write_target
from iceduck.transaction.commit import crash_point
from iceduck.vocabulary import duck_literal, quote_ident
from iceduck.write.matching import unregister
from iceduck.write.parquet import needs_connection, prepare_connection, uses_bucket, write_data_files
from iceduck.write.types import (
    WriteTypeError,
    arrow_schema_of_relation,
    check_writable,
    compatible,
    duck_type,
    iceberg_type_from_arrow,
)


def _as_arrow(data: Any) -> tuple[pa.Schema, Any]:
    """(Arrow schema, object DuckDB can scan) for the supported inputs."""
    if isinstance(data, pa.Table | pa.RecordBatchReader):
        return data.schema, data
    if isinstance(data, pa.RecordBatch):
        return data.schema, pa.Table.from_batches([data])
    if _is_relation(data):
        # a DuckDB relation, possibly of another connection: stream its rows as Arrow
        reader = data.to_arrow_reader(1_000_000)
        return _fix_relation_schema(data, reader.schema), reader
    if hasattr(data, "to_arrow") and not isinstance(data, pa.Array):  # polars
        table = data.to_arrow()
        return table.schema, table
    try:
        import pandas as pd

        if isinstance(data, pd.DataFrame):
            table = pa.Table.from_pandas(data, preserve_index=False)
            return table.schema, table
    except ImportError:
        pass
    raise ValidationError(
        f"cannot append {type(data).__name__}: give a pyarrow Table/RecordBatch/RecordBatchReader, a DuckDB "
        "relation or a pandas DataFrame"
    )


def _fix_relation_schema(rel: Any, schema: pa.Schema) -> pa.Schema:
    return arrow_schema_of_relation(rel.types, schema)  # the one DuckDB -> Iceberg type mapping


def _implicitly_castable(source: IcebergType, target: IcebergType) -> bool:
    """Casts SQL makes implicitly on INSERT that cannot surprise: numbers to wider numbers, strings to uuid."""
    numeric = ("int", "long", "float", "double")
    s, t = source.name, target.name
    if s in ("int", "long") and isinstance(target, DecimalType):
        digits = 10 if s == "int" else 19
        return target.precision - target.scale >= digits
    if (s in numeric or isinstance(source, DecimalType)) and t in ("float", "double"):
        return True
    if isinstance(source, DecimalType) and isinstance(target, DecimalType):
        return (
            source.scale <= target.scale
            and source.precision - source.scale <= target.precision - target.scale
        )
    return source == STRING and target == UUID


def source_select(
    schema: Schema, source_name: str, arrow_schema: pa.Schema, *, by_name: bool, table: str
) -> str:
    """SQL selecting the table's columns (cast, defaults filled in) from a registered Arrow source."""
    input_fields = list(arrow_schema)
    mapping: dict[int, pa.Field] = {}
    targets = [f for f in schema.fields]
    if by_name:
        exact = {f.name: f for f in input_fields}
        lower: dict[str, list[pa.Field]] = {}
        for f in input_fields:
            lower.setdefault(f.name.lower(), []).append(f)
        used: set[str] = set()
        for t in targets:
            found = exact.get(t.name)
            if found is None:
                candidates = lower.get(t.name.lower(), [])
                found = candidates[0] if len(candidates) == 1 else None
            if found is not None:
                mapping[t.id] = found
                used.add(found.name)
        extra = [f.name for f in input_fields if f.name not in used]
        if extra:
            raise ValidationError(
                f"cannot write to {table}: column(s) {', '.join(extra)} are not in the table "
                f"(table columns: {', '.join(f.name for f in targets)})"
            )
    else:
        if len(input_fields) != len(targets):
            raise ValidationError(
                f"cannot write to {table}: {len(input_fields)} column(s) given, the table has {len(targets)} "
                f"({', '.join(f.name for f in targets)})"
            )
        mapping = {t.id: f for t, f in zip(targets, input_fields, strict=True)}
    problems = []
    select = []
    for t in targets:
        if t.type.name == "unknown":
            continue
        target_type = duck_type(t.type, t.name)
        src = mapping.get(t.id)
        if src is None:
            if t.has_write_default and t.write_default is not None:
                select.append(f"{_default_literal(t)} AS {quote_ident(t.name)}")
            elif t.required:
                problems.append(f"required column {t.name} is missing (and has no write-default)")
            else:
                select.append(f"CAST(NULL AS {target_type}) AS {quote_ident(t.name)}")
            continue
        try:
            source_type = iceberg_type_from_arrow(src.type, src.name)
        except WriteTypeError as e:
            problems.append(str(e))
            continue
        why = compatible(source_type, t.type)
        if why and not _implicitly_castable(source_type, t.type):
            problems.append(f"column {t.name}: {why} (given as {src.name}: {src.type})")
            continue
        if t.required and src.nullable and source_type == UNKNOWN:
            problems.append(f"required column {t.name} is given as all nulls")
            continue
        select.append(f"CAST({quote_ident(src.name)} AS {target_type}) AS {quote_ident(t.name)}")
    if problems:
        raise ValidationError(f"cannot write to {table}: " + "; ".join(problems))
    return f"SELECT {', '.join(select)} FROM {quote_ident(source_name)}"


def _default_literal(f: NestedField) -> str:
    if isinstance(f.type, PrimitiveType | DecimalType):
        return duck_literal(f.type, from_json(f.type, f.write_default))
    if f.write_default == {}:
        # a struct defaulting to {}: each field takes its own write-default
        children = []
        for c in f.type.fields:  # type: ignore[union-attr]
            value = c.write_default if c.has_write_default else None
            child = (
                duck_literal(c.type, from_json(c.type, value))
                if value is not None and isinstance(c.type, PrimitiveType | DecimalType)
                else f"CAST(NULL AS {duck_type(c.type, c.name)})"
            )
            children.append(f"{quote_ident(c.name)} := {child}")
        return f"CAST(struct_pack({', '.join(children)}) AS {duck_type(f.type, f.name)})"
    return f"CAST(NULL AS {duck_type(f.type, f.name)})"


def write_input(con: Any, table: Table, data: Any, *, by_name: bool) -> list[Any]:
    prepare_connection(con, table.io)
    target = write_target(table)
    check_writable(target.schema)
    who = table.name or table.metadata_location
    if _is_relation(data) and not needs_connection(target) and not uses_bucket(target):
        # A DuckDB relation is written by its own connection: its rows never leave DuckDB.
        arrow_schema = _fix_relation_schema(data, data.limit(0).to_arrow_table().schema)
        name = "__iceduck_input"
        select = source_select(target.schema, name, arrow_schema, by_name=by_name, table=who)
        files = write_data_files(con, select, target, run=lambda sql: data.query(name, sql).fetchall())
    else:
        arrow_schema, scannable = _as_arrow(data)
        name = f"__iceduck_input_{uuid.uuid4().hex}"
        select = source_select(target.schema, name, arrow_schema, by_name=by_name, table=who)
        con.register(name, scannable)
        try:
            files = write_data_files(con, select, target)
        finally:
            unregister(con, [name])
    crash_point("data-written")
    return files


def _is_relation(data: Any) -> bool:
    return hasattr(data, "to_arrow_reader") and hasattr(data, "query") and hasattr(data, "types")


__all__ = ["source_select", "write_input"]
