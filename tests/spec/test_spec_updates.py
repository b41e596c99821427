"""Metadata updates and requirements (iceduck.spec.updates): JSON both ways, requirement checks,
applying updates. Truth comes from real metadata files of other engines (the conformance corpus:
their schemas, specs, snapshots and refs must survive the REST JSON round trip), from metadata
built by hand, and from PyIceberg 0.12's own `update_table_metadata` applied to the same JSON."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iceduck.errors import CommitConflictError, IcebergError, ValidationError
from iceduck.spec.partitioning import PartitionField, PartitionSpec
from iceduck.spec.snapshots import (
    MAIN_BRANCH,
    MetadataLogEntry,
    Snapshot,
    SnapshotLogEntry,
    SnapshotRef,
    SnapshotRefType,
    StatisticsFile,
    frozen_map,
)
from iceduck.spec.sorting import UNSORTED, NullOrder, SortDirection, SortField, SortOrder
from iceduck.spec.table_metadata import (
    TableMetadata,
    parse_table_metadata,
    read_table_metadata,
    table_metadata_to_json,
)
from iceduck.spec.transforms import parse_transform
from iceduck.spec.types import INT, LONG, STRING, NestedField, Schema
from iceduck.spec.updates import (
    AddEncryptionKey,
    AddPartitionSpec,
    AddSchema,
    AddSnapshot,
    AddSortOrder,
    AssertCreate,
    AssertCurrentSchemaId,
    AssertDefaultSortOrderId,
    AssertDefaultSpecId,
    AssertLastAssignedFieldId,
    AssertLastAssignedPartitionId,
    AssertRefSnapshotId,
    AssertTableUUID,
    AssignUUID,
    RemovePartitionSpecs,
    RemovePartitionStatistics,
    RemoveProperties,
    RemoveSchemas,
    RemoveSnapshotRef,
    RemoveSnapshots,
    RemoveStatistics,
    SetCurrentSchema,
    SetDefaultSortOrder,
    SetDefaultSpec,
    SetLocation,
    SetPartitionStatistics,
    SetProperties,
    SetSnapshotRef,
    SetStatistics,
    TableRequirement,
    TableUpdate,
    UpgradeFormatVersion,
    apply_updates,
    check_requirements,
    requirements_for,
    requirements_from_json,
    requirements_to_json,
    updates_from_json,
    updates_to_json,
)
from tests.spec.test_table_metadata import metadata_files

TABLE_UUID = uuid.UUID("9c12d441-03fe-4693-9a96-a0705ddf69c1")
SCHEMA = Schema((NestedField(1, "id", LONG, required=True), NestedField(2, "s", STRING)), 0)
BY_S = PartitionSpec(0, (PartitionField((2,), 1000, "s", parse_transform("identity")),))
ORDER = SortOrder(
    1, (SortField((1,), parse_transform("identity"), SortDirection.ASC, NullOrder.NULLS_FIRST),)
)


def json_round_trip(updates: list[TableUpdate]) -> list[TableUpdate]:
    return updates_from_json(json.loads(json.dumps(updates_to_json(updates))))


def create_updates(
    format_version: int = 3,
    spec: PartitionSpec = BY_S,
    order: SortOrder = ORDER,
    properties: dict[str, str] | None = None,
) -> list[TableUpdate]:
    """What a create transaction sends (the order Java and PyIceberg use)."""
    return [
        AssignUUID(TABLE_UUID),
        UpgradeFormatVersion(format_version),
        AddSchema(SCHEMA),
        SetCurrentSchema(-1),
        AddPartitionSpec(spec),
        SetDefaultSpec(-1),
        AddSortOrder(order),
        SetDefaultSortOrder(-1),
        SetLocation("s3://bucket/t"),
        SetProperties(properties or {"owner": "me"}),
    ]


def snapshot(
    sid: int, parent: int | None, seq: int, ts: int, first_row_id: int | None, rows: int | None
) -> Snapshot:
    return Snapshot(
        snapshot_id=sid,
        parent_snapshot_id=parent,
        sequence_number=seq,
        timestamp_ms=ts,
        manifest_list=f"s3://bucket/t/metadata/snap-{sid}.avro",
        summary=frozen_map({"operation": "append"}),
        schema_id=0,
        first_row_id=first_row_id,
        added_rows=rows,
    )


def commit_snapshot(md: TableMetadata, sid: int, ts: int, rows: int) -> list[TableUpdate]:
    fv = md.format_version
    snap = snapshot(
        sid,
        md.current_snapshot_id,
        md.last_sequence_number + 1 if fv >= 2 else 0,
        ts,
        md.next_row_id if fv >= 3 else None,
        rows if fv >= 3 else None,
    )
    return [AddSnapshot(snap), SetSnapshotRef(MAIN_BRANCH, SnapshotRef(sid, SnapshotRefType.BRANCH))]


# -- building metadata ---------------------------------------------------------------------------


def test_create_builds_the_new_table_metadata() -> None:
    md = apply_updates(None, create_updates(), last_updated_ms=1_000)
    expected = TableMetadata(
        format_version=3,
        table_uuid=TABLE_UUID,
        location="s3://bucket/t",
        last_sequence_number=0,
        last_updated_ms=1_000,
        last_column_id=2,
        schemas=(SCHEMA,),
        current_schema_id=0,
        partition_specs=(BY_S,),
        default_spec_id=0,
        last_partition_id=1000,
        properties=frozen_map({"owner": "me"}),
        sort_orders=(UNSORTED, ORDER),
        default_sort_order_id=1,
        next_row_id=0,
    )
    assert table_metadata_to_json(md) == table_metadata_to_json(expected)
    # the JSON form of the updates builds the same table
    assert apply_updates(None, json_round_trip(create_updates()), last_updated_ms=1_000) == md


def test_create_unpartitioned_unsorted_v2() -> None:
    updates = create_updates(2, PartitionSpec(0, ()), UNSORTED, {"a": "b"})
    md = apply_updates(None, updates, last_updated_ms=5)
    assert md.format_version == 2 and md.next_row_id is None
    assert md.partition_specs == (PartitionSpec(0, ()),) and md.last_partition_id == 999
    assert md.sort_orders == (UNSORTED,) and md.default_sort_order_id == 0
    # without spec and sort order updates a new table is unpartitioned and unsorted
    bare = [
        u
        for u in updates
        if not isinstance(u, AddPartitionSpec | SetDefaultSpec | AddSortOrder | SetDefaultSortOrder)
    ]
    assert apply_updates(None, bare, last_updated_ms=5) == md


def test_add_snapshot_and_set_ref_match_hand_built_metadata() -> None:
    base = apply_updates(None, create_updates(), last_updated_ms=1_000)
    first = apply_updates(
        base, commit_snapshot(base, 11, 2_000, 100), metadata_location="m/0.json", last_updated_ms=2_500
    )
    second = apply_updates(
        first, commit_snapshot(first, 22, 3_000, 50), metadata_location="m/1.json", last_updated_ms=3_500
    )
    s1 = snapshot(11, None, 1, 2_000, 0, 100)
    s2 = snapshot(22, 11, 2, 3_000, 100, 50)
    expected = TableMetadata(
        format_version=3,
        table_uuid=TABLE_UUID,
        location="s3://bucket/t",
        last_sequence_number=2,
        last_updated_ms=3_500,
        last_column_id=2,
        schemas=(SCHEMA,),
        current_schema_id=0,
        partition_specs=(BY_S,),
        default_spec_id=0,
        last_partition_id=1000,
        properties=frozen_map({"owner": "me"}),
        current_snapshot_id=22,
        snapshots=(s1, s2),
        snapshot_log=(SnapshotLogEntry(2_000, 11), SnapshotLogEntry(3_000, 22)),
        metadata_log=(MetadataLogEntry(1_000, "m/0.json"), MetadataLogEntry(2_500, "m/1.json")),
        sort_orders=(UNSORTED, ORDER),
        default_sort_order_id=1,
        refs=frozen_map({MAIN_BRANCH: SnapshotRef(22, SnapshotRefType.BRANCH)}),
        next_row_id=150,
    )
    assert json.dumps(table_metadata_to_json(second)) == json.dumps(table_metadata_to_json(expected))


def test_schema_spec_and_order_ids_are_reused_or_assigned() -> None:
    base = apply_updates(None, create_updates(), last_updated_ms=1)
    wider = Schema((*SCHEMA.fields, NestedField(3, "n", INT)), 99)
    md = apply_updates(base, [AddSchema(wider), SetCurrentSchema(-1)], last_updated_ms=2)
    assert (
        [s.schema_id for s in md.schemas] == [0, 1] and md.current_schema_id == 1 and md.last_column_id == 3
    )
    # the old schema again: reused, last-column-id does not go back
    back = apply_updates(md, [AddSchema(SCHEMA), SetCurrentSchema(-1)], last_updated_ms=3)
    assert (
        [s.schema_id for s in back.schemas] == [0, 1]
        and back.current_schema_id == 0
        and back.last_column_id == 3
    )
    # a spec with the same fields is reused; a new one gets the next id and raises last-partition-id
    same = apply_updates(
        md, [AddPartitionSpec(PartitionSpec(7, BY_S.fields)), SetDefaultSpec(-1)], last_updated_ms=4
    )
    assert same.partition_specs == md.partition_specs
    by_n = PartitionSpec(0, (PartitionField((3,), 1001, "n_bucket", parse_transform("bucket[4]")),))
    new = apply_updates(md, [AddPartitionSpec(by_n), SetDefaultSpec(-1)], last_updated_ms=5)
    assert [s.spec_id for s in new.partition_specs] == [0, 1] and new.default_spec_id == 1
    assert new.last_partition_id == 1001
    # unsorted is order 0 (added when missing), a new order the next id
    unsorted = apply_updates(md, [AddSortOrder(UNSORTED), SetDefaultSortOrder(-1)], last_updated_ms=6)
    assert unsorted.default_sort_order_id == 0 and unsorted.sort_orders == md.sort_orders
    desc = SortOrder(
        5, (SortField((3,), parse_transform("identity"), SortDirection.DESC, NullOrder.NULLS_LAST),)
    )
    ordered = apply_updates(md, [AddSortOrder(desc), SetDefaultSortOrder(-1)], last_updated_ms=7)
    assert [o.order_id for o in ordered.sort_orders] == [0, 1, 2] and ordered.default_sort_order_id == 2


def test_expiry_drops_snapshots_statistics_and_the_log_before_them() -> None:
    md = apply_updates(None, create_updates(2), last_updated_ms=1)
    for i, sid in enumerate((1, 2, 3)):
        md = apply_updates(md, commit_snapshot(md, sid, 10 * (i + 1), 1), last_updated_ms=10 * (i + 1))
    stats = StatisticsFile(1, "s3://bucket/t/stats-1.puffin", 10, 5)
    md = apply_updates(md, [SetStatistics(stats), SetSnapshotRef("tag", SnapshotRef(2, SnapshotRefType.TAG))])
    assert md.statistics == (stats,)
    with pytest.raises(ValidationError, match="snapshot 2 is still referenced by ref 'tag'"):
        apply_updates(md, [RemoveSnapshots((1, 2))])
    out = apply_updates(md, [RemoveSnapshotRef("tag"), RemoveSnapshots((1, 2, 12345))], last_updated_ms=99)
    assert [s.snapshot_id for s in out.snapshots] == [3]
    assert out.snapshot_log == (SnapshotLogEntry(30, 3),) and out.statistics == () and "tag" not in out.refs


def test_metadata_log_is_pruned_to_previous_versions_max() -> None:
    md = apply_updates(
        None, create_updates(properties={"write.metadata.previous-versions-max": "2"}), last_updated_ms=0
    )
    for i in range(4):
        md = apply_updates(
            md, [SetProperties({"n": str(i)})], metadata_location=f"m/{i}.json", last_updated_ms=i + 1
        )
    assert [e.metadata_file for e in md.metadata_log] == ["m/2.json", "m/3.json"]
    assert [e.timestamp_ms for e in md.metadata_log] == [2, 3]


# -- invalid sequences ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("updates", "error", "message"),
    [
        ([SetCurrentSchema(-1)], ValidationError, "set-current-schema: -1 means the schema added last"),
        ([SetCurrentSchema(7)], ValidationError, "set-current-schema: there is no schema 7"),
        ([SetDefaultSpec(3)], ValidationError, "set-default-spec: there is no partition spec 3"),
        ([SetDefaultSortOrder(-1)], ValidationError, "set-default-sort-order: -1 means the sort order"),
        ([UpgradeFormatVersion(2)], ValidationError, "cannot downgrade format-version from 3 to 2"),
        ([UpgradeFormatVersion(4)], ValidationError, "format-version must be 1, 2 or 3, not 4"),
        ([AssignUUID(uuid.UUID(int=1))], ValidationError, "a uuid is never reassigned"),
        ([SetSnapshotRef("b", SnapshotRef(404))], ValidationError, "snapshot 404, which does not exist"),
        ([RemoveSchemas((0,))], ValidationError, "schema 0 is the current schema"),
        ([RemovePartitionSpecs((0,))], ValidationError, "spec 0 is the default partition spec"),
        ([SetLocation("")], ValidationError, "set-location: the location is empty"),
        (
            [
                AddPartitionSpec(
                    PartitionSpec(
                        0, (BY_S.fields[0], PartitionField((1,), 1001, "s", parse_transform("identity")))
                    )
                )
            ],
            ValidationError,
            "partition field names must be unique: s",
        ),
        # planned before another commit took the sequence number / row ids: a conflict, so writers retry
        (
            [AddSnapshot(snapshot(5, 11, 1, 1, 100, 1))],
            CommitConflictError,
            "not above the table's last-sequence-number 1",
        ),
        (
            [AddSnapshot(snapshot(5, 11, 2, 1, 99, 1))],
            CommitConflictError,
            "below the table's next-row-id 100",
        ),
        ([AddSnapshot(snapshot(5, 11, 2, 1, None, None))], CommitConflictError, "has no first-row-id"),
        ([AddSnapshot(snapshot(11, None, 2, 1, 100, 1))], ValidationError, "has a snapshot 11 already"),
        (
            [SetSnapshotRef(MAIN_BRANCH, SnapshotRef(11, SnapshotRefType.TAG))],
            ValidationError,
            "must be a branch",
        ),
    ],
)
def test_invalid_updates_are_refused_naming_the_update(
    updates: list[TableUpdate], error: type[IcebergError], message: str
) -> None:
    base = apply_updates(None, create_updates(), last_updated_ms=1)
    base = apply_updates(base, commit_snapshot(base, 11, 2, 100), last_updated_ms=2)
    with pytest.raises(error, match=message):
        apply_updates(base, updates)
    assert base.current_snapshot_id == 11  # the base is never changed


def test_a_new_table_needs_a_schema_and_a_location() -> None:
    with pytest.raises(ValidationError, match="needs set-location"):
        apply_updates(None, [AddSchema(SCHEMA), SetCurrentSchema(-1)])
    with pytest.raises(ValidationError, match="needs add-schema and set-current-schema"):
        apply_updates(None, [SetLocation("/t")])
    with pytest.raises(ValidationError, match="invalid table metadata: missing 'table-uuid'"):
        apply_updates(
            None, [UpgradeFormatVersion(2), AddSchema(SCHEMA), SetCurrentSchema(-1), SetLocation("/t")]
        )
    # removing main leaves no current snapshot (valid), a v1 table needs no uuid
    md = apply_updates(
        None, [UpgradeFormatVersion(1), AddSchema(SCHEMA), SetCurrentSchema(-1), SetLocation("/t")]
    )
    assert md.table_uuid is None and md.format_version == 1
    md = apply_updates(md, commit_snapshot(md, 1, 5, 1))
    assert apply_updates(md, [RemoveSnapshotRef(MAIN_BRANCH)]).current_snapshot_id is None


# -- requirements --------------------------------------------------------------------------------


def test_requirements_pass_on_the_base_and_fail_naming_themselves() -> None:
    base = apply_updates(None, create_updates(), last_updated_ms=1)
    base = apply_updates(base, commit_snapshot(base, 11, 2, 100), last_updated_ms=2)
    moved = apply_updates(base, commit_snapshot(base, 22, 3, 1), last_updated_ms=3)
    cases: list[tuple[TableRequirement, str]] = [
        (AssertTableUUID(uuid.UUID(int=5)), f"the table's uuid is {TABLE_UUID}"),
        (AssertRefSnapshotId(MAIN_BRANCH, 22), "ref 'main' is at snapshot 11"),
        (AssertRefSnapshotId("branch", 11), "ref 'branch' does not exist"),
        (AssertRefSnapshotId(MAIN_BRANCH, None), "ref 'main' exists"),
        (AssertLastAssignedFieldId(3), "last-column-id is 2"),
        (AssertCurrentSchemaId(1), "current-schema-id is 0"),
        (AssertLastAssignedPartitionId(999), "last-partition-id is 1000"),
        (AssertDefaultSpecId(1), "default-spec-id is 0"),
        (AssertDefaultSortOrderId(0), "default-sort-order-id is 1"),
        (AssertCreate(), "the table exists already"),
    ]
    for requirement, why in cases:
        body = requirements_to_json([requirement])[0]
        with pytest.raises(CommitConflictError) as info:
            check_requirements(base, [requirement], table="ns.t")
        text = str(info.value)
        assert text.startswith(f"ns.t: requirement {body['type']}") and why in text, text
    # the requirements derived from updates planned on `base` hold on it and fail once it moved
    planned = commit_snapshot(base, 33, 4, 1)
    reqs = requirements_for(base, planned)
    assert reqs == [AssertTableUUID(TABLE_UUID), AssertRefSnapshotId(MAIN_BRANCH, 11)]
    check_requirements(base, reqs)
    with pytest.raises(CommitConflictError, match="assert-ref-snapshot-id"):
        check_requirements(moved, reqs)
    check_requirements(None, [AssertCreate()])
    with pytest.raises(CommitConflictError, match="the table does not exist"):
        check_requirements(None, [AssertTableUUID(TABLE_UUID)])


def test_requirements_for_each_kind_of_update() -> None:
    base = apply_updates(None, create_updates(), last_updated_ms=1)
    updates: list[TableUpdate] = [
        AddSchema(SCHEMA), SetCurrentSchema(-1), AddPartitionSpec(BY_S), SetDefaultSpec(-1),
        AddSortOrder(ORDER), SetDefaultSortOrder(-1), RemoveSnapshotRef("tag"),
    ]  # fmt: skip
    assert requirements_for(base, updates) == [
        AssertTableUUID(TABLE_UUID),
        AssertLastAssignedFieldId(2),
        AssertCurrentSchemaId(0),
        AssertLastAssignedPartitionId(1000),
        AssertDefaultSpecId(0),
        AssertDefaultSortOrderId(1),
        AssertRefSnapshotId("tag", None),
    ]
    assert requirements_for(None, create_updates()) == [AssertCreate()]


# -- JSON ----------------------------------------------------------------------------------------


def rebuilding_updates(md: TableMetadata) -> list[TableUpdate]:
    """Every part of a metadata file as updates (to carry other engines' objects through JSON)."""
    out: list[TableUpdate] = [UpgradeFormatVersion(md.format_version), SetLocation(md.location)]
    if md.table_uuid is not None:
        out.append(AssignUUID(md.table_uuid))
    out += [AddSchema(s, md.last_column_id) for s in md.schemas] + [SetCurrentSchema(md.current_schema_id)]
    out += [AddPartitionSpec(s) for s in md.partition_specs] + [SetDefaultSpec(md.default_spec_id)]
    out += [AddSortOrder(o) for o in md.sort_orders] + [SetDefaultSortOrder(md.default_sort_order_id)]
    out += [AddSnapshot(s) for s in md.snapshots]
    out += [SetSnapshotRef(name, ref) for name, ref in md.refs.items()]
    out += [SetStatistics(s) for s in md.statistics]
    out += [SetPartitionStatistics(p) for p in md.partition_statistics]
    out += [AddEncryptionKey(k) for k in md.encryption_keys]
    out += [SetProperties(dict(md.properties)), RemoveProperties(tuple(md.properties)[:2])]
    out += [RemoveSnapshots(tuple(s.snapshot_id for s in md.snapshots[:2])), RemoveSchemas((0,))]
    out += [RemovePartitionSpecs((0, 1)), RemoveStatistics(1), RemovePartitionStatistics(2)]
    return out


def test_updates_of_other_engines_metadata_survive_json(conformance: Path) -> None:
    checked = 0
    for path in metadata_files(conformance):
        try:
            md = read_table_metadata(path.read_bytes(), path=str(path))
        except IcebergError:
            continue  # the invalid goldens
        updates = rebuilding_updates(md)
        assert json_round_trip(updates) == updates, path
        checked += 1
    assert checked > 100


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_requirements_json_round_trip(data: st.DataObject) -> None:
    ints = st.integers(-1, 2**62)
    reqs: list[TableRequirement] = data.draw(
        st.lists(
            st.one_of(
                st.just(AssertCreate()),
                st.uuids().map(AssertTableUUID),
                st.builds(AssertRefSnapshotId, st.text(min_size=1, max_size=8), st.none() | ints),
                ints.map(AssertLastAssignedFieldId),
                ints.map(AssertCurrentSchemaId),
                ints.map(AssertLastAssignedPartitionId),
                ints.map(AssertDefaultSpecId),
                ints.map(AssertDefaultSortOrderId),
            ),
            max_size=8,
        )
    )
    assert requirements_from_json(json.loads(json.dumps(requirements_to_json(reqs)))) == reqs


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"action": "fly"}, r"updates\[0\]: unknown update action 'fly'"),
        ({"action": "add-schema"}, r"updates\[0\] \(add-schema\): missing 'schema'"),
        ({"action": "set-current-schema", "schema-id": "1"}, r"'schema-id' must be an integer"),
        ({"action": "assign-uuid", "uuid": "nope"}, r"'uuid' is not a UUID"),
        ({"action": "set-properties", "updates": {"a": 1}}, r"property values must be strings"),
        (
            {"action": "add-snapshot", "snapshot": {"snapshot-id": 1}},
            r"updates\[0\] \(add-snapshot\): 'snapshot'",
        ),
        (
            {"action": "set-snapshot-ref", "ref-name": "b", "snapshot-id": 1, "type": "leaf"},
            r"'type' must be",
        ),
        ("add-schema", r"updates\[0\]: must be a JSON object"),
    ],
)
def test_bad_update_json_gets_one_clear_line(payload: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as info:
        updates_from_json([payload])
    assert "\n" not in str(info.value) and "Traceback" not in str(info.value)


def test_bad_requirement_json_gets_one_clear_line() -> None:
    with pytest.raises(ValidationError, match=r"requirements\[1\]: unknown requirement type 'assert-luck'"):
        requirements_from_json([{"type": "assert-create"}, {"type": "assert-luck"}])
    with pytest.raises(
        ValidationError, match=r"requirements\[0\] \(assert-ref-snapshot-id\): missing 'snapshot-id'"
    ):
        requirements_from_json([{"type": "assert-ref-snapshot-id", "ref": "main"}])


# -- against PyIceberg's update_table_metadata -----------------------------------------------------

PROPERTY_KEYS = st.sampled_from(["a", "b", "c", "commit.retry.num-retries"])


@st.composite
def commit_sequences(draw: st.DrawFn) -> tuple[TableMetadata, list[list[TableUpdate]]]:
    """A new table and a few commits of the kinds iceduck's writers make (snapshots on main and
    branches, tags, properties, new schemas)."""
    fv = draw(st.sampled_from([2, 3]))
    base = apply_updates(None, create_updates(fv), last_updated_ms=1_000)
    commits: list[list[TableUpdate]] = []
    md = base
    next_sid, ts = 100, 2_000
    # every commit changes something (PyIceberg writes no metadata-log entry for a commit that does not)
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["snapshot", "snapshot", "tag", "props", "schema"]))
        ts += draw(st.integers(1, 1000))
        if kind == "snapshot":
            rows = draw(st.integers(0, 1000))
            updates = commit_snapshot(md, next_sid, ts, rows)
            next_sid += 1
        elif kind == "tag" and md.snapshots:
            target = draw(st.sampled_from([s.snapshot_id for s in md.snapshots]))
            age = draw(st.none() | st.integers(1, 10**9))
            updates = [SetSnapshotRef(f"t{i}", SnapshotRef(target, SnapshotRefType.TAG, age))]
        elif kind == "schema":
            n = md.last_column_id + 1
            wider = Schema((*md.schema.fields, NestedField(n, f"c{n}", INT)), md.schema.schema_id + 1)
            updates = [AddSchema(wider), SetCurrentSchema(-1)]
        else:
            sets = {**draw(st.dictionaries(PROPERTY_KEYS, st.text(max_size=5), max_size=3)), "n": str(i)}
            removals = tuple(k for k in md.properties if draw(st.booleans()))
            updates = [SetProperties(sets), RemoveProperties(removals)]
        commits.append(updates)
        md = apply_updates(md, updates, last_updated_ms=ts)
    return base, commits


def pyiceberg_apply(md_json: dict[str, Any], updates: list[TableUpdate], location: str) -> dict[str, Any]:
    from pydantic import TypeAdapter
    from pyiceberg.table.metadata import TableMetadataUtil
    from pyiceberg.table.update import TableUpdate as PyUpdate
    from pyiceberg.table.update import update_table_metadata

    base = TableMetadataUtil.parse_raw(json.dumps(md_json))
    adapter: TypeAdapter[Any] = TypeAdapter(PyUpdate)
    theirs = tuple(adapter.validate_python(u) for u in updates_to_json(updates))
    out = update_table_metadata(base, theirs, metadata_location=location)
    result: dict[str, Any] = out.model_dump(mode="json", by_alias=True, exclude_none=True)
    return result


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(commit_sequences())
def test_applying_updates_agrees_with_pyiceberg(case: tuple[TableMetadata, list[list[TableUpdate]]]) -> None:
    md, commits = case
    for i, updates in enumerate(commits):
        location = f"s3://bucket/t/metadata/{i:05d}.metadata.json"
        ours = apply_updates(md, updates, metadata_location=location)
        theirs = parse_table_metadata(pyiceberg_apply(table_metadata_to_json(md), updates, location))
        # last-updated-ms is the commit's time: each implementation takes its own clock
        mine = table_metadata_to_json(ours)
        other = table_metadata_to_json(theirs)
        mine.pop("last-updated-ms"), other.pop("last-updated-ms")
        assert mine == other
        md = ours
