"""Other readers read what iceduck writes.

* The reference peer (DuckDB 1.5.5 + iceberg) reads iceduck's v3 tables (partitioned, after appends,
  DV deletes, updates, schema changes) with the same rows and the same `_row_id` and
  `_last_updated_sequence_number` as computed here from the metadata, independently of iceduck's
  writer: manifests read with fastavro, first row ids inherited by the spec's rules in this file,
  data files read with pyarrow, deletion vectors decoded from their blobs.
* PyIceberg 0.12 reads iceduck's v2 tables (position delete files) with the same rows.
* Deletion vectors written for the Java golden position sets equal the golden bytes.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iceduck.io.fileio import LocalFileIO
from iceduck.puffin import Roaring64, decode_deletion_vector
from iceduck.spec.manifest import CONTENT_DATA, DataFile
from iceduck.write.deletes import write_deletion_vectors_file
from tests.puffin.test_deletion_vector import GOLDENS, ICEBERG_DELETES
from tests.support import maintenance_helpers as mh
from tests.support.peer import Peer, sql_string
from tests.support.write_helpers import avro_records, new_lake, pyiceberg_rows

ROW_ID = 2147483540
LAST_UPDATED = 2147483539


def expected_rows(metadata_location: str, key: str) -> dict[Any, dict[str, Any]]:
    """Rows by `key` with `_row_id` / `_last_updated_sequence_number`, computed from the metadata."""
    md = mh.metadata(metadata_location)  # local files or S3 objects, parsed here
    snap = next(s for s in md["snapshots"] if s["snapshot-id"] == md["current-snapshot-id"])
    schema = next(s for s in md["schemas"] if s["schema-id"] == md["current-schema-id"])
    files: list[tuple[str, int | None, int]] = []  # (path, first_row_id, data sequence number)
    deleted: dict[str, set[int]] = {}
    for mf in avro_records(snap["manifest-list"]):
        running = mf.get("first_row_id")
        for entry in avro_records(mf["manifest_path"]):
            d = entry["data_file"]
            if entry["status"] == 2:
                continue
            if mf["content"] == 0:
                first = d.get("first_row_id")
                if first is None and running is not None:
                    first = running
                    running += d["record_count"]
                seq = (
                    entry["sequence_number"]
                    if entry["sequence_number"] is not None
                    else mf["sequence_number"]
                )
                files.append((d["file_path"], first, seq))
            else:
                assert d["content"] == 1 and d["file_format"].upper() == "PUFFIN", (
                    "v3 tables here only have DVs"
                )
                blob = mh.file_bytes(d["file_path"])[
                    d["content_offset"] : d["content_offset"] + d["content_size_in_bytes"]
                ]
                positions = decode_deletion_vector(blob, path=d["file_path"])
                deleted.setdefault(d["referenced_data_file"], set()).update(int(p) for p in positions)
    out: dict[Any, dict[str, Any]] = {}
    for path, first, seq in files:
        data = pq.read_table(pa.BufferReader(mh.file_bytes(path)))
        by_id = {int(f.metadata[b"PARQUET:field_id"]): f.name for f in data.schema}
        gone = deleted.get(path, set())
        columns = {f["id"]: by_id.get(f["id"]) for f in schema["fields"]}
        for pos, row in enumerate(data.to_pylist()):
            if pos in gone:
                continue
            values = {}
            for f in schema["fields"]:
                stored = columns[f["id"]]
                if stored is not None:
                    values[f["name"]] = row[stored]
                else:
                    values[f["name"]] = f.get("initial-default")
            stored_row_id = row.get(by_id[ROW_ID]) if ROW_ID in by_id else None
            stored_seq = row.get(by_id[LAST_UPDATED]) if LAST_UPDATED in by_id else None
            values["_row_id"] = (
                None if first is None else (stored_row_id if stored_row_id is not None else first + pos)
            )
            values["_last_updated_sequence_number"] = (
                None if first is None else (stored_seq if stored_seq is not None else seq)
            )
            out[values[key]] = values
    return out


def peer_rows(peer: Peer, metadata_location: str, key: str) -> dict[Any, dict[str, Any]]:
    table = peer.query_arrow(
        f"SELECT *, _row_id, _last_updated_sequence_number FROM iceberg_scan({sql_string(metadata_location)})"
    )
    return {row[key]: row for row in table.to_pylist()}


def _normalise(rows: dict[Any, dict[str, Any]], columns: list[str]) -> dict[Any, tuple[Any, ...]]:
    def norm(v: Any) -> Any:
        if isinstance(v, str) and len(v) == 10 and v[4] == "-":  # a JSON date default
            return dt.date.fromisoformat(v)
        return v

    return {k: tuple(norm(r[c]) for c in columns) for k, r in rows.items()}


@pytest.mark.peer
def test_peer_reads_v3_tables_with_row_lineage(warehouse: str, peer: Peer) -> None:
    lake = new_lake(warehouse)
    t = lake.create_table(
        "ns.services",
        [
            ("service_id", "BIGINT"),
            ("service_date", "DATE"),
            ("station", "VARCHAR"),
            ("delay_min", "INTEGER"),
        ],
        partition_by=["service_date", "bucket(4, service_id)"],
    )
    source = (
        "SELECT i AS service_id, DATE '2026-10-01' + (i % 3)::INTEGER AS service_date, 'st' || (i % 5) AS station, "
        "(i % 7)::INTEGER AS delay_min FROM range({a}, {b}) t(i)"
    )
    t.append(lake.con.sql(source.format(a=1, b=601)))
    t.append(lake.con.sql(source.format(a=601, b=901)))
    t.delete("service_date = DATE '2026-10-02' AND delay_min = 4")
    before_update = expected_rows(t.metadata_location, "service_id")
    r = t.update({"delay_min": "delay_min + 100"}, "service_id IN (7, 8, 651)")
    update_seq = r.sequence_number
    with t.update_schema() as u:
        u.add_column("platform", "int", initial_default=9)
        u.rename_column("station", "stop")
    t.append(
        lake.con.sql(source.format(a=901, b=951) + " ").project(
            "service_id, service_date, station AS stop, delay_min, 3 AS platform"
        )
    )
    t.update({"platform": "1"}, "service_id = 8")
    t.delete("service_id % 50 = 0")
    columns = [
        "service_id",
        "service_date",
        "stop",
        "delay_min",
        "platform",
        "_row_id",
        "_last_updated_sequence_number",
    ]
    expected = expected_rows(t.metadata_location, "service_id")
    got = peer_rows(peer, t.metadata_location, "service_id")
    assert _normalise(got, columns) == _normalise(expected, columns)
    # and the lineage means what the spec says
    assert len({r["_row_id"] for r in got.values()}) == len(got)
    for sid in (7, 651):
        assert got[sid]["_row_id"] == before_update[sid]["_row_id"]  # an updated row keeps its id
        assert got[sid]["_last_updated_sequence_number"] == update_seq
    assert got[8]["_last_updated_sequence_number"] == t.current_snapshot().sequence_number - 1
    untouched = 11
    assert got[untouched]["_row_id"] == before_update[untouched]["_row_id"]
    assert (
        got[untouched]["_last_updated_sequence_number"]
        == before_update[untouched]["_last_updated_sequence_number"]
    )
    assert got[11]["platform"] == 9 and got[920]["platform"] == 3  # initial default vs written value
    assert len(got) == len(pyiceberg_rows(t.metadata_location))
    lake.close()


@pytest.mark.peer
def test_peer_reads_copy_on_write_and_upgraded_tables(warehouse: str, peer: Peer) -> None:
    lake = new_lake(warehouse)
    t = lake.create_table("ns.t", [("id", "BIGINT"), ("v", "VARCHAR")], format_version=2)
    t.append(lake.con.sql("SELECT i AS id, 'v' || i AS v FROM range(100) t(i)"))
    t.delete("id < 5")  # a v2 position delete file
    t.upgrade_format_version(3)
    t.set_properties({"write.update.mode": "copy-on-write"})
    t.update({"v": "'changed'"}, "id = 50")
    t.delete("id = 60")  # merged with the position deletes into a DV... the file was rewritten: a new DV
    columns = ["id", "v", "_row_id", "_last_updated_sequence_number"]
    expected = expected_rows(t.metadata_location, "id") if _only_dvs(t.metadata_location) else None
    got = peer_rows(peer, t.metadata_location, "id")
    assert sorted(got) == [i for i in range(100) if i >= 5 and i != 60]
    assert got[50]["v"] == "changed"
    if expected is not None:
        assert _normalise(got, columns) == _normalise(expected, columns)
    lake.close()


def _only_dvs(metadata_location: str) -> bool:
    md = json.loads(mh.file_bytes(metadata_location))
    snap = next(s for s in md["snapshots"] if s["snapshot-id"] == md["current-snapshot-id"])
    for mf in avro_records(snap["manifest-list"]):
        for entry in avro_records(mf["manifest_path"]):
            d = entry["data_file"]
            if entry["status"] != 2 and d["content"] == 1 and d["file_format"] != "PUFFIN":
                return False
    return True


def test_pyiceberg_reads_v2_tables(warehouse: str) -> None:
    lake = new_lake(warehouse)
    t = lake.create_table(
        "ns.t",
        pa.schema(
            [
                ("id", pa.int64()),
                ("ts", pa.timestamp("us", tz="UTC")),
                ("name", pa.string()),
                ("amount", pa.decimal128(10, 2)),
            ]
        ),
        partition_by=["day(ts)", "truncate(2, name)"],
        format_version=2,
    )
    t.append(
        lake.con.sql(
            "SELECT i AS id, TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_hours(i * 5) AS ts, 'name' || (i % 13) AS name, "
            "(i * 1.5)::DECIMAL(10, 2) AS amount FROM range(200) t(i)"
        )
    )
    t.delete("id % 9 = 0")
    t.update({"name": "'zz'", "amount": "amount + 1"}, "id BETWEEN 100 AND 104")
    with t.update_schema() as u:
        u.add_column("note", "string")
    t.append(
        lake.con.sql(
            "SELECT 1000 AS id, TIMESTAMPTZ '2026-02-01 00:00:00+00' AS ts, 'x' AS name, 2.50 AS amount, 'new' AS note"
        )
    )
    t.delete("id = 101")
    rows = {r["id"]: r for r in pyiceberg_rows(t.metadata_location)}
    expected_ids = sorted([i for i in range(200) if i % 9 != 0 and i != 101] + [1000])
    assert sorted(rows) == expected_ids
    assert rows[102]["name"] == "zz" and rows[102]["amount"] == Decimal("154.00")  # 102 * 1.5 + 1
    assert rows[1000]["note"] == "new" and rows[5]["note"] is None
    assert rows[5]["ts"] == dt.datetime(2026, 1, 2, 1, tzinfo=dt.UTC)
    lake.close()


@pytest.mark.parametrize("name", sorted(n for n in GOLDENS if n != "empty-position-index.bin"))
def test_deletion_vectors_equal_the_java_goldens(conformance: Path, tmp_path: Path, name: str) -> None:
    _size, _length, _crc, positions = GOLDENS[name]
    golden = (conformance / ICEBERG_DELETES / name).read_bytes()
    data_file = DataFile(CONTENT_DATA, "s3://bucket/data/f.parquet", "PARQUET", 0, (), 2**40, 1)
    path, (entry,) = write_deletion_vectors_file(LocalFileIO(), str(tmp_path), [(data_file, positions)])
    blob = mh.file_bytes(path)[entry.content_offset : entry.content_offset + entry.content_size_in_bytes]
    assert blob == golden
    assert entry.record_count == positions.cardinality and entry.referenced_data_file == data_file.file_path


def test_a_table_delete_writes_the_golden_dv(conformance: Path, warehouse: str) -> None:
    lake = new_lake(warehouse)
    t = lake.create_table("ns.t", [("id", "BIGINT")])
    t.append(pa.table({"id": pa.array(range(10), pa.int64())}))
    t.delete("id IN (1, 3, 5, 7, 9)")
    ((_, entry),) = [
        (mf, e) for mf in avro_records(json.loads(mh.file_bytes(t.metadata_location))["snapshots"][-1]["manifest-list"])
        for e in avro_records(mf["manifest_path"]) if e["data_file"]["content"] == 1
    ]  # fmt: skip
    d = entry["data_file"]
    blob = mh.file_bytes(d["file_path"])[
        d["content_offset"] : d["content_offset"] + d["content_size_in_bytes"]
    ]
    assert (
        blob == (conformance / ICEBERG_DELETES / "small-alternating-values-position-index.bin").read_bytes()
    )
    assert Roaring64.from_positions([1, 3, 5, 7, 9]) == decode_deletion_vector(blob, path="x")
    lake.close()


def test_pyiceberg_and_iceduck_share_a_catalog(tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog as PyIcebergSqlCatalog

    from iceduck.lake import connect

    warehouse = tmp_path / "shared"
    lake = connect(warehouse)
    theirs = PyIcebergSqlCatalog(
        "iceduck", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}"
    )
    theirs.create_namespace("ns")
    created = theirs.create_table("ns.t", pa.schema([("id", pa.int64()), ("s", pa.string())]))
    created.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": ["a", "b", "c"]}))
    t = lake.table("ns.t")  # a PyIceberg v2 table, written on by iceduck
    t.append(pa.table({"id": pa.array([4, 5], pa.int64()), "s": ["d", "e"]}))
    t.delete("id = 2")
    theirs.load_table("ns.t").append(pa.table({"id": pa.array([6], pa.int64()), "s": ["f"]}))
    t.update({"s": "upper(s)"}, "id IN (4, 6)")
    rows = sorted(theirs.load_table("ns.t").scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows == [
        {"id": 1, "s": "a"}, {"id": 3, "s": "c"}, {"id": 4, "s": "D"}, {"id": 5, "s": "e"}, {"id": 6, "s": "F"},
    ]  # fmt: skip
    # records of live data files (deleted rows still count): 3 + 2 + the 2 updated rows rewritten
    assert t.current_snapshot().summary["total-records"] == "7"
    lake.close()
