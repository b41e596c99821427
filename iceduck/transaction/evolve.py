"""Metadata-only changes behind the Python API: schema, partition spec, sort order, properties,
format version. Each checks its change on the table as loaded, then commits it (applied again to
the current metadata on a retry)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from iceduck.errors import ValidationError
from iceduck.spec.partitioning import PartitionField
from iceduck.spec.sorting import SortField
from iceduck.spec.table_metadata import TableMetadata
from iceduck.spec.updates import TableUpdate, apply_updates
from iceduck.transaction.changes import MetadataChange
from iceduck.transaction.commit import CommitResult, TableCommitter
from iceduck.transaction.metadata import (
    format_version_updates,
    property_updates,
    schema_updates,
    sort_order_updates,
    spec_updates,
)
from iceduck.transaction.schema_update import SchemaChanges
from iceduck.transaction.terms import partition_fields, sort_order


def update_schema(committer: TableCommitter, changes: SchemaChanges) -> CommitResult:
    """Commit schema changes (one new schema)."""
    base = committer.load()
    md = base.metadata
    changes.apply(md)  # refuse invalid changes before committing anything

    def update(current: TableMetadata) -> list[TableUpdate]:
        return schema_updates(changes.apply(current))

    change = MetadataChange("update-schema", update, planned_schema_id=md.current_schema_id)
    return committer.commit(change, base)


def update_spec(committer: TableCommitter, terms: Sequence[str | PartitionField]) -> CommitResult:
    """Make a partition spec of `terms` the table's default (existing data keeps its spec)."""
    base = committer.load()
    md = base.metadata
    # refuse bad terms before committing anything
    apply_updates(md, spec_updates(md, partition_fields(md.schema, terms)))

    def update(current: TableMetadata) -> list[TableUpdate]:
        return spec_updates(current, partition_fields(current.schema, terms))

    change = MetadataChange(
        "update-spec", update, planned_schema_id=md.current_schema_id, planned_spec_id=md.default_spec_id
    )
    return committer.commit(change, base)


def set_sort_order(committer: TableCommitter, terms: Sequence[str | SortField]) -> CommitResult:
    """Make a sort order of `terms` the table's default (empty: unsorted)."""
    base = committer.load()
    sort_order(base.metadata.schema, terms)  # refuse bad terms before committing anything

    def update(current: TableMetadata) -> list[TableUpdate]:
        return sort_order_updates(sort_order(current.schema, terms))

    return committer.commit(
        MetadataChange("set-sort-order", update, planned_schema_id=base.metadata.current_schema_id), base
    )


_RESERVED = frozenset({"format-version"})


def set_properties(committer: TableCommitter, updates: Mapping[str, Any]) -> CommitResult:
    """Set table properties (values become strings)."""
    props = {str(k): str(v) for k, v in updates.items()}
    reserved = sorted(_RESERVED & props.keys())
    if reserved:
        raise ValidationError(
            f"{committer.identifier}: {', '.join(reserved)} is not a table property; use upgrade_format_version"
        )
    base = committer.load()
    return committer.commit(MetadataChange("set-properties", lambda md: property_updates(props)), base)


def unset_properties(committer: TableCommitter, keys: Iterable[str]) -> CommitResult:
    """Remove table properties (absent ones are ignored)."""
    removals = [str(k) for k in keys]
    base = committer.load()
    return committer.commit(
        MetadataChange("unset-properties", lambda md: property_updates({}, removals)), base
    )


def upgrade_format_version(committer: TableCommitter, version: int) -> CommitResult:
    """Upgrade the table's format version (one-way)."""
    base = committer.load()
    format_version_updates(base.metadata, version)  # refuse a downgrade before committing anything
    return committer.commit(
        MetadataChange("upgrade-format-version", lambda md: format_version_updates(md, version)), base
    )


__all__ = [
    "set_properties",
    "set_sort_order",
    "unset_properties",
    "update_schema",
    "update_spec",
    "upgrade_format_version",
]
