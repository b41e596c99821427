"""Pure table metadata updates: each function takes a `TableMetadata` and returns a new one.

They follow the spec's rules for writers: new schemas and partition specs get fresh ids unless an
equal one exists (which is then reused, "Writers must not create a new partition spec if there
already exists a compatible partition spec"), partition field ids are reused for equivalent fields
and otherwise continue after `last-partition-id`, `last-column-id` only grows, a snapshot moves
`main`, the snapshot log and (v3) `next-row-id`, and every commit logs the previous metadata file
in `metadata-log`, pruned to `write.metadata.previous-versions-max` entries.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from iceduck.errors import ValidationError
from iceduck.spec.partitioning import PARTITION_DATA_ID_START, PartitionField, PartitionSpec
from iceduck.spec.snapshots import (
    MAIN_BRANCH,
    MetadataLogEntry,
    Snapshot,
    SnapshotLogEntry,
    SnapshotRef,
    SnapshotRefType,
    frozen_map,
)
from iceduck.spec.sorting import UNSORTED, SortOrder
from iceduck.spec.table_metadata import TableMetadata
from iceduck.spec.transforms import VoidTransform
from iceduck.spec.types import Schema

DEFAULT_PREVIOUS_VERSIONS_MAX = 100


def _updated(md: TableMetadata, **changes: Any) -> TableMetadata:
    """`dataclasses.replace` for table metadata, with fresh lookup indexes: `replace` would hand the
    new object the old one's index dicts, and filling them would change the old object too."""
    return dataclasses.replace(
        md, **changes, _schemas_by_id={}, _specs_by_id={}, _orders_by_id={}, _snapshots_by_id={}
    )


def now_ms() -> int:
    """The current time in milliseconds since the epoch."""
    return int(time.time() * 1000)


def new_table_metadata(
    *,
    location: str,
    schema: Schema,
    spec: PartitionSpec,
    sort_order: SortOrder,
    properties: Mapping[str, str],
    format_version: int,
    table_uuid: uuid.UUID | None = None,
) -> TableMetadata:
    """Metadata of a new, empty table (schema id 0, spec id 0, sort order 1 when sorted)."""
    if format_version not in (1, 2, 3):
        raise ValidationError(f"format-version must be 1, 2 or 3, not {format_version}")
    schema = Schema(schema.fields, 0, schema.identifier_field_ids)
    spec = dataclasses.replace(spec, spec_id=0)
    orders: tuple[SortOrder, ...] = (UNSORTED,)
    default_order = 0
    if not sort_order.is_unsorted:
        sort_order = dataclasses.replace(sort_order, order_id=1)
        orders = (UNSORTED, sort_order)
        default_order = 1
    return TableMetadata(
        format_version=format_version,
        table_uuid=table_uuid or uuid.uuid4(),
        location=location.rstrip("/"),
        last_sequence_number=0,
        last_updated_ms=now_ms(),
        last_column_id=schema.highest_field_id,
        schemas=(schema,),
        current_schema_id=0,
        partition_specs=(spec,),
        default_spec_id=0,
        last_partition_id=max(spec.last_assigned_field_id, PARTITION_DATA_ID_START - 1),
        properties=frozen_map(dict(properties)),
        sort_orders=orders,
        default_sort_order_id=default_order,
        next_row_id=0 if format_version >= 3 else None,
    )


def with_snapshot(md: TableMetadata, snapshot: Snapshot, next_row_id: int | None) -> TableMetadata:
    """`md` with `snapshot` added and made current on `main`."""
    refs = dict(md.refs)
    refs[MAIN_BRANCH] = SnapshotRef(snapshot.snapshot_id, SnapshotRefType.BRANCH)
    return _updated(
        md,
        snapshots=(*md.snapshots, snapshot),
        current_snapshot_id=snapshot.snapshot_id,
        refs=frozen_map(refs),
        snapshot_log=(*md.snapshot_log, SnapshotLogEntry(snapshot.timestamp_ms, snapshot.snapshot_id)),
        last_sequence_number=max(md.last_sequence_number, snapshot.sequence_number),
        last_updated_ms=max(md.last_updated_ms, snapshot.timestamp_ms),
        next_row_id=next_row_id if md.format_version >= 3 else None,
    )


def with_metadata_log(
    md: TableMetadata, previous_location: str, previous_updated_ms: int
) -> tuple[TableMetadata, tuple[MetadataLogEntry, ...]]:
    """`md` logging the previous metadata file; also returns the entries pruned from the log."""
    try:
        keep = int(md.properties.get("write.metadata.previous-versions-max", DEFAULT_PREVIOUS_VERSIONS_MAX))
    except ValueError:
        raise ValidationError("write.metadata.previous-versions-max must be an integer") from None
    log = (*md.metadata_log, MetadataLogEntry(previous_updated_ms, previous_location))
    keep = max(keep, 1)
    dropped = log[: max(0, len(log) - keep)]
    return _updated(md, metadata_log=log[len(dropped) :], last_updated_ms=now_ms()), dropped


# -- schemas -------------------------------------------------------------------------------------------


def with_schema(md: TableMetadata, schema: Schema) -> TableMetadata:
    """`md` with `schema` as the current schema (reusing the id of an equal existing schema)."""
    for existing in md.schemas:
        if existing.fields == schema.fields and existing.identifier_field_ids == schema.identifier_field_ids:
            return _updated(
                md,
                current_schema_id=existing.schema_id,
                last_column_id=max(md.last_column_id, schema.highest_field_id),
            )
    new_id = max(s.schema_id for s in md.schemas) + 1
    schema = Schema(schema.fields, new_id, schema.identifier_field_ids)
    return _updated(
        md,
        schemas=(*md.schemas, schema),
        current_schema_id=new_id,
        last_column_id=max(md.last_column_id, schema.highest_field_id),
    )


# -- partition specs ---------------------------------------------------------------------------------


def _equivalent(a: PartitionSpec, b: PartitionSpec) -> bool:
    if len(a.fields) != len(b.fields):
        return False
    return all(
        x.source_ids == y.source_ids and x.transform == y.transform and x.name == y.name
        for x, y in zip(a.fields, b.fields, strict=True)
    )


def assign_partition_field_ids(
    md: TableMetadata, fields: Iterable[PartitionField]
) -> tuple[PartitionField, ...]:
    """Partition fields with ids: reused from an equivalent field (same sources and transform) of
    any spec, else continuing after `last-partition-id`."""
    out = []
    next_id = max(md.last_partition_id, PARTITION_DATA_ID_START - 1)
    used: set[int] = set()
    for f in fields:
        reuse = None
        for spec in md.partition_specs:
            for old in spec.fields:
                if (
                    old.source_ids == f.source_ids
                    and old.transform == f.transform
                    and old.field_id not in used
                ):
                    reuse = old.field_id
                    break
            if reuse is not None:
                break
        if reuse is None:
            next_id += 1
            reuse = next_id
        used.add(reuse)
        out.append(dataclasses.replace(f, field_id=reuse))
    return tuple(out)


def with_default_spec(md: TableMetadata, fields: Iterable[PartitionField]) -> TableMetadata:
    """`md` with a partition spec of `fields` as the default (an equivalent existing spec is reused).

    v1 tables cannot drop partition fields: a field missing from `fields` is kept as `void`.
    """
    new_fields = list(fields)
    if md.format_version == 1:
        current = md.default_spec
        kept = []
        for old in current.fields:
            match = next(
                (f for f in new_fields if f.source_ids == old.source_ids and f.transform == old.transform),
                None,
            )
            if match is not None:
                kept.append(match)
                new_fields.remove(match)
            else:
                kept.append(dataclasses.replace(old, transform=VoidTransform()))
        new_fields = kept + new_fields
    assigned = assign_partition_field_ids(md, new_fields)
    names = [f.name for f in assigned]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"partition field names must be unique: {', '.join(dupes)}")
    candidate = PartitionSpec(0, assigned)
    for spec in md.partition_specs:
        if _equivalent(spec, candidate):
            return _updated(md, default_spec_id=spec.spec_id)
    new_id = max(s.spec_id for s in md.partition_specs) + 1
    spec = PartitionSpec(new_id, assigned)
    return _updated(
        md,
        partition_specs=(*md.partition_specs, spec),
        default_spec_id=new_id,
        last_partition_id=max(md.last_partition_id, spec.last_assigned_field_id),
    )


def with_sort_order(md: TableMetadata, order: SortOrder) -> TableMetadata:
    """`md` with `order` as the default sort order (an equal existing order is reused)."""
    if order.is_unsorted:
        return _updated(md, default_sort_order_id=0)
    for existing in md.sort_orders:
        if existing.fields == order.fields:
            return _updated(md, default_sort_order_id=existing.order_id)
    new_id = max(o.order_id for o in md.sort_orders) + 1
    return _updated(
        md,
        sort_orders=(*md.sort_orders, dataclasses.replace(order, order_id=new_id)),
        default_sort_order_id=new_id,
    )


# -- properties and versions --------------------------------------------------------------------------


def with_properties(
    md: TableMetadata, updates: Mapping[str, str], removals: Iterable[str] = ()
) -> TableMetadata:
    """`md` with properties set and removed (absent keys are ignored)."""
    props = dict(md.properties)
    for key in removals:
        props.pop(key, None)
    for key, value in updates.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValidationError(f"table properties are strings: {key!r}={value!r}")
        props[key] = value
    return _updated(md, properties=frozen_map(props))


def with_format_version(md: TableMetadata, version: int) -> TableMetadata:
    """`md` upgraded to format `version` (one-way). Upgrading to v3 starts `next-row-id` at 0;
    existing snapshots keep no row ids, existing position delete files stay valid."""
    if version not in (1, 2, 3):
        raise ValidationError(f"format-version must be 1, 2 or 3, not {version}")
    if version < md.format_version:
        raise ValidationError(
            f"cannot downgrade format-version from {md.format_version} to {version}: upgrades are one-way"
        )
    if version == md.format_version:
        return md
    return _updated(
        md,
        format_version=version,
        next_row_id=0 if version >= 3 else None,
        table_uuid=md.table_uuid or uuid.uuid4(),
    )
