"""Table metadata updates and requirements: a commit as the REST catalog spec describes it.

A commit is a list of *requirements* (what the table must look like for the change to apply:
`assert-table-uuid`, `assert-ref-snapshot-id`, ...) and a list of *updates* (`add-snapshot`,
`set-snapshot-ref`, `add-schema`, `set-properties`, ...), the two halves of the REST
`CommitTableRequest`. Each has a frozen dataclass here, with the JSON names of the REST spec both
ways (`updates_to_json` / `updates_from_json`, `requirements_to_json` / `requirements_from_json`).

* `check_requirements(metadata_or_None, requirements)` raises `CommitConflictError` naming the
  first requirement the table (None: no table) does not meet.
* `apply_updates(metadata_or_None, updates, ...)` is the one place where metadata changes: it
  returns the new `TableMetadata` (None builds a new table, as a create transaction does).
  Invalid updates raise `ValidationError` naming the update; updates that only fail because the
  table moved on since they were planned (a snapshot whose sequence number or first row id another
  commit has taken) raise `CommitConflictError`, so a writer re-plans and retries.
* `requirements_for(base, updates)` gives the requirements that protect a list of updates planned
  on `base` (the rules Java's `UpdateRequirements` uses: the table UUID always, the last assigned
  ids and current ids an update builds on, the refs it moves).

Rules `apply_updates` follows (spec "Table Metadata", REST "TableUpdate"):
- `add-schema` reuses the id of an existing schema with the same fields and identifier fields,
  else takes the highest id + 1; `last-column-id` only grows. `add-spec` reuses an existing spec
  with the same fields (source ids, transform, name), else takes a new id; the spec's field ids
  are kept (the writer assigns them) and `last-partition-id` grows to cover them. `add-sort-order`
  gives the unsorted order id 0 and a new order the highest id + 1 (at least 1). An id of -1 in
  `set-current-schema` / `set-default-spec` / `set-default-sort-order` means the one added last in
  this list.
- `add-snapshot` needs a new snapshot id; in v2+ its sequence number must be above the table's
  (unless it has no parent); in v3 it needs `first-row-id` (not below the table's `next-row-id`)
  and `added-rows`, and moves `next-row-id` past them. `set-snapshot-ref` of `main` makes the
  snapshot current and logs it in `snapshot-log` (at the snapshot's time when it was added in this
  commit, else at the commit's time).
- `remove-snapshots` refuses a snapshot a ref still points at; it drops the snapshots, their
  statistics files and the `snapshot-log` up to the last entry of a removed snapshot (a log with a
  gap would claim the wrong snapshot was current). Unknown snapshot ids are ignored.
- `upgrade-format-version` is one-way; upgrading to v3 starts `next-row-id` at 0.
- With `metadata_location` (the file the base was read from), the base's file is logged in
  `metadata-log`, pruned to `write.metadata.previous-versions-max` (default 100) entries.
- The result is validated (`validate_table_metadata`).

Pure: no I/O. The only outside input is the clock, when `last_updated_ms` is not given.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from iceduck.errors import CommitConflictError, InvalidMetadataError, ValidationError
from iceduck.spec.json_fields import frozen_map
from iceduck.spec.partitioning import (
    PARTITION_DATA_ID_START,
    UNPARTITIONED,
    PartitionSpec,
    parse_partition_spec,
    partition_spec_to_json,
)
from iceduck.spec.snapshots import (
    MAIN_BRANCH,
    EncryptionKey,
    MetadataLogEntry,
    PartitionStatisticsFile,
    Snapshot,
    SnapshotLogEntry,
    SnapshotRef,
    SnapshotRefType,
    StatisticsFile,
    encryption_key_to_json,
    parse_encryption_key,
    parse_partition_statistics_file,
    parse_snapshot,
    parse_snapshot_ref,
    parse_statistics_file,
    partition_statistics_file_to_json,
    snapshot_ref_to_json,
    snapshot_to_json,
    statistics_file_to_json,
)
from iceduck.spec.sorting import UNSORTED, UNSORTED_ORDER_ID, SortOrder, parse_sort_order, sort_order_to_json
from iceduck.spec.table_metadata import SUPPORTED_FORMAT_VERSIONS, TableMetadata, validate_table_metadata
from iceduck.spec.types import Schema, parse_schema, schema_to_json

# An id of -1 in set-current-schema / set-default-spec / set-default-sort-order: the last one added.
LAST_ADDED = -1
DEFAULT_PREVIOUS_VERSIONS_MAX = 100
PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"
# Format version of a new table whose updates do not say (the REST and Java default).
DEFAULT_FORMAT_VERSION = 2
# The JSON of updates is read with the most permissive format version; the metadata they build
# is then validated against its own version.
_JSON_FORMAT_VERSION = 3


# ---------------------------------------------------------------------------------------------
# Updates
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AssignUUID:
    """Give a new table its UUID (a table that has one keeps it)."""

    action: ClassVar[str] = "assign-uuid"
    uuid: uuid.UUID


@dataclass(frozen=True, slots=True)
class UpgradeFormatVersion:
    """Raise the format version (never lower it)."""

    action: ClassVar[str] = "upgrade-format-version"
    format_version: int


@dataclass(frozen=True, slots=True)
class AddSchema:
    """Add a schema (its id is assigned on apply). `last_column_id` is deprecated in REST."""

    action: ClassVar[str] = "add-schema"
    schema: Schema
    last_column_id: int | None = None


@dataclass(frozen=True, slots=True)
class SetCurrentSchema:
    """Make a schema current; `schema_id` -1 means the schema added last in this commit."""

    action: ClassVar[str] = "set-current-schema"
    schema_id: int


@dataclass(frozen=True, slots=True)
class AddPartitionSpec:
    """Add a partition spec (field ids as given; the spec id is assigned on apply)."""

    action: ClassVar[str] = "add-spec"
    spec: PartitionSpec


@dataclass(frozen=True, slots=True)
class SetDefaultSpec:
    """Make a partition spec the default; `spec_id` -1 means the spec added last."""

    action: ClassVar[str] = "set-default-spec"
    spec_id: int


@dataclass(frozen=True, slots=True)
class AddSortOrder:
    """Add a sort order (its id is assigned on apply; the unsorted order is always id 0)."""

    action: ClassVar[str] = "add-sort-order"
    sort_order: SortOrder


@dataclass(frozen=True, slots=True)
class SetDefaultSortOrder:
    """Make a sort order the default; `sort_order_id` -1 means the order added last."""

    action: ClassVar[str] = "set-default-sort-order"
    sort_order_id: int


@dataclass(frozen=True, slots=True)
class AddSnapshot:
    """Add a snapshot (no ref moves: `SetSnapshotRef` does that)."""

    action: ClassVar[str] = "add-snapshot"
    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class SetSnapshotRef:
    """Create or move a branch or tag; `main` also moves the current snapshot."""

    action: ClassVar[str] = "set-snapshot-ref"
    ref_name: str
    ref: SnapshotRef


@dataclass(frozen=True, slots=True)
class RemoveSnapshots:
    """Remove snapshots (expiry)."""

    action: ClassVar[str] = "remove-snapshots"
    snapshot_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RemoveSnapshotRef:
    """Remove a branch or tag (absent: nothing happens)."""

    action: ClassVar[str] = "remove-snapshot-ref"
    ref_name: str


@dataclass(frozen=True, slots=True)
class SetLocation:
    """Set the table's base location."""

    action: ClassVar[str] = "set-location"
    location: str


@dataclass(frozen=True, slots=True)
class SetProperties:
    """Set table properties."""

    action: ClassVar[str] = "set-properties"
    updates: Mapping[str, str] = field(hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "updates", frozen_map(self.updates))


@dataclass(frozen=True, slots=True)
class RemoveProperties:
    """Remove table properties (absent keys are ignored)."""

    action: ClassVar[str] = "remove-properties"
    removals: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SetStatistics:
    """Set the table statistics file of a snapshot (replacing any it had)."""

    action: ClassVar[str] = "set-statistics"
    statistics: StatisticsFile


@dataclass(frozen=True, slots=True)
class RemoveStatistics:
    """Remove the table statistics file of a snapshot."""

    action: ClassVar[str] = "remove-statistics"
    snapshot_id: int


@dataclass(frozen=True, slots=True)
class SetPartitionStatistics:
    """Set the partition statistics file of a snapshot (replacing any it had)."""

    action: ClassVar[str] = "set-partition-statistics"
    partition_statistics: PartitionStatisticsFile


@dataclass(frozen=True, slots=True)
class RemovePartitionStatistics:
    """Remove the partition statistics file of a snapshot."""

    action: ClassVar[str] = "remove-partition-statistics"
    snapshot_id: int


@dataclass(frozen=True, slots=True)
class RemovePartitionSpecs:
    """Remove partition specs (not the default one)."""

    action: ClassVar[str] = "remove-partition-specs"
    spec_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RemoveSchemas:
    """Remove schemas (not the current one)."""

    action: ClassVar[str] = "remove-schemas"
    schema_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AddEncryptionKey:
    """Add a table encryption key (v3)."""

    action: ClassVar[str] = "add-encryption-key"
    encryption_key: EncryptionKey


@dataclass(frozen=True, slots=True)
class RemoveEncryptionKey:
    """Remove a table encryption key."""

    action: ClassVar[str] = "remove-encryption-key"
    key_id: str


TableUpdate = (
    AssignUUID | UpgradeFormatVersion | AddSchema | SetCurrentSchema | AddPartitionSpec | SetDefaultSpec
    | AddSortOrder | SetDefaultSortOrder | AddSnapshot | SetSnapshotRef | RemoveSnapshots
    | RemoveSnapshotRef | SetLocation | SetProperties | RemoveProperties | SetStatistics
    | RemoveStatistics | SetPartitionStatistics | RemovePartitionStatistics | RemovePartitionSpecs
    | RemoveSchemas | AddEncryptionKey | RemoveEncryptionKey
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Requirements
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AssertCreate:
    """The table must not exist yet."""

    type: ClassVar[str] = "assert-create"


@dataclass(frozen=True, slots=True)
class AssertTableUUID:
    """The table's UUID must be `uuid` (it was not dropped and replaced)."""

    type: ClassVar[str] = "assert-table-uuid"
    uuid: uuid.UUID


@dataclass(frozen=True, slots=True)
class AssertRefSnapshotId:
    """Branch or tag `ref` must point at `snapshot_id`; None: the ref must not exist."""

    type: ClassVar[str] = "assert-ref-snapshot-id"
    ref: str
    snapshot_id: int | None


@dataclass(frozen=True, slots=True)
class AssertLastAssignedFieldId:
    """The table's `last-column-id` must be this."""

    type: ClassVar[str] = "assert-last-assigned-field-id"
    last_assigned_field_id: int


@dataclass(frozen=True, slots=True)
class AssertCurrentSchemaId:
    """The table's current schema id must be this."""

    type: ClassVar[str] = "assert-current-schema-id"
    current_schema_id: int


@dataclass(frozen=True, slots=True)
class AssertLastAssignedPartitionId:
    """The table's `last-partition-id` must be this."""

    type: ClassVar[str] = "assert-last-assigned-partition-id"
    last_assigned_partition_id: int


@dataclass(frozen=True, slots=True)
class AssertDefaultSpecId:
    """The table's default partition spec id must be this."""

    type: ClassVar[str] = "assert-default-spec-id"
    default_spec_id: int


@dataclass(frozen=True, slots=True)
class AssertDefaultSortOrderId:
    """The table's default sort order id must be this."""

    type: ClassVar[str] = "assert-default-sort-order-id"
    default_sort_order_id: int


TableRequirement = (
    AssertCreate | AssertTableUUID | AssertRefSnapshotId | AssertLastAssignedFieldId
    | AssertCurrentSchemaId | AssertLastAssignedPartitionId | AssertDefaultSpecId
    | AssertDefaultSortOrderId
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class _IdAssertion:
    """A requirement that one id of the table metadata is still what a change was planned on: the
    requirement's field (its REST key is the same with dashes), the update that builds on the id,
    and the id as a `TableMetadata` attribute and as its name in metadata JSON (for messages)."""

    requirement: type[Any]
    field: str
    needed_by: type[Any]
    attribute: str
    metadata_key: str


_ID_ASSERTIONS = (
    _IdAssertion(AssertLastAssignedFieldId, "last_assigned_field_id", AddSchema, "last_column_id", "last-column-id"),
    _IdAssertion(AssertCurrentSchemaId, "current_schema_id", SetCurrentSchema, "current_schema_id", "current-schema-id"),
    _IdAssertion(
        AssertLastAssignedPartitionId, "last_assigned_partition_id", AddPartitionSpec, "last_partition_id",
        "last-partition-id",
    ),
    _IdAssertion(AssertDefaultSpecId, "default_spec_id", SetDefaultSpec, "default_spec_id", "default-spec-id"),
    _IdAssertion(
        AssertDefaultSortOrderId, "default_sort_order_id", SetDefaultSortOrder, "default_sort_order_id",
        "default-sort-order-id",
    ),
)  # fmt: skip
_ID_ASSERTION_OF = {a.requirement: a for a in _ID_ASSERTIONS}
_ID_ASSERTION_FOR = {a.needed_by: a for a in _ID_ASSERTIONS}


def describe_requirement(r: TableRequirement) -> str:
    """A requirement as its REST JSON text, for messages (`assert-ref-snapshot-id(ref=main, ...)`)."""
    body = requirement_to_json(r)
    args = ", ".join(f"{k}={v}" for k, v in body.items() if k != "type")
    return f"{r.type}({args})" if args else r.type


def _requirement_failure(r: TableRequirement, md: TableMetadata | None) -> str | None:
    """Why `md` does not meet `r`, or None when it does."""
    if isinstance(r, AssertCreate):
        return None if md is None else "the table exists already"
    if md is None:
        return "the table does not exist"
    if isinstance(r, AssertTableUUID):
        return None if md.table_uuid == r.uuid else f"the table's uuid is {md.table_uuid}"
    if isinstance(r, AssertRefSnapshotId):
        ref = md.refs.get(r.ref)
        if r.snapshot_id is None:
            return None if ref is None else f"ref {r.ref!r} exists (snapshot {ref.snapshot_id})"
        if ref is None:
            return f"ref {r.ref!r} does not exist"
        return None if ref.snapshot_id == r.snapshot_id else f"ref {r.ref!r} is at snapshot {ref.snapshot_id}"
    a = _ID_ASSERTION_OF.get(type(r))
    if a is None:
        raise ValidationError(f"unknown requirement {r!r}")
    actual = getattr(md, a.attribute)
    return None if actual == getattr(r, a.field) else f"{a.metadata_key} is {actual}"


def check_requirements(
    metadata: TableMetadata | None, requirements: Iterable[TableRequirement], *, table: str | None = None
) -> None:
    """Raise `CommitConflictError` naming the first requirement `metadata` (None: no table) fails."""
    for r in requirements:
        why = _requirement_failure(r, metadata)
        if why is not None:
            who = table or (metadata.location if metadata is not None else "the table")
            raise CommitConflictError(
                f"{who}: requirement {describe_requirement(r)} failed: {why} (another commit changed the "
                "table; reload and retry)"
            )


def requirements_for(base: TableMetadata | None, updates: Iterable[TableUpdate]) -> list[TableRequirement]:
    """The requirements that keep `updates`, planned on `base`, from applying to a table that moved.

    None: `assert-create`. Otherwise the table UUID, and for each update what it builds on: the
    last column id (add-schema), the current schema (set-current-schema), the last partition id
    (add-spec), the default spec and sort order (set-default-...), the ref it moves or removes,
    and every ref for remove-snapshots (a ref may protect a snapshot).
    """
    if base is None:
        return [AssertCreate()]
    out: list[TableRequirement] = []

    def add(r: TableRequirement) -> None:
        if r not in out:
            out.append(r)

    if base.table_uuid is not None:
        add(AssertTableUUID(base.table_uuid))
    for u in updates:
        a = _ID_ASSERTION_FOR.get(type(u))
        if a is not None:
            add(a.requirement(getattr(base, a.attribute)))
        elif isinstance(u, SetSnapshotRef | RemoveSnapshotRef):
            ref = base.refs.get(u.ref_name)
            add(AssertRefSnapshotId(u.ref_name, ref.snapshot_id if ref is not None else None))
        elif isinstance(u, RemoveSnapshots):
            for name, ref in base.refs.items():
                add(AssertRefSnapshotId(name, ref.snapshot_id))
    return out


# ---------------------------------------------------------------------------------------------
# Applying updates
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Builder:
    """Table metadata while updates are applied (mutable, private to `apply_updates`)."""

    format_version: int | None
    table_uuid: uuid.UUID | None
    location: str | None
    last_sequence_number: int
    last_column_id: int
    schemas: list[Schema]
    current_schema_id: int | None
    specs: list[PartitionSpec]
    default_spec_id: int | None
    last_partition_id: int
    properties: dict[str, str]
    current_snapshot_id: int | None
    snapshots: list[Snapshot]
    snapshot_log: list[SnapshotLogEntry]
    metadata_log: list[MetadataLogEntry]
    sort_orders: list[SortOrder]
    default_sort_order_id: int
    refs: dict[str, SnapshotRef]
    statistics: list[StatisticsFile]
    partition_statistics: list[PartitionStatisticsFile]
    next_row_id: int | None
    encryption_keys: list[EncryptionKey]
    last_added_schema: int | None = None
    last_added_spec: int | None = None
    last_added_order: int | None = None
    added_snapshots: dict[int, Snapshot] = field(default_factory=dict)

    @classmethod
    def of(cls, md: TableMetadata) -> _Builder:
        return cls(
            md.format_version, md.table_uuid, md.location, md.last_sequence_number, md.last_column_id,
            list(md.schemas), md.current_schema_id, list(md.partition_specs), md.default_spec_id,
            md.last_partition_id, dict(md.properties), md.current_snapshot_id, list(md.snapshots),
            list(md.snapshot_log), list(md.metadata_log), list(md.sort_orders), md.default_sort_order_id,
            dict(md.refs), list(md.statistics), list(md.partition_statistics), md.next_row_id,
            list(md.encryption_keys),
        )  # fmt: skip

    @classmethod
    def empty(cls) -> _Builder:
        # A new table: no schema or location yet; unpartitioned and unsorted unless updates say.
        return cls(
            None, None, None, 0, 0, [], None, [], None, PARTITION_DATA_ID_START - 1, {}, None, [], [], [],
            [UNSORTED], UNSORTED_ORDER_ID, {}, [], [], None, [],
        )  # fmt: skip


def _fail(u: TableUpdate, problem: str) -> ValidationError:
    return ValidationError(f"cannot apply {u.action}: {problem}")


def _resolve(u: TableUpdate, wanted: int, last_added: int | None, known: Iterable[int], what: str) -> int:
    if wanted == LAST_ADDED:
        if last_added is None:
            raise _fail(u, f"-1 means the {what} added last, and no {what} was added before it")
        return last_added
    if wanted not in set(known):
        raise _fail(u, f"there is no {what} {wanted} (ids: {sorted(set(known))})")
    return wanted


def _same_spec(a: PartitionSpec, b: PartitionSpec) -> bool:
    """Whether two specs partition the same way (the spec's "compatible" specs: reuse, don't add)."""
    return len(a.fields) == len(b.fields) and all(
        x.source_ids == y.source_ids and x.transform == y.transform and x.name == y.name
        for x, y in zip(a.fields, b.fields, strict=True)
    )


def _apply_one(b: _Builder, u: TableUpdate, commit_ms: int) -> None:
    if isinstance(u, AssignUUID):
        if b.table_uuid is not None and b.table_uuid != u.uuid:
            raise _fail(u, f"the table has uuid {b.table_uuid} already; a uuid is never reassigned")
        b.table_uuid = u.uuid
    elif isinstance(u, UpgradeFormatVersion):
        v = u.format_version
        if v not in SUPPORTED_FORMAT_VERSIONS:
            raise _fail(u, f"format-version must be 1, 2 or 3, not {v}")
        if b.format_version is not None and v < b.format_version:
            raise _fail(
                u, f"cannot downgrade format-version from {b.format_version} to {v}: upgrades are one-way"
            )
        if v >= 3 and (b.format_version is None or b.format_version < 3):
            b.next_row_id = 0
        b.format_version = v
    elif isinstance(u, AddSchema):
        schema = u.schema
        b.last_column_id = max(
            b.last_column_id, u.last_column_id if u.last_column_id is not None else schema.highest_field_id
        )
        for existing in b.schemas:
            if (
                existing.fields == schema.fields
                and existing.identifier_field_ids == schema.identifier_field_ids
            ):
                b.last_added_schema = existing.schema_id
                return
        new_id = max((s.schema_id for s in b.schemas), default=-1) + 1
        b.schemas.append(Schema(schema.fields, new_id, schema.identifier_field_ids))
        b.last_added_schema = new_id
    elif isinstance(u, SetCurrentSchema):
        known = [s.schema_id for s in b.schemas]
        b.current_schema_id = _resolve(u, u.schema_id, b.last_added_schema, known, "schema")
    elif isinstance(u, AddPartitionSpec):
        names = [f.name for f in u.spec.fields]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise _fail(u, f"partition field names must be unique: {', '.join(dupes)}")
        for old_spec in b.specs:
            if _same_spec(old_spec, u.spec):
                b.last_added_spec = old_spec.spec_id
                return
        new_id = max((s.spec_id for s in b.specs), default=-1) + 1
        b.specs.append(PartitionSpec(new_id, u.spec.fields))
        b.last_partition_id = max(b.last_partition_id, u.spec.last_assigned_field_id)
        b.last_added_spec = new_id
    elif isinstance(u, SetDefaultSpec):
        known = [s.spec_id for s in b.specs]
        b.default_spec_id = _resolve(u, u.spec_id, b.last_added_spec, known, "partition spec")
    elif isinstance(u, AddSortOrder):
        _add_sort_order(b, u.sort_order)
    elif isinstance(u, SetDefaultSortOrder):
        known = [o.order_id for o in b.sort_orders]
        b.default_sort_order_id = _resolve(u, u.sort_order_id, b.last_added_order, known, "sort order")
    elif isinstance(u, AddSnapshot):
        _add_snapshot(b, u)
    elif isinstance(u, SetSnapshotRef):
        _set_ref(b, u, commit_ms)
    elif isinstance(u, RemoveSnapshots):
        _remove_snapshots(b, u)
    elif isinstance(u, RemoveSnapshotRef):
        if b.refs.pop(u.ref_name, None) is not None and u.ref_name == MAIN_BRANCH:
            b.current_snapshot_id = None
    elif isinstance(u, SetLocation):
        if not u.location:
            raise _fail(u, "the location is empty")
        b.location = u.location
    elif isinstance(u, SetProperties):
        for key, value in u.updates.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise _fail(u, f"table properties are strings: {key!r}={value!r}")
            b.properties[key] = value
    elif isinstance(u, RemoveProperties):
        for key in u.removals:
            b.properties.pop(key, None)
    elif isinstance(u, SetStatistics):
        sid = u.statistics.snapshot_id
        b.statistics = [s for s in b.statistics if s.snapshot_id != sid] + [u.statistics]
    elif isinstance(u, RemoveStatistics):
        b.statistics = [s for s in b.statistics if s.snapshot_id != u.snapshot_id]
    elif isinstance(u, SetPartitionStatistics):
        sid = u.partition_statistics.snapshot_id
        b.partition_statistics = [p for p in b.partition_statistics if p.snapshot_id != sid]
        b.partition_statistics.append(u.partition_statistics)
    elif isinstance(u, RemovePartitionStatistics):
        b.partition_statistics = [p for p in b.partition_statistics if p.snapshot_id != u.snapshot_id]
    elif isinstance(u, RemovePartitionSpecs):
        if b.default_spec_id in u.spec_ids:
            raise _fail(u, f"spec {b.default_spec_id} is the default partition spec")
        b.specs = [s for s in b.specs if s.spec_id not in u.spec_ids]
    elif isinstance(u, RemoveSchemas):
        if b.current_schema_id in u.schema_ids:
            raise _fail(u, f"schema {b.current_schema_id} is the current schema")
        b.schemas = [s for s in b.schemas if s.schema_id not in u.schema_ids]
    elif isinstance(u, AddEncryptionKey):
        if any(k.key_id == u.encryption_key.key_id for k in b.encryption_keys):
            raise _fail(u, f"the table has a key {u.encryption_key.key_id!r} already")
        b.encryption_keys.append(u.encryption_key)
    elif isinstance(u, RemoveEncryptionKey):
        b.encryption_keys = [k for k in b.encryption_keys if k.key_id != u.key_id]
    else:  # pragma: no cover - the union is exhaustive
        raise ValidationError(f"not a table update: {u!r}")


def _add_sort_order(b: _Builder, order: SortOrder) -> None:
    if order.is_unsorted:
        if all(o.order_id != UNSORTED_ORDER_ID for o in b.sort_orders):
            b.sort_orders.insert(0, UNSORTED)
        b.last_added_order = UNSORTED_ORDER_ID
        return
    for existing in b.sort_orders:
        if existing.fields == order.fields:
            b.last_added_order = existing.order_id
            return
    new_id = max([o.order_id for o in b.sort_orders] + [UNSORTED_ORDER_ID]) + 1
    b.sort_orders.append(SortOrder(new_id, order.fields))
    b.last_added_order = new_id


def _add_snapshot(b: _Builder, u: AddSnapshot) -> None:
    s = u.snapshot
    if any(x.snapshot_id == s.snapshot_id for x in b.snapshots):
        raise _fail(u, f"the table has a snapshot {s.snapshot_id} already")
    fv = b.format_version or DEFAULT_FORMAT_VERSION
    if fv >= 2 and s.parent_snapshot_id is not None and s.sequence_number <= b.last_sequence_number:
        # Another commit took this sequence number after the snapshot was planned.
        raise CommitConflictError(
            f"cannot apply add-snapshot: snapshot {s.snapshot_id} has sequence number {s.sequence_number}, "
            f"not above the table's last-sequence-number {b.last_sequence_number} (another commit came first; "
            "retry)"
        )
    if fv >= 3:
        if s.first_row_id is None or s.added_rows is None:
            # Planned before the table was upgraded to v3 (or by a writer without row lineage).
            raise CommitConflictError(
                f"cannot apply add-snapshot: the table is format-version 3 and snapshot {s.snapshot_id} has no "
                "first-row-id/added-rows (planned on an older format version; retry)"
            )
        if b.next_row_id is not None and s.first_row_id < b.next_row_id:
            raise CommitConflictError(
                f"cannot apply add-snapshot: snapshot {s.snapshot_id} starts at row id {s.first_row_id}, below the "
                f"table's next-row-id {b.next_row_id} (another commit assigned those row ids; retry)"
            )
        b.next_row_id = s.first_row_id + s.added_rows
    b.snapshots.append(s)
    b.added_snapshots[s.snapshot_id] = s
    b.last_sequence_number = max(b.last_sequence_number, s.sequence_number)


def _set_ref(b: _Builder, u: SetSnapshotRef, commit_ms: int) -> None:
    ref = u.ref
    snap = next((s for s in b.snapshots if s.snapshot_id == ref.snapshot_id), None)
    if snap is None:
        raise _fail(u, f"ref {u.ref_name!r} would point at snapshot {ref.snapshot_id}, which does not exist")
    if u.ref_name == MAIN_BRANCH and ref.type != SnapshotRefType.BRANCH:
        raise _fail(u, "ref 'main' must be a branch, not a tag")
    if b.refs.get(u.ref_name) == ref:
        return
    b.refs[u.ref_name] = ref
    if u.ref_name == MAIN_BRANCH:
        b.current_snapshot_id = ref.snapshot_id
        added = b.added_snapshots.get(ref.snapshot_id)
        b.snapshot_log.append(
            SnapshotLogEntry(added.timestamp_ms if added is not None else commit_ms, ref.snapshot_id)
        )


def _remove_snapshots(b: _Builder, u: RemoveSnapshots) -> None:
    gone = set(u.snapshot_ids)
    for name, ref in sorted(b.refs.items()):
        if ref.snapshot_id in gone:
            raise _fail(u, f"snapshot {ref.snapshot_id} is still referenced by ref {name!r}")
    b.snapshots = [s for s in b.snapshots if s.snapshot_id not in gone]
    b.statistics = [s for s in b.statistics if s.snapshot_id not in gone]
    b.partition_statistics = [p for p in b.partition_statistics if p.snapshot_id not in gone]
    last_gone = max((i for i, e in enumerate(b.snapshot_log) if e.snapshot_id in gone), default=-1)
    b.snapshot_log = b.snapshot_log[last_gone + 1 :]


def previous_versions_max(properties: Mapping[str, str]) -> int:
    """How many previous metadata files `metadata-log` keeps (`write.metadata.previous-versions-max`)."""
    try:
        keep = int(properties.get(PREVIOUS_VERSIONS_MAX, DEFAULT_PREVIOUS_VERSIONS_MAX))
    except ValueError:
        raise ValidationError(f"{PREVIOUS_VERSIONS_MAX} must be an integer") from None
    return max(keep, 1)


def apply_updates(
    metadata: TableMetadata | None,
    updates: Iterable[TableUpdate],
    *,
    metadata_location: str | None = None,
    last_updated_ms: int | None = None,
) -> TableMetadata:
    """The metadata after `updates`, in order, on `metadata` (None: a new table).

    `metadata_location` is the file `metadata` was read from: it is logged in `metadata-log`.
    `last_updated_ms` is the commit's time (default: now). Raises `ValidationError` naming the
    update for updates that cannot apply, `CommitConflictError` for updates planned on a table
    that has moved on since (see the module documentation).
    """
    commit_ms = int(time.time() * 1000) if last_updated_ms is None else last_updated_ms
    b = _Builder.empty() if metadata is None else _Builder.of(metadata)
    for u in updates:
        _apply_one(b, u, commit_ms)
    if metadata is not None and metadata_location is not None:
        b.metadata_log.append(MetadataLogEntry(metadata.last_updated_ms, metadata_location))
        keep = previous_versions_max(b.properties)
        b.metadata_log = b.metadata_log[max(0, len(b.metadata_log) - keep) :]
    return _build(b, commit_ms)


def _build(b: _Builder, commit_ms: int) -> TableMetadata:
    if b.location is None:
        raise ValidationError("cannot build table metadata: a new table needs set-location")
    if b.current_schema_id is None:
        raise ValidationError(
            "cannot build table metadata: a new table needs add-schema and set-current-schema"
        )
    specs, default_spec_id = b.specs, b.default_spec_id
    if not specs:
        specs, default_spec_id = [UNPARTITIONED], UNPARTITIONED.spec_id
    elif default_spec_id is None:
        raise ValidationError(
            "cannot build table metadata: a new table with a partition spec needs set-default-spec"
        )
    fv = b.format_version or DEFAULT_FORMAT_VERSION
    md = TableMetadata(
        format_version=fv,
        table_uuid=b.table_uuid,
        location=b.location,
        last_sequence_number=b.last_sequence_number,
        last_updated_ms=commit_ms,
        last_column_id=b.last_column_id,
        schemas=tuple(b.schemas),
        current_schema_id=b.current_schema_id,
        partition_specs=tuple(specs),
        default_spec_id=default_spec_id,
        last_partition_id=b.last_partition_id,
        properties=frozen_map(b.properties),
        current_snapshot_id=b.current_snapshot_id,
        snapshots=tuple(b.snapshots),
        snapshot_log=tuple(b.snapshot_log),
        metadata_log=tuple(b.metadata_log),
        sort_orders=tuple(b.sort_orders),
        default_sort_order_id=b.default_sort_order_id,
        refs=frozen_map(b.refs),
        statistics=tuple(b.statistics),
        partition_statistics=tuple(b.partition_statistics),
        next_row_id=(b.next_row_id if b.next_row_id is not None else 0) if fv >= 3 else None,
        encryption_keys=tuple(b.encryption_keys),
    )
    try:
        validate_table_metadata(md)
    except InvalidMetadataError as e:
        raise ValidationError(f"the updates leave invalid table metadata: {e}") from None
    return md


def pruned_metadata_log(
    base: TableMetadata, new: TableMetadata, base_location: str
) -> list[MetadataLogEntry]:
    """The metadata-log entries (of `base`, and `base_location` itself) that `new` no longer lists:
    the files a commit may delete when `write.metadata.delete-after-commit.enabled`."""
    kept = set(new.metadata_log)
    candidates = [*base.metadata_log, MetadataLogEntry(base.last_updated_ms, base_location)]
    return [e for e in candidates if e not in kept]


# ---------------------------------------------------------------------------------------------
# JSON (the REST spec's names)
# ---------------------------------------------------------------------------------------------


def update_to_json(u: TableUpdate) -> dict[str, Any]:
    """The REST JSON object of one update."""
    out: dict[str, Any] = {"action": u.action}
    codec = _UPDATE_FIELDS.get(type(u))
    if codec is not None:
        out.update(codec.to_json(u))
    elif isinstance(u, AddSchema):
        out["schema"] = schema_to_json(u.schema)
        if u.last_column_id is not None:
            out["last-column-id"] = u.last_column_id
    elif isinstance(u, SetSnapshotRef):
        out["ref-name"] = u.ref_name
        out.update(snapshot_ref_to_json(u.ref))
    elif isinstance(u, SetProperties):
        out["updates"] = dict(u.updates)
    return out


def updates_to_json(updates: Iterable[TableUpdate]) -> list[dict[str, Any]]:
    """The REST JSON list of updates (`CommitTableRequest.updates`)."""
    return [update_to_json(u) for u in updates]


class _Fields:
    """Typed access to one JSON object, with errors naming where it is (`updates[2] (add-schema)`)."""

    def __init__(self, obj: Any, where: str) -> None:
        if not isinstance(obj, Mapping):
            raise ValidationError(f"{where}: must be a JSON object, not {obj!r}")
        self.obj = obj
        self.where = where

    def fail(self, problem: str) -> ValidationError:
        return ValidationError(f"{self.where}: {problem}")

    def get(self, key: str) -> Any:
        if key not in self.obj:
            raise self.fail(f"missing {key!r}")
        return self.obj[key]

    def integer(self, key: str, *, nullable: bool = False) -> Any:
        value = self.get(key)
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{key!r} must be an integer, not {value!r}")
        return value

    def string(self, key: str) -> str:
        value = self.get(key)
        if not isinstance(value, str):
            raise self.fail(f"{key!r} must be a string, not {value!r}")
        return value

    def uuid(self, key: str) -> uuid.UUID:
        text = self.string(key)
        try:
            return uuid.UUID(text)
        except ValueError:
            raise self.fail(f"{key!r} is not a UUID: {text!r}") from None

    def integers(self, key: str) -> tuple[int, ...]:
        value = self.get(key)
        if not isinstance(value, list) or any(isinstance(x, bool) or not isinstance(x, int) for x in value):
            raise self.fail(f"{key!r} must be a list of integers, not {value!r}")
        return tuple(value)

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.get(key)
        if not isinstance(value, list) or any(not isinstance(x, str) for x in value):
            raise self.fail(f"{key!r} must be a list of strings, not {value!r}")
        return tuple(value)

    def object(self, key: str) -> Mapping[str, Any]:
        value = self.get(key)
        if not isinstance(value, Mapping):
            raise self.fail(f"{key!r} must be an object, not {value!r}")
        return value

    def parsed(self, key: str, parse: Any) -> Any:
        """A nested spec object read by its spec parser; its errors are re-raised naming this place."""
        value = self.object(key)
        try:
            return parse(value)
        except (InvalidMetadataError, ValidationError) as e:
            raise self.fail(f"{key!r}: {e}") from None


def _parse_schema_obj(obj: Mapping[str, Any]) -> Schema:
    if obj.get("type", "struct") != "struct":
        raise InvalidMetadataError("a schema must be a struct")
    return parse_schema(obj)


def update_from_json(obj: Any, *, where: str = "update") -> TableUpdate:
    """One update from its REST JSON object; `ValidationError` naming `where` and the problem."""
    f = _Fields(obj, where)
    action = f.get("action")
    f.where = f"{where} ({action})"
    cls = _UPDATES_BY_ACTION.get(action) if isinstance(action, str) else None
    if cls is None:
        raise ValidationError(f"{where}: unknown update action {action!r}")
    codec = _UPDATE_FIELDS.get(cls)
    if codec is not None:
        update: TableUpdate = codec.from_json(f)
        return update
    if cls is AddSchema:
        last = f.integer("last-column-id") if f.obj.get("last-column-id") is not None else None
        return AddSchema(f.parsed("schema", _parse_schema_obj), last)
    if cls is SetSnapshotRef:
        name = f.string("ref-name")
        body = {k: v for k, v in f.obj.items() if k not in ("action", "ref-name")}
        try:
            ref = parse_snapshot_ref(body, name=name)
        except InvalidMetadataError as e:
            raise f.fail(str(e)) from None
        return SetSnapshotRef(name, ref)
    updates = f.object("updates")  # set-properties
    bad = [k for k, v in updates.items() if not isinstance(v, str)]
    if bad:
        raise f.fail(f"property values must be strings: {bad[0]!r}={updates[bad[0]]!r}")
    return SetProperties(dict(updates))


def _with_spec_id(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    # `spec-id` is optional in the REST PartitionSpec (the catalog assigns it).
    return obj if "spec-id" in obj else {**obj, "spec-id": 0}


def _snapshot_version(obj: Mapping[str, Any]) -> int:
    # A v1 snapshot may list `manifests` instead of a manifest list; every later field is allowed.
    return 1 if "manifests" in obj else _JSON_FORMAT_VERSION


# -- the JSON form of updates and requirements whose fields map one to one onto JSON keys ---------


@dataclass(frozen=True, slots=True)
class _Key:
    """One field <-> one JSON key: how to read it from a `_Fields` and how to write its value."""

    key: str
    attr: str
    read: Callable[[_Fields, str], Any]
    write: Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class _Codec:
    """The JSON form of a class whose fields are all `_Key`s (in order)."""

    cls: type[Any]
    keys: tuple[_Key, ...]

    def to_json(self, value: Any) -> dict[str, Any]:
        return {k.key: k.write(getattr(value, k.attr)) for k in self.keys}

    def from_json(self, f: _Fields) -> Any:
        return self.cls(*(k.read(f, k.key) for k in self.keys))


def _same(value: Any) -> Any:
    return value


def _integer(key: str, attr: str) -> _Key:
    return _Key(key, attr, _Fields.integer, _same)


def _integers(key: str, attr: str) -> _Key:
    return _Key(key, attr, _Fields.integers, list)


def _string(key: str, attr: str) -> _Key:
    return _Key(key, attr, _Fields.string, _same)


def _parsed(
    key: str, attr: str, parse: Callable[[Mapping[str, Any]], Any], write: Callable[[Any], Any]
) -> _Key:
    return _Key(key, attr, lambda f, k: f.parsed(k, parse), write)


_UUID = _Key("uuid", "uuid", _Fields.uuid, str)

_UPDATE_FIELDS: dict[type[Any], _Codec] = {
    c.cls: c
    for c in (
        _Codec(AssignUUID, (_UUID,)),
        _Codec(UpgradeFormatVersion, (_integer("format-version", "format_version"),)),
        _Codec(SetCurrentSchema, (_integer("schema-id", "schema_id"),)),
        _Codec(
            AddPartitionSpec,
            (
                _parsed(
                    "spec",
                    "spec",
                    lambda o: parse_partition_spec(_with_spec_id(o), format_version=_JSON_FORMAT_VERSION),
                    partition_spec_to_json,
                ),
            ),
        ),
        _Codec(SetDefaultSpec, (_integer("spec-id", "spec_id"),)),
        _Codec(
            AddSortOrder,
            (
                _parsed(
                    "sort-order",
                    "sort_order",
                    lambda o: parse_sort_order(o, format_version=_JSON_FORMAT_VERSION),
                    sort_order_to_json,
                ),
            ),
        ),
        _Codec(SetDefaultSortOrder, (_integer("sort-order-id", "sort_order_id"),)),
        _Codec(
            AddSnapshot,
            (
                _parsed(
                    "snapshot",
                    "snapshot",
                    lambda o: parse_snapshot(o, format_version=_snapshot_version(o)),
                    lambda s: snapshot_to_json(s, format_version=_JSON_FORMAT_VERSION),
                ),
            ),
        ),
        _Codec(RemoveSnapshots, (_integers("snapshot-ids", "snapshot_ids"),)),
        _Codec(RemoveSnapshotRef, (_string("ref-name", "ref_name"),)),
        _Codec(SetLocation, (_string("location", "location"),)),
        _Codec(RemoveProperties, (_Key("removals", "removals", _Fields.strings, list),)),
        _Codec(
            SetStatistics,
            (_parsed("statistics", "statistics", parse_statistics_file, statistics_file_to_json),),
        ),
        _Codec(RemoveStatistics, (_integer("snapshot-id", "snapshot_id"),)),
        _Codec(
            SetPartitionStatistics,
            (
                _parsed(
                    "partition-statistics",
                    "partition_statistics",
                    parse_partition_statistics_file,
                    partition_statistics_file_to_json,
                ),
            ),
        ),
        _Codec(RemovePartitionStatistics, (_integer("snapshot-id", "snapshot_id"),)),
        _Codec(RemovePartitionSpecs, (_integers("spec-ids", "spec_ids"),)),
        _Codec(RemoveSchemas, (_integers("schema-ids", "schema_ids"),)),
        _Codec(
            AddEncryptionKey,
            (_parsed("encryption-key", "encryption_key", parse_encryption_key, encryption_key_to_json),),
        ),
        _Codec(RemoveEncryptionKey, (_string("key-id", "key_id"),)),
    )
}
# the three whose JSON form is not one key per field are read and written by hand below
_UPDATES_BY_ACTION: dict[str, type[Any]] = {c.action: c for c in _UPDATE_FIELDS} | {
    AddSchema.action: AddSchema,
    SetSnapshotRef.action: SetSnapshotRef,
    SetProperties.action: SetProperties,
}

_REQUIREMENT_FIELDS: dict[type[Any], _Codec] = {
    c.cls: c
    for c in (
        _Codec(AssertTableUUID, (_UUID,)),
        _Codec(
            AssertRefSnapshotId,
            (
                _string("ref", "ref"),
                _Key("snapshot-id", "snapshot_id", lambda f, k: f.integer(k, nullable=True), _same),
            ),
        ),
        *(_Codec(a.requirement, (_integer(a.field.replace("_", "-"), a.field),)) for a in _ID_ASSERTIONS),
    )
}
_REQUIREMENTS_BY_TYPE: dict[str, type[Any]] = {c.type: c for c in _REQUIREMENT_FIELDS} | {
    AssertCreate.type: AssertCreate
}


def updates_from_json(objs: Any, *, where: str = "updates") -> list[TableUpdate]:
    """Updates from the REST JSON list; `ValidationError` naming the bad entry."""
    return [update_from_json(o, where=w) for o, w in _json_list(objs, where)]


def _json_list(objs: Any, where: str) -> Iterable[tuple[Any, str]]:
    """The entries of a REST JSON list with the place each is at (`updates[2]`)."""
    if not isinstance(objs, Sequence) or isinstance(objs, str | bytes):
        raise ValidationError(f"{where}: must be a JSON list, not {objs!r}")
    return ((o, f"{where}[{i}]") for i, o in enumerate(objs))


def requirement_to_json(r: TableRequirement) -> dict[str, Any]:
    """The REST JSON object of one requirement."""
    out: dict[str, Any] = {"type": r.type}
    codec = _REQUIREMENT_FIELDS.get(type(r))
    if codec is not None:
        out.update(codec.to_json(r))
    return out


def requirements_to_json(requirements: Iterable[TableRequirement]) -> list[dict[str, Any]]:
    """The REST JSON list of requirements (`CommitTableRequest.requirements`)."""
    return [requirement_to_json(r) for r in requirements]


def requirement_from_json(obj: Any, *, where: str = "requirement") -> TableRequirement:
    """One requirement from its REST JSON object; `ValidationError` naming `where` and the problem."""
    f = _Fields(obj, where)
    kind = f.get("type")
    f.where = f"{where} ({kind})"
    cls = _REQUIREMENTS_BY_TYPE.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValidationError(f"{where}: unknown requirement type {kind!r}")
    codec = _REQUIREMENT_FIELDS.get(cls)
    requirement: TableRequirement = cls() if codec is None else codec.from_json(f)
    return requirement


def requirements_from_json(objs: Any, *, where: str = "requirements") -> list[TableRequirement]:
    """Requirements from the REST JSON list; `ValidationError` naming the bad entry."""
    return [requirement_from_json(o, where=w) for o, w in _json_list(objs, where)]
