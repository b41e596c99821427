"""Metadata tables read from the table metadata file alone: snapshots, history, refs, the metadata
log, schemas, partition specs and properties.

Each function takes a loaded `Table` (and options) and returns a `pyarrow.Table` with the schema
declared beside it. Column names follow the metadata tables of Spark and PyIceberg where they have
an equivalent.
"""

from __future__ import annotations

import pyarrow as pa

from iceduck.spec.snapshots import Snapshot
from iceduck.spec.table_metadata import TableMetadata
from iceduck.spec.types import NestedField, Schema, type_to_json
from iceduck.table import Table

TS = pa.timestamp("ms", tz="UTC")
STR_MAP = pa.map_(pa.string(), pa.string())

SNAPSHOTS = pa.schema(
    [
        ("committed_at", TS),
        ("snapshot_id", pa.int64()),
        ("parent_id", pa.int64()),
        ("sequence_number", pa.int64()),
        ("operation", pa.string()),
        ("manifest_list", pa.string()),
        ("summary", STR_MAP),
        ("schema_id", pa.int32()),
        ("first_row_id", pa.int64()),
        ("added_rows", pa.int64()),
        ("is_current", pa.bool_()),
    ]
)


def snapshots(table: Table) -> pa.Table:
    """One row per snapshot in the metadata, oldest first."""
    md = table.metadata
    current = md.current_snapshot_id
    rows = sorted(md.snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number))
    return pa.table(
        {
            "committed_at": [s.timestamp_ms for s in rows],
            "snapshot_id": [s.snapshot_id for s in rows],
            "parent_id": [s.parent_snapshot_id for s in rows],
            "sequence_number": [s.sequence_number for s in rows],
            "operation": [s.operation for s in rows],
            "manifest_list": [s.manifest_list for s in rows],
            "summary": [list(s.summary.items()) for s in rows],
            "schema_id": [s.schema_id for s in rows],
            "first_row_id": [s.first_row_id for s in rows],
            "added_rows": [s.added_rows for s in rows],
            "is_current": [s.snapshot_id == current for s in rows],
        },
        schema=SNAPSHOTS,
    )


HISTORY = pa.schema(
    [
        ("made_current_at", TS),
        ("snapshot_id", pa.int64()),
        ("parent_id", pa.int64()),
        ("is_current_ancestor", pa.bool_()),
    ]
)


def history(table: Table) -> pa.Table:
    """The snapshot log: when each snapshot became current, and whether it is an ancestor of the current one."""
    md = table.metadata
    ancestors = _ancestor_ids(md)
    by_id = {s.snapshot_id: s for s in md.snapshots}
    log = md.snapshot_log
    return pa.table(
        {
            "made_current_at": [e.timestamp_ms for e in log],
            "snapshot_id": [e.snapshot_id for e in log],
            "parent_id": [_parent(by_id.get(e.snapshot_id)) for e in log],
            "is_current_ancestor": [e.snapshot_id in ancestors for e in log],
        },
        schema=HISTORY,
    )


def _parent(s: Snapshot | None) -> int | None:
    return s.parent_snapshot_id if s is not None else None


def _ancestor_ids(md: TableMetadata) -> set[int]:
    if md.current_snapshot_id is None:
        return set()
    return {s.snapshot_id for s in md.ancestors_of(md.current_snapshot_id)}


REFS = pa.schema(
    [
        ("name", pa.string()),
        ("type", pa.string()),
        ("snapshot_id", pa.int64()),
        ("max_reference_age_in_ms", pa.int64()),
        ("min_snapshots_to_keep", pa.int32()),
        ("max_snapshot_age_in_ms", pa.int64()),
    ]
)


def refs(table: Table) -> pa.Table:
    """Branches and tags, `main` included."""
    items = sorted(table.metadata.refs.items())
    return pa.table(
        {
            "name": [n for n, _ in items],
            "type": [str(r.type).upper() for _, r in items],
            "snapshot_id": [r.snapshot_id for _, r in items],
            "max_reference_age_in_ms": [r.max_ref_age_ms for _, r in items],
            "min_snapshots_to_keep": [r.min_snapshots_to_keep for _, r in items],
            "max_snapshot_age_in_ms": [r.max_snapshot_age_ms for _, r in items],
        },
        schema=REFS,
    )


METADATA_LOG = pa.schema(
    [
        ("timestamp", TS),
        ("file", pa.string()),
        ("latest_snapshot_id", pa.int64()),
        ("is_current", pa.bool_()),
    ]
)


def metadata_log(table: Table) -> pa.Table:
    """Previous metadata files from the metadata log, then the current one.

    `latest_snapshot_id` is the snapshot that was current at that time (from the snapshot log).
    """
    md = table.metadata
    entries = [(e.timestamp_ms, e.metadata_file, False) for e in md.metadata_log]
    entries.append((md.last_updated_ms, table.metadata_location, True))
    return pa.table(
        {
            "timestamp": [t for t, _, _ in entries],
            "file": [f for _, f, _ in entries],
            "latest_snapshot_id": [_current_at(md, t) for t, _, _ in entries],
            "is_current": [c for _, _, c in entries],
        },
        schema=METADATA_LOG,
    )


def _current_at(md: TableMetadata, timestamp_ms: int) -> int | None:
    latest = None
    for e in md.snapshot_log:
        if e.timestamp_ms <= timestamp_ms:
            latest = e.snapshot_id
    return latest


SCHEMAS = pa.schema(
    [
        ("schema_id", pa.int32()),
        ("is_current", pa.bool_()),
        ("field_id", pa.int32()),
        ("name", pa.string()),
        ("path", pa.string()),
        ("parent_id", pa.int32()),
        ("depth", pa.int32()),
        ("type", pa.string()),
        ("required", pa.bool_()),
        ("is_identifier", pa.bool_()),
        ("doc", pa.string()),
        ("initial_default", pa.string()),
        ("write_default", pa.string()),
    ]
)


def schemas(table: Table) -> pa.Table:
    """One row per field of every schema, nested fields with their dotted path."""
    md = table.metadata
    rows: list[dict[str, object]] = []
    for schema in md.schemas:
        for f, path, parent, depth in _fields(schema):
            rows.append(
                {
                    "schema_id": schema.schema_id,
                    "is_current": schema.schema_id == md.current_schema_id,
                    "field_id": f.id,
                    "name": f.name,
                    "path": path,
                    "parent_id": parent,
                    "depth": depth,
                    "type": _type_text(f),
                    "required": f.required,
                    "is_identifier": f.id in schema.identifier_field_ids,
                    "doc": f.doc,
                    "initial_default": _json_text(f.initial_default) if f.has_initial_default else None,
                    "write_default": _json_text(f.write_default) if f.has_write_default else None,
                }
            )
    return pa.Table.from_pylist(rows, schema=SCHEMAS)


def _fields(schema: Schema) -> list[tuple[NestedField, str, int | None, int]]:
    out: list[tuple[NestedField, str, int | None, int]] = []
    parent_of: dict[str, int] = {}
    for f, path in schema.walk():
        head, _, _ = path.rpartition(".")
        out.append((f, path, parent_of.get(head) if head else None, path.count(".")))
        parent_of[path] = f.id
    return out


def _type_text(f: NestedField) -> str:
    t = type_to_json(f.type)
    return t if isinstance(t, str) else str(f.type)


def _json_text(value: object) -> str:
    import json

    return json.dumps(value)


PARTITION_SPECS = pa.schema(
    [
        ("spec_id", pa.int32()),
        ("is_default", pa.bool_()),
        ("field_id", pa.int32()),
        ("name", pa.string()),
        ("transform", pa.string()),
        ("source_ids", pa.list_(pa.int32())),
        ("source_columns", pa.list_(pa.string())),
        ("result_type", pa.string()),
    ]
)


def partition_specs(table: Table) -> pa.Table:
    """One row per partition field of every spec (an unpartitioned spec has one row with NULL field)."""
    md = table.metadata
    schema = md.schema
    rows: list[dict[str, object]] = []
    for spec in md.partition_specs:
        base: dict[str, object] = {"spec_id": spec.spec_id, "is_default": spec.spec_id == md.default_spec_id}
        if not spec.fields:
            rows.append(base)
        ptype = spec.partition_type(schema)
        for pf, rf in zip(spec.fields, ptype.fields, strict=True):
            rows.append(
                base
                | {
                    "field_id": pf.field_id,
                    "name": pf.name,
                    "transform": str(pf.transform),
                    "source_ids": list(pf.source_ids),
                    "source_columns": [schema.column_name(i) for i in pf.source_ids],
                    "result_type": str(rf.type),
                }
            )
    return pa.Table.from_pylist(rows, schema=PARTITION_SPECS)


PROPERTIES = pa.schema([("key", pa.string()), ("value", pa.string())])


def properties(table: Table) -> pa.Table:
    """The table's properties."""
    items = sorted(table.metadata.properties.items())
    return pa.table({"key": [k for k, _ in items], "value": [v for _, v in items]}, schema=PROPERTIES)
