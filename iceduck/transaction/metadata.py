"""The updates each kind of table change produces, planned on the table's current metadata.

These are the writer's half of the spec's rules; `iceduck.spec.updates.apply_updates` holds the
other half (id reuse and assignment when the updates are applied). Here: a new snapshot moves
`main` (keeping its retention settings); partition field ids are reused for equivalent fields
(same sources and transform) of any spec and otherwise continue after `last-partition-id`; v1
tables cannot drop partition fields, so a dropped field stays as `void`; a format upgrade is
one-way and gives a v1 table without a UUID one.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterable, Mapping

from iceduck.errors import ValidationError
from iceduck.spec.partitioning import PARTITION_DATA_ID_START, PartitionField, PartitionSpec
from iceduck.spec.snapshots import MAIN_BRANCH, Snapshot, SnapshotRef, SnapshotRefType
from iceduck.spec.sorting import SortOrder
from iceduck.spec.table_metadata import SUPPORTED_FORMAT_VERSIONS, TableMetadata
from iceduck.spec.transforms import VoidTransform
from iceduck.spec.types import Schema
from iceduck.spec.updates import (
    LAST_ADDED,
    AddPartitionSpec,
    AddSchema,
    AddSnapshot,
    AddSortOrder,
    AssignUUID,
    RemoveProperties,
    RemoveSnapshotRef,
    RemoveSnapshots,
    SetCurrentSchema,
    SetDefaultSortOrder,
    SetDefaultSpec,
    SetLocation,
    SetProperties,
    SetSnapshotRef,
    TableUpdate,
    UpgradeFormatVersion,
)


def now_ms() -> int:
    """The current time in milliseconds since the epoch."""
    return int(time.time() * 1000)


def _check_format_version(version: int) -> None:
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise ValidationError(f"format-version must be 1, 2 or 3, not {version}")


def create_table_updates(
    *,
    location: str,
    schema: Schema,
    spec: PartitionSpec,
    sort_order: SortOrder,
    properties: Mapping[str, str],
    format_version: int,
    table_uuid: uuid.UUID | None = None,
) -> list[TableUpdate]:
    """The updates that build a new, empty table (sent with `assert-create`): schema id 0, spec
    id 0, sort order 1 when sorted (0 is the unsorted order)."""
    _check_format_version(format_version)
    return [
        AssignUUID(table_uuid or uuid.uuid4()),
        UpgradeFormatVersion(format_version),
        AddSchema(schema),
        SetCurrentSchema(LAST_ADDED),
        AddPartitionSpec(spec),
        SetDefaultSpec(LAST_ADDED),
        AddSortOrder(sort_order),
        SetDefaultSortOrder(LAST_ADDED),
        SetLocation(location.rstrip("/")),
        SetProperties(dict(properties)),
    ]


def snapshot_updates(md: TableMetadata, snapshot: Snapshot) -> list[TableUpdate]:
    """Add `snapshot` and make it the head of `main` (keeping the branch's retention settings)."""
    main = md.refs.get(MAIN_BRANCH)
    ref = (
        dataclasses.replace(main, snapshot_id=snapshot.snapshot_id)
        if main is not None
        else SnapshotRef(snapshot.snapshot_id, SnapshotRefType.BRANCH)
    )
    return [AddSnapshot(snapshot), SetSnapshotRef(MAIN_BRANCH, ref)]


def expire_updates(expired: Iterable[int], removed_refs: Iterable[str]) -> list[TableUpdate]:
    """Remove refs, then the snapshots (which no remaining ref may point at)."""
    out: list[TableUpdate] = [RemoveSnapshotRef(name) for name in sorted(removed_refs)]
    ids = tuple(sorted(expired))
    if ids:
        out.append(RemoveSnapshots(ids))
    return out


# -- schemas, partition specs, sort orders ------------------------------------------------------------


def schema_updates(schema: Schema) -> list[TableUpdate]:
    """Make `schema` current (an equal existing schema is reused when applied)."""
    return [AddSchema(schema), SetCurrentSchema(LAST_ADDED)]


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


def spec_updates(md: TableMetadata, fields: Iterable[PartitionField]) -> list[TableUpdate]:
    """Make a spec of `fields` the default (an equivalent existing spec is reused when applied).

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
    spec = PartitionSpec(0, assign_partition_field_ids(md, new_fields))
    return [AddPartitionSpec(spec), SetDefaultSpec(LAST_ADDED)]


def sort_order_updates(order: SortOrder) -> list[TableUpdate]:
    """Make `order` the default sort order (an equal existing order is reused when applied)."""
    return [AddSortOrder(order), SetDefaultSortOrder(LAST_ADDED)]


# -- properties and versions --------------------------------------------------------------------------


def property_updates(updates: Mapping[str, str], removals: Iterable[str] = ()) -> list[TableUpdate]:
    """Remove and set table properties (absent keys are ignored)."""
    out: list[TableUpdate] = []
    keys = tuple(removals)
    if keys:
        out.append(RemoveProperties(keys))
    if updates:
        out.append(SetProperties(dict(updates)))
    return out


def format_version_updates(md: TableMetadata, version: int) -> list[TableUpdate]:
    """Upgrade the table to format `version` (one-way; the same version: nothing to do)."""
    _check_format_version(version)
    if version < md.format_version:
        raise ValidationError(
            f"cannot downgrade format-version from {md.format_version} to {version}: upgrades are one-way"
        )
    if version == md.format_version:
        return []
    out: list[TableUpdate] = [] if md.table_uuid is not None else [AssignUUID(uuid.uuid4())]
    return [*out, UpgradeFormatVersion(version)]
