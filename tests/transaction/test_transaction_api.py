"""The Python write API (iceduck.lake): namespaces, tables, append/delete/update/overwrite, errors.

Rows are read back with PyIceberg 0.12 (an independent reader of v2 and v3 tables); manifests and
manifest lists are read with fastavro; expected values are computed from the input data.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from iceduck.errors import (
    AlreadyExistsError,
    NamespaceNotFoundError,
    TableNotFoundError,
    ValidationError,
)
from iceduck.io.storage import default_io
from iceduck.puffin import read_footer
from iceduck.write.types import WriteTypeError
from tests.support import maintenance_helpers as mh
from tests.support.write_helpers import (
    SCHEMA,
    arrow_rows,
    manifest_entries,
    new_lake,
    pyiceberg_rows,
    table_files,
)


def test_namespaces_and_tables(lake, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert lake.list_namespaces() == ("ns",)
    lake.create_namespace("other")
    t = lake.create_table("ns.t1", SCHEMA)
    lake.create_table("ns.t2", [("a", "BIGINT")], format_version=2)
    assert lake.list_tables("ns") == ("t1", "t2")
    with pytest.raises(AlreadyExistsError):
        lake.create_table("ns.t1", SCHEMA)
    with pytest.raises(NamespaceNotFoundError):
        lake.create_table("nope.t", SCHEMA)
    lake.rename_table("ns.t2", "other.t3")
    assert lake.list_tables("other") == ("t3",)
    assert lake.table("other.t3").format_version == 2
    with pytest.raises(TableNotFoundError):
        lake.table("ns.t2")
    t.append(arrow_rows(10))
    folder = t.location
    lake.drop_table("ns.t1")
    assert table_files(folder)  # files stay without purge
    with pytest.raises(TableNotFoundError):
        t.append(arrow_rows(1))
    lake.drop_table("other.t3", purge=False)
    t = lake.create_table("ns.t4", SCHEMA)
    t.append(arrow_rows(10))
    t.delete("id < 3")
    location = t.location
    lake.drop_table("ns.t4", purge=True)
    assert table_files(location) == set()
    lake.drop_namespace("other")
    assert lake.list_namespaces() == ("ns",)


def test_purge_leaves_files_outside_the_table_location(lake, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A table whose metadata names files outside its location (another tool wrote it, or a REST
    client before the server checked): purge deletes the table's own files and none of those."""
    from iceduck.spec import updates as upd
    from iceduck.tables import purge_files

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep")
    other = lake.create_table("ns.o", SCHEMA)
    other.append(arrow_rows(5))
    others_files = table_files(other.location)
    t = lake.create_table("ns.t", SCHEMA, format_version=2)
    t.append(arrow_rows(10))
    location = t.location
    last = t.load().metadata.last_sequence_number
    outside = [str(victim / "precious"), f"{location}/../o/{os.path.basename(other.metadata_location)}"]
    snapshots = [
        {"snapshot-id": 900 + i, "sequence-number": last + 1 + i, "timestamp-ms": 1_800_000_000_000 + i,
         "manifest-list": path, "summary": {"operation": "append"}, "schema-id": 0}
        for i, path in enumerate(outside)
    ]  # fmt: skip
    updates = upd.updates_from_json([{"action": "add-snapshot", "snapshot": s} for s in snapshots])
    lake.catalog.commit_table("ns", "t", [], updates)
    table = t.load()
    lake.catalog.drop_table("ns", "t")
    report = purge_files(table)
    assert (victim / "precious").read_text() == "keep"
    assert table_files(other.location) == others_files
    assert len(report.left) == 2 and str(victim / "precious") in {p for p, _ in report.left}
    assert table_files(location) == set()  # its own files went


def test_new_table_metadata(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table(
        "ns.t", SCHEMA, partition_by=["day", "bucket(4, id)", "truncate(2, name) AS short"], sort_by=["id DESC"],
        properties={"owner": "me"},
    )  # fmt: skip
    table = t.load()
    md = table.metadata
    assert os.path.basename(table.metadata_location).startswith("00000-")
    assert md.format_version == 3 and md.next_row_id == 0 and md.last_sequence_number == 0
    assert [(f.name, str(f.transform), f.field_id, f.source_ids) for f in md.default_spec.fields] == [
        ("day", "identity", 1000, (2,)),
        ("id_bucket", "bucket[4]", 1001, (1,)),
        ("short", "truncate[2]", 1002, (3,)),
    ]
    assert md.last_partition_id == 1002 and md.last_column_id == 4
    assert (
        md.default_sort_order.order_id == 1
        and str(md.default_sort_order.fields[0]) == "identity(1) desc nulls-last"
    )
    assert md.properties == {"owner": "me"}
    assert md.current_snapshot() is None


@pytest.mark.s3_twin
def test_append_inputs(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("ns.t", SCHEMA)
    r1 = t.append(arrow_rows(5))
    assert (r1.operation, r1.added_rows, r1.added_data_files, r1.sequence_number) == ("append", 5, 1, 1)
    t.append(pa.RecordBatchReader.from_batches(SCHEMA, arrow_rows(5, 5).to_batches()))
    t.append(
        lake.con.sql(
            "SELECT 10 + i AS id, DATE '2022-01-01' AS day, 'x' AS name, 1.5 AS score FROM range(3) t(i)"
        )
    )
    other = duckdb.connect()
    t.append(other.sql("SELECT 13::BIGINT AS id, NULL::DATE AS day, NULL AS name, NULL::DOUBLE AS score"))
    other.close()
    t.append(arrow_rows(2, 14).to_batches()[0])
    t.append(arrow_rows(2, 16).select(["score", "name", "id"]))  # by name, missing optional column -> null
    t.append(lake.con.sql("SELECT 18, DATE '2022-01-01', 'p', 2.0"), by_name=False)
    r = t.append(arrow_rows(0))
    assert r.attempts == 0 and r.notes == ("no rows to append",)
    rows = pyiceberg_rows(t.metadata_location, sort_by="id")
    assert [row["id"] for row in rows] == list(range(19))
    assert rows[16]["day"] is None and rows[16]["name"] == "n16"
    assert rows[18]["name"] == "p"
    assert len(t.load().metadata.snapshots) == 7


def test_append_errors_change_nothing(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("ns.t", [("id", "BIGINT"), ("amount", "INTEGER")])
    t.append(pa.table({"id": [1], "amount": pa.array([2], pa.int32())}))
    before = t.metadata_location
    files = table_files(t.location)
    with pytest.raises(ValidationError, match=r"column\(s\) extra, other are not in the table"):
        t.append(pa.table({"id": [1], "extra": [2], "other": [3]}))
    with pytest.raises(ValidationError, match="column amount: long cannot be written as int"):
        t.append(pa.table({"id": [1], "amount": pa.array([2], pa.int64())}))
    with pytest.raises(ValidationError, match="column amount: string cannot be written as int"):
        t.append(lake.con.sql("SELECT 1 AS id, 'x' AS amount"))
    with pytest.raises(ValidationError, match="column id has type uint64"):
        t.append(pa.table({"id": pa.array([1], pa.uint64())}))
    with pytest.raises(ValidationError, match="column id: Iceberg has no type for HUGEINT"):
        t.append(lake.con.sql("SELECT 1::HUGEINT AS id"))
    with pytest.raises(ValidationError, match=r"3 column\(s\) given, the table has 2"):
        t.append(lake.con.sql("SELECT 1, 2, 3"), by_name=False)
    assert t.metadata_location == before
    assert table_files(t.location) == files
    with pytest.raises(TableNotFoundError):
        lake.table("ns.missing")
    with pytest.raises(TableNotFoundError):
        lake.con.sql("SELECT 1")  # the lake still works
        from iceduck.lake import TableHandle

        TableHandle(lake, "ns.missing").append(arrow_rows(1))


def test_types_iceberg_cannot_hold(lake) -> None:  # type: ignore[no-untyped-def]
    # the messages of SQL's CREATE TABLE: one mapping (iceduck.write.types.iceberg_type_of_duck)
    unsigned = r"column big: Iceberg has no type for UBIGINT \(.*DECIMAL\(20, 0\)"
    with pytest.raises(WriteTypeError, match=unsigned):
        lake.create_table("ns.t", [("big", "UBIGINT")])
    with pytest.raises(WriteTypeError, match="column h: Iceberg has no type for HUGEINT"):
        lake.create_table("ns.t", [("h", "HUGEINT")])
    with pytest.raises(WriteTypeError, match="column i: Iceberg has no type for INTERVAL"):
        lake.create_table("ns.t", [("i", "INTERVAL")])
    with pytest.raises(ValidationError, match="needs format version 3"):
        lake.create_table("ns.t", [("ns", "TIMESTAMP_NS")], format_version=2)
    assert lake.list_tables("ns") == ()


def test_required_columns(lake) -> None:  # type: ignore[no-untyped-def]
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    t = lake.create_table("ns.t", schema)
    assert t.schema.fields[0].required
    with pytest.raises(ValidationError, match="required column id is missing"):
        t.append(pa.table({"v": ["a"]}))
    with pytest.raises(ValidationError, match="required column id would hold 1 null"):
        t.append(pa.table({"id": pa.array([1, None], pa.int64()), "v": ["a", "b"]}))
    assert t.current_snapshot() is None
    assert [p for p in table_files(t.location) if p.endswith(".parquet")] == []


@pytest.mark.s3_twin
def test_delete_with_deletion_vectors(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
    t.append(arrow_rows(100))
    r = t.delete("id % 10 = 3")
    assert (r.operation, r.deleted_rows, r.added_delete_files, r.removed_delete_files) == ("delete", 10, 2, 0)
    entries = [e for _, e in manifest_entries(t.metadata_location) if e["data_file"]["content"] == 1]
    assert len(entries) == 2  # one DV per data file that lost rows, day % 4 in {1, 3} -> ids ending in 3
    puffins = {e["data_file"]["file_path"] for e in entries}
    assert len(puffins) == 1  # several DVs share one Puffin file
    (puffin,) = puffins
    with default_io().open_input(puffin) as reader:
        footer = read_footer(reader)
    for e in entries:
        d = e["data_file"]
        blob = next(
            b for b in footer.blobs if b.properties["referenced-data-file"] == d["referenced_data_file"]
        )
        assert (blob.offset, blob.length) == (d["content_offset"], d["content_size_in_bytes"])
        assert blob.type == "deletion-vector-v1" and blob.snapshot_id == -1 and blob.sequence_number == -1
        assert (
            blob.compression_codec is None and int(blob.properties["cardinality"]) == d["record_count"] == 5
        )
        assert d["file_format"] == "PUFFIN"
    assert [row["id"] for row in pyiceberg_rows(t.metadata_location, sort_by="id")] == [
        i for i in range(100) if i % 10 != 3
    ]

    # a second delete on the same file merges with its DV, which it replaces
    r = t.delete("id IN (7, 13, 17)")  # 13 is gone already; 7 and 17 are in the two files with DVs
    assert (r.deleted_rows, r.added_delete_files, r.removed_delete_files) == (2, 2, 2)
    statuses = [
        (e["status"], e["data_file"]["record_count"])
        for _, e in manifest_entries(t.metadata_location)
        if e["data_file"]["content"] == 1
    ]
    assert sorted(statuses) == [
        (1, 6),
        (1, 6),
        (2, 5),
        (2, 5),
    ]  # the merged DVs (5 + 1), the old ones DELETED
    r = t.delete("id = 10")  # day 19002: the first DV for that file; the manifest of the others is kept as is
    statuses = [
        (e["status"], e["data_file"]["record_count"])
        for _, e in manifest_entries(t.metadata_location)
        if e["data_file"]["content"] == 1
    ]
    assert sorted(statuses) == [(1, 1), (1, 6), (1, 6)]
    assert len(pyiceberg_rows(t.metadata_location)) == 87
    assert t.delete("id = 1000").notes == ("no rows matched",)


@pytest.mark.s3_twin
def test_delete_every_row_of_a_file_drops_it(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
    t.append(arrow_rows(40))
    t.delete("id = 0")  # a DV on the day-0 file first
    r = t.delete("day = DATE '2022-01-08'")  # 19000 = 2022-01-08: every row of that file
    assert (r.removed_data_files, r.removed_delete_files, r.added_delete_files, r.deleted_rows) == (
        1,
        1,
        0,
        9,
    )
    live = [e for _, e in manifest_entries(t.metadata_location) if e["status"] != 2]
    assert sum(1 for e in live if e["data_file"]["content"] == 0) == 3
    assert not any(e["data_file"]["content"] == 1 for e in live)
    assert sorted(r["id"] for r in pyiceberg_rows(t.metadata_location)) == [
        i for i in range(40) if i % 4 != 0
    ]
    summary = t.current_snapshot().summary
    assert (
        summary["operation"] == "delete"
        and summary["deleted-data-files"] == "1"
        and summary["removed-dvs"] == "1"
    )


@pytest.mark.s3_twin
def test_update_merge_on_read(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
    t.append(arrow_rows(20))
    r = t.update({"score": "score * 100", "name": "upper(name)"}, "id IN (2, 3, 11)")
    assert (r.operation, r.updated_rows, r.added_data_files, r.added_delete_files) == (
        "overwrite",
        3,
        2,
        2,
    )  # days 2 and 3
    rows = {row["id"]: row for row in pyiceberg_rows(t.metadata_location)}
    assert len(rows) == 20
    assert rows[2]["score"] == 100.0 and rows[2]["name"] == "N2" and rows[11]["name"] == "N11"
    assert rows[4]["score"] == 2.0 and rows[4]["name"] == "n4"
    with pytest.raises(ValidationError, match="cannot set 'nope'"):
        t.update({"nope": "1"})
    with pytest.raises(ValidationError, match="cannot evaluate predicate"):
        t.update({"score": "0"}, "no_such_column = 1")


@pytest.mark.s3_twin
def test_copy_on_write_delete_and_update(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table(
        "ns.t",
        SCHEMA,
        properties={"write.delete.mode": "copy-on-write", "write.update.mode": "copy-on-write"},
    )
    t.append(arrow_rows(50))
    r = t.delete("id < 5")
    assert (r.operation, r.added_delete_files, r.removed_data_files, r.added_data_files, r.deleted_rows) == (
        "overwrite",
        0,
        1,
        1,
        5,
    )
    r = t.update({"name": "'z'"}, "id = 10")
    assert (r.added_delete_files, r.removed_data_files, r.added_data_files, r.updated_rows) == (0, 1, 1, 1)
    rows = {row["id"]: row for row in pyiceberg_rows(t.metadata_location)}
    assert sorted(rows) == list(range(5, 50)) and rows[10]["name"] == "z" and rows[11]["name"] == "n11"
    live = [e for _, e in manifest_entries(t.metadata_location) if e["status"] != 2]
    assert all(e["data_file"]["content"] == 0 for e in live)
    r = t.delete(None)
    assert (r.operation, r.removed_data_files, r.deleted_rows) == ("delete", 1, 45)
    assert pyiceberg_rows(t.metadata_location) == []


@pytest.mark.s3_twin
def test_overwrite(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
    t.append(arrow_rows(20))
    t.delete("id = 1")
    r = t.overwrite(arrow_rows(3, 100))
    assert (r.operation, r.removed_data_files, r.removed_delete_files, r.added_data_files) == (
        "overwrite",
        4,
        1,
        3,
    )
    assert sorted(row["id"] for row in pyiceberg_rows(t.metadata_location)) == [100, 101, 102]
    r = t.overwrite(arrow_rows(2, 200), where="id >= 101")
    assert r.operation == "overwrite"
    assert sorted(row["id"] for row in pyiceberg_rows(t.metadata_location)) == [100, 200, 201]


@pytest.mark.s3_twin
def test_v2_tables_use_position_delete_files(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("ns.t", SCHEMA, partition_by=["day"], format_version=2)
    t.append(arrow_rows(40))
    t.delete("id IN (1, 2, 3)")
    t.update({"name": "'u'"}, "id = 6")
    t.delete("id = 5")
    live = [e for _, e in manifest_entries(t.metadata_location) if e["status"] != 2]
    deletes = [e["data_file"] for e in live if e["data_file"]["content"] == 1]
    assert deletes and all(
        d["file_format"] == "PARQUET" and "content_offset" not in d for d in deletes
    )  # v2 manifests
    rows = {row["id"]: row for row in pyiceberg_rows(t.metadata_location)}
    assert sorted(rows) == [i for i in range(40) if i not in (1, 2, 3, 5)] and rows[6]["name"] == "u"
    assert t.load().metadata.next_row_id is None


@pytest.mark.s3_twin
def test_upgrade_v2_to_v3_merges_position_deletes_into_a_dv(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("ns.t", SCHEMA, format_version=2)
    t.append(arrow_rows(30))
    t.delete("id IN (1, 2)")
    with pytest.raises(ValidationError, match="cannot downgrade"):
        t.upgrade_format_version(1)
    r = t.upgrade_format_version(3)
    assert r.operation == "upgrade-format-version" and t.format_version == 3
    assert t.load().metadata.next_row_id == 0
    assert len(pyiceberg_rows(t.metadata_location)) == 28
    r = t.delete("id = 7")
    assert (r.added_delete_files, r.removed_delete_files, r.deleted_rows) == (1, 1, 1)
    live = [
        e
        for _, e in manifest_entries(t.metadata_location)
        if e["status"] != 2 and e["data_file"]["content"] == 1
    ]
    assert [(d["data_file"]["file_format"], d["data_file"]["record_count"]) for d in live] == [("PUFFIN", 3)]
    assert sorted(row["id"] for row in pyiceberg_rows(t.metadata_location)) == [
        i for i in range(30) if i not in (1, 2, 7)
    ]
    snap = t.current_snapshot()
    assert (
        snap.first_row_id == 0 and snap.added_rows == 30
    )  # existing rows get row ids in the first v3 snapshot
    assert t.load().metadata.next_row_id == 30


def test_folder_catalog(tmp_path: Path) -> None:
    lake = new_lake(tmp_path / "fw", catalog="folder")
    t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
    t.append(arrow_rows(10))
    t.delete("id = 3")
    t.update({"score": "-1"}, "id = 4")
    metadata = Path(t.location) / "metadata"
    assert (metadata / "version-hint.text").read_text() == "4"
    assert t.metadata_location.endswith("v4.metadata.json")
    rows = {r["id"]: r for r in pyiceberg_rows(t.metadata_location)}
    assert sorted(rows) == [0, 1, 2, 4, 5, 6, 7, 8, 9] and rows[4]["score"] == -1.0
    assert lake.list_tables("ns") == ("t",)
    log = [e.metadata_file for e in t.load().metadata.metadata_log]
    assert [os.path.basename(p) for p in log] == ["v1.metadata.json", "v2.metadata.json", "v3.metadata.json"]
    lake.close()


def _add_equality_delete(t, ids: list[int]) -> None:  # type: ignore[no-untyped-def]
    """Commit an equality delete file on column `id` (iceduck never writes these itself)."""
    import pyarrow.parquet as pq

    from iceduck.spec.manifest import CONTENT_EQUALITY_DELETES, DataFile
    from iceduck.spec.updates import requirements_for
    from iceduck.transaction.commit import Attempt, Change
    from iceduck.transaction.metadata import now_ms, snapshot_updates
    from iceduck.transaction.snapshot import FileChanges, produce_snapshot, write_added_manifests

    path = f"{t.location}/data/eq-deletes.parquet"
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"1"})])
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}, schema=schema), sink)
    written = sink.getvalue().to_pybytes()
    mh.write_file(path, written)
    eq = DataFile(CONTENT_EQUALITY_DELETES, path, "PARQUET", 0, (), len(ids), len(written), equality_ids=(1,))

    class AddDeletes(Change):
        operation = "delete"

        def apply(self, current, attempt):  # type: ignore[no-untyped-def]
            changes = FileChanges(added_delete_files=[eq])
            folder = current.metadata_location.rsplit("/", 1)[0]
            added = write_added_manifests(
                current, changes, snapshot_id=77, schema=current.metadata.schema, metadata_dir=folder
            )
            produced = produce_snapshot(
                current, changes, snapshot_id=77, operation="delete", timestamp_ms=now_ms(),
                schema=current.metadata.schema, metadata_dir=folder, added=added,
            )  # fmt: skip
            updates = snapshot_updates(current.metadata, produced.snapshot)
            return Attempt(updates, requirements_for(current.metadata, updates))

    t._committer().commit(AddDeletes())


def test_equality_deletes_block_rewrites_but_not_deletes(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("ns.t", SCHEMA)
    t.append(arrow_rows(10))
    _add_equality_delete(t, [2, 3])
    before = t.metadata_location
    with pytest.raises(ValidationError, match="equality delete files"):
        t.update({"name": "'x'"}, "id = 4")
    t.set_properties({"write.delete.mode": "copy-on-write"})
    with pytest.raises(ValidationError, match="equality delete files"):
        t.delete("id = 4")
    assert t.load().metadata.current_snapshot_id == lake.table("ns.t").load().metadata.current_snapshot_id
    t.set_properties({"write.delete.mode": "merge-on-read"})
    r = t.delete("id IN (3, 4)")  # 3 is already deleted by the equality delete: deleting it again is harmless
    assert r.deleted_rows == 2 and before != t.metadata_location


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_columns_named_like_internal_aliases(lake, mode: str) -> None:  # type: ignore[no-untyped-def]
    # SET and WHERE use bare column names: none may collide with the writer's own join aliases.
    schema = pa.schema([("f", pa.int64()), ("p", pa.string()), ("m", pa.int64())])
    t = lake.create_table(
        "ns.aliases", schema, properties={"write.update.mode": mode, "write.delete.mode": mode}
    )
    t.append(pa.table({"f": [1, 2, 3], "p": ["a", "b", "c"], "m": [10, 20, 30]}))
    t.update({"p": "f::VARCHAR || p", "m": "m + f"}, "f >= 2")
    t.delete("f = 3")
    rows = sorted((r["f"], r["p"], r["m"]) for r in pyiceberg_rows(t.metadata_location))
    assert rows == [(1, "a", 10), (2, "2b", 22)]
