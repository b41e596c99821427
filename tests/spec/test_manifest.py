"""Manifest lists and manifests: the conformance corpus, PyIceberg as independent reader, round trips,
inheritance rules, writing, and refusal of damaged or encrypted files."""

from __future__ import annotations

import gzip
import io
import json
import math
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iceduck.errors import (
    CorruptFileError,
    IcebergError,
    InvalidMetadataError,
    UnsupportedFormatError,
    ValidationError,
)
from iceduck.spec import _avro_schemas
from iceduck.spec._avro_schemas import parse_header
from iceduck.spec.manifest import (
    STATUS_ADDED,
    STATUS_DELETED,
    STATUS_EXISTING,
    UNASSIGNED_SEQUENCE_NUMBER,
    DataFile,
    ManifestEntry,
    ManifestFile,
    PartitionFieldSummary,
    iter_manifest_rows,
    read_manifest,
    read_manifest_list,
    read_manifests,
    write_manifest_list,
)
from iceduck.spec.manifest_writer import summarize_manifest, write_manifest
from iceduck.spec.types import (
    BINARY,
    BOOLEAN,
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_NS,
    TIMESTAMPTZ,
    TIMESTAMPTZ_NS,
    UUID,
    DecimalType,
    FixedType,
    IcebergType,
    NestedField,
    StructType,
)

# legacy_v1's category values, from DuckDB's expected query rows (alpha, beta, alpha).
BARE_V1_PARTITIONS = [("alpha",), ("beta",)]

SCHEMA_JSON = {
    "type": "struct",
    "schema-id": 3,
    "fields": [
        {"id": 1, "name": "id", "required": False, "type": "long"},
        {"id": 2, "name": "name", "required": False, "type": "string"},
    ],
}

# ---------------------------------------------------------------------------------------------
# The duckdb-iceberg corpus: every manifest list and manifest its tables reference
# ---------------------------------------------------------------------------------------------


def _strip(path: str) -> str:
    if path.startswith("file://"):
        path = path[len("file://") :]
    while path.startswith("./"):
        path = path[2:]
    return path.rstrip("/")


def _map_path(location: str, recorded: str, table_dir: Path) -> Path:
    """Where a path recorded in a moved table's metadata lives now: the part after the table's
    recorded location, joined to the table folder (or, for paths outside that location, the part
    from the metadata folder on)."""
    loc, rec = _strip(location), _strip(recorded)
    if rec.startswith(loc + "/"):
        return table_dir / rec[len(loc) + 1 :]
    return table_dir / "metadata" / rec.rsplit("/metadata/", 1)[1]


@dataclass
class CorpusList:
    path: Path
    table_dir: Path
    location: str


@dataclass
class Corpus:
    lists: dict[Path, CorpusList]
    bare_manifests: dict[Path, tuple[Path, str]]  # v1 snapshots listing manifests directly
    missing: set[Path]


@pytest.fixture(scope="module")
def corpus(conformance: Path) -> Corpus:
    root = conformance / "duckdb-iceberg" / "data" / "persistent"
    lists: dict[Path, CorpusList] = {}
    bare: dict[Path, tuple[Path, str]] = {}
    missing: set[Path] = set()
    for md_path in sorted(root.rglob("*metadata.json")):
        raw = md_path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        try:
            md = json.loads(raw)
        except ValueError:
            continue  # bad_data/ holds deliberately broken JSON
        if not isinstance(md, dict) or "format-version" not in md:
            continue
        table_dir = md_path.parent.parent
        for snap in md.get("snapshots", []):
            if snap.get("manifest-list"):
                p = _map_path(md["location"], snap["manifest-list"], table_dir)
                if p.exists():
                    lists[p] = CorpusList(p, table_dir, md["location"])
                else:
                    missing.add(p)
            for m in snap.get("manifests", []):
                bare[_map_path(md["location"], m, table_dir)] = (table_dir, md["location"])
    return Corpus(lists, bare, missing)


def test_corpus_is_complete(corpus: Corpus) -> None:
    # 40 tables; one intermediate snapshot of equality_deletes/mytable points at a list the corpus
    # does not ship (its successor is present).
    assert len(corpus.lists) >= 60
    assert [p.name for p in corpus.missing] == [
        "snap-7342794868382145167-1-34f7dec7-90c5-4cd5-b158-5782b73fc010.avro"
    ]
    assert len(corpus.bare_manifests) == 1


def _manifests_of(entry: CorpusList) -> Iterator[tuple[ManifestFile, Path]]:
    for m in read_manifest_list(entry.path.read_bytes(), path=str(entry.path)):
        yield m, _map_path(entry.location, m.manifest_path, entry.table_dir)


def test_every_corpus_manifest_list_and_manifest_reads(corpus: Corpus) -> None:
    n_manifests = 0
    for entry in corpus.lists.values():
        for m, mpath in _manifests_of(entry):
            manifest = read_manifest(mpath.read_bytes(), path=str(mpath), manifest=m)
            n_manifests += 1
            entries = manifest.entries
            # The list's own counts, written by Spark / PyIceberg / DuckDB, describe the manifest.
            if m.added_files_count is not None:
                by_status = [sum(1 for e in entries if e.status == s) for s in (1, 0, 2)]
                assert by_status == [m.added_files_count, m.existing_files_count, m.deleted_files_count], (
                    mpath
                )
                # Row totals only: merch_v1 (a repro of a writer bug) books existing rows as added.
                rows = sum(e.data_file.record_count for e in entries)
                assert rows == m.added_rows_count + m.existing_rows_count + m.deleted_rows_count, mpath  # type: ignore[operator]
            for e in entries:
                assert e.snapshot_id is not None and e.sequence_number is not None
                assert e.file_sequence_number is not None
                assert e.data_file.spec_id == m.partition_spec_id
                assert (e.data_file.content == 0) == (m.content == 0), mpath
                if m.partitions is not None:
                    assert len(e.data_file.partition) == len(m.partitions)
            if manifest.metadata.format_version >= 2 and m.sequence_number > 0:
                live = [e.sequence_number for e in entries if e.status != STATUS_DELETED]
                if live:
                    assert min(live) == m.min_sequence_number, mpath  # type: ignore[type-var]
    assert n_manifests >= 100
    for mpath in corpus.bare_manifests:
        manifest = read_manifest(mpath.read_bytes(), path=str(mpath), manifest=_mf(sequence_number=0))
        assert manifest.metadata.format_version == 1
        # DuckDB's iceberg_metadata on this table: data and file sequence numbers 0.
        assert {(e.sequence_number, e.file_sequence_number) for e in manifest.entries} == {(0, 0)}
        assert sorted(e.data_file.partition for e in manifest.entries) == BARE_V1_PARTITIONS


def test_manifests_decoded_together_read_as_they_do_alone(
    corpus: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    # read_manifests decodes the manifests sharing an Avro schema in one polars call and splits the
    # rows back: every corpus manifest, batched per table and all in one batch (schemas mixed),
    # must read exactly as it does alone, and as fastavro reads it.
    polars = [True]
    monkeypatch.setattr(_avro_schemas, "use_polars", lambda size: polars[0])
    batched: list[int] = []
    batch = _avro_schemas._polars_batch

    def spy(meta: Any, sync: bytes, blocks: list[Any]) -> Any:
        batched.append(len(blocks))
        return batch(meta, sync, blocks)

    monkeypatch.setattr(_avro_schemas, "_polars_batch", spy)
    everything: list[tuple[bytes, str | None, ManifestFile | None]] = []
    for entry in corpus.lists.values():
        items: list[tuple[bytes, str | None, ManifestFile | None]] = [
            (mpath.read_bytes(), str(mpath), m) for m, mpath in _manifests_of(entry)
        ]
        everything += items
        alone = [read_manifest(data, path=path, manifest=m) for data, path, m in items]
        together = read_manifests(items)
        assert [(m.metadata, m.entries) for m in together] == [(m.metadata, m.entries) for m in alone]
    alone = [read_manifest(data, path=path, manifest=m) for data, path, m in everything]
    together = read_manifests(everything)
    assert [m.entries for m in together] == [m.entries for m in alone]
    assert len(everything) >= 100 and max(batched) >= 10
    # Against fastavro's reading: entries asked for last-first (the first few entries a column is
    # asked for are read from Arrow one by one, the rest after converting the column).
    polars[0] = False
    fastavro_read = [read_manifest(data, path=path, manifest=m) for data, path, m in everything]
    polars[0] = True
    together = read_manifests(everything)
    for m, truth in zip(together, fastavro_read, strict=True):
        assert [m.entry(i) for i in reversed(range(len(m)))] == list(reversed(truth.entries))


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_a_damaged_manifest_in_a_batch_fails_as_it_does_alone(
    codec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every byte of the middle manifest flipped in turn: decoded with its neighbours, it gives the
    # entries it gives alone or the same one-line error naming it (never a neighbour's rows or name).
    monkeypatch.setattr(_avro_schemas, "use_polars", lambda size: True)
    part = StructType((NestedField(1000, "p", INT, required=False),))

    def manifest(k: int) -> bytes:
        entries = [
            ManifestEntry(STATUS_ADDED, 42, None, None, _data_file(f"f{k}-{i}.parquet", partition=(i,), value_counts={1: i}))
            for i in range(4)
        ]  # fmt: skip
        spec = [{"name": "p", "transform": "identity", "source-id": 1, "field-id": 1000}]
        return write_manifest(
            entries, format_version=2, schema_json=SCHEMA_JSON, partition_spec_json=spec, partition_spec_id=0,
            partition_type=part, snapshot_id=42, codec=codec,
        )  # fmt: skip

    def outcome(read: Any) -> Any:
        try:
            return [m.entries for m in read()]
        except IcebergError as e:
            assert "\n" not in str(e) and "m1.avro" in str(e)
            return str(e)

    first, middle, last = (manifest(k) for k in range(3))
    _, start = parse_header(middle, path=None, what="manifest")
    errors = 0
    for pos in range(start, len(middle)):
        damaged = bytearray(middle)
        damaged[pos] ^= 0xFF
        items = [(first, "m0.avro", None), (bytes(damaged), "m1.avro", None), (last, "m2.avro", None)]
        together = outcome(lambda: read_manifests(items))  # noqa: B023
        alone = outcome(lambda: [read_manifest(d, path=p, manifest=m) for d, p, m in items])  # noqa: B023
        assert together == alone, pos
        errors += isinstance(together, str)
    assert errors > 0


def test_corpus_partition_values_are_internal(corpus: Corpus) -> None:
    """dates, times, timestamps as ints, decimals as Decimal, fixed as bytes (architecture.md)."""
    seen: dict[str, set[Any]] = {}
    for entry in corpus.lists.values():
        key = next((p for p in entry.table_dir.parts if p.startswith(("partition_", "hive_"))), None)
        if key is None:
            continue
        for m, mpath in _manifests_of(entry):
            for e in read_manifest(mpath.read_bytes(), path=str(mpath), manifest=m).entries:
                seen.setdefault(key, set()).update(e.data_file.partition)
    # Expected values from DuckDB's own tests on these tables (EXPECTED_RESULTS_FROM_DUCKDB_TESTS.json)
    # and the calendar: 2024-01-03 is day 19725.
    assert {19723, 19724, 19725}.issubset(seen["hive_partitioned_table"])
    assert seen["partition_timestamp"] == {1684161045000000, 1692695720000000}
    assert seen["partition_time"] == {45296000000, 30069000000}  # 12:34:56 and 08:21:09
    assert Decimal("123456789.45678901234567890123456") in seen["partition_decimal_hugeint"]
    assert all(isinstance(v, Decimal) for v in seen["partition_decimal_hugeint"] if v is not None)
    assert all(isinstance(v, bytes) and len(v) == 11 for v in seen["partition_fixed_length_binary"])
    assert all(isinstance(v, int) for v in seen["partition_timestamptz"])


# ---------------------------------------------------------------------------------------------
# PyIceberg as an independent reader of the same files
# ---------------------------------------------------------------------------------------------


def _pyiceberg_io(location: str, table_dir: Path) -> Any:
    from pyiceberg.io.pyarrow import PyArrowFileIO

    class RelocatingIO(PyArrowFileIO):
        """Maps the paths a moved corpus table recorded onto its folder, like the tests above."""

        def new_input(self, path: str) -> Any:
            return super().new_input(
                path if Path(path).is_file() else str(_map_path(location, path, table_dir))
            )

    return RelocatingIO()


def _norm_map(m: Any) -> dict[int, Any]:
    return dict(m or {})


def _compare_manifest_files(ours: ManifestFile, theirs: Any, where: str) -> None:
    assert ours.manifest_path == theirs.manifest_path, where
    assert ours.manifest_length == theirs.manifest_length, where
    assert ours.partition_spec_id == theirs.partition_spec_id, where
    assert ours.content == int(theirs.content), where
    assert ours.sequence_number == (theirs.sequence_number or 0), where
    assert ours.min_sequence_number == (theirs.min_sequence_number or 0), where
    assert ours.added_snapshot_id == theirs.added_snapshot_id, where
    for name in (
        "added_files_count",
        "existing_files_count",
        "deleted_files_count",
        "added_rows_count",
        "existing_rows_count",
        "deleted_rows_count",
    ):
        assert getattr(ours, name) == getattr(theirs, name), (where, name)
    ours_parts = [
        (p.contains_null, p.contains_nan, p.lower_bound, p.upper_bound) for p in ours.partitions or ()
    ]
    theirs_parts = [
        (p.contains_null, p.contains_nan, p.lower_bound, p.upper_bound) for p in theirs.partitions or ()
    ]
    assert ours_parts == theirs_parts, where
    assert ours.key_metadata == theirs.key_metadata, where


def _compare_entries(ours: list[ManifestEntry], theirs: list[Any], where: str) -> None:
    assert len(ours) == len(theirs), where
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        w = f"{where} entry {i}"
        assert a.status == int(b.status), w
        assert a.snapshot_id == b.snapshot_id, w
        assert a.sequence_number == b.sequence_number, w
        assert a.file_sequence_number == b.file_sequence_number, w
        d, e = a.data_file, b.data_file
        assert d.content == int(e.content), w
        assert d.file_path == e.file_path, w
        assert (
            d.file_format.upper()
            == str(e.file_format.value if hasattr(e.file_format, "value") else e.file_format).upper()
        ), w
        assert list(d.partition) == list(e.partition), w
        assert d.record_count == e.record_count, w
        assert d.file_size_in_bytes == e.file_size_in_bytes, w
        assert d.spec_id == e.spec_id, w
        for name in ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts"):
            assert dict(getattr(d, name)) == _norm_map(getattr(e, name)), (w, name)
        assert dict(d.lower_bounds) == _norm_map(e.lower_bounds), w
        assert dict(d.upper_bounds) == _norm_map(e.upper_bounds), w
        assert d.key_metadata == e.key_metadata, w
        assert d.split_offsets == (None if e.split_offsets is None else tuple(e.split_offsets)), w
        assert d.equality_ids == (None if not e.equality_ids else tuple(e.equality_ids)) or (
            d.equality_ids == () and not e.equality_ids
        ), w
        assert d.sort_order_id == e.sort_order_id, w


def test_corpus_matches_pyiceberg(corpus: Corpus) -> None:
    from pyiceberg.manifest import read_manifest_list as py_read_list

    compared_lists = compared_manifests = 0
    pyiceberg_refused: list[str] = []
    for entry in corpus.lists.values():
        pyio = _pyiceberg_io(entry.location, entry.table_dir)
        try:
            theirs = list(py_read_list(pyio.new_input(str(entry.path))))
        except Exception as e:  # PyIceberg cannot read some writers' files (BigQuery's nullable unions)
            pyiceberg_refused.append(f"{entry.path.name}: {e!r}")
            continue
        ours = read_manifest_list(entry.path.read_bytes(), path=str(entry.path))
        assert len(ours) == len(theirs), entry.path
        compared_lists += 1
        for m, t in zip(ours, theirs, strict=True):
            _compare_manifest_files(m, t, str(entry.path))
            mpath = _map_path(entry.location, m.manifest_path, entry.table_dir)
            try:
                their_entries = t.fetch_manifest_entry(pyio, discard_deleted=False)
            except Exception as e:  # BigQuery's nullable data_file union trips PyIceberg
                pyiceberg_refused.append(f"{mpath.name}: {e!r}")
                continue
            our_entries = read_manifest(mpath.read_bytes(), path=str(mpath), manifest=m).entries
            _compare_entries(list(our_entries), their_entries, str(mpath))
            compared_manifests += 1
    assert compared_lists >= 60 and compared_manifests >= 90, (compared_lists, compared_manifests)
    assert len(pyiceberg_refused) <= 1, pyiceberg_refused


def test_bigquery_manifest_without_format_version(corpus: Corpus) -> None:
    """BigQuery writes every field as a nullable union and omits the manifest metadata keys."""
    (entry,) = [e for p, e in corpus.lists.items() if "big_query_error" in str(p)]
    ((m, mpath),) = list(_manifests_of(entry))
    assert (m.content, m.sequence_number, m.added_files_count, m.added_rows_count) == (0, 0, 1, 2)
    manifest = read_manifest(mpath.read_bytes(), path=str(mpath), manifest=m)
    assert manifest.metadata.schema is None and manifest.metadata.partition_spec_id == 0
    (e,) = manifest.entries
    assert e.status == STATUS_ADDED and e.snapshot_id == m.added_snapshot_id
    assert e.data_file.partition == () and e.data_file.record_count == 2
    assert e.data_file.lower_bounds == {1: struct.pack("<q", 1)}
    assert e.data_file.upper_bounds == {1: struct.pack("<q", 2)}


def test_v1_list_with_null_counts(corpus: Corpus) -> None:
    (entry,) = [e for p, e in corpus.lists.items() if p.name == "snap-v1-null-counts.avro"]
    ms = read_manifest_list(entry.path.read_bytes(), path=str(entry.path))
    assert len(ms) == 2
    for m in ms:
        assert (m.content, m.sequence_number, m.min_sequence_number) == (0, 0, 0)
        assert m.added_files_count is None and m.existing_rows_count is None
        assert m.first_row_id is None


def test_legacy_bare_deletion_vector_v3_fields(corpus: Corpus) -> None:
    """GOLDEN_EXPECTATIONS.md: the DV entry has content_offset 0, content_size_in_bytes 42, 1 record."""
    (entry,) = [e for p, e in corpus.lists.items() if p.name == "snap-legacy-bare-deletion-vector.avro"]
    ms = read_manifest_list(entry.path.read_bytes(), path=str(entry.path))
    deletes = [m for m in ms if m.content == 1]
    assert len(deletes) == 1 and all(m.first_row_id is None for m in ms)
    mpath = _map_path(entry.location, deletes[0].manifest_path, entry.table_dir)
    manifest = read_manifest(mpath.read_bytes(), path=str(mpath), manifest=deletes[0])
    assert manifest.metadata.format_version == 3 and manifest.metadata.content == 1
    (e,) = manifest.entries
    d = e.data_file
    assert (d.content, d.file_format, d.record_count) == (1, "PUFFIN", 1)
    assert (d.content_offset, d.content_size_in_bytes) == (0, 42)
    assert d.referenced_data_file is not None and d.referenced_data_file.endswith(".parquet")
    assert d.first_row_id is None  # delete files never get row ids


# ---------------------------------------------------------------------------------------------
# Manifest lists from other implementations
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "count_field"),
    [("manifest-list-v2-1.avro", "added_data_files_count"), ("manifest-list-v2-2.avro", "added_files_count")],
)
def test_v2_lists_with_old_and_new_count_names(conformance: Path, name: str, count_field: str) -> None:
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import read_manifest_list as py_read_list

    path = conformance / "apache-iceberg-rust/crates/iceberg/testdata/manifests_lists" / name
    data = path.read_bytes()
    schema = json.loads(fastavro.reader(io.BytesIO(data)).metadata["avro.schema"])
    assert count_field in [f["name"] for f in schema["fields"]]  # the naming this file uses
    (m,) = read_manifest_list(data, path=str(path))
    assert (m.content, m.sequence_number, m.min_sequence_number, m.partition_spec_id) == (0, 1, 1, 0)
    assert (m.added_files_count, m.existing_files_count, m.deleted_files_count) == (1, 0, 0)
    assert (m.added_rows_count, m.existing_rows_count, m.deleted_rows_count) == (1, 0, 0)
    assert m.partitions == () and m.first_row_id is None
    assert m.manifest_path.endswith("-m0.avro")
    (theirs,) = list(py_read_list(PyArrowFileIO().new_input(str(path))))
    _compare_manifest_files(m, theirs, name)


def test_duckdb_written_v3_list(conformance: Path) -> None:
    path = conformance / "apache-iceberg-go/testdata/duckdb_v3_manifest_list.avro"
    data, m = path.read_bytes(), read_manifest_list(path.read_bytes(), path=str(path.name))
    assert [x.content for x in m] == [0, 1]
    assert [x.sequence_number for x in m] == [1, 2]
    assert [x.min_sequence_number for x in m] == [1, 2]
    assert [x.added_snapshot_id for x in m] == [5275221492656851850, 226306597092543916]
    assert [x.added_rows_count for x in m] == [100, 10]
    assert [x.manifest_length for x in m] == [2390, 2599]
    # DuckDB gives the delete manifest a first_row_id too (the spec says null); read as stored.
    assert [x.first_row_id for x in m] == [0, 100]
    assert all(x.partitions is None for x in m)
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import read_manifest_list as py_read_list

    theirs = list(py_read_list(PyArrowFileIO().new_input(str(path))))
    for a, b in zip(m, theirs, strict=True):
        _compare_manifest_files(a, b, path.name)
    assert len(data) == 1685


def test_encrypted_manifest_list_is_refused(conformance: Path) -> None:
    path = (
        conformance
        / "apache-iceberg-rust/crates/iceberg/testdata/manifests_lists/manifest-list-v3-encrypted.avro"
    )
    with pytest.raises(UnsupportedFormatError, match=r"encrypted.*not supported") as info:
        read_manifest_list(path.read_bytes(), path=str(path))
    assert str(path) in str(info.value)
    with pytest.raises(UnsupportedFormatError, match="encrypted manifest"):
        read_manifest(path.read_bytes(), path="m.avro")


# ---------------------------------------------------------------------------------------------
# Damaged, foreign and incomplete files
# ---------------------------------------------------------------------------------------------


def _data_file(path: str = "s3://b/t/data/f.parquet", **kw: Any) -> DataFile:
    base: dict[str, Any] = {
        "content": 0,
        "file_path": path,
        "file_format": "PARQUET",
        "spec_id": 0,
        "partition": (),
        "record_count": 10,
        "file_size_in_bytes": 1000,
    }
    base.update(kw)
    return DataFile(**base)


def _write(
    entries: list[ManifestEntry], fv: int = 2, content: int = 0, ptype: StructType | None = None
) -> bytes:
    return write_manifest(
        entries,
        format_version=fv,
        schema_json=SCHEMA_JSON,
        partition_spec_json=[],
        partition_spec_id=0,
        partition_type=ptype or StructType(()),
        content=content,
        snapshot_id=42,
    )


def test_truncated_manifest_names_the_file() -> None:
    entries = [
        ManifestEntry(STATUS_ADDED, 42, None, None, _data_file(f"f{i}.parquet", value_counts={1: i, 2: i}))
        for i in range(20)
    ]
    for codec in ("deflate", "null"):
        data = write_manifest(
            entries,
            format_version=2,
            schema_json=SCHEMA_JSON,
            partition_spec_json=[],
            partition_spec_id=0,
            partition_type=StructType(()),
            snapshot_id=42,
            codec=codec,
        )
        _, header_end = parse_header(data, path="x", what="manifest")
        for cut in range(len(data)):
            if cut == header_end:
                # A container cut right after its header is a valid empty file: Avro cannot tell.
                assert read_manifest(data[:cut], path="cut.avro").entries == ()
                continue
            with pytest.raises(CorruptFileError) as info:
                read_manifest(data[:cut], path="s3://b/t/metadata/cut-m0.avro")
            assert info.value.path == "s3://b/t/metadata/cut-m0.avro"
            assert "truncated or corrupt Avro" in str(info.value) or "not an Avro file" in str(info.value)


def test_corrupt_block_is_refused() -> None:
    data = bytearray(_write([ManifestEntry(STATUS_ADDED, 42, None, None, _data_file())]))
    # Avro's deflate blocks carry no checksum, so only structural damage is detectable: here the
    # sync marker that closes the block.
    data[-3] ^= 0xFF
    with pytest.raises(CorruptFileError, match="truncated or corrupt Avro"):
        read_manifest(bytes(data), path="bad.avro")


@pytest.mark.parametrize("data", [b"", b"{", b'{"format-version": 2}', b"PAR1\x00\x00\x00\x00PAR1"])
def test_not_avro_is_refused(data: bytes) -> None:
    with pytest.raises(CorruptFileError) as info:
        read_manifest_list(data, path="snap-1.avro")
    assert info.value.path == "snap-1.avro"
    assert "not an Avro file" in str(info.value) or "truncated" in str(info.value)


def _container(schema: dict[str, Any], records: list[dict[str, Any]], meta: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, metadata=meta)
    return buf.getvalue()


def test_manifest_missing_required_field() -> None:
    data_file: dict[str, Any] = {
        "type": "record",
        "name": "r2",
        "fields": [
            {"name": "content", "type": "int", "field-id": 134},
            {"name": "file_format", "type": "string", "field-id": 101},
            {"name": "partition", "type": {"type": "record", "name": "r102", "fields": []}, "field-id": 102},
            {"name": "record_count", "type": "long", "field-id": 103},
            {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
        ],
    }
    schema = {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            {"name": "status", "type": "int", "field-id": 0},
            {"name": "data_file", "type": data_file, "field-id": 2},
        ],
    }
    rec: dict[str, Any] = {
        "status": 1,
        "data_file": {
            "content": 0,
            "file_format": "PARQUET",
            "partition": {},
            "record_count": 1,
            "file_size_in_bytes": 1,
        },
    }
    data = _container(schema, [rec], {"format-version": "2", "content": "data"})
    with pytest.raises(InvalidMetadataError, match=r"m0\.avro.*file_path \(field id 100\)"):
        read_manifest(data, path="m0.avro")
    # v1 requires the snapshot id column
    data_file["fields"].insert(0, {"name": "file_path", "type": "string", "field-id": 100})
    data = _container(
        schema, [{**rec, "data_file": {**rec["data_file"], "file_path": "x"}}], {"format-version": "1"}
    )
    with pytest.raises(InvalidMetadataError, match=r"m1\.avro.*snapshot_id"):
        read_manifest(data, path="m1.avro")


def test_manifest_list_missing_required_field() -> None:
    schema = {
        "type": "record",
        "name": "manifest_file",
        "fields": [
            {"name": "manifest_path", "type": "string", "field-id": 500},
            {"name": "manifest_length", "type": "long", "field-id": 501},
            {"name": "partition_spec_id", "type": "int", "field-id": 502},
            {"name": "added_snapshot_id", "type": "long", "field-id": 503},
        ],
    }
    rec = {"manifest_path": "m.avro", "manifest_length": 1, "partition_spec_id": 0, "added_snapshot_id": 1}
    # Readable as v1 (no sequence numbers: 0) ...
    (m,) = read_manifest_list(_container(schema, [rec], {"format-version": "1"}), path="l.avro")
    assert (m.sequence_number, m.content, m.added_files_count) == (0, 0, None)
    # ... but a v2 list must have them.
    with pytest.raises(InvalidMetadataError, match=r"l2\.avro.*content \(field id 517\)"):
        read_manifest_list(_container(schema, [rec], {"format-version": "2"}), path="l2.avro")
    schema["fields"] = schema["fields"][1:]
    with pytest.raises(InvalidMetadataError, match="manifest_path"):
        read_manifest_list(_container(schema, [rec], {"format-version": "1"}), path="l3.avro")


# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------

PARTITION_TYPES: list[IcebergType] = [
    BOOLEAN, INT, LONG, FLOAT, DOUBLE, DATE, TIME, TIMESTAMP, TIMESTAMPTZ, TIMESTAMP_NS, TIMESTAMPTZ_NS,
    STRING, UUID, BINARY, FixedType(3), DecimalType(9, 2), DecimalType(38, 10), DecimalType(1, 0),
]  # fmt: skip


def _values(t: IcebergType) -> st.SearchStrategy[Any]:
    if isinstance(t, DecimalType):
        bound = 10**t.precision - 1
        return st.integers(-bound, bound).map(lambda n: Decimal(f"{n}E-{t.scale}"))
    if isinstance(t, FixedType):
        return st.binary(min_size=t.length, max_size=t.length)
    return {
        "boolean": st.booleans(),
        "int": st.integers(-(2**31), 2**31 - 1),
        "long": st.integers(-(2**63), 2**63 - 1),
        "float": st.floats(width=32, allow_nan=False),
        "double": st.floats(allow_nan=False),
        "date": st.integers(-(2**31), 2**31 - 1),
        "time": st.integers(0, 86_400_000_000 - 1),
        # beyond year 9999 on purpose: stored longs must not go through datetime
        "timestamp": st.integers(-(2**63), 2**63 - 1),
        "timestamptz": st.integers(-(2**63), 2**63 - 1),
        "timestamp_ns": st.integers(-(2**63), 2**63 - 1),
        "timestamptz_ns": st.integers(-(2**63), 2**63 - 1),
        "string": st.text(max_size=20),
        "uuid": st.uuids(),
        "binary": st.binary(max_size=20),
    }[t.name]


@st.composite
def manifests(draw: st.DrawFn) -> tuple[int, StructType, list[ManifestEntry], int]:
    fv = draw(st.sampled_from([1, 2, 3]))
    types = draw(st.lists(st.sampled_from(PARTITION_TYPES), max_size=4))
    ptype = StructType(
        tuple(
            NestedField(1000 + i, f"p{i}" if i % 2 else f"p-{i} {t}", t, draw(st.booleans()))
            for i, t in enumerate(types)
        )
    )
    content = 0 if fv == 1 else draw(st.sampled_from([0, 1]))
    longs = st.integers(0, 2**62)
    stat_map = st.dictionaries(st.integers(1, 50), longs, max_size=4)
    bound_map = st.dictionaries(st.integers(1, 50), st.binary(max_size=9), max_size=4)
    entries = []
    for i in range(draw(st.integers(0, 6))):
        status = draw(st.sampled_from([0, 1, 2]))
        explicit_seq = fv >= 2 and (status != STATUS_ADDED or draw(st.booleans()))
        seq = draw(longs) if explicit_seq else None
        fseq = draw(longs) if explicit_seq else None
        file_content = 0 if content == 0 else draw(st.sampled_from([1, 2]))
        partition = tuple(
            None if not f.required and draw(st.booleans()) else draw(_values(f.type)) for f in ptype.fields
        )
        # A deletion vector (v3) names its data file, offset and size; every file is listed once.
        dv = fv >= 3 and file_content == 1 and draw(st.booleans())
        maybe_long = longs if dv else st.none() | longs
        d = DataFile(
            file_content,
            draw(st.text(min_size=1, max_size=30)) + f"#{i}",
            "PUFFIN" if dv else draw(st.sampled_from(["PARQUET", "AVRO", "ORC"])),
            7,
            partition,
            draw(longs),
            draw(longs),
            draw(stat_map),
            draw(stat_map),
            draw(stat_map),
            draw(stat_map),
            draw(bound_map),
            draw(bound_map),
            draw(st.none() | st.binary(max_size=8)),
            draw(st.none() | st.lists(longs, max_size=3).map(tuple)),
            draw(st.none() | st.lists(st.integers(1, 99), min_size=1, max_size=3).map(tuple))
            if fv >= 2 and file_content == 2
            else None,
            draw(st.none() | st.integers(0, 5)),
            draw(st.none() | longs) if fv >= 3 and file_content == 0 else None,
            draw(st.text(max_size=10) if dv else st.none() | st.text(max_size=10))
            if fv >= 2 and file_content == 1
            else None,
            draw(maybe_long) if fv >= 3 and file_content == 1 else None,
            draw(maybe_long) if fv >= 3 and file_content == 1 else None,
        )
        entries.append(
            ManifestEntry(status, draw(st.none() | longs) if fv >= 2 else draw(longs), seq, fseq, d)
        )
    return fv, ptype, entries, content


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(manifests())
def test_write_then_read_round_trips(case: tuple[int, StructType, list[ManifestEntry], int]) -> None:
    fv, ptype, entries, content = case
    data = write_manifest(
        entries,
        format_version=fv,
        schema_json=json.dumps(SCHEMA_JSON),
        partition_spec_json={"spec-id": 7, "fields": []},
        partition_spec_id=7,
        partition_type=ptype,
        content=content,
        snapshot_id=99,
    )
    manifest = read_manifest(data, path="rt.avro")
    md = manifest.metadata
    assert (md.format_version, md.content, md.partition_spec_id, md.schema_id) == (fv, content, 7, 3)
    assert md.schema is not None and json.loads(md.schema) == SCHEMA_JSON
    assert md.partition_spec == "[]"
    expected = [
        replace(e, snapshot_id=99) if e.snapshot_id is None and fv >= 2 else e for e in entries
    ]  # written with the manifest's snapshot id where the entry had none
    assert list(manifest.entries) == expected
    for got, want in zip(manifest.entries, expected, strict=True):
        for v_got, v_want in zip(got.data_file.partition, want.data_file.partition, strict=True):
            assert type(v_got) is type(v_want)
            if isinstance(v_want, Decimal):
                assert v_got.as_tuple().exponent == v_want.as_tuple().exponent


def test_written_schema_has_field_ids_and_logical_types() -> None:
    ptype = StructType(
        (
            NestedField(1000, "d", DATE),
            NestedField(1001, "ts", TIMESTAMPTZ),
            NestedField(1002, "ns", TIMESTAMP_NS),
            NestedField(1003, "dec", DecimalType(18, 3)),
            NestedField(1004, "u", UUID),
            NestedField(1005, "t", TIME),
            NestedField(1006, "x.y", LONG, required=True),
        )
    )
    for fv in (1, 2, 3):
        data = write_manifest(
            [],
            format_version=fv,
            schema_json=SCHEMA_JSON,
            partition_spec_json=[],
            partition_spec_id=0,
            partition_type=ptype,
            snapshot_id=1,
        )
        reader = fastavro.reader(io.BytesIO(data))
        schema = json.loads(reader.metadata["avro.schema"])
        assert reader.metadata["avro.codec"] == "deflate"

        def walk(t: Any, where: str) -> None:
            if isinstance(t, list):
                for b in t:
                    walk(b, where)
            elif isinstance(t, dict) and t.get("type") == "record":
                for f in t["fields"]:
                    assert "field-id" in f, f"{where}.{f['name']} has no field-id"
                    walk(f["type"], f"{where}.{f['name']}")
            elif isinstance(t, dict) and t.get("type") == "array":
                if t.get("logicalType") == "map":
                    assert [f["name"] for f in t["items"]["fields"]] == ["key", "value"]
                else:
                    assert "element-id" in t, where
                walk(t["items"], where)

        walk(schema, "manifest_entry")
        df = next(f for f in schema["fields"] if f["name"] == "data_file")["type"]
        part = next(f for f in df["fields"] if f["name"] == "partition")["type"]
        types = {f["field-id"]: f["type"] for f in part["fields"]}
        assert types[1000] == ["null", {"type": "int", "logicalType": "date"}]
        assert types[1001][1] == {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": True}
        assert types[1002][1] == {"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": False}
        assert types[1003][1]["size"] == 8 and types[1003][1]["logicalType"] == "decimal"
        assert types[1004][1]["size"] == 16 and types[1004][1]["logicalType"] == "uuid"
        assert types[1005][1] == {"type": "long", "logicalType": "time-micros"}
        assert types[1006] == "long"
        assert [f["name"] for f in part["fields"]][-1] == "x_x2Ey"
        md = reader.metadata
        assert md["format-version"] == str(fv) and md["partition-spec-id"] == "0" and md["schema-id"] == "3"
        assert ("content" in md) == (fv >= 2)
        names = [f["name"] for f in df["fields"]]
        assert ("block_size_in_bytes" in names) == (fv == 1)
        assert ("first_row_id" in names) == (fv == 3) == ("content_size_in_bytes" in names)


def test_decimal_sizes_follow_precision() -> None:
    # minBytesRequired(P) from the spec: 9 digits fit in 4 bytes, 18 in 8, 38 in 16.
    from iceduck.spec._avro_schemas import decimal_required_bytes

    assert [decimal_required_bytes(p) for p in (1, 2, 3, 9, 10, 18, 19, 38)] == [1, 1, 2, 4, 5, 8, 9, 16]


def test_iter_manifest_rows_gives_stored_values() -> None:
    ptype = StructType((NestedField(1000, "day", DATE), NestedField(1001, "ts", TIMESTAMP)))
    e = ManifestEntry(STATUS_ADDED, 1, None, None, _data_file(partition=(19725, 253402300800000000)))
    (row,) = list(iter_manifest_rows(_write([e], ptype=ptype), path="x"))
    assert row["data_file"]["partition"] == {"day": 19725, "ts": 253402300800000000}  # year 10000


# ---------------------------------------------------------------------------------------------
# PyIceberg reads what we write
# ---------------------------------------------------------------------------------------------


def _pyiceberg_encoder(t: IcebergType, value: Any) -> bytes:
    from pyiceberg import conversions
    from pyiceberg.types import (
        DateType,
        DoubleType,
        IntegerType,
        LongType,
        StringType,
    )
    from pyiceberg.types import (
        DecimalType as PyDecimal,
    )

    if isinstance(t, DecimalType):
        return conversions.to_bytes(PyDecimal(t.precision, t.scale), value)
    py = {
        "int": IntegerType(),
        "long": LongType(),
        "string": StringType(),
        "date": DateType(),
        "double": DoubleType(),
    }
    return conversions.to_bytes(py[t.name], value)


def test_pyiceberg_reads_our_v2_manifest_and_list(tmp_path: Path) -> None:
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import read_manifest_list as py_read_list

    ptype = StructType(
        (
            NestedField(1000, "region", STRING),
            NestedField(1001, "day", DATE),
            NestedField(1002, "price", DecimalType(10, 2)),
        )
    )
    entries = [
        ManifestEntry(
            STATUS_ADDED,
            None,
            None,
            None,
            _data_file(
                f"s3://b/t/data/{i}.parquet",
                partition=("eu" if i % 2 else None, 19700 + i, Decimal(f"{i}.25")),
                record_count=10 + i,
                value_counts={1: 10 + i},
                lower_bounds={1: struct.pack("<q", i)},
                upper_bounds={1: struct.pack("<q", 100 + i)},
                split_offsets=(4,),
                sort_order_id=0,
            ),
        )
        for i in range(4)
    ] + [
        ManifestEntry(
            STATUS_EXISTING, 5, 2, 2, _data_file("s3://b/t/data/old.parquet", partition=("us", 19000, None))
        ),
        ManifestEntry(
            STATUS_DELETED,
            9,
            1,
            1,
            _data_file("s3://b/t/data/gone.parquet", partition=("us", 18000, Decimal("-1.50"))),
        ),
    ]
    data = write_manifest(
        entries,
        format_version=2,
        schema_json=SCHEMA_JSON,
        partition_spec_json=[
            {"source-id": 2, "field-id": 1000, "name": "region", "transform": "identity"},
            {"source-id": 3, "field-id": 1001, "name": "day", "transform": "identity"},
            {"source-id": 4, "field-id": 1002, "name": "price", "transform": "identity"},
        ],
        partition_spec_id=1,
        partition_type=ptype,
        snapshot_id=9,
    )
    mpath = tmp_path / "m0.avro"
    mpath.write_bytes(data)
    mf = summarize_manifest(
        entries,
        manifest_path=str(mpath),
        manifest_length=len(data),
        partition_spec_id=1,
        partition_type=ptype,
        content=0,
        added_snapshot_id=9,
        encode_bound=_pyiceberg_encoder,
    )
    assert mf.sequence_number == UNASSIGNED_SEQUENCE_NUMBER
    assert (mf.added_files_count, mf.existing_files_count, mf.deleted_files_count) == (4, 1, 1)
    assert (mf.added_rows_count, mf.existing_rows_count, mf.deleted_rows_count) == (46, 10, 10)
    assert mf.min_sequence_number == 2  # the EXISTING entry; the DELETED one (1) does not count
    result = write_manifest_list(
        [mf], format_version=2, snapshot_id=9, parent_snapshot_id=5, sequence_number=3
    )
    assert result.next_row_id is None
    lpath = tmp_path / "snap-9.avro"
    lpath.write_bytes(result.data)

    (theirs,) = list(py_read_list(PyArrowFileIO().new_input(str(lpath))))
    assert (theirs.sequence_number, theirs.min_sequence_number, theirs.added_snapshot_id) == (3, 2, 9)
    assert theirs.manifest_length == len(data)
    # Summaries against PyIceberg's own encoding of the expected extremes.
    from pyiceberg import conversions
    from pyiceberg.types import DateType, StringType
    from pyiceberg.types import DecimalType as PyDecimal

    assert [(p.contains_null, p.lower_bound, p.upper_bound) for p in theirs.partitions or ()] == [
        (True, conversions.to_bytes(StringType(), "eu"), conversions.to_bytes(StringType(), "us")),
        (False, conversions.to_bytes(DateType(), 18000), conversions.to_bytes(DateType(), 19703)),
        (
            True,
            conversions.to_bytes(PyDecimal(10, 2), Decimal("-1.50")),
            conversions.to_bytes(PyDecimal(10, 2), Decimal("3.25")),
        ),
    ]
    their_entries = theirs.fetch_manifest_entry(PyArrowFileIO(), discard_deleted=False)
    (ours,) = read_manifest_list(result.data, path=str(lpath))
    _compare_manifest_files(ours, theirs, "written list")
    _compare_entries(
        list(read_manifest(data, path=str(mpath), manifest=ours).entries), their_entries, "written"
    )
    assert [e.sequence_number for e in their_entries] == [3, 3, 3, 3, 2, 1]
    first_partition: Any = their_entries[0].data_file.partition
    assert list(first_partition) == [None, 19700, Decimal("0.25")]

    reader = fastavro.reader(io.BytesIO(result.data))
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    assert meta == {
        "snapshot-id": "9",
        "parent-snapshot-id": "5",
        "format-version": "2",
        "sequence-number": "3",
    }


# ---------------------------------------------------------------------------------------------
# Inheritance
# ---------------------------------------------------------------------------------------------


def _mf(**kw: Any) -> ManifestFile:
    base: dict[str, Any] = {
        "manifest_path": "m.avro",
        "manifest_length": 1,
        "partition_spec_id": 4,
        "content": 0,
        "sequence_number": 12,
        "min_sequence_number": 0,  # entries here carry sequence numbers from 0 up
        "added_snapshot_id": 777,
        # file counts not given (as v1 lists may): read_manifest's entry-count check then has nothing to compare
        "added_files_count": None,
        "existing_files_count": None,
        "deleted_files_count": None,
        "added_rows_count": 0,
        "existing_rows_count": 0,
        "deleted_rows_count": 0,
    }
    base.update(kw)
    return ManifestFile(**base)


def test_sequence_numbers_and_snapshot_ids_inherit() -> None:
    entries = [
        ManifestEntry(STATUS_ADDED, None, None, None, _data_file("a")),
        ManifestEntry(STATUS_ADDED, 5, 3, None, _data_file("b")),  # explicit data sequence number kept
        ManifestEntry(STATUS_EXISTING, 6, 4, 8, _data_file("c")),
        ManifestEntry(STATUS_DELETED, None, 2, 2, _data_file("d")),
    ]
    data = write_manifest(
        entries,
        format_version=2,
        schema_json=SCHEMA_JSON,
        partition_spec_json=[],
        partition_spec_id=0,
        partition_type=StructType(()),
        snapshot_id=None,
    )
    raw = read_manifest(data, path="m.avro").entries
    assert [(e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in raw] == [
        (None, None, None),
        (5, 3, None),
        (6, 4, 8),
        (None, 2, 2),
    ]
    got = read_manifest(data, path="m.avro", manifest=_mf()).entries
    assert [(e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in got] == [
        (777, 12, 12),
        (5, 3, 12),
        (6, 4, 8),
        (777, 2, 2),
    ]
    assert {e.data_file.spec_id for e in got} == {4}  # the list's partition_spec_id
    assert {e.data_file.spec_id for e in raw} == {0}  # the manifest's own metadata


def test_existing_entry_without_sequence_number_is_refused() -> None:
    # A writer that breaks "existing entries must carry both sequence numbers" (crafted by hand,
    # since write_manifest refuses to produce it).
    schema = json.loads(fastavro.reader(io.BytesIO(_write([]))).metadata["avro.schema"])
    rec = {
        "status": STATUS_EXISTING,
        "snapshot_id": 1,
        "sequence_number": None,
        "file_sequence_number": 5,
        "data_file": {
            "content": 0,
            "file_path": "f",
            "file_format": "PARQUET",
            "partition": {},
            "record_count": 1,
            "file_size_in_bytes": 1,
        },
    }
    data = _container(schema, [rec], {"format-version": "2", "content": "data"})
    with pytest.raises(InvalidMetadataError, match=r"bad\.avro.*entry 0 \(EXISTING\).*sequence_number"):
        read_manifest(data, path="bad.avro", manifest=_mf())
    assert read_manifest(data, path="bad.avro").entries[0].sequence_number is None
    # Listed with sequence number 0 (data carried over from v1) it reads as 0.
    assert (
        read_manifest(data, path="bad.avro", manifest=_mf(sequence_number=0)).entries[0].sequence_number == 0
    )


def test_v1_manifest_sequence_numbers_are_zero() -> None:
    data = _write([ManifestEntry(STATUS_EXISTING, 5, None, None, _data_file())], fv=1)
    (e,) = read_manifest(data, path="v1.avro", manifest=_mf(sequence_number=0, min_sequence_number=0)).entries
    assert (e.snapshot_id, e.sequence_number, e.file_sequence_number) == (5, 0, 0)


@st.composite
def row_id_cases(draw: st.DrawFn) -> tuple[list[ManifestEntry], int | None]:
    entries = [
        ManifestEntry(
            draw(st.sampled_from([0, 1, 2])),
            1,
            1,
            1,
            _data_file(
                f"f{i}",
                record_count=draw(st.integers(0, 1000)),
                first_row_id=draw(st.none() | st.integers(0, 10**6)),
            ),
        )
        for i in range(draw(st.integers(0, 8)))
    ]
    return entries, draw(st.none() | st.integers(0, 10**9))


@settings(max_examples=100, deadline=None)
@given(row_id_cases())
def test_first_row_id_inheritance(case: tuple[list[ManifestEntry], int | None]) -> None:
    """Spec "First Row ID Inheritance": null ids become the manifest's first_row_id plus the record
    counts of the preceding data files that also had none; DELETED entries take no ids."""
    entries, manifest_first = case
    data = _write(entries, fv=3)
    got = read_manifest(data, path="m.avro", manifest=_mf(first_row_id=manifest_first)).entries
    next_id = manifest_first
    for want, have in zip(entries, got, strict=True):
        if want.data_file.first_row_id is not None:
            assert have.data_file.first_row_id == want.data_file.first_row_id
        elif next_id is None or want.status == STATUS_DELETED:
            assert have.data_file.first_row_id is None
        else:
            assert have.data_file.first_row_id == next_id
            next_id += want.data_file.record_count


def test_first_row_id_example_and_delete_manifests() -> None:
    entries = [
        ManifestEntry(STATUS_ADDED, 1, None, None, _data_file("a", record_count=10)),
        ManifestEntry(STATUS_EXISTING, 1, 1, 1, _data_file("b", record_count=5, first_row_id=3)),
        ManifestEntry(STATUS_DELETED, 1, 1, 1, _data_file("c", record_count=7)),
        ManifestEntry(STATUS_EXISTING, 1, 1, 1, _data_file("d", record_count=4)),
    ]
    got = read_manifest(_write(entries, fv=3), path="m", manifest=_mf(first_row_id=1000)).entries
    assert [e.data_file.first_row_id for e in got] == [1000, 3, None, 1010]
    deletes = [ManifestEntry(STATUS_ADDED, 1, None, None, _data_file("dv", content=1, record_count=3))]
    got = read_manifest(
        _write(deletes, fv=3, content=1), path="m", manifest=_mf(content=1, first_row_id=5)
    ).entries
    assert got[0].data_file.first_row_id is None


# ---------------------------------------------------------------------------------------------
# Summaries and manifest lists
# ---------------------------------------------------------------------------------------------


def _double_bytes(t: IcebergType, v: Any) -> bytes:
    return struct.pack("<d", v)


def test_summary_floats_nan_and_signed_zero() -> None:
    ptype = StructType((NestedField(1000, "x", DOUBLE),))
    entries = [
        ManifestEntry(STATUS_ADDED, 1, None, None, _data_file(str(i), partition=(v,)))
        for i, v in enumerate([0.0, -0.0, math.nan, None, 2.5, -0.0])
    ]
    mf = summarize_manifest(
        entries,
        manifest_path="m",
        manifest_length=1,
        partition_spec_id=0,
        partition_type=ptype,
        content=0,
        added_snapshot_id=1,
        sequence_number=4,
        encode_bound=_double_bytes,
    )
    (s,) = mf.partitions or ()
    assert (s.contains_null, s.contains_nan) == (True, True)
    assert s.lower_bound == struct.pack("<d", -0.0) and s.upper_bound == struct.pack("<d", 2.5)
    assert (mf.sequence_number, mf.min_sequence_number) == (4, 4)
    ptype2 = StructType((NestedField(1000, "x", DOUBLE),))
    zeros = [
        ManifestEntry(STATUS_ADDED, 1, None, None, _data_file(str(i), partition=(v,)))
        for i, v in enumerate([-0.0, 0.0])
    ]
    (z,) = summarize_manifest(
        zeros, manifest_path="m", manifest_length=1, partition_spec_id=0, partition_type=ptype2,
        content=0, added_snapshot_id=1, encode_bound=_double_bytes,
    ).partitions or ()  # fmt: skip
    assert (z.lower_bound, z.upper_bound) == (struct.pack("<d", -0.0), struct.pack("<d", 0.0))
    all_null = [ManifestEntry(STATUS_ADDED, 1, None, None, _data_file("n", partition=(None,)))]
    (n,) = summarize_manifest(
        all_null, manifest_path="m", manifest_length=1, partition_spec_id=0, partition_type=ptype2,
        content=0, added_snapshot_id=1, encode_bound=_double_bytes,
    ).partitions or ()  # fmt: skip
    assert (n.contains_null, n.contains_nan, n.lower_bound, n.upper_bound) == (True, False, None, None)


def _list_row(
    path: str,
    content: int = 0,
    added: int = 0,
    existing: int = 0,
    first_row_id: int | None = None,
    seq: int = 1,
) -> ManifestFile:
    return _mf(
        manifest_path=path,
        content=content,
        sequence_number=seq,
        min_sequence_number=seq,
        added_files_count=1,
        existing_files_count=0,
        deleted_files_count=0,
        added_rows_count=added,
        existing_rows_count=existing,
        first_row_id=first_row_id,
    )


def test_v3_manifest_list_assigns_first_row_ids(tmp_path: Path) -> None:
    rows = [
        _list_row("new-data", added=10, existing=5, seq=UNASSIGNED_SEQUENCE_NUMBER),
        _list_row("new-deletes", content=1, added=3, seq=UNASSIGNED_SEQUENCE_NUMBER),
        _list_row("old-data", added=50, first_row_id=7, seq=2),
        _list_row("more-data", added=3, seq=UNASSIGNED_SEQUENCE_NUMBER),
    ]
    result = write_manifest_list(
        rows, format_version=3, snapshot_id=10, parent_snapshot_id=None, sequence_number=6, first_row_id=100
    )
    assert [m.first_row_id for m in result.manifests] == [100, None, 7, 115]
    assert result.next_row_id == 118
    back = read_manifest_list(result.data, path="snap-10.avro")
    assert back == result.manifests
    assert [m.sequence_number for m in back] == [6, 6, 2, 6]
    assert [m.min_sequence_number for m in back] == [6, 6, 2, 6]
    meta = fastavro.reader(io.BytesIO(result.data)).metadata
    assert (meta["snapshot-id"], meta["parent-snapshot-id"], meta["sequence-number"]) == ("10", "null", "6")
    assert (meta["format-version"], meta["first-row-id"]) == ("3", "100")
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import read_manifest_list as py_read_list

    path = tmp_path / "snap-10.avro"
    path.write_bytes(result.data)
    theirs = list(py_read_list(PyArrowFileIO().new_input(str(path))))
    for ours, their in zip(back, theirs, strict=True):
        _compare_manifest_files(ours, their, "v3 list")
    # PyIceberg 0.12 does not expose first_row_id: check the stored column directly.
    stored: list[Any] = list(fastavro.reader(io.BytesIO(result.data)))
    assert [r["first_row_id"] for r in stored] == [100, None, 7, 115]


def test_manifest_list_round_trip_v1_v2() -> None:
    rows = [
        ManifestFile(
            "a.avro",
            10,
            0,
            0,
            0,
            0,
            5,
            1,
            2,
            3,
            4,
            5,
            6,
            (PartitionFieldSummary(True, None, b"\x01", b"\x09"),),
        ),
        ManifestFile("b.avro", 11, 1, 0, 0, 0, 5, None, None, None, None, None, None, None, b"key"),
    ]
    r1 = write_manifest_list(rows, format_version=1, snapshot_id=5, parent_snapshot_id=4)
    assert read_manifest_list(r1.data, path="l1") == tuple(rows)
    with pytest.raises(ValidationError, match="requires added_files_count"):
        write_manifest_list(rows, format_version=2, snapshot_id=5, parent_snapshot_id=4, sequence_number=1)
    with pytest.raises(ValidationError, match="delete manifests"):
        write_manifest_list(
            [replace(rows[0], content=1)], format_version=1, snapshot_id=5, parent_snapshot_id=None
        )
    v2 = [replace(rows[0], content=1, sequence_number=3, min_sequence_number=2)]
    r2 = write_manifest_list(v2, format_version=2, snapshot_id=5, parent_snapshot_id=None, sequence_number=3)
    assert read_manifest_list(r2.data, path="l2") == tuple(v2)


def test_write_refuses_inconsistent_entries() -> None:
    with pytest.raises(ValidationError, match="delete file"):
        _write([ManifestEntry(STATUS_ADDED, 1, None, None, _data_file(content=1))], content=0)
    with pytest.raises(ValidationError, match="explicit sequence numbers"):
        _write([ManifestEntry(STATUS_EXISTING, 1, None, None, _data_file())])
    with pytest.raises(ValidationError, match="partition"):
        _write([ManifestEntry(STATUS_ADDED, 1, None, None, _data_file(partition=(1,)))])
    ptype = StructType((NestedField(1000, "p", DecimalType(4, 1)),))
    with pytest.raises(ValidationError, match="fraction digits"):
        _write(
            [ManifestEntry(STATUS_ADDED, 1, None, None, _data_file(partition=(Decimal("1.25"),)))],
            ptype=ptype,
        )


# ---------------------------------------------------------------------------------------------
# Speed: reading stays close to fastavro's own decoding
# ---------------------------------------------------------------------------------------------


def test_reading_a_100_entry_manifest_is_fast() -> None:
    ptype = StructType((NestedField(1000, "day", DATE), NestedField(1001, "kind", STRING)))
    stats = {c: c * 10 for c in range(1, 11)}
    bounds = {c: struct.pack("<q", c) for c in range(1, 11)}
    entries = [
        ManifestEntry(
            STATUS_ADDED,
            1,
            None,
            None,
            _data_file(
                f"s3://bucket/warehouse/db/t/data/day=2024-01-{i % 28 + 1:02d}/{uuid.uuid4()}.parquet",
                partition=(19700 + i % 28, "click"),
                column_sizes=stats,
                value_counts=stats,
                null_value_counts=stats,
                nan_value_counts=stats,
                lower_bounds=bounds,
                upper_bounds=bounds,
                split_offsets=(4,),
            ),
        )
        for i in range(100)
    ]
    data = _write(entries, ptype=ptype)
    mf = _mf(first_row_id=0)
    read_manifest(data, path="m", manifest=mf)
    best_ours = best_raw = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        read_manifest(data, path="m", manifest=mf)
        t1 = time.perf_counter()
        list(fastavro.reader(io.BytesIO(data)))
        t2 = time.perf_counter()
        best_ours, best_raw = min(best_ours, t1 - t0), min(best_raw, t2 - t1)
    # Building the model adds little to decoding (generous bound: machines are shared).
    assert best_ours < 3 * best_raw + 0.005, (best_ours, best_raw)


def test_every_avro_file_in_the_corpus_reads(conformance: Path) -> None:
    """Also the lists and manifests no metadata file references any more."""
    root = conformance / "duckdb-iceberg" / "data" / "persistent"
    kinds = {"list": 0, "manifest": 0}
    for path in sorted(root.rglob("*.avro")):
        data = path.read_bytes()
        if "manifest_path" in fastavro.reader(io.BytesIO(data)).metadata["avro.schema"]:
            assert read_manifest_list(data, path=str(path))
            kinds["list"] += 1
        else:
            assert read_manifest(data, path=str(path)).entries
            kinds["manifest"] += 1
    assert kinds["list"] >= 60 and kinds["manifest"] >= 60, kinds


def test_summary_default_encoder_and_hashable_entries() -> None:
    ptype = StructType((NestedField(1000, "n", INT), NestedField(1001, "s", STRING)))
    entries = [
        ManifestEntry(STATUS_ADDED, 1, None, None, _data_file(str(i), partition=(v, s), value_counts={1: 1}))
        for i, (v, s) in enumerate([(5, "b"), (-3, "a"), (None, "c")])
    ]
    mf = summarize_manifest(
        entries,
        manifest_path="m",
        manifest_length=1,
        partition_spec_id=0,
        partition_type=ptype,
        content=0,
        added_snapshot_id=1,
    )
    assert [(p.contains_null, p.lower_bound, p.upper_bound) for p in mf.partitions or ()] == [
        (True, struct.pack("<i", -3), struct.pack("<i", 5)),
        (False, b"a", b"c"),
    ]
    assert len({*entries, *entries}) == 3  # usable in sets (metric maps stay out of the hash)


# ---------------------------------------------------------------------------------------------
# Column screens: the entry checks and inheritance over whole columns agree with the row loops
# ---------------------------------------------------------------------------------------------

# Damage an entry may carry within its writer schema: each changes one field of one record.
_DAMAGE = (
    ("status", lambda r, other: r.__setitem__("status", 5)),
    ("status", lambda r, other: r.__setitem__("status", STATUS_DELETED)),
    ("status", lambda r, other: r.__setitem__("status", STATUS_EXISTING)),
    ("content", lambda r, other: r["data_file"].__setitem__("content", 4)),
    ("content", lambda r, other: r["data_file"].__setitem__("content", 2)),
    ("record_count", lambda r, other: r["data_file"].__setitem__("record_count", -1)),
    ("sequence_number", lambda r, other: r.__setitem__("sequence_number", None)),
    ("sequence_number", lambda r, other: r.__setitem__("sequence_number", -3)),
    ("sequence_number", lambda r, other: r.__setitem__("sequence_number", 0)),
    ("file_sequence_number", lambda r, other: r.__setitem__("file_sequence_number", None)),
    ("file_sequence_number", lambda r, other: r.__setitem__("file_sequence_number", -1)),
    ("file_path", lambda r, other: r["data_file"].__setitem__("file_path", other["data_file"]["file_path"])),
    ("first_row_id", lambda r, other: r["data_file"].__setitem__("first_row_id", -2)),
    ("referenced_data_file", lambda r, other: r["data_file"].__setitem__("referenced_data_file", "zz.parquet")),
)


def _outcome(data: bytes, manifest: ManifestFile) -> object:
    try:
        return list(read_manifest(data, path="screened.avro", manifest=manifest).entries)
    except IcebergError as e:
        return (type(e), str(e))


@st.composite
def plain_manifests(draw: st.DrawFn) -> tuple[int, list[ManifestEntry], int]:
    """Manifests the column screens clear unless damaged: live entries of distinct files."""
    fv = draw(st.sampled_from([1, 2, 3]))
    content = 0 if fv == 1 else draw(st.sampled_from([0, 0, 1]))
    entries = []
    for i in range(draw(st.integers(1, 6))):
        status = draw(st.sampled_from([STATUS_ADDED, STATUS_ADDED, STATUS_EXISTING]))
        explicit = fv >= 2 and (status != STATUS_ADDED or draw(st.booleans()))
        seq = draw(st.integers(0, 9)) if explicit else None
        d = _data_file(
            f"f{i}.parquet",
            content=0 if content == 0 else 2,
            equality_ids=(1,) if content else None,
            first_row_id=draw(st.none() | st.integers(0, 99)) if fv >= 3 and content == 0 else None,
        )
        entries.append(ManifestEntry(status, draw(st.none() | st.integers(1, 9)) if fv >= 2 else 5, seq, seq, d))
    return fv, entries, content


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plain_manifests(), st.data())
def test_column_screens_refuse_and_keep_what_the_row_loops_do(
    case: tuple[int, list[ManifestEntry], int], data: st.DataObject
) -> None:
    """`_build_columns` / `_inherit` clear whole columns at C speed and walk rows only where a
    screen cannot clear them: with the screens off (the row loops alone) every damaged or
    inheriting manifest reads to the same entries or the same one-line error."""
    from iceduck.spec import manifest as manifest_module

    fv, entries, content = case
    written = write_manifest(
        entries,
        format_version=fv,
        schema_json=json.dumps(SCHEMA_JSON),
        partition_spec_json={"spec-id": 7, "fields": []},
        partition_spec_id=7,
        partition_type=StructType(()),
        content=content,
        snapshot_id=99,
    )
    reader = fastavro.reader(io.BytesIO(written))
    schema = reader.writer_schema
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    records = list(iter_manifest_rows(written, path="screened.avro"))  # stored values, as written
    fields = {f["name"] for f in schema["fields"]} | {f["name"] for f in _data_file_fields(schema)}
    for _ in range(data.draw(st.integers(0, 2))):
        name, damage = data.draw(st.sampled_from(_DAMAGE))
        if name in fields:
            damage(data.draw(st.sampled_from(records)), data.draw(st.sampled_from(records)))
    out = io.BytesIO()
    fastavro.writer(out, schema, records, metadata=meta)
    seq = data.draw(st.integers(0, 9))
    listed = ManifestFile(
        "screened.avro", len(out.getvalue()), 7, content, seq, data.draw(st.integers(0, seq)), 99,
        None, None, None, None, None, None, first_row_id=data.draw(st.none() | st.integers(0, 99)),
    )  # fmt: skip
    screened = _outcome(out.getvalue(), listed)
    manifest_module._SCREENS = False
    try:
        alone = _outcome(out.getvalue(), listed)
    finally:
        manifest_module._SCREENS = True
    assert screened == alone


def _data_file_fields(schema: dict[str, Any]) -> list[dict[str, Any]]:
    field = next(f for f in schema["fields"] if f["name"] == "data_file")
    t = field["type"]
    return list(t["fields"] if isinstance(t, dict) else next(b for b in t if isinstance(b, dict))["fields"])
