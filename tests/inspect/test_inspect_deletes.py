"""Delete inspection: puffin_blobs, dv_positions, position_deletes, dv_check.

Truth comes from outside the code under test: the positions each test chooses to delete (written by
tests/support/tablebuilder.py), PyIceberg 0.12 and the reference peer (DuckDB 1.5.5) reading the built
tables, and the Java/Go Puffin fixtures of the conformance corpus (GOLDEN_EXPECTATIONS.md, sections
3 and 4).
"""

from __future__ import annotations

import dataclasses
import shutil
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

import iceduck
from iceduck.errors import CorruptFileError
from iceduck.inspect import deletes
from iceduck.inspect.deletes import dv_check, dv_positions, position_deletes, puffin_blobs
from iceduck.puffin import write_deletion_vectors
from iceduck.spec.manifest import DataFile
from iceduck.table import Table
from tests.support.peer import Peer, sql_string
from tests.support.tablebuilder import TableBuilder

GO_DELETES = "apache-iceberg-go/table/dv/testdata/deletes"
GO_PUFFIN = "apache-iceberg-go/puffin/testdata"
JAVA_PUFFIN = "apache-iceberg/core/src/test/resources/org/apache/iceberg/puffin/v1"
LEGACY = (
    "duckdb-iceberg/data/persistent/legacy_bare_deletion_vector/warehouse/default/legacy_bare_deletion_vector"
)
LEGACY_DATA = (
    "data/persistent/legacy_bare_deletion_vector/warehouse/default/legacy_bare_deletion_vector/data/"
    "00000-0-cac6cfea-266f-44f8-9a3a-70dd8fb68014.parquet"
)
DV_FIELDS = [2147483645]  # the _pos field id the Java writer records for a DV blob

# The positions the v3 table deletes, per snapshot and data file (rows: a 10, b 20, c 30).
A_S2 = [1, 3, 5]
C_S2 = [0, 29]
A_S3 = [7]  # merged with A_S2 into one DV that replaces the snapshot-2 DV of a


@dataclass
class V3:
    builder: TableBuilder
    a: str
    b: str
    c: str

    def table(self) -> Table:
        return Table.load(self.builder.metadata_path)

    def snapshot_ids(self) -> list[int]:
        return [c.snapshot_id for c in self.builder.commits]


def build_v3(folder: Path, *, tamper: Any = None) -> V3:
    """Three data files; s1 data only; s2 DVs on a and c (one Puffin file, plus a statistics file);
    s3 a new DV for a, merged with the old one, which it replaces."""
    b = TableBuilder(folder)
    a, bb, c = b.add_data_file(10), b.add_data_file(20), b.add_data_file(30)
    b.commit()
    b.commit(dvs={a: A_S2, c: C_S2}, statistics=True, tamper=tamper)
    b.commit(dvs={a: A_S3})
    return V3(b, a, bb, c)


@pytest.fixture
def v3(tmp_path: Path) -> V3:
    return build_v3(tmp_path / "v3")


def build_v2(folder: Path) -> tuple[TableBuilder, str, str]:
    b = TableBuilder(folder, format_version=2)
    a, c = b.add_data_file(10), b.add_data_file(30)
    b.commit()
    b.commit(position_deletes={a: [1, 3], c: [0, 29]})
    b.commit(position_deletes={a: [4]})
    return b, a, c


def _rows(reader: pa.RecordBatchReader | pa.Table) -> list[dict[str, Any]]:
    table = reader.read_all() if isinstance(reader, pa.RecordBatchReader) else reader
    return table.to_pylist()


def _triples(reader: pa.RecordBatchReader) -> set[tuple[str, str, int]]:
    return {(r["delete_file_path"], r["referenced_data_file"], r["pos"]) for r in _rows(reader)}


# ---------------------------------------------------------------------------------------------
# The builder writes tables other readers agree with
# ---------------------------------------------------------------------------------------------


def test_builder_v3_tables_read_by_pyiceberg(v3: V3) -> None:
    b = v3.builder
    expected_counts = [60, 60 - len(A_S2) - len(C_S2), 60 - len(A_S2) - len(A_S3) - len(C_S2)]
    for sid, count in zip(v3.snapshot_ids(), expected_counts, strict=True):
        ids = StaticTable.from_metadata(b.metadata_path).scan(snapshot_id=sid).to_arrow()["id"].to_pylist()
        assert sorted(ids) == b.live_ids(sid)
        assert len(ids) == count


def test_builder_v2_tables_read_by_pyiceberg(tmp_path: Path) -> None:
    b, _, _ = build_v2(tmp_path / "v2")
    for sid, count in zip([c.snapshot_id for c in b.commits], [40, 36, 35], strict=True):
        ids = StaticTable.from_metadata(b.metadata_path).scan(snapshot_id=sid).to_arrow()["id"].to_pylist()
        assert sorted(ids) == b.live_ids(sid)
        assert len(ids) == count


@pytest.mark.peer
def test_builder_tables_read_by_reference_peer(tmp_path: Path, peer: Peer) -> None:
    """DuckDB 1.5.5 verifies DVs (CRC, cardinality) as it applies them: its row counts prove the DVs valid."""
    v3 = build_v3(tmp_path / "v3")
    b2, _, _ = build_v2(tmp_path / "v2")
    mixed = _build_mixed(tmp_path / "mixed")
    for b in (v3.builder, b2, mixed):
        for commit in b.commits:
            sql = (
                f"SELECT count(*), sum(id) FROM iceberg_scan({sql_string(b.metadata_path)}, "
                f"snapshot_from_id := {commit.snapshot_id})"
            )
            ids = b.live_ids(commit.snapshot_id)
            assert peer.query(sql) == [(len(ids), sum(ids))]


# ---------------------------------------------------------------------------------------------
# dv_positions
# ---------------------------------------------------------------------------------------------


def test_dv_positions_per_snapshot(v3: V3) -> None:
    t = v3.table()
    s1, s2, s3 = v3.snapshot_ids()
    p2 = v3.builder.commits[1].puffin_path
    p3 = v3.builder.commits[2].puffin_path
    assert p2 is not None and p3 is not None
    assert _triples(dv_positions(t, t.snapshot(snapshot_id=s1))) == set()
    assert _triples(dv_positions(t, t.snapshot(snapshot_id=s2))) == {
        *((p2, v3.a, p) for p in A_S2),
        *((p2, v3.c, p) for p in C_S2),
    }
    assert _triples(dv_positions(t, t.snapshot(snapshot_id=s3))) == {
        *((p3, v3.a, p) for p in A_S2 + A_S3),
        *((p2, v3.c, p) for p in C_S2),
    }
    # The builder's own record of deleted positions agrees (DVs are the only deletes here).
    for sid in (s2, s3):
        got: dict[str, set[int]] = {}
        for _, ref, pos in _triples(dv_positions(t, t.snapshot(snapshot_id=sid))):
            got.setdefault(ref, set()).add(pos)
        assert got == {k: set(v) for k, v in v3.builder.deleted(sid).items()}


def test_dv_positions_schema_and_order(v3: V3) -> None:
    t = v3.table()
    reader = dv_positions(t, t.snapshot())
    assert reader.schema == deletes.DV_POSITIONS
    table = reader.read_all()
    assert table.column("delete_file_path").type == pa.dictionary(pa.int32(), pa.string())
    # ascending positions within each DV
    by_ref: dict[str, list[int]] = {}
    for r in table.to_pylist():
        by_ref.setdefault(r["referenced_data_file"], []).append(r["pos"])
    assert all(v == sorted(v) for v in by_ref.values())


def test_dv_positions_empty_table_snapshot(v3: V3) -> None:
    t = v3.table()
    assert dv_positions(t, None).read_all().num_rows == 0
    assert position_deletes(t, None).read_all().num_rows == 0
    assert dv_check(t, None).num_rows == 0
    assert puffin_blobs(t, None).num_rows == 0


def test_moved_table_shows_recorded_paths_and_reads_the_moved_files(tmp_path: Path) -> None:
    v3 = build_v3(tmp_path / "orig" / "v3")
    recorded = {(v3.builder.commits[2].puffin_path, v3.a), (v3.builder.commits[1].puffin_path, v3.c)}
    moved = tmp_path / "elsewhere" / "v3"
    moved.parent.mkdir()
    shutil.move(str(tmp_path / "orig" / "v3"), str(moved))
    t = Table.load(str(moved / "metadata" / "v3.metadata.json"))
    rows = _rows(dv_positions(t, t.snapshot()))
    assert {(r["delete_file_path"], r["referenced_data_file"]) for r in rows} == recorded
    assert len(rows) == len(A_S2) + len(A_S3) + len(C_S2)
    assert {r["delete_file_path"] for r in _rows(position_deletes(t, t.snapshot()))} == {
        p for p, _ in recorded
    }
    assert [r["ok"] for r in _rows(dv_check(t, t.snapshot()))] == [True, True]
    assert set(puffin_blobs(t, t.snapshot()).column("file_path").to_pylist()) == {p for p, _ in recorded}


def test_dv_positions_of_go_and_java_puffin_files(conformance: Path) -> None:
    """GOLDEN_EXPECTATIONS.md section 4: Java-written DV files (via iceberg-go) and the Go writer's file."""
    single = str(conformance / GO_DELETES / "single-blob-dv.puffin")
    multi = str(conformance / GO_DELETES / "multi-blob-dv.puffin")
    go = str(conformance / GO_PUFFIN / "deletion-vector-v1.puffin")
    assert _rows(dv_positions(single)) == [
        {
            "delete_file_path": single,
            "referenced_data_file": "s3://warehouse/db/table/data/00000-0-abc.parquet",
            "pos": p,
        }
        for p in [1, 3, 5, 7, 9]
    ]
    assert [(r["referenced_data_file"], r["pos"]) for r in _rows(dv_positions(multi))] == [
        ("s3://warehouse/db/table/data/file-001.parquet", 0),
        ("s3://warehouse/db/table/data/file-001.parquet", 100),
        ("s3://warehouse/db/table/data/file-001.parquet", 200),
        ("s3://warehouse/db/table/data/file-002.parquet", 50),
        ("s3://warehouse/db/table/data/file-002.parquet", 150),
    ]
    assert [(r["referenced_data_file"], r["pos"]) for r in _rows(dv_positions(go))] == [
        ("data/test.parquet", p) for p in [1, 3, 5, 7, 9]
    ]
    # A file of other blobs has no positions.
    assert (
        dv_positions(str(conformance / JAVA_PUFFIN / "sample-metric-data-uncompressed.bin"))
        .read_all()
        .num_rows
        == 0
    )


# ---------------------------------------------------------------------------------------------
# The legacy bare DV (a DV blob without Puffin framing)
# ---------------------------------------------------------------------------------------------


def test_legacy_bare_deletion_vector(conformance: Path) -> None:
    """GOLDEN_EXPECTATIONS.md section 4: 42 bytes, no PFA1 magic; manifest offset 0, size 42, record_count 1; [1]."""
    t = Table.load(str(conformance / LEGACY))
    s = t.snapshot()
    with pytest.raises(CorruptFileError, match=r"legacy-bare-deletion-vector\.puffin.*bare.*allow_bare=True"):
        dv_positions(t, s).read_all()
    rows = _rows(dv_positions(t, s, allow_bare=True))
    assert [(r["referenced_data_file"], r["pos"]) for r in rows] == [(LEGACY_DATA, 1)]
    assert rows[0]["delete_file_path"].endswith("data/legacy-bare-deletion-vector.puffin")
    assert [r["delete_kind"] for r in _rows(position_deletes(t, s, allow_bare=True))] == ["deletion-vector"]
    with pytest.raises(CorruptFileError, match=r"Not a Puffin file.*bare deletion-vector-v1 blob"):
        puffin_blobs(t, s)
    # The file given by path: refused, or read as one DV without a referenced data file.
    path = t.resolve(rows[0]["delete_file_path"])
    with pytest.raises(CorruptFileError, match="bare deletion-vector-v1 blob"):
        dv_positions(path).read_all()
    assert _rows(dv_positions(path, allow_bare=True)) == [
        {"delete_file_path": path, "referenced_data_file": None, "pos": 1}
    ]
    # dv_check reports it: the bytes are a good DV (CRC 0xeebd85f4), the file is not Puffin.
    (check,) = _rows(dv_check(t, s))
    assert check["crc_ok"] is True and check["error"] is None
    assert (check["content_offset"], check["content_size_in_bytes"]) == (0, 42)
    assert (check["manifest_cardinality"], check["decoded_cardinality"], check["blob_cardinality"]) == (
        1,
        1,
        None,
    )
    assert check["ok"] is False
    assert "footer: Not a Puffin file" in check["problems"]


# ---------------------------------------------------------------------------------------------
# position_deletes
# ---------------------------------------------------------------------------------------------


def _build_mixed(folder: Path) -> TableBuilder:
    """v3: a position-delete file (as carried over from v2) on b, then a DV on a."""
    b = TableBuilder(folder)
    a, bb = b.add_data_file(10), b.add_data_file(20)
    b.commit()
    b.commit(position_deletes={bb: [2, 4, 19]})
    b.commit(dvs={a: [0, 9]})
    return b


def test_position_deletes_mixes_files_and_dvs(tmp_path: Path) -> None:
    b = _build_mixed(tmp_path / "mixed")
    a, bb = list(b.data_files)
    pos_file, puffin = b.commits[1].position_delete_path, b.commits[2].puffin_path
    t = Table.load(b.metadata_path)
    reader = position_deletes(t, t.snapshot())
    assert reader.schema == deletes.POSITION_DELETES
    got = {tuple(r.values()) for r in _rows(reader)}
    assert got == {
        *((pos_file, bb, p, "position-delete-file", 2) for p in [2, 4, 19]),
        *((puffin, a, p, "deletion-vector", 3) for p in [0, 9]),
    }
    ids = StaticTable.from_metadata(b.metadata_path).scan().to_arrow()["id"].to_pylist()
    assert sorted(ids) == b.live_ids()
    # Only the DV is one: dv_positions and dv_check skip the Parquet file.
    assert {r["pos"] for r in _rows(dv_positions(t, t.snapshot()))} == {0, 9}
    assert dv_check(t, t.snapshot()).column("ok").to_pylist() == [True]


def test_position_deletes_v2_per_snapshot(tmp_path: Path) -> None:
    b, a, c = build_v2(tmp_path / "v2")
    t = Table.load(b.metadata_path)
    f2, f3 = b.commits[1].position_delete_path, b.commits[2].position_delete_path
    s1, _, s3 = (c.snapshot_id for c in b.commits)
    assert _rows(position_deletes(t, t.snapshot(snapshot_id=s1))) == []
    assert _rows(position_deletes(t, t.snapshot(snapshot_id=s3))) == [
        {"delete_file_path": f2, "referenced_data_file": a, "pos": 1, "delete_kind": "position-delete-file", "sequence_number": 2},
        {"delete_file_path": f2, "referenced_data_file": a, "pos": 3, "delete_kind": "position-delete-file", "sequence_number": 2},
        {"delete_file_path": f2, "referenced_data_file": c, "pos": 0, "delete_kind": "position-delete-file", "sequence_number": 2},
        {"delete_file_path": f2, "referenced_data_file": c, "pos": 29, "delete_kind": "position-delete-file", "sequence_number": 2},
        {"delete_file_path": f3, "referenced_data_file": a, "pos": 4, "delete_kind": "position-delete-file", "sequence_number": 3},
    ]  # fmt: skip
    assert dv_positions(t, t.snapshot()).read_all().num_rows == 0
    assert dv_check(t, t.snapshot()).num_rows == 0
    assert puffin_blobs(t, t.snapshot()).num_rows == 0


def test_position_delete_columns_found_by_field_id(tmp_path: Path) -> None:
    """A writer may name the columns differently: the reserved field ids identify them."""
    import pyarrow.parquet as pq

    b, a, c = build_v2(tmp_path / "v2")
    path = b.commits[1].position_delete_path
    assert path is not None
    original = pq.read_table(path)
    renamed = original.rename_columns(["the_file", "the_position"])
    renamed = renamed.cast(
        pa.schema(
            [
                pa.field("the_file", pa.string(), False, {b"PARQUET:field_id": b"2147483546"}),
                pa.field("the_position", pa.int64(), False, {b"PARQUET:field_id": b"2147483545"}),
            ]
        )
    )
    pq.write_table(renamed, path)
    t = Table.load(b.metadata_path)
    rows = _rows(position_deletes(t, t.snapshot(snapshot_id=b.commits[1].snapshot_id)))
    assert [(r["referenced_data_file"], r["pos"]) for r in rows] == [(a, 1), (a, 3), (c, 0), (c, 29)]
    # Neither ids nor names: a clear error naming the file.
    pq.write_table(pa.table({"x": original.column(0), "y": original.column(1)}), path)
    with pytest.raises(Exception, match=r"pos-deletes\.parquet.*no file_path/pos columns"):
        position_deletes(t, t.snapshot()).read_all()


# ---------------------------------------------------------------------------------------------
# dv_check
# ---------------------------------------------------------------------------------------------


def test_dv_check_ok_on_good_tables(v3: V3) -> None:
    t = v3.table()
    _, s2, s3 = v3.snapshot_ids()
    rows = _rows(dv_check(t, t.snapshot(snapshot_id=s2)))
    assert [(r["referenced_data_file"], r["manifest_cardinality"]) for r in rows] == [(v3.a, 3), (v3.c, 2)]
    for r, card in zip(rows, [len(A_S2), len(C_S2)], strict=True):
        assert r["ok"] is True and r["crc_ok"] is True and r["error"] is None and r["problems"] is None
        assert r["blob_cardinality"] == r["decoded_cardinality"] == card
    rows3 = _rows(dv_check(t, t.snapshot(snapshot_id=s3)))
    assert sorted((r["referenced_data_file"], r["decoded_cardinality"]) for r in rows3) == [
        (v3.a, 4),
        (v3.c, 2),
    ]
    assert all(r["ok"] for r in rows3)
    # content_offset/size agree with the Puffin footer as puffin_blobs lists it
    blobs = _rows(puffin_blobs(t, t.snapshot(snapshot_id=s2)))
    dv_blobs = {
        (b["file_path"], b["offset"], b["length"]) for b in blobs if b["type"] == "deletion-vector-v1"
    }
    assert {
        (r["delete_file_path"], r["content_offset"], r["content_size_in_bytes"]) for r in rows
    } == dv_blobs


def test_dv_check_reports_a_flipped_byte(v3: V3) -> None:
    t = v3.table()
    s2 = v3.snapshot_ids()[1]
    puffin = v3.builder.commits[1].puffin_path
    assert puffin is not None
    data = bytearray(Path(puffin).read_bytes())
    # blob 0 (the DV of a) sits at offset 4; flip a byte inside its bitmap
    start, length = 4, int.from_bytes(data[4:8], "big") + 8
    data[start + 20] ^= 0xFF
    Path(puffin).write_bytes(bytes(data))
    computed = zlib.crc32(bytes(data[start + 4 : start + length - 4]))
    stored = int.from_bytes(data[start + length - 4 : start + length], "big")
    assert computed != stored

    a_row, c_row = _rows(dv_check(t, t.snapshot(snapshot_id=s2)))
    assert a_row["crc_ok"] is False and a_row["ok"] is False
    assert (
        f"Invalid CRC for deletion vector {puffin}: 0x{computed:08x}, expected 0x{stored:08x}"
        in a_row["error"]
    )
    assert a_row["decoded_cardinality"] is None
    assert c_row["ok"] is True  # the other DV in the same file is fine
    with pytest.raises(
        CorruptFileError, match=rf"{puffin}: Invalid CRC .*0x{computed:08x}, expected 0x{stored:08x}"
    ):
        dv_positions(t, t.snapshot(snapshot_id=s2)).read_all()
    with pytest.raises(CorruptFileError, match="Invalid CRC"):
        position_deletes(t, t.snapshot(snapshot_id=s2)).read_all()


def test_dv_check_reports_a_wrong_cardinality(tmp_path: Path) -> None:
    def wrong_count(d: DataFile) -> DataFile:
        return dataclasses.replace(d, record_count=d.record_count + 1) if d.referenced_data_file == c else d

    c = str((tmp_path / "v3" / "data" / "00002-data.parquet").resolve())
    v3 = build_v3(tmp_path / "v3", tamper=wrong_count)
    assert v3.c == c
    t = v3.table()
    s2 = t.snapshot(snapshot_id=v3.snapshot_ids()[1])
    a_row, c_row = _rows(dv_check(t, s2))
    assert a_row["ok"] is True
    assert (c_row["manifest_cardinality"], c_row["blob_cardinality"], c_row["decoded_cardinality"]) == (
        3,
        2,
        2,
    )
    assert c_row["ok"] is False and c_row["crc_ok"] is True and c_row["error"] is None
    assert "cardinality is 2, the manifest records record_count 3" in c_row["problems"]
    assert "decoded 2 positions, the manifest records record_count 3" in c_row["problems"]
    with pytest.raises(
        CorruptFileError, match=r"\.puffin: Invalid cardinality: .* 2 positions, expected record_count 3"
    ):
        dv_positions(t, s2).read_all()


def test_dv_check_reports_a_truncated_puffin_file(v3: V3) -> None:
    t = v3.table()
    s2 = t.snapshot(snapshot_id=v3.snapshot_ids()[1])
    puffin = v3.builder.commits[1].puffin_path
    assert puffin is not None
    full = Path(puffin).read_bytes()
    Path(puffin).write_bytes(full[:60])  # keeps the DV of a (4..50), cuts c's (50..94) and the footer
    a_row, c_row = _rows(dv_check(t, s2))
    assert a_row["decoded_cardinality"] == 3 and a_row["crc_ok"] is True and a_row["error"] is None
    assert a_row["ok"] is False
    assert f"file is 60 bytes, the manifest records file_size_in_bytes {len(full)}" in a_row["problems"]
    assert "footer: " in a_row["problems"]
    assert c_row["ok"] is False and c_row["decoded_cardinality"] is None and c_row["crc_ok"] is None
    assert "offset 50, length 44 lies outside the file (60 bytes)" in c_row["error"]
    with pytest.raises(
        CorruptFileError, match=rf"{puffin}: Deletion vector at offset 50, length 44 lies outside"
    ):
        dv_positions(t, s2).read_all()
    with pytest.raises(CorruptFileError, match=rf"{puffin}"):
        puffin_blobs(t, s2)


def test_dv_check_reports_metadata_disagreements(tmp_path: Path) -> None:
    """The manifest names another data file than the blob: referenced file mismatch, positions past its
    rows, and two DVs for one data file."""
    folder = tmp_path / "v3"
    a = str((folder / "data" / "00000-data.parquet").resolve())
    c = str((folder / "data" / "00002-data.parquet").resolve())

    def retarget(d: DataFile) -> DataFile:  # c's DV (positions 0, 29) recorded as a's (10 rows)
        return dataclasses.replace(d, referenced_data_file=a) if d.referenced_data_file == c else d

    v3 = build_v3(folder, tamper=retarget)
    t = v3.table()
    rows = _rows(dv_check(t, t.snapshot(snapshot_id=v3.snapshot_ids()[1])))
    assert [r["referenced_data_file"] for r in rows] == [a, a]
    assert [r["crc_ok"] for r in rows] == [True, True]
    assert [r["ok"] for r in rows] == [False, False]
    problems = rows[1]["problems"]
    assert f"blob 1 referenced-data-file is {c!r}, the manifest records {a!r}" in problems
    assert "position 29 is past the data file's 10 rows" in problems
    assert "2 deletion vectors reference this data file" in problems
    assert "2 deletion vectors reference this data file" in rows[0]["problems"]


def test_missing_delete_files_are_named(v3: V3, tmp_path: Path) -> None:
    t = v3.table()
    s2 = t.snapshot(snapshot_id=v3.snapshot_ids()[1])
    puffin = v3.builder.commits[1].puffin_path
    assert puffin is not None
    Path(puffin).unlink()
    with pytest.raises(FileNotFoundError, match=rf"{puffin}: file not found"):
        dv_positions(t, s2).read_all()
    with pytest.raises(FileNotFoundError, match=rf"{puffin}: file not found"):
        puffin_blobs(t, s2)
    rows = _rows(dv_check(t, s2))  # reports, does not raise
    assert [r["ok"] for r in rows] == [False, False]
    assert all(r["error"] == f"{puffin}: file not found" for r in rows)
    with pytest.raises(FileNotFoundError, match=r"nothing\.puffin: file not found"):
        dv_positions(str(tmp_path / "nothing.puffin"))  # fails at the call, not later
    b, _, _ = build_v2(tmp_path / "v2")
    path = b.commits[1].position_delete_path
    assert path is not None
    Path(path).unlink()
    t2 = Table.load(b.metadata_path)
    with pytest.raises(FileNotFoundError, match=rf"{path}: position-delete file not found"):
        position_deletes(t2, t2.snapshot()).read_all()


# ---------------------------------------------------------------------------------------------
# puffin_blobs
# ---------------------------------------------------------------------------------------------


def test_puffin_blobs_of_go_and_java_fixtures(conformance: Path) -> None:
    single = str(conformance / GO_DELETES / "single-blob-dv.puffin")
    (row,) = _rows(puffin_blobs(single))
    ref = "s3://warehouse/db/table/data/00000-0-abc.parquet"
    assert row == {
        "file_path": single,
        "blob_index": 0,
        "type": "deletion-vector-v1",
        "fields": DV_FIELDS,
        "snapshot_id": -1,
        "sequence_number": -1,
        "offset": 4,
        "length": 50,
        "compression_codec": None,
        "properties": [("referenced-data-file", ref), ("cardinality", "5")],
        "referenced_data_file": ref,
        "cardinality": 5,
        "file_size": 384,
    }
    multi = _rows(puffin_blobs(str(conformance / GO_DELETES / "multi-blob-dv.puffin")))
    assert [(r["blob_index"], r["offset"], r["length"], r["cardinality"], r["file_size"]) for r in multi] == [
        (0, 4, 46, 3, 639),
        (1, 50, 44, 2, 639),
    ]
    assert [r["referenced_data_file"] for r in multi] == [
        "s3://warehouse/db/table/data/file-001.parquet",
        "s3://warehouse/db/table/data/file-002.parquet",
    ]
    (go,) = _rows(puffin_blobs(str(conformance / GO_PUFFIN / "deletion-vector-v1.puffin")))
    assert (go["fields"], go["referenced_data_file"], go["cardinality"], go["file_size"]) == (
        [],
        "data/test.parquet",
        5,
        314,
    )
    assert (go["snapshot_id"], go["sequence_number"], go["compression_codec"], len(go["properties"])) == (
        -1,
        -1,
        None,
        2,
    )
    # Java's statistics samples (section 3): other blob types, zstd, no properties.
    zstd = _rows(puffin_blobs(str(conformance / JAVA_PUFFIN / "sample-metric-data-compressed-zstd.bin")))
    assert [
        (
            r["type"],
            r["fields"],
            r["snapshot_id"],
            r["sequence_number"],
            r["offset"],
            r["length"],
            r["compression_codec"],
        )
        for r in zstd
    ] == [("some-blob", [1], 2, 1, 4, 22, "zstd"), ("some-other-blob", [2], 2, 1, 26, 77, "zstd")]
    assert [(r["properties"], r["referenced_data_file"], r["cardinality"], r["file_size"]) for r in zstd] == [
        ([], None, None, 417)
    ] * 2
    assert puffin_blobs(str(conformance / JAVA_PUFFIN / "empty-puffin-uncompressed.bin")).num_rows == 0


def test_puffin_blobs_of_a_table_snapshot(v3: V3) -> None:
    t = v3.table()
    s1, s2, s3 = v3.snapshot_ids()
    p2, p3 = v3.builder.commits[1].puffin_path, v3.builder.commits[2].puffin_path
    stats = v3.builder.commits[1].statistics_path
    assert puffin_blobs(t, t.snapshot(snapshot_id=s1)).num_rows == 0
    table = puffin_blobs(t, t.snapshot(snapshot_id=s2))
    assert table.schema == deletes.PUFFIN_BLOBS
    rows = _rows(table)
    assert [
        (r["file_path"], r["blob_index"], r["type"], r["referenced_data_file"], r["cardinality"])
        for r in rows
    ] == [
        (p2, 0, "deletion-vector-v1", v3.a, 3),
        (p2, 1, "deletion-vector-v1", v3.c, 2),
        (stats, 0, "apache-datasketches-theta-v1", None, None),
        (stats, 1, "apache-datasketches-theta-v1", None, None),
    ]
    assert [(r["snapshot_id"], r["sequence_number"], r["compression_codec"]) for r in rows] == [
        (-1, -1, None),
        (-1, -1, None),
        (s2, 2, "zstd"),
        (s2, 2, None),
    ]
    assert rows[2]["properties"] == [("ndv", "42")]
    assert p2 is not None
    assert {r["file_size"] for r in rows[:2]} == {Path(p2).stat().st_size}
    # s3: the statistics file belongs to s2; both DV files are referenced (p2 still holds c's DV),
    # and every blob of a referenced file is listed, the replaced DV of a included.
    rows3 = _rows(puffin_blobs(t, t.snapshot(snapshot_id=s3)))
    assert sorted((r["file_path"], r["referenced_data_file"]) for r in rows3) == sorted(
        [(p2, v3.a), (p2, v3.c), (p3, v3.a)]
    )


# ---------------------------------------------------------------------------------------------
# Through SQL
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    return iceduck.register(duckdb.connect())


def test_sql_functions(v3: V3, con: duckdb.DuckDBPyConnection) -> None:
    md = sql_string(v3.builder.metadata_path)
    s2 = v3.snapshot_ids()[1]
    types = con.execute(f"DESCRIBE SELECT * FROM iceberg_dv_positions({md})").fetchall()
    assert [(name, t) for name, t, *_ in types] == [
        ("delete_file_path", "VARCHAR"),
        ("referenced_data_file", "VARCHAR"),
        ("pos", "BIGINT"),
    ]
    rows = con.execute(
        f"SELECT referenced_data_file, list(pos ORDER BY pos) FROM iceberg_dv_positions({md}, snapshot_id := {s2}) "
        "GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert rows == [(v3.a, A_S2), (v3.c, C_S2)]
    assert con.execute(
        f"SELECT delete_kind, sequence_number, count(*) FROM iceberg_position_deletes({md}) GROUP BY ALL ORDER BY ALL"
    ).fetchall() == [("deletion-vector", 2, len(C_S2)), ("deletion-vector", 3, len(A_S2) + len(A_S3))]
    assert con.execute(
        f"SELECT bool_and(ok), sum(decoded_cardinality) FROM iceberg_dv_check({md})"
    ).fetchall() == [(True, len(A_S2) + len(A_S3) + len(C_S2))]
    assert con.execute(
        f"SELECT count(*) FILTER (type = 'deletion-vector-v1'), count(*) FROM iceberg_puffin_blobs({md}, snapshot_id := {s2})"
    ).fetchall() == [(2, 4)]


def test_sql_error_names_the_puffin_file(v3: V3, con: duckdb.DuckDBPyConnection) -> None:
    puffin = v3.builder.commits[2].puffin_path
    assert puffin is not None
    data = bytearray(Path(puffin).read_bytes())
    data[-60] ^= 0x01  # inside the footer JSON: the DV itself is still fine
    data[30] ^= 0xFF  # inside the DV bitmap
    Path(puffin).write_bytes(bytes(data))
    with pytest.raises(duckdb.Error, match=rf"{puffin}.*Invalid CRC"):
        con.execute(
            f"SELECT count(*) FROM iceberg_dv_positions({sql_string(v3.builder.metadata_path)})"
        ).fetchall()


# ---------------------------------------------------------------------------------------------
# Scale: 20 million positions stream into DuckDB
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_twenty_million_positions_stream_into_duckdb(tmp_path: Path, con: duckdb.DuckDBPyConnection) -> None:
    n = 20_000_000
    gaps = np.random.default_rng(7).integers(1, 600, n, dtype=np.int64)  # mean gap 300: two 2^32 keys
    positions = np.cumsum(gaps) - 1
    path = tmp_path / "big.puffin"
    data, (blob,) = write_deletion_vectors([("s3://bucket/db/t/data/big.parquet", positions)])
    path.write_bytes(data)
    assert blob.cardinality == n
    del data
    expected = (n, int(positions.sum()), int(positions[0]), int(positions[-1]))

    # Python side: bounded batches, more than one (it streams), the right total.
    sizes = [b.num_rows for b in dv_positions(str(path))]
    assert len(sizes) > 1 and max(sizes) <= deletes.BATCH_ROWS and sum(sizes) == n

    sql = f"SELECT count(*), sum(pos), min(pos), max(pos) FROM iceberg_dv_positions({sql_string(str(path))})"
    start = time.perf_counter()
    result = con.execute(sql).fetchall()
    seconds = time.perf_counter() - start
    assert result == [expected]
    start = time.perf_counter()
    (files,) = con.execute(
        f"SELECT count(DISTINCT referenced_data_file), count(*) FROM iceberg_dv_positions({sql_string(str(path))})"
    ).fetchall()
    seconds_paths = time.perf_counter() - start
    assert files == (1, n)
    print(
        f"\n20M DV positions into DuckDB: count/sum {seconds:.2f} s, with the path column {seconds_paths:.2f} s"
    )
