"""Creating a table behind the Python API: the schema from user input, the create commit (`assert-create`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from iceduck.catalog.base import split_table_name
from iceduck.catalog.locations import ALLOW_NESTED_PROPERTY, check_location_free
from iceduck.errors import AlreadyExistsError, NamespaceNotFoundError, ValidationError
from iceduck.io.fileio import FileIO
from iceduck.io.storage import default_io
from iceduck.spec.partitioning import PartitionField
from iceduck.spec.sorting import SortField
from iceduck.spec.types import V3_ONLY_TYPES, NestedField, Schema
from iceduck.spec.updates import AssertCreate, apply_updates
from iceduck.transaction.commit import CommitRecord, CommitResult
from iceduck.transaction.metadata import create_table_updates
from iceduck.transaction.schema_update import to_iceberg_type
from iceduck.transaction.terms import partition_spec, sort_order
from iceduck.write.types import assign_fresh_ids, schema_from_arrow


def to_schema(schema: Any, con: Any = None) -> Schema:
    """An Iceberg schema (fresh ids unless an iceduck Schema is given) from a `pyarrow.Schema`, an
    iceduck `Schema`, or `(name, DuckDB or Iceberg type)` pairs / a mapping of them."""
    if isinstance(schema, Schema):
        ids = [f.id for f, _ in schema.walk()]
        if len(ids) != len(set(ids)):
            raise ValidationError("schema has duplicate field ids")
        return schema
    if isinstance(schema, pa.Schema):
        return schema_from_arrow(schema)
    pairs = list(schema.items()) if isinstance(schema, Mapping) else list(schema)
    if not pairs:
        raise ValidationError("a table needs at least one column")
    fields = [NestedField(0, name, to_iceberg_type(t, con, name)) for name, t in pairs]
    names = [n for n, _ in pairs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"duplicate column names: {', '.join(dupes)}")
    fresh, _ = assign_fresh_ids(fields)
    return Schema(fresh)


def create_table(
    catalog: Any,
    identifier: str,
    schema: Any,
    *,
    partition_by: Sequence[str | PartitionField] | None = None,
    sort_by: Sequence[str | SortField] | None = None,
    properties: Mapping[str, str] | None = None,
    format_version: int = 3,
    location: str | None = None,
    con: Any = None,
    io: FileIO | None = None,
) -> CommitResult:
    """Create a table; `AlreadyExistsError` if the name is taken. The catalog writes the first
    metadata file from the create updates (`assert-create`); the result has its location."""
    namespace, name = split_table_name(identifier)
    io = io or default_io()
    iceberg_schema = to_schema(schema, con)
    if format_version not in (1, 2, 3):
        raise ValidationError(f"format_version must be 1, 2 or 3, not {format_version}")
    if format_version < 3:
        for f, path in iceberg_schema.walk():
            if f.type.name in V3_ONLY_TYPES:
                raise ValidationError(f"column {path} has type {f.type}, which needs format version 3")
    props = {str(k): str(v) for k, v in (properties or {}).items()}
    if "format-version" in props:
        raise ValidationError("set the format version with format_version=..., not as a property")
    spec = partition_spec(iceberg_schema, partition_by)
    order = sort_order(iceberg_schema, sort_by)
    if not catalog.namespace_exists(namespace):
        raise NamespaceNotFoundError(
            f"cannot create table {identifier}: namespace '{namespace}' does not exist"
        )
    if catalog.table_exists(namespace, name) if hasattr(catalog, "table_exists") else False:
        raise AlreadyExistsError(f"table {identifier} exists already")
    table_location = (location or catalog.default_table_location(namespace, name)).rstrip("/")
    if props.get(ALLOW_NESTED_PROPERTY, "").lower() != "true":
        check_location_free(catalog, identifier, table_location, io)
    updates = create_table_updates(
        location=table_location, schema=iceberg_schema, spec=spec, sort_order=order, properties=props,
        format_version=format_version,
    )  # fmt: skip
    apply_updates(None, updates)  # refuse invalid metadata before the catalog sees it
    requirements = [AssertCreate()]
    committed = catalog.commit_table(namespace, name, requirements, updates)
    record = CommitRecord(
        identifier, None, committed.metadata_location, committed.metadata.last_updated_ms,
        tuple(requirements), tuple(updates),
    )  # fmt: skip
    return CommitResult(
        identifier, "create", None, None, committed.metadata_location, attempts=1, commit=record
    )


__all__ = ["create_table", "to_schema"]
