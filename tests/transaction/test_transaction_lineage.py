"""Row lineage (v3): the spec's worked example, and what rewrites keep.

The example ("Row lineage example" in the table spec): a table with next-row-id 1000 and an existing
manifest (75 added rows, first_row_id 925) commits a snapshot with manifests added1 (100 added,
25 existing: EXISTING data1 with first_row_id 800, ADDED data2 and data3 of 50 rows), added2
(0 added, 100 existing) and added3 (125 added, 25 existing). Expected: snapshot first-row-id 1000,
manifest first_row_ids 1000 / 1125 / 1225, data2 at 1000 and data3 at 1050 by inheritance, data1
kept at 800, next-row-id 1375.
"""

from __future__ import annotations

from iceduck.io.paths import join_path
from iceduck.spec.manifest import (
    CONTENT_DATA,
    MANIFEST_CONTENT_DATA,
    STATUS_ADDED,
    STATUS_EXISTING,
    DataFile,
    ManifestEntry,
    read_manifest,
)
from iceduck.spec.manifest_writer import summarize_manifest, write_manifest
from iceduck.spec.types import schema_to_json
from iceduck.spec.updates import apply_updates
from iceduck.transaction.metadata import snapshot_updates
from iceduck.transaction.snapshot import AddedManifests, FileChanges, produce_snapshot
from iceduck.write.types import LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID, ROW_ID_FIELD_ID
from tests.support import maintenance_helpers as mh
from tests.support.write_helpers import SCHEMA, arrow_rows, avro_records, new_lake


def _file(path: str, rows: int, first_row_id: int | None = None) -> DataFile:
    return DataFile(CONTENT_DATA, path, "PARQUET", 0, (), rows, 100, first_row_id=first_row_id)


def test_spec_row_lineage_example(warehouse: str) -> None:
    lake = new_lake(warehouse)
    t = lake.create_table("ns.t", SCHEMA)
    t.append(arrow_rows(925))
    t.append(arrow_rows(75, 925))  # the "existing" manifest: 75 added rows at first_row_id 925
    base = t.load()
    assert base.metadata.next_row_id == 1000
    md = base.metadata
    folder = base.metadata_location.rsplit("/", 1)[0]
    snapshot_id = 42

    def manifest(name: str, entries: list[ManifestEntry]) -> object:
        data = write_manifest(
            entries, format_version=3, schema_json=schema_to_json(md.schema), partition_spec_json=[], partition_spec_id=0,
            partition_type=md.default_spec.partition_type(md.schema), snapshot_id=snapshot_id,
        )  # fmt: skip
        path = join_path(folder, name)
        mh.write_file(path, data)
        return summarize_manifest(
            entries, manifest_path=path, manifest_length=len(data), partition_spec_id=0,
            partition_type=md.default_spec.partition_type(md.schema), content=MANIFEST_CONTENT_DATA,
            added_snapshot_id=snapshot_id,
        )  # fmt: skip

    existing = ManifestEntry(STATUS_EXISTING, 7, 1, 1, _file("data1", 25, 800))
    added1 = manifest(
        "added1.avro",
        [
            existing,
            ManifestEntry(STATUS_ADDED, None, None, None, _file("data2", 50)),
            ManifestEntry(STATUS_ADDED, None, None, None, _file("data3", 50)),
        ],
    )
    added2 = manifest("added2.avro", [ManifestEntry(STATUS_EXISTING, 7, 1, 1, _file("data4", 100))])
    added3 = manifest(
        "added3.avro",
        [
            ManifestEntry(STATUS_ADDED, None, None, None, _file("data5", 125)),
            ManifestEntry(STATUS_EXISTING, 7, 1, 1, _file("data6", 25)),
        ],
    )
    produced = produce_snapshot(
        base, FileChanges(), snapshot_id=snapshot_id, operation="append", timestamp_ms=md.last_updated_ms + 1,
        schema=md.schema, metadata_dir=folder, added=AddedManifests(snapshot_id, [added1, added2, added3]),  # type: ignore[list-item]
    )  # fmt: skip
    snap = produced.snapshot
    assert snap.first_row_id == 1000
    rows = {r["manifest_path"].rsplit("/", 1)[-1]: r for r in avro_records(snap.manifest_list)}
    assert {
        name: (r["added_rows_count"], r["existing_rows_count"], r["first_row_id"])
        for name, r in rows.items()
        if name.startswith("added")
    } == {
        "added1.avro": (100, 25, 1000),
        "added2.avro": (0, 100, 1125),
        "added3.avro": (125, 25, 1225),
    }
    existing_rows = [r for name, r in rows.items() if not name.startswith("added")]
    assert sorted((r["added_rows_count"], r["first_row_id"]) for r in existing_rows) == [(75, 925), (925, 0)]
    assert produced.next_row_id == 1375 and snap.added_rows == 375
    assert apply_updates(md, snapshot_updates(md, snap)).next_row_id == 1375
    # data files inherit first_row_id from their manifest
    listed = {
        m.manifest_path.rsplit("/", 1)[-1]: m
        for m in base.manifests(snap)
        if m.manifest_path.endswith("added1.avro")
    }
    entries = read_manifest(
        mh.file_bytes(listed["added1.avro"].manifest_path), path="added1", manifest=listed["added1.avro"]
    ).entries
    assert [(e.data_file.file_path, e.data_file.first_row_id) for e in entries] == [
        ("data1", 800),
        ("data2", 1000),
        ("data3", 1050),
    ]
    lake.close()


def test_rewrites_keep_row_ids_and_reset_updated_sequence_numbers(warehouse: str) -> None:
    lake = new_lake(warehouse)
    t = lake.create_table("ns.t", SCHEMA, properties={"write.update.mode": "copy-on-write"})
    t.append(arrow_rows(10))  # seq 1, row ids 0..9
    t.append(arrow_rows(10, 10))  # seq 2, row ids 10..19
    r = t.update({"score": "-score"}, "id = 3")  # seq 3: rewrites the first file
    assert r.sequence_number == 3
    table = t.load()
    snap = table.metadata.current_snapshot()
    added = [e for e in table.entries(snap) if e.snapshot_id == snap.snapshot_id]
    (new_file,) = added
    data = mh.read_parquet(new_file.data_file.file_path)
    # the reserved lineage columns are in the rewritten file, by field id
    ids = {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in data.schema}
    assert (
        ids["_row_id"] == ROW_ID_FIELD_ID
        and ids["_last_updated_sequence_number"] == LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID
    )
    by_id = {row["id"]: row for row in data.to_pylist()}
    assert sorted(by_id) == list(range(10))
    for i, row in by_id.items():
        assert row["_row_id"] == i  # every moved row keeps its row id
        # the updated row inherits the new file's sequence number (null); the others keep theirs
        assert row["_last_updated_sequence_number"] == (None if i == 3 else 1)
    assert new_file.sequence_number == 3
    # row ids of the rewritten file's own manifest range are never reused: next-row-id moved past them
    assert table.metadata.next_row_id == 30
    lake.close()


def test_appended_files_carry_no_lineage_columns(warehouse: str) -> None:
    lake = new_lake(warehouse)
    t = lake.create_table("ns.t", SCHEMA)
    t.append(arrow_rows(3))
    (entry,) = list(t.load().entries(t.current_snapshot()))
    names = mh.read_parquet(entry.data_file.file_path).schema.names
    assert names == ["id", "day", "name", "score"]
    assert entry.data_file.first_row_id == 0
    lake.close()
