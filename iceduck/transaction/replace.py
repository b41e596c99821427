"""Replacing a table in place (CREATE OR REPLACE TABLE ... [AS SELECT]): Iceberg's atomic replace.

The table keeps its UUID, location, snapshots, snapshot log and metadata log; in one commit it
gets (what Java Iceberg's replace-table transaction commits, so its readers see the same thing):

* `remove-snapshot-ref main`: the table has no current snapshot until the new rows are appended
  (older snapshots stay readable by time travel);
* the new schema, its field ids reused by name (full path) from the current schema and fresh ones
  after `last-column-id` for new columns (an equal existing schema is reused);
* the new partition spec and sort order, partition field ids reused from any spec with the same
  source and transform (an equal existing spec / order is reused);
* the given properties on top of the existing ones; a higher format version when asked;
* when there are rows, an append snapshot of them (no parent), which `main` then points at.

The data files are written once against the replaced metadata; a concurrent commit makes the
attempt plan again on the new state, and when that state would give different field ids than the
files were written with, the replace fails with `CommitConflictError` (nothing committed).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from iceduck.errors import CommitConflictError, ValidationError
from iceduck.spec.snapshots import MAIN_BRANCH
from iceduck.spec.table_metadata import TableMetadata
from iceduck.spec.types import IcebergType, ListType, MapType, NestedField, Schema, StructType
from iceduck.spec.updates import (
    RemoveSnapshotRef,
    SetProperties,
    TableUpdate,
    UpgradeFormatVersion,
    apply_updates,
    requirements_for,
)
from iceduck.table import Table
from iceduck.transaction.changes import KIND_APPEND, SnapshotChange
from iceduck.transaction.commit import Attempt, Change, CommitResult, TableCommitter
from iceduck.transaction.metadata import schema_updates, sort_order_updates, spec_updates
from iceduck.transaction.terms import partition_fields, sort_order


def reuse_ids(schema: Schema, current: Schema, last_column_id: int) -> Schema:
    """`schema` with each field's id taken from the field of the same full name in `current`, new
    fields numbered after `last_column_id` (identifier fields follow their names)."""
    old: dict[str, int] = {}
    for f, path in current.walk():
        old[path] = f.id
    counter = itertools.count(last_column_id + 1)
    by_old_id = {f.id: path for f, path in schema.walk()}

    def fid(path: str) -> int:
        return old[path] if path in old else next(counter)

    fields = tuple(_field(f, f.name, fid) for f in schema.fields)
    out = Schema(fields, schema_id=schema.schema_id)
    paths = {path: f.id for f, path in out.walk()}
    keys = tuple(paths[by_old_id[i]] for i in schema.identifier_field_ids)
    return Schema(fields, schema_id=schema.schema_id, identifier_field_ids=keys)


def _field(f: NestedField, path: str, fid: Any) -> NestedField:
    return dataclasses.replace(f, id=fid(path), type=_type(f.type, path, fid))


def _type(t: IcebergType, path: str, fid: Any) -> IcebergType:
    if isinstance(t, StructType):
        return StructType(tuple(_field(f, f"{path}.{f.name}", fid) for f in t.fields))
    if isinstance(t, ListType):
        element = f"{path}.element"
        return ListType(fid(element), _type(t.element, element, fid), t.element_required)
    if isinstance(t, MapType):
        key, value = f"{path}.key", f"{path}.value"
        return MapType(
            fid(key), _type(t.key, key, fid), fid(value), _type(t.value, value, fid), t.value_required
        )
    return t


def replacement_updates(
    md: TableMetadata,
    schema: Schema,
    partition_by: Sequence[Any] | None,
    sort_by: Sequence[Any] | None,
    properties: Mapping[str, str],
    format_version: int | None,
) -> list[TableUpdate]:
    """The updates that make `md` the replaced table (see the module docstring), no snapshot yet."""
    updates: list[TableUpdate] = []
    if format_version is not None and format_version != md.format_version:
        if format_version < md.format_version:
            raise ValidationError(
                f"cannot replace a v{md.format_version} table with a v{format_version} one (no downgrades)"
            )
        updates.append(UpgradeFormatVersion(format_version))
    if MAIN_BRANCH in md.refs:
        updates.append(RemoveSnapshotRef(MAIN_BRANCH))
    fresh = reuse_ids(schema, md.schema, md.last_column_id)
    updates += schema_updates(fresh)
    staged = apply_updates(md, updates)
    updates += spec_updates(staged, partition_fields(staged.schema, list(partition_by or ())))
    updates += sort_order_updates(sort_order(staged.schema, list(sort_by or ())))
    if properties:
        updates.append(SetProperties(dict(properties)))
    return updates


class ReplaceTable(Change):
    """The replace updates, then (when there are files) an append of them, in one commit."""

    operation = "replace"

    def __init__(self, make_updates: Any, first: list[TableUpdate], append: SnapshotChange | None) -> None:
        self._make_updates = make_updates
        self._first = first
        self._append = append

    def apply(self, current: Table, attempt: int) -> Attempt:
        md = current.metadata
        updates = list(self._make_updates(md))
        replaced = apply_updates(md, updates)
        if attempt and replaced.schema != apply_updates(md, self._first).schema:
            raise CommitConflictError(
                f"table {current.name}: changed by another writer while it was being replaced; nothing was "
                "committed"
            )
        written: list[str] = []
        if self._append is not None:
            planned = self._append.apply(dataclasses.replace(current, metadata=replaced), attempt)
            updates += planned.updates
            written = planned.written
        return Attempt(updates, requirements_for(md, updates), written)

    def abort(self) -> None:
        if self._append is not None:
            self._append.abort()

    def result(self, table: str, metadata: TableMetadata, location: str, attempts: int) -> CommitResult:
        base = super().result(table, metadata, location, attempts)
        if self._append is None:
            return base
        rows = sum(f.record_count for f in self._append.added_data_files)
        return dataclasses.replace(base, added_data_files=len(self._append.added_data_files), added_rows=rows)


def replace_table(
    committer: TableCommitter,
    con: Any,
    schema: Schema,
    data: Any = None,
    *,
    partition_by: Sequence[Any] | None = None,
    sort_by: Sequence[Any] | None = None,
    properties: Mapping[str, str] | None = None,
    format_version: int | None = None,
) -> CommitResult:
    """Replace the table's schema, spec, sort order (and rows: `data`, a relation or Arrow data, by
    name) in one commit; history kept (see the module docstring)."""
    from iceduck.transaction.write_input import write_input

    base = committer.load()
    md = base.metadata
    if md.format_version < 2:
        raise ValidationError(
            f"table {committer.identifier}: CREATE OR REPLACE needs format version 2 or 3 (v1 partition specs "
            "cannot change freely); upgrade it with ALTER TABLE ... SET ('format-version' = '2')"
        )
    props = {str(k): str(v) for k, v in (properties or {}).items()}

    def make(current: TableMetadata) -> list[TableUpdate]:
        return replacement_updates(current, schema, partition_by, sort_by, props, format_version)

    first = make(md)
    replaced = dataclasses.replace(base, metadata=apply_updates(md, first))
    append = None
    if data is not None:
        files = write_input(con, replaced, data, by_name=True)
        if files:
            append = SnapshotChange(kind=KIND_APPEND, operation="append", added_data_files=files)
    return committer.commit(ReplaceTable(make, first, append), base)


__all__ = ["ReplaceTable", "replace_table", "replacement_updates", "reuse_ids"]
