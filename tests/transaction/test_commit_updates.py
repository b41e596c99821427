"""Every commit is requirements + updates: the recorded updates, applied to the metadata file they
were applied to, rebuild the committed metadata file byte for byte, for each kind of write and
maintenance action (and through the REST JSON form of the record). Maintenance runs keep the same
records in the maintenance log."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from iceduck.catalog.commit import metadata_bytes
from iceduck.errors import CommitConflictError
from iceduck.lake import Lake
from iceduck.maintenance.actions import Maintainer
from iceduck.spec.table_metadata import read_table_metadata
from iceduck.spec.updates import (
    AddSchema,
    AddSnapshot,
    AssertCreate,
    AssertCurrentSchemaId,
    AssertRefSnapshotId,
    AssertTableUUID,
    RemoveSnapshots,
    SetProperties,
    SetSnapshotRef,
    UpgradeFormatVersion,
)
from iceduck.transaction import create as ops
from iceduck.transaction.commit import CommitRecord, TableCommitter
from tests.support.maintenance_helpers import file_bytes
from tests.support.write_helpers import SCHEMA, arrow_rows, new_lake, pyiceberg_rows, table_files


def _records(lake: Lake, action: Callable[[Lake], Any]) -> list[CommitRecord]:
    """The commit records of what `action` did: from its results, else from the maintenance log."""
    seen: list[CommitRecord] = []
    original = TableCommitter.commit
    original_create = ops.create_table

    def create(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = original_create(*args, **kwargs)
        seen.append(result.commit)
        return result

    def commit(self, change, base=None, sleep=time.sleep):  # type: ignore[no-untyped-def]
        result = original(self, change, base, sleep)
        assert result.commit is not None and self.last_commit == result.commit
        seen.append(result.commit)
        return result

    TableCommitter.commit = commit  # type: ignore[method-assign]
    ops.create_table = create
    try:
        action(lake)
    finally:
        TableCommitter.commit = original  # type: ignore[method-assign]
        ops.create_table = original_create
    return seen


def _create(lake: Lake, version: int = 3, **kw: Any) -> None:
    lake.create_table("ns.t", SCHEMA, partition_by=["day"], format_version=version, **kw)


def _appended(lake: Lake, version: int = 3) -> None:
    _create(lake, version, properties={"write.delete.mode": "merge-on-read"})
    t = lake.table("ns.t")
    t.append(arrow_rows(20))
    t.append(arrow_rows(20, 100))


def _maintain(lake: Lake, run: Callable[[Maintainer], Any]) -> None:
    m = Maintainer.for_lake(lake, "ns.t")
    run(m)
    logged = [c for r in m.log() for c in r.commits]
    assert logged, "the maintenance log records the commits"


# name -> (set-up before the recorded commits, the commits, the update actions they must contain)
SCENARIOS: dict[str, tuple[Callable[[Lake], None], Callable[[Lake], Any], set[str]]] = {
    "create": (
        lambda lake: None,
        lambda lake: _create(lake, sort_by=["id DESC"]),
        {"assign-uuid", "add-schema"},
    ),
    "append": (
        lambda lake: _create(lake),
        lambda lake: lake.table("ns.t").append(arrow_rows(10)),
        {"add-snapshot"},
    ),
    "delete-dv": (_appended, lambda lake: lake.table("ns.t").delete("id % 3 = 0"), {"add-snapshot"}),
    "delete-v2": (
        lambda lake: _appended(lake, 2),
        lambda lake: lake.table("ns.t").delete("id % 3 = 0"),
        {"add-snapshot"},
    ),
    "delete-files": (_appended, lambda lake: lake.table("ns.t").delete("id < 100"), {"add-snapshot"}),
    "update": (
        _appended,
        lambda lake: lake.table("ns.t").update({"name": "'x'"}, "id = 5"),
        {"add-snapshot"},
    ),
    "overwrite": (_appended, lambda lake: lake.table("ns.t").overwrite(arrow_rows(3, 500)), {"add-snapshot"}),
    "schema": (
        _appended,
        lambda lake: (
            lake.table("ns.t")
            .update_schema()
            .add_column("extra", "long")
            .rename_column("name", "label")
            .commit()
        ),
        {"add-schema", "set-current-schema"},
    ),
    "partition": (
        _appended,
        lambda lake: (
            lake.table("ns.t").update_spec(["day", "bucket(4, id)"]),
            lake.table("ns.t").update_spec([]),
        ),
        {"add-spec", "set-default-spec"},
    ),
    "sort-order": (
        _appended,
        lambda lake: lake.table("ns.t").set_sort_order(["id DESC"]),
        {"add-sort-order"},
    ),
    "properties": (
        _appended,
        lambda lake: (
            lake.table("ns.t").set_properties({"a": 1}),
            lake.table("ns.t").unset_properties(["a"]),
        ),
        {"set-properties", "remove-properties"},
    ),
    "upgrade": (
        lambda lake: _appended(lake, 2),
        lambda lake: (
            lake.table("ns.t").upgrade_format_version(3),
            lake.table("ns.t").append(arrow_rows(2, 900)),
        ),
        {"upgrade-format-version", "add-snapshot"},
    ),
    "expire": (
        _appended,
        lambda lake: _maintain(
            lake,
            lambda m: m.expire_snapshots(
                older_than=int(time.time() * 1000) + 1, retain_last=1, dry_run=False
            ),
        ),
        {"remove-snapshots"},
    ),
    "rewrite-data": (
        lambda lake: (_appended(lake), lake.table("ns.t").delete("id % 2 = 0")),
        lambda lake: _maintain(
            lake, lambda m: m.rewrite_data_files(rewrite_all=True, min_input_files=2, dry_run=False)
        ),
        {"add-snapshot"},
    ),
    "rewrite-manifests": (
        _appended,
        lambda lake: _maintain(lake, lambda m: m.rewrite_manifests(dry_run=False)),
        {"add-snapshot"},
    ),
}


@pytest.fixture
def lake(warehouse: str) -> Iterator[Lake]:
    lake = new_lake(warehouse)
    yield lake
    lake.close()


@pytest.mark.s3_twin(catalog=("sql",))  # a folder catalog needs a local warehouse
@pytest.mark.parametrize("catalog", ["sql", "folder"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_recorded_updates_rebuild_the_committed_metadata_byte_for_byte(
    warehouse: str, catalog: str, scenario: str
) -> None:
    lake = new_lake(warehouse, catalog=catalog)
    try:
        _replay_scenario(lake, scenario)
    finally:
        lake.close()


def _replay_scenario(lake: Lake, scenario: str) -> None:
    setup, action, actions = SCENARIOS[scenario]
    setup(lake)
    records = _records(lake, action)
    assert records
    seen_actions = set()
    for record in records:
        # through the REST JSON form, as a REST catalog would receive it
        replayed = CommitRecord.from_json(json.loads(json.dumps(record.to_json())))
        assert replayed == record
        base = None
        if record.base_metadata_location is not None:
            base = read_table_metadata(file_bytes(record.base_metadata_location))
        committed = file_bytes(record.metadata_location)
        assert metadata_bytes(replayed.replay(base)) == committed
        seen_actions.update(u.action for u in record.updates)
        if base is None:
            assert record.requirements == (AssertCreate(),)
        else:
            assert AssertTableUUID(base.table_uuid) in record.requirements  # type: ignore[arg-type]
    assert actions <= seen_actions
    if scenario.startswith(("expire", "rewrite")):
        # the maintenance log holds the same records
        logged = [
            CommitRecord.from_json(c) for r in Maintainer.for_lake(lake, "ns.t").log() for c in r.commits
        ]
        assert logged == records


def test_snapshot_commits_assert_the_head_they_were_planned_on(lake: Lake) -> None:
    _appended(lake)
    t = lake.table("ns.t")
    head = t.current_snapshot()
    assert head is not None
    result = t.update({"name": "'y'"}, "id = 1")
    record = result.commit
    assert record is not None
    assert AssertRefSnapshotId("main", head.snapshot_id) in record.requirements
    assert any(isinstance(r, AssertCurrentSchemaId) for r in record.requirements)  # rows were read with it
    assert [u.action for u in record.updates] == ["add-snapshot", "set-snapshot-ref"]
    added = record.updates[0]
    assert isinstance(added, AddSnapshot) and added.snapshot.parent_snapshot_id == head.snapshot_id
    ref = record.updates[1]
    assert isinstance(ref, SetSnapshotRef) and ref.ref.snapshot_id == added.snapshot.snapshot_id


def test_a_commit_applies_to_newer_metadata_when_its_requirements_still_hold(lake: Lake) -> None:
    """Another writer changed a property between planning and committing: the append's
    requirements (table uuid, main head) still hold, so the catalog applies its updates to the
    newer metadata (once), the way a REST catalog does; nothing is lost."""
    _appended(lake)
    t = lake.table("ns.t")
    committer = TableCommitter(lake.catalog, "ns", "t", lake.io)
    planned_on = committer.load()
    t.set_properties({"by": "other"})
    other = t.metadata_location
    from iceduck.transaction.changes import KIND_APPEND, SnapshotChange

    with lake.con.cursor() as cur:
        from iceduck.transaction.write_input import write_input

        files = write_input(cur, planned_on, arrow_rows(1, 700), by_name=True)
    result = committer.commit(
        SnapshotChange(kind=KIND_APPEND, operation="append", added_data_files=files), planned_on
    )
    assert result.attempts == 1 and result.commit is not None
    assert result.commit.base_metadata_location == other
    md = t.load().metadata
    assert md.properties["by"] == "other" and 700 in {r["id"] for r in pyiceberg_rows(t.metadata_location)}


def test_a_requirement_that_fails_makes_the_writer_plan_again(lake: Lake) -> None:
    _appended(lake)
    t = lake.table("ns.t")
    committer = TableCommitter(lake.catalog, "ns", "t", lake.io)
    planned_on = committer.load()
    head = planned_on.metadata.current_snapshot()
    assert head is not None
    t.append(arrow_rows(1, 800))  # main moves: a delete planned on `head` must be planned again
    with pytest.raises(CommitConflictError, match=r"requirement assert-ref-snapshot-id\(ref=main"):
        lake.catalog.commit_table(
            "ns", "t", [AssertRefSnapshotId("main", head.snapshot_id)], [SetProperties({"x": "y"})]
        )
    # the delete itself re-plans and merges on the new head
    result = t.delete("id = 800 or id = 1")
    assert result.commit is not None and result.deleted_rows == 2


def test_invalid_updates_leave_the_table_as_it_was(lake: Lake) -> None:
    _appended(lake)
    t = lake.table("ns.t")
    before = t.metadata_location
    from iceduck.errors import ValidationError

    with pytest.raises(ValidationError, match="cannot downgrade"):
        lake.catalog.commit_table("ns", "t", [], [UpgradeFormatVersion(2)])
    with pytest.raises(
        ValidationError, match=r"remove-snapshots: snapshot .* is still referenced by ref 'main'"
    ):
        head = t.current_snapshot()
        assert head is not None
        lake.catalog.commit_table("ns", "t", [], [RemoveSnapshots((head.snapshot_id,))])
    assert t.metadata_location == before
    # the schema of a new table goes through add-schema too
    assert any(
        isinstance(u, AddSchema)
        for u in _records(lake, lambda lk: lk.create_table("ns.u", SCHEMA))[0].updates
    )


@pytest.mark.s3_twin(catalog=("sql",))  # a folder catalog needs a local warehouse
@pytest.mark.parametrize("catalog", ["sql", "folder"])
def test_losing_the_swap_is_a_conflict_and_leaves_no_file(
    warehouse: str, catalog: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another commit lands between applying the updates and the swap: the later one gets
    `CommitConflictError`, its metadata file is gone, the table has the other commit."""
    import iceduck.catalog.commit as commit_mod  # both catalogs' commit_table steps

    lake = new_lake(warehouse, catalog=catalog)
    try:
        _create(lake)
        metadata_dir = lake.table("ns.t").location + "/metadata"
        original = commit_mod.apply_commit
        state = {"armed": True}

        def racing(*args, **kwargs):  # type: ignore[no-untyped-def]
            out = original(*args, **kwargs)
            if state["armed"]:
                state["armed"] = False
                lake.catalog.commit_table("ns", "t", [], [SetProperties({"winner": "other"})])
            return out

        monkeypatch.setattr(commit_mod, "apply_commit", racing)
        before = table_files(metadata_dir)
        with pytest.raises(CommitConflictError, match="commit conflict"):
            lake.catalog.commit_table("ns", "t", [], [SetProperties({"winner": "me"})])
        assert len(table_files(metadata_dir) - before) == 1  # only the other commit's file
        assert lake.table("ns.t").properties["winner"] == "other"
        # through the committer, the conflict re-plans and commits on the new state
        state["armed"] = True
        result = lake.table("ns.t").set_properties({"winner": "me"})
        assert result.attempts == 2 and lake.table("ns.t").properties["winner"] == "me"
    finally:
        lake.close()


def test_the_sql_maintenance_log_shows_each_commit(lake: Lake) -> None:
    _appended(lake)
    lake.table("ns.t").append(arrow_rows(5, 300))
    time.sleep(0.01)
    lake.con.execute(
        "SELECT * FROM iceberg_expire_snapshots('ns.t', older_than := now(), retain_last := 1, dry_run := false)"
    ).fetchall()
    rows = lake.con.execute("SELECT action, commits FROM iceberg_maintenance_log('ns.t')").fetchall()
    assert [action for action, _ in rows] == ["expire_snapshots"]
    (commit_json,) = rows[0][1]
    record = CommitRecord.from_json(json.loads(commit_json))
    assert record.metadata_location == lake.table("ns.t").metadata_location
    removed = [u for u in record.updates if isinstance(u, RemoveSnapshots)]
    assert len(removed) == 1 and len(removed[0].snapshot_ids) == 2
    assert record.base_metadata_location is not None
    base = read_table_metadata(file_bytes(record.base_metadata_location))
    assert metadata_bytes(record.replay(base)) == file_bytes(record.metadata_location)
