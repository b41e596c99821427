"""The fuzzer's silent wrong-row classes, each now one clear line naming the file (issue 15).

Every case mutates one value of a real table iceduck wrote (re-encoded with fastavro, independent
of iceduck's codecs) so the file stays valid on its own, and checks the scan refuses with the file
named instead of returning other rows. Before these checks each case returned other rows."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import iceduck
from iceduck.duckdb.scan import clear_scan_caches
from iceduck.lake import Lake
from tests.support.rewrite import current_manifests, rewrite_avro

LAKE_NAMESPACES = ("s",)
# The cases edit the table's manifests and delete files in place through local paths (Path, pyarrow
# and fastavro on the warehouse folder); the checks they pin are storage-independent.
pytestmark = pytest.mark.local_only("edits the table's files in place through local paths")


def _scan(target: str) -> list[tuple[Any, ...]]:
    clear_scan_caches()  # metadata files are immutable, so cached by path: these tests rewrite them
    con = duckdb.connect()
    iceduck.register(con)
    try:
        return sorted(con.execute("SELECT * FROM iceberg_scan(?)", [target]).fetchall())
    finally:
        con.close()


def _refused(target: str, names: str) -> str:
    with pytest.raises(duckdb.Error) as e:
        _scan(target)
    message = str(e.value).splitlines()[0]
    assert names in message and "Traceback" not in message, message
    return message


def _table(lake: Lake, version: int) -> tuple[str, list[tuple[Any, ...]]]:
    lake.sql(
        f"CREATE TABLE s.t (id BIGINT, p VARCHAR) PARTITIONED BY (p) WITH ('format-version' = '{version}')"
    )
    lake.sql("INSERT INTO s.t SELECT i, 'p' || (i % 2) FROM range(20) t(i)")
    lake.sql("DELETE FROM s.t WHERE id % 3 = 0")
    md = str(lake.table("s.t").metadata_location)
    rows = _scan(md)
    assert len(rows) == 13
    return md, rows


def _manifest_list(md: str) -> Path:
    doc = json.loads(Path(md).read_text())
    snap = next(s for s in doc["snapshots"] if s["snapshot-id"] == doc["current-snapshot-id"])
    return Path(snap["manifest-list"])


def _set(field: str, value: Callable[[Any], Any], where: Callable[[dict[str, Any]], bool] = lambda r: True) -> Any:
    done = []

    def edit(rec: dict[str, Any]) -> dict[str, Any]:
        target = rec["data_file"] if field in rec.get("data_file", {}) else rec
        if not done and where(rec):
            target[field] = value(target[field])
            done.append(True)
        return rec

    return edit


@pytest.mark.parametrize("version", [2, 3])
def test_an_entry_status_changed_to_deleted_is_an_error(lake: Lake, version: int) -> None:
    md, _ = _table(lake, version)
    (data,) = current_manifests(md, content=0)

    def deleted(rec: dict[str, Any]) -> dict[str, Any]:
        if rec["data_file"]["file_path"].endswith("-00000.parquet"):
            # as a writer that spells out sequence numbers (else the null ones already give it away)
            rec.update(status=2, sequence_number=1, file_sequence_number=1)
        return rec

    rewrite_avro(data, deleted)
    _refused(md, f"{Path(data).name}: the manifest holds 1 ADDED, 0 EXISTING, 1 DELETED entries")


def test_a_lowered_or_raised_manifest_sequence_number_is_an_error(lake: Lake) -> None:
    md, rows = _table(lake, 3)
    listed = _manifest_list(md)
    original = listed.read_bytes()

    def deletes(r: dict[str, Any]) -> bool:
        return bool(r["content"] == 1)

    rewrite_avro(listed, _set("sequence_number", lambda s: s - 1, deletes))  # the DVs then skip their files
    _refused(md, f"{listed.name}: manifest list row 0 has min_sequence_number 2 above its sequence_number 1")
    listed.write_bytes(original)
    rewrite_avro(listed, _set("sequence_number", lambda s: s + 1, deletes))
    rewrite_avro(listed, _set("min_sequence_number", lambda s: s + 1, deletes))
    _refused(md, "has sequence_number 3, but the snapshot listing it has sequence number 2")
    listed.write_bytes(original)
    assert _scan(md) == rows


@pytest.mark.parametrize("other", ["x", "s3://other-bucket/f.parquet"])
def test_a_dv_of_no_live_data_file_is_an_error(lake: Lake, other: str) -> None:
    md, _ = _table(lake, 3)
    (deletes,) = current_manifests(md, content=1)
    rewrite_avro(deletes, _set("referenced_data_file", lambda _: other))
    message = _refused(md, ".puffin: the deletion vector at offset")
    assert f"references {other}, which is no live data file" in message


def test_a_dv_moved_to_another_live_data_file_is_an_error(lake: Lake) -> None:
    md, _ = _table(lake, 3)
    (deletes,) = current_manifests(md, content=1)
    with open(deletes, "rb") as f:
        targets = [r["data_file"]["referenced_data_file"] for r in fastavro.reader(f)]
    assert len(targets) == 2
    # both DVs swap their data files: each bitmap would delete the other file's positions
    swap = {targets[0]: targets[1], targets[1]: targets[0]}

    def edit(rec: dict[str, Any]) -> dict[str, Any]:
        rec["data_file"]["referenced_data_file"] = swap[rec["data_file"]["referenced_data_file"]]
        return rec

    rewrite_avro(deletes, edit)
    # the partition check of the spec's rule 3 would also keep the DV off; iceduck must not apply it
    message = _refused(md, ".puffin: the deletion vector at offset")
    assert "was written for" in message or "no live data file" in message


# -- v2 position-delete files ----------------------------------------------------------------------


def _v2_deletes(lake: Lake) -> tuple[str, list[tuple[Any, ...]], Path, Path]:
    md, rows = _table(lake, 2)
    (manifest,) = current_manifests(md, content=1)
    with open(manifest, "rb") as f:
        first = next(iter(fastavro.reader(f)))["data_file"]["file_path"]
    return md, rows, Path(manifest), Path(first)


def test_a_changed_referenced_data_file_of_a_position_delete_file_is_an_error(lake: Lake) -> None:
    md, _, manifest, _ = _v2_deletes(lake)
    with open(manifest, "rb") as f:
        a, b = (r["data_file"]["referenced_data_file"] for r in fastavro.reader(f))
    swap = {a: b, b: a}  # each delete file then names the other partition's data file

    def swapped(rec: dict[str, Any]) -> dict[str, Any]:
        rec["data_file"]["referenced_data_file"] = swap[rec["data_file"]["referenced_data_file"]]
        return rec

    rewrite_avro(manifest, swapped)
    _refused(md, f"{manifest.name}: manifest entry 0 names referenced_data_file")
    # without file_path bounds to compare, the file's own rows give it away when it is read
    def no_bounds(rec: dict[str, Any]) -> dict[str, Any]:
        for name in ("lower_bounds", "upper_bounds"):
            rec["data_file"][name] = [b for b in rec["data_file"][name] if b["key"] != 2147483546]
        return rec

    rewrite_avro(manifest, no_bounds)
    _refused(md, "-deletes.parquet: position-delete file names data files other than")


def _rewrite_parquet(path: Path, change: Callable[[list[str], list[int]], tuple[list[str], list[int]]]) -> None:
    table = pq.read_table(path)
    paths, positions = change(table.column(0).to_pylist(), table.column(1).to_pylist())
    out = pa.table([pa.array(paths, pa.string()), pa.array(positions, pa.int64())], schema=table.schema)
    pq.write_table(out, path)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda p, q: (p, q[1:2] + q[:1] + q[2:]), "is not sorted by file_path, then pos"),
        (lambda p, q: (p[1:], q[1:]), "rows, but its manifest entry says record_count"),
        (lambda p, q: (p, [*q[:-1], q[-1] + 1]), "outside the bounds its manifest entry records"),
    ],
    ids=["unsorted", "count", "bounds"],
)
def test_a_position_delete_file_that_disagrees_with_its_entry_is_an_error(
    lake: Lake, change: Any, says: str
) -> None:
    md, _, _, delete_file = _v2_deletes(lake)
    _rewrite_parquet(delete_file, change)
    message = _refused(md, f"{delete_file.name}: ")
    assert says in message


def test_a_flipped_byte_in_a_position_delete_page_is_an_error(lake: Lake) -> None:
    md, _, _, delete_file = _v2_deletes(lake)
    meta = pq.read_metadata(delete_file)
    pos = meta.row_group(0).column(1)
    start = pos.dictionary_page_offset or pos.data_page_offset
    data = bytearray(delete_file.read_bytes())
    at = start + pos.total_compressed_size - 1  # the page's last byte: its payload, past the header
    data[at] ^= 0x01
    delete_file.write_bytes(bytes(data))
    _refused(md, delete_file.name)  # the page checksum iceduck writes does not hold


def test_a_position_beyond_the_data_file_is_an_error(lake: Lake) -> None:
    md, _, manifest, delete_file = _v2_deletes(lake)
    _rewrite_parquet(delete_file, lambda p, q: (p, [*q[:-1], 10_000]))

    def wider(rec: dict[str, Any]) -> dict[str, Any]:
        if rec["data_file"]["file_path"].endswith(delete_file.name):
            for b in rec["data_file"]["upper_bounds"]:
                if b["key"] == 2147483545:
                    b["value"] = (10_000).to_bytes(8, "little")
        return rec

    rewrite_avro(manifest, wider)
    _refused(md, "deletes position 10000 of")


# -- partitions, equality deletes, sequence numbers ------------------------------------------------


def test_an_identity_partition_value_outside_the_file_bounds_is_an_error(lake: Lake) -> None:
    md, _ = _table(lake, 2)
    (data,) = current_manifests(md, content=0)

    def moved(rec: dict[str, Any]) -> dict[str, Any]:
        if rec["data_file"]["partition"]["p"] == "p0":
            rec["data_file"]["partition"]["p"] = "p7"
        return rec

    rewrite_avro(data, moved)
    _refused(md, f"{Path(data).name}: the entry of ")


EQ_TABLE = "duckdb-iceberg/data/persistent/equality_delete_extra_column/warehouse/ns/t"


def _eq_table(conformance: Path, tmp_path: Path) -> tuple[str, Path]:
    dst = tmp_path / "t"
    shutil.copytree(conformance / EQ_TABLE, dst)
    return str(dst), next((dst / "metadata").glob("482c51b1-*-m0.avro"))


def test_equality_ids_naming_a_column_the_delete_file_lacks_is_an_error(conformance: Path, tmp_path: Path) -> None:
    target, deletes = _eq_table(conformance, tmp_path)
    assert len(_scan(target)) > 0
    rewrite_avro(deletes, _set("equality_ids", lambda ids: [2]))
    _refused(target, "equality delete file has no column with field id 2")


def test_an_entry_sequence_number_below_the_manifest_minimum_is_an_error(conformance: Path, tmp_path: Path) -> None:
    target, deletes = _eq_table(conformance, tmp_path)
    rewrite_avro(deletes, _set("sequence_number", lambda s: s - 1))  # the equality delete would skip its rows
    _refused(target, f"{deletes.name}: manifest entry 0 has data sequence number 1, below")


def test_an_entry_sequence_number_above_the_manifest_sequence_number_is_an_error(
    conformance: Path, tmp_path: Path
) -> None:
    # issue 24, item 8: a data file numbered after the equality delete escaped it (its row came back)
    target, _ = _eq_table(conformance, tmp_path)
    data = next((Path(target) / "metadata").glob("d2abf39d-*-m0.avro"))
    rewrite_avro(data, _set("sequence_number", lambda s: 2**62))
    _refused(target, f"{data.name}: manifest entry 0 has data sequence number {2**62}, above the manifest's")


# -- data files that are not the file their entry describes (issue 24, item 8) --------------------


def _plain_table(lake: Lake) -> tuple[str, Path]:
    """A v3 table of one data file and no deletes: its file is read by DuckDB directly."""
    lake.sql("CREATE TABLE s.t (id BIGINT, p VARCHAR)")
    lake.sql("INSERT INTO s.t SELECT i, 'p' || (i % 2) FROM range(20) t(i)")
    md = str(lake.table("s.t").metadata_location)
    assert len(_scan(md)) == 20
    (data,) = (Path(md).parent.parent / "data").rglob("*.parquet")
    return md, data


def _ids(**fields: tuple[pa.DataType, int]) -> pa.Schema:
    return pa.schema([pa.field(n, t, metadata={b"PARQUET:field_id": str(i).encode()}) for n, (t, i) in fields.items()])


def test_a_data_file_swapped_for_one_with_more_rows_is_an_error(lake: Lake) -> None:
    md, data = _plain_table(lake)
    schema = _ids(id=(pa.int64(), 1), p=(pa.string(), 2))
    pq.write_table(pa.table({"id": range(50), "p": ["x"] * 50}, schema=schema), data)
    _refused(md, f"{data.name}: the data file holds 50 rows, but its manifest entry says record_count 20")


def test_a_data_file_lacking_a_column_its_entry_measured_is_an_error(lake: Lake) -> None:
    # the same row count, field 2 gone (another file's id 7 instead): read, p would be 20 NULLs,
    # while the entry's value_counts say the file holds 20 non-null values of it
    md, data = _plain_table(lake)
    schema = _ids(id=(pa.int64(), 1), q=(pa.string(), 7))
    pq.write_table(pa.table({"id": range(20), "q": ["z"] * 20}, schema=schema), data)
    _refused(md, f"{data.name}: the data file has no column for field 'p' (id 2), but its manifest entry counts 20")


def test_a_data_file_without_field_ids_reads_its_columns_by_position_as_java_does(lake: Lake) -> None:
    # A legal table by the reference's reading: Java gives a file without field ids (and no name
    # mapping) fallback ids by column position, so `x, y` are read as `id, p` (checked with Java
    # Iceberg 1.10.2: the same 20 rows). Row count and columns agree with the entry.
    md, data = _plain_table(lake)
    pq.write_table(pa.table({"x": pa.array(range(100, 120), pa.int64()), "y": [f"v{i}" for i in range(20)]}), data)
    assert _scan(md) == [(100 + i, f"v{i}") for i in range(20)]
