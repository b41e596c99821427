"""Table metadata: every metadata file of the conformance corpus, the invalid goldens, version rules,
round trips, and snapshot selection. Expected values come from the files themselves (goldens),
TABLE_INVENTORY.json, PyIceberg 0.12 as an independent parser, and the upstream tests that use the
invalid goldens (apache/iceberg TestTableMetadata, iceberg-rust table_metadata.rs, iceberg-cpp)."""

from __future__ import annotations

import copy
import gzip
import json
import random
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iceduck.errors import (
    CorruptFileError,
    IcebergError,
    InvalidMetadataError,
    UnsupportedFormatError,
    ValidationError,
)
from iceduck.spec import table_metadata as table_metadata_module
from iceduck.spec.partitioning import (
    PartitionField,
    PartitionSpec,
    parse_partition_fields,
    parse_partition_spec,
    partition_spec_to_json,
)
from iceduck.spec.snapshots import SnapshotFields, SnapshotRefType, plain_snapshot_fields
from iceduck.spec.sorting import (
    NullOrder,
    SortDirection,
    SortField,
    SortOrder,
    parse_sort_order,
    sort_order_to_json,
)
from iceduck.spec.table_metadata import (
    TableMetadata,
    decode_metadata_json,
    parse_table_metadata,
    read_table_metadata,
    table_metadata_to_json,
)
from iceduck.spec.transforms import parse_transform
from iceduck.spec.types import DATE, INT, LONG, UNKNOWN, NestedField, Schema

JAVA = "apache-iceberg/core/src/test/resources"
RUST = "apache-iceberg-rust/crates/iceberg/testdata"
GO = "apache-iceberg-go/table/testdata"
DUCK = "duckdb-iceberg/data/persistent"
CXX = "more/lithium-tech-iceberg-cxx/tests"

# Invalid goldens and the reason the upstream tests that use them give (our wording, same cause).
INVALID: dict[str, tuple[type[IcebergError], str]] = {
    # Java TestTableMetadata.testParserUnsupportedVersion: "Cannot read unsupported version 42"
    f"{JAVA}/TableMetadataUnsupportedVersion.json": (UnsupportedFormatError, "unsupported format-version 42"),
    # iceberg-rust wrote this when v3 was unsupported; as a v3 file it lacks the required `schemas`.
    f"{RUST}/table_metadata/TableMetadataUnsupportedVersion.json": (
        InvalidMetadataError,
        "missing 'schemas'",
    ),
    # Java testMissingSchemaType: "Cannot parse type from json"; iceberg-cpp: "Missing 'type'"
    f"{JAVA}/TableMetadataV1MissingSchemaType.json": (InvalidMetadataError, "missing 'type'"),
    # Java testParserV2CurrentSchemaIdValidation: "Cannot find schema with current-schema-id=2"
    f"{JAVA}/TableMetadataV2CurrentSchemaNotFound.json": (
        InvalidMetadataError,
        "current-schema-id 2 refers to no",
    ),
    f"{RUST}/table_metadata/TableMetadataV2CurrentSchemaNotFound.json": (
        InvalidMetadataError,
        "current-schema-id 2 refers to no",
    ),
    # Java: "last-partition-id must exist in format v2"
    f"{JAVA}/TableMetadataV2MissingLastPartitionId.json": (
        InvalidMetadataError,
        "missing 'last-partition-id'",
    ),
    f"{RUST}/table_metadata/TableMetadataV2MissingLastPartitionId.json": (
        InvalidMetadataError,
        "missing 'last-partition-id'",
    ),
    # Java: "partition-specs must exist in format v2"
    f"{JAVA}/TableMetadataV2MissingPartitionSpecs.json": (InvalidMetadataError, "missing 'partition-specs'"),
    f"{RUST}/table_metadata/TableMetadataV2MissingPartitionSpecs.json": (
        InvalidMetadataError,
        "missing 'partition-specs'",
    ),
    # Java: "schemas must exist in format v2"
    f"{JAVA}/TableMetadataV2MissingSchemas.json": (InvalidMetadataError, "missing 'schemas'"),
    f"{RUST}/table_metadata/TableMetadataV2MissingSchemas.json": (InvalidMetadataError, "missing 'schemas'"),
    # Java: "sort-orders must exist in format v2"
    f"{JAVA}/TableMetadataV2MissingSortOrder.json": (InvalidMetadataError, "missing 'sort-orders'"),
    f"{RUST}/table_metadata/TableMetadataV2MissingSortOrder.json": (
        InvalidMetadataError,
        "missing 'sort-orders'",
    ),
    # iceberg-rust test_table_metadata_v1_no_valid_schema: "No valid schema configuration found"
    f"{RUST}/table_metadata/TableMetadataV1NoValidSchema.json": (
        InvalidMetadataError,
        "'schemas' without 'current-schema-id'",
    ),
    # A BigQuery leftover next to the real metadata: no format version at all.
    f"{DUCK}/big_query_error/metadata/v0.metadata.json": (InvalidMetadataError, "no 'format-version'"),
    # iceberg-cxx's deliberately broken files beside a real table: the first 37 bytes of a metadata
    # file, a fragment from its middle, and an empty file (its tests expect all three refused).
    f"{CXX}/metadata/broken1.metadata.json": (
        InvalidMetadataError,
        "malformed JSON at line 3 column 3 (char 28): Unterminated string (the file ends early: truncated)",
    ),
    f"{CXX}/metadata/broken2.metadata.json": (
        InvalidMetadataError,
        "malformed JSON at line 1 column 1 (char 0): Expecting value",
    ),
    f"{CXX}/metadata/empty.metadata.json": (InvalidMetadataError, "table metadata file is empty (0 bytes)"),
}


def metadata_files(root: Path) -> list[Path]:
    """Every table metadata file of the corpus (plain, gzip, zstd, and the named goldens)."""
    out: set[Path] = set()
    for pattern in ("*.metadata.json", "*.metadata.json.gz", "*.gz.metadata.json", "TableMetadata*.json"):
        out.update(root.rglob(pattern))
    out.update((root / RUST).glob("example_*table_metadata*.json"))
    return sorted(p for p in out if p.is_file())


def rel(root: Path, p: Path) -> str:
    return p.relative_to(root).as_posix()


def load(root: Path, name: str) -> TableMetadata:
    return read_table_metadata((root / name).read_bytes(), path=name)


def raw_json(root: Path, name: str) -> dict[str, Any]:
    data = (root / name).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    elif data[:4] == b"\x28\xb5\x2f\xfd":
        data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    result: dict[str, Any] = json.loads(data)
    return result


def pyiceberg_parse(text: bytes) -> Any:
    from pyiceberg.table.metadata import TableMetadataUtil

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TableMetadataUtil.parse_raw(text.decode())


# ---------------------------------------------------------------------------------------------
# The whole corpus
# ---------------------------------------------------------------------------------------------


def test_corpus_has_the_expected_files(conformance: Path) -> None:
    names = {rel(conformance, p) for p in metadata_files(conformance)}
    assert len(names) >= 130
    assert set(INVALID) <= names
    assert f"{GO}/TableMetadataV2Valid.zstd.metadata.json" in names
    assert f"{DUCK}/iceberg/lineitem_iceberg_gz/metadata/v1.gz.metadata.json" in names


def test_every_corpus_file_parses_or_is_refused_for_its_reason(conformance: Path) -> None:
    parsed = 0
    for p in metadata_files(conformance):
        name = rel(conformance, p)
        if name in INVALID:
            kind, reason = INVALID[name]
            with pytest.raises(kind) as info:
                read_table_metadata(p.read_bytes(), path=name)
            assert reason in str(info.value), name
            assert name in str(info.value), "the message must name the file"
            continue
        md = read_table_metadata(p.read_bytes(), path=name)
        assert md.format_version in (1, 2, 3)
        assert md.schema.schema_id == md.current_schema_id
        parsed += 1
    assert parsed >= 120


def test_round_trip_of_every_valid_corpus_file(conformance: Path) -> None:
    for p in metadata_files(conformance):
        name = rel(conformance, p)
        if name in INVALID:
            continue
        md = read_table_metadata(p.read_bytes(), path=name)
        out = table_metadata_to_json(md)
        # Through real JSON text, as a writer would store it.
        again = read_table_metadata(json.dumps(out).encode(), path=name)
        assert again == md, name
        assert table_metadata_to_json(again) == out, name
        # Writing keeps what the version requires and nothing it forbids.
        if md.format_version == 1:
            assert "schema" in out and "partition-spec" in out and "last-sequence-number" not in out
        else:
            assert "schema" not in out and "partition-spec" not in out
            assert {"table-uuid", "last-sequence-number", "schemas", "sort-orders"} <= set(out)
        assert ("next-row-id" in out) == (md.format_version == 3)


def test_lazy_reading_equals_eager_reading_on_every_corpus_file(conformance: Path) -> None:
    # lazy=True (how tables are read) parses snapshots and log entries on use: the same values,
    # and for the invalid goldens the same error, at load or once every item is used.
    for p in metadata_files(conformance):
        name = rel(conformance, p)
        data = p.read_bytes()
        if name in INVALID:
            kind, reason = INVALID[name]
            with pytest.raises(kind, match=None) as info:
                md = read_table_metadata(data, path=name, lazy=True)
                _ = (tuple(md.snapshots), tuple(md.snapshot_log), tuple(md.metadata_log))
            assert reason in str(info.value) and name in str(info.value), name
            continue
        eager = read_table_metadata(data, path=name)
        lazy = read_table_metadata(data, path=name, lazy=True)
        assert lazy.current_snapshot() == eager.current_snapshot(), name
        assert list(lazy.snapshot_ids) == [s.snapshot_id for s in eager.snapshots], name
        for s in eager.snapshots:
            assert lazy.snapshot_by_id(s.snapshot_id) == s, name
        assert lazy == eager, name
        assert tuple(lazy.snapshots) == tuple(eager.snapshots), name
        assert tuple(lazy.snapshot_log) == eager.snapshot_log, name
        assert tuple(lazy.metadata_log) == eager.metadata_log, name
        assert table_metadata_to_json(lazy) == table_metadata_to_json(eager), name


def test_lazy_reading_keeps_the_checks_across_the_file(v2: dict[str, Any], v3: dict[str, Any]) -> None:
    path = "s3://b/t/metadata/00001.metadata.json"

    def lazy(obj: dict[str, Any]) -> TableMetadata:
        return parse_table_metadata(obj, path=path, lazy=True)

    # A malformed old snapshot: the current one reads; using the old one gives the eager error.
    obj = copy.deepcopy(v2)
    obj["snapshots"][0]["summary"] = {"added-files": "1"}
    eager_error = refused(obj)
    md = lazy(obj)
    current = md.current_snapshot()
    assert current is not None and current.snapshot_id == obj["current-snapshot-id"]
    with pytest.raises(InvalidMetadataError) as info:
        md.snapshot_by_id(obj["snapshots"][0]["snapshot-id"])
    assert str(info.value) == eager_error
    with pytest.raises(InvalidMetadataError):
        list(md.snapshots)
    # What is checked across snapshots is checked at load, lazy or not.
    obj = copy.deepcopy(v2)
    obj["snapshots"].append(copy.deepcopy(obj["snapshots"][0]))
    with pytest.raises(InvalidMetadataError, match="duplicate snapshot id"):
        lazy(obj)
    obj = copy.deepcopy(v2)
    obj["refs"] = {"t": {"snapshot-id": 5, "type": "tag"}, "main": {"snapshot-id": obj["current-snapshot-id"], "type": "branch"}}
    with pytest.raises(InvalidMetadataError, match="which does not exist"):
        lazy(obj)
    obj = copy.deepcopy(v2)
    obj["snapshots"][0]["snapshot-id"] = "7"  # an id that is no integer is parsed (and refused) at once
    with pytest.raises(InvalidMetadataError, match="'snapshot-id' must be an integer"):
        lazy(obj)
    obj = copy.deepcopy(v3)
    obj["snapshots"][1]["added-rows"] = 1500
    with pytest.raises(InvalidMetadataError, match="is not above the row ids of snapshot"):
        lazy(obj)
    obj["snapshots"][1]["added-rows"] = -1
    with pytest.raises(InvalidMetadataError, match="'added-rows' must not be negative"):
        lazy(obj)
    # A hand-edited id beyond a Java long is converted as the eager parser converts it.
    obj = copy.deepcopy(v2)
    big = 2**63 + 5
    obj["snapshots"][0]["snapshot-id"] = big
    obj["snapshots"][1]["parent-snapshot-id"] = big
    obj["snapshot-log"] = []
    assert lazy(obj).snapshot_ids == [s.snapshot_id for s in parse_table_metadata(obj).snapshots]


def test_strict_mode_refuses_only_the_documented_deviations(conformance: Path) -> None:
    refused = {}
    for p in metadata_files(conformance):
        name = rel(conformance, p)
        if name in INVALID:
            continue
        try:
            read_table_metadata(p.read_bytes(), path=name, strict=True)
        except InvalidMetadataError as e:
            refused[name] = str(e)
    assert {n.split("/")[3] if n.startswith(DUCK) else n.rsplit("/", 1)[-1] for n in refused} == {
        "add_columns_with_defaults",  # PyIceberg wrote initial-default into v2 tables
        "add_columns_with_defaults_in_struct",
        "timestamptz_ns",  # v3 without next-row-id
        "TableMetadataV3WithPartitionStatistics.json",  # iceberg-go: first-row-id without added-rows
        "TableMetadataV1PartitionSpecsWithoutDefaultId.json",
        "TableMetadataV1SchemasWithoutCurrentId.json",
        "equality_delete_cross_partition",  # snapshot id 9876543210123456789 > 2**63 - 1
        "equality_delete_extra_column",
    }, refused
    assert all(name in msg for name, msg in refused.items())


# ---------------------------------------------------------------------------------------------
# Facts from TABLE_INVENTORY.json and PyIceberg
# ---------------------------------------------------------------------------------------------


def test_inventory_facts_for_every_table(conformance: Path) -> None:
    inventory = json.loads((conformance / "TABLE_INVENTORY.json").read_text())
    assert len(inventory) == 40
    for entry in inventory:
        name = f"{entry['path']}/{entry['current_metadata']}"
        md = load(conformance, name)
        assert md.format_version == max(entry["format_versions"]), name
        assert len(md.snapshots) == entry["n_snapshots"], name
        assert len(md.schemas) == entry["n_schemas"], name
        specs = [
            [f"{f.name}={f.transform}({f.source_id})" for f in spec.fields] for spec in md.partition_specs
        ]
        assert specs == entry["specs"], name
        assert (len(md.partition_specs) > 1) == entry["partition_evolution"], name
        # The inventory lists `next-row-id` where the file has one (timestamptz_ns is v3 without it).
        assert (entry["row_lineage"] != []) == ("next-row-id" in raw_json(conformance, name)), name
        if entry["row_lineage"]:
            assert f"next-row-id={md.next_row_id}" in entry["row_lineage"], name
        assert ("schema.name-mapping.default" in md.properties) == entry["name_mapping"], name


def _pyiceberg_field_ids(schema: Any) -> set[int]:
    from pyiceberg.schema import index_by_id

    return set(index_by_id(schema))


def test_agrees_with_pyiceberg_on_every_file_both_read(conformance: Path) -> None:
    compared = 0
    for p in metadata_files(conformance):
        name = rel(conformance, p)
        if name in INVALID:
            continue
        ours = read_table_metadata(p.read_bytes(), path=name)
        raw = raw_json(conformance, name)
        try:
            theirs = pyiceberg_parse(json.dumps(raw).encode())
        except Exception:  # PyIceberg refuses some valid files (v1 `manifests`, Glue keys, 'ndv' blobs)
            continue
        compared += 1
        assert ours.format_version == theirs.format_version, name
        assert ours.table_uuid == uuid.UUID(str(theirs.table_uuid)), name
        assert ours.location == theirs.location, name
        assert ours.last_updated_ms == theirs.last_updated_ms, name
        assert ours.last_column_id == theirs.last_column_id, name
        assert ours.last_sequence_number == getattr(theirs, "last_sequence_number", 0), name
        assert ours.current_snapshot_id == _long(theirs.current_snapshot_id), name
        assert [s.snapshot_id for s in ours.snapshots] == [_long(s.snapshot_id) for s in theirs.snapshots], name
        assert [s.parent_snapshot_id for s in ours.snapshots] == [
            _long(s.parent_snapshot_id) for s in theirs.snapshots
        ]
        assert [s.sequence_number for s in ours.snapshots] == [
            s.sequence_number or 0 for s in theirs.snapshots
        ]
        assert [s.timestamp_ms for s in ours.snapshots] == [s.timestamp_ms for s in theirs.snapshots], name
        assert [s.manifest_list for s in ours.snapshots] == [s.manifest_list for s in theirs.snapshots], name
        assert [s.operation for s in ours.snapshots] == [
            s.summary.operation.value if s.summary else None for s in theirs.snapshots
        ], name
        assert ours.current_schema_id == theirs.current_schema_id, name
        assert [s.schema_id for s in ours.schemas] == [s.schema_id for s in theirs.schemas], name
        for a, b in zip(ours.schemas, theirs.schemas, strict=True):
            assert set(a.field_ids()) == _pyiceberg_field_ids(b), name
            assert a.identifier_field_ids == tuple(b.identifier_field_ids), name
        assert ours.last_partition_id == theirs.last_partition_id, name
        if name != f"{RUST}/table_metadata/TableMetadataV1PartitionSpecsWithoutDefaultId.json":
            # PyIceberg takes 0 there; we take the newest spec, as iceberg-rust's test expects (2).
            assert ours.default_spec_id == theirs.default_spec_id, name
        assert [
            (s.spec_id, [(f.source_id, f.field_id, f.name, str(f.transform)) for f in s.fields])
            for s in ours.partition_specs
        ] == [
            (s.spec_id, [(f.source_id, f.field_id, f.name, str(f.transform)) for f in s.fields])
            for s in theirs.partition_specs
        ], name
        assert ours.default_sort_order_id == theirs.default_sort_order_id, name
        assert [
            (
                o.order_id,
                [(f.source_id, str(f.transform), str(f.direction), str(f.null_order)) for f in o.fields],
            )
            for o in ours.sort_orders
        ] == [
            (
                o.order_id,
                [(f.source_id, str(f.transform), f.direction.value, f.null_order.value) for f in o.fields],
            )
            for o in theirs.sort_orders
        ], name
        assert {k: (r.snapshot_id, str(r.type)) for k, r in ours.refs.items()} == {
            k: (_long(r.snapshot_id), r.snapshot_ref_type.value) for k, r in theirs.refs.items()
        }, name
        assert dict(ours.properties) == dict(theirs.properties), name
        assert [(e.timestamp_ms, e.snapshot_id) for e in ours.snapshot_log] == [
            (e.timestamp_ms, _long(e.snapshot_id)) for e in theirs.snapshot_log
        ], name
        assert [(e.timestamp_ms, e.metadata_file) for e in ours.metadata_log] == [
            (e.timestamp_ms, e.metadata_file) for e in theirs.metadata_log
        ], name
        if "next-row-id" in raw:
            assert ours.next_row_id == theirs.next_row_id, name
        # Partition types: PyIceberg computes them independently from the transforms' result types.
        for spec, their_spec in zip(ours.partition_specs, theirs.partition_specs, strict=True):
            if any(ours.schema.find_field(i) is None for f in spec.fields for i in f.source_ids):
                continue
            ptype = spec.partition_type(ours.schema)
            their_type = their_spec.partition_type(theirs.schema())
            assert [(f.id, f.name, str(f.type)) for f in ptype.fields] == [
                (f.field_id, f.name, str(f.field_type)) for f in their_type.fields
            ], name
    assert compared >= 110


# ---------------------------------------------------------------------------------------------
# Specific goldens
# ---------------------------------------------------------------------------------------------


def test_v2_valid_golden(conformance: Path) -> None:
    md = load(conformance, f"{JAVA}/TableMetadataV2Valid.json")
    assert md.format_version == 2
    assert md.table_uuid == uuid.UUID("9c12d441-03fe-4693-9a96-a0705ddf69c1")
    assert md.last_sequence_number == 34
    assert md.current_schema_id == 1 and [s.schema_id for s in md.schemas] == [0, 1]
    assert md.schema.identifier_field_ids == (1, 2)
    assert md.default_spec.fields == (PartitionField((1,), 1000, "x", parse_transform("identity")),)
    assert md.sort_order_by_id(3) == SortOrder(
        3,
        (
            SortField((2,), parse_transform("identity"), SortDirection.ASC, NullOrder.NULLS_FIRST),
            SortField((3,), parse_transform("bucket[4]"), SortDirection.DESC, NullOrder.NULLS_LAST),
        ),
    )
    assert md.default_sort_order.order_id == 3
    current = md.current_snapshot()
    assert current is not None and current.snapshot_id == 3055729675574597004
    assert current.parent_snapshot_id == 3051729675574597004 and current.sequence_number == 1
    assert current.schema_id == 1 and md.schema_for_snapshot(current).schema_id == 1
    first = md.snapshot_by_id(3051729675574597004)
    assert first is not None and first.schema_id is None
    assert md.schema_for_snapshot(first).schema_id == 1  # no schema-id: the current schema
    # No refs in the file: the implicit main branch points at the current snapshot.
    assert set(md.refs) == {"main"} and md.refs["main"].type == SnapshotRefType.BRANCH
    assert md.snapshot_for_ref("main") == current


def test_zstd_golden_reads_like_its_plain_json(conformance: Path) -> None:
    name = f"{GO}/TableMetadataV2Valid.zstd.metadata.json"
    assert (conformance / name).read_bytes()[:4] == b"\x28\xb5\x2f\xfd"
    plain = parse_table_metadata(raw_json(conformance, name), path=name)
    assert load(conformance, name) == plain
    assert plain.format_version == 2


def test_v1_golden_fills_in_v2_fields(conformance: Path) -> None:
    md = load(conformance, f"{JAVA}/TableMetadataV1Valid.json")
    assert md.format_version == 1
    assert md.last_sequence_number == 0
    assert [s.schema_id for s in md.schemas] == [0] and md.current_schema_id == 0
    assert [f.name for f in md.schema.fields] == ["x", "y", "z"]
    assert md.partition_specs == (
        PartitionSpec(0, (PartitionField((1,), 1000, "x", parse_transform("identity")),)),
    )
    assert md.last_partition_id == 1000
    assert md.sort_orders == (SortOrder(0, ()),) and md.default_sort_order_id == 0
    assert md.current_snapshot_id is None and md.current_snapshot() is None and dict(md.refs) == {}


def test_rust_v1_goldens_with_partial_new_keys(conformance: Path) -> None:
    # iceberg-rust test_table_metadata_v1_partition_specs_without_default_id: the default is spec 2.
    md = load(conformance, f"{RUST}/table_metadata/TableMetadataV1PartitionSpecsWithoutDefaultId.json")
    assert md.default_spec_id == 2 and [s.spec_id for s in md.partition_specs] == [1, 2]
    assert [(f.name, f.source_id) for f in md.default_spec.fields] == [("y", 2)]
    # iceberg-rust test_table_metadata_v1_schemas_without_current_id: `schema` says which is current.
    md = load(conformance, f"{RUST}/table_metadata/TableMetadataV1SchemasWithoutCurrentId.json")
    assert [f.name for f in md.schema.fields] == ["x", "y", "z"]
    # iceberg-rust test_table_metadata_v1_compat: AWS Glue's v1 file.
    md = load(conformance, f"{RUST}/table_metadata/TableMetadataV1Compat.json")
    assert md.table_uuid == uuid.UUID("3276010d-7b1d-488c-98d8-9025fc4fde6b")
    assert md.last_updated_ms == 1727773114005 and md.current_schema_id == 0
    assert md.location == "s3://bucket/warehouse/iceberg/glue.db/table_name"


def test_statistics_goldens(conformance: Path) -> None:
    md = load(conformance, f"{JAVA}/TableMetadataStatisticsFiles.json")
    (stats,) = md.statistics
    assert stats.snapshot_id == 3055729675574597004
    assert stats.statistics_path == "s3://a/b/stats.puffin"
    assert (stats.file_size_in_bytes, stats.file_footer_size_in_bytes) == (413, 42)
    (blob,) = stats.blob_metadata
    assert (blob.type, blob.snapshot_id, blob.sequence_number, blob.fields) == (
        "ndv",
        3055729675574597004,
        1,
        (1,),
    )

    md = load(conformance, f"{JAVA}/TableMetadataPartitionStatisticsFiles.json")
    (pstats,) = md.partition_statistics
    assert (pstats.snapshot_id, pstats.statistics_path, pstats.file_size_in_bytes) == (
        3055729675574597004,
        "s3://a/b/partition-stats.parquet",
        43,
    )

    md = load(conformance, f"{GO}/TableMetadataV3WithPartitionStatistics.json")
    assert [(p.snapshot_id, p.file_size_in_bytes) for p in md.partition_statistics] == [
        (3051729675574597004, 42330),
        (3055729675574597004, 65871),
    ]
    assert [(s.first_row_id, s.added_rows) for s in md.snapshots] == [(1000, None), (2000, None)]
    assert md.next_row_id == 3000
    tag = md.refs["test"]
    assert (tag.type, tag.snapshot_id, tag.max_ref_age_ms) == (
        SnapshotRefType.TAG,
        3051729675574597004,
        10000000,
    )


def test_v3_encryption_golden(conformance: Path) -> None:
    md = load(conformance, f"{RUST}/table_metadata/TableMetadataV3ValidEncryption.json")
    assert md.format_version == 3 and md.next_row_id == 0
    assert [k.key_id for k in md.encryption_keys] == [
        "5b29941b-b3b4-4d57-8758-a9d1bf340b39",
        "1fb95f04-7f98-4b1f-a08f-e810cfb907ff",
    ]
    first, second = md.encryption_keys
    assert first.encrypted_by_id == "master-1" and dict(first.properties) == {
        "KEY_TIMESTAMP": "1781172301703"
    }
    assert second.encrypted_by_id == first.key_id and dict(second.properties) == {}
    assert first.encrypted_key_metadata_bytes[:4] == bytes.fromhex("5953083f")
    snap = md.current_snapshot()
    assert snap is not None and snap.key_id == second.key_id
    assert snap.first_row_id is None  # row lineage is optional for snapshots on read
    out = table_metadata_to_json(md)
    assert out["encryption-keys"][0]["encrypted-key-metadata"].startswith("WVMIPwaf")


def test_v3_minimal_golden_and_upgraded_table(conformance: Path) -> None:
    md = load(conformance, f"{JAVA}/TableMetadataV3ValidMinimal.json")
    assert md.format_version == 3 and md.next_row_id == 0 and md.current_snapshot() is None
    # A v1 table upgraded to v3: old snapshots keep sequence number 0 and have no row ids.
    md = load(
        conformance,
        f"{DUCK}/iceberg_v1_repro/repro/merch_v1/metadata/00004-v3-upgraded-v1-null-counts.metadata.json",
    )
    assert md.format_version == 3 and md.next_row_id == 0
    assert [(s.sequence_number, s.first_row_id) for s in md.snapshots] == [(0, None)] * 3
    assert "next-row-id" in table_metadata_to_json(md)


def test_v1_deprecated_keys_and_manifests(conformance: Path) -> None:
    name = f"{DUCK}/iceberg_v1_deprecated/default/legacy_v1/metadata/v2.metadata.json"
    md = load(conformance, name)
    raw = raw_json(conformance, name)
    assert "schemas" not in raw and "partition-specs" not in raw
    (snap,) = md.snapshots
    assert snap.manifest_list is None
    assert snap.manifests == tuple(raw["snapshots"][0]["manifests"])
    assert snap.sequence_number == 0 and snap.operation == "append"
    assert md.default_spec.fields == (PartitionField((2,), 1000, "category", parse_transform("identity")),)
    assert md.default_spec.partition_type(md.schema).fields == (
        NestedField(1000, "category", md.schema.fields[1].type),
    )
    out = table_metadata_to_json(md)
    assert out["snapshots"][0]["manifests"] == raw["snapshots"][0]["manifests"]
    assert "manifest-list" not in out["snapshots"][0] and "sequence-number" not in out["snapshots"][0]


def test_gzip_variants(conformance: Path) -> None:
    base = f"{DUCK}/iceberg/lineitem_iceberg_gz"
    for name in (f"{base}/metadata/v1.gz.metadata.json", f"{base}/metadata/v2.gz.metadata.json"):
        assert (conformance / name).read_bytes()[:2] == b"\x1f\x8b"
    md = load(conformance, f"{base}/metadata/v2.gz.metadata.json")
    assert md.format_version == 1
    assert md.table_uuid == uuid.UUID("cadbf370-2450-4103-a393-668c16aed805")
    assert md.current_snapshot_id == 4468019210336628573
    assert load(conformance, f"{DUCK}/iceberg/lineitem_iceberg_gz_no_hint/metadata/v2.gz.metadata.json") == md
    # Detection is by content, not name: a gzip of a plain file reads like the plain file.
    plain_name = f"{JAVA}/TableMetadataV2Valid.json"
    plain = (conformance / plain_name).read_bytes()
    assert read_table_metadata(gzip.compress(plain), path="x.metadata.json.gz") == load(
        conformance, plain_name
    )


def test_defaults_in_v2_are_tolerated_but_not_in_strict_mode(conformance: Path) -> None:
    name = f"{DUCK}/add_columns_with_defaults/default.db/add_columns_with_defaults/metadata/00003-3f1801a5-7dfb-4072-b14a-39cd12f9279b.metadata.json"
    md = load(conformance, name)
    assert md.format_version == 2
    col = md.schema.field_by_name("col_integer")
    assert col is not None and (col.initial_default, col.write_default) == (342342, 342342)
    with pytest.raises(InvalidMetadataError, match="default value, which needs format-version 3"):
        read_table_metadata((conformance / name).read_bytes(), path=name, strict=True)


# ---------------------------------------------------------------------------------------------
# Snapshot selection: refs, time travel, ancestry
# ---------------------------------------------------------------------------------------------


def test_snapshot_as_of_and_ancestry_on_a_deep_history(conformance: Path) -> None:
    name = f"{RUST}/example_table_metadata_v2_deep_history.json"
    md = load(conformance, name)
    log = [(e["timestamp-ms"], e["snapshot-id"]) for e in raw_json(conformance, name)["snapshot-log"]]
    assert len(log) == 5 and len(md.snapshots) == 5
    assert md.snapshot_as_of(log[0][0] - 1) is None  # before the table had data
    for i, (ts, sid) in enumerate(log):
        for t in (ts, ts + 1):  # inclusive at the entry's own time, and just after it
            snap = md.snapshot_as_of(t)
            assert snap is not None and snap.snapshot_id == sid
        if i + 1 < len(log):
            before_next = md.snapshot_as_of(log[i + 1][0] - 1)
            assert before_next is not None and before_next.snapshot_id == sid
    last = md.snapshot_as_of(10**15)
    assert last is not None and last.snapshot_id == log[-1][1] == md.current_snapshot_id
    # Lineage is linear here: ancestors of the head are every snapshot, newest first.
    assert [s.snapshot_id for s in md.ancestors_of(log[-1][1])] == [sid for _, sid in reversed(log)]
    assert [s.snapshot_id for s in md.ancestors_of(log[1][1])] == [log[1][1], log[0][1]]
    assert md.ancestors_of(12345) == ()
    assert md.snapshot_for_ref("main") == md.current_snapshot()
    assert md.snapshot_for_ref("nope") is None


def test_refs_and_same_timestamp_log_entries(conformance: Path) -> None:
    md = load(conformance, f"{RUST}/example_table_metadata_v2_partition_evolution.json")
    # refs has only a tag; main is implied by current-snapshot-id.
    assert set(md.refs) == {"test", "main"}
    assert md.refs["main"].snapshot_id == 3059729675574597004 and md.refs["main"].is_branch
    tag = md.snapshot_for_ref("test")
    assert tag is not None and tag.snapshot_id == 3051729675574597004 and not md.refs["test"].is_branch
    # Two log entries share 1555100955770: the later one was current from then on.
    at = md.snapshot_as_of(1555100955770)
    assert at is not None and at.snapshot_id == 3059729675574597004
    assert [s.spec_id for s in md.partition_specs] == [0, 1, 2] and md.default_spec_id == 2


def test_snapshot_as_of_an_expired_snapshot(conformance: Path) -> None:
    obj = raw_json(conformance, f"{RUST}/example_table_metadata_v2_deep_history.json")
    obj["snapshots"] = obj["snapshots"][2:]
    md = parse_table_metadata(obj)
    with pytest.raises(ValidationError, match="has expired"):
        md.snapshot_as_of(obj["snapshot-log"][0]["timestamp-ms"])
    # Ancestry stops where the parent has been expired.
    assert len(md.ancestors_of(md.current_snapshot_id or 0)) == 3


def test_table_with_several_real_snapshots(conformance: Path) -> None:
    base = f"{DUCK}/equality_deletes/warehouse/mydb/mytable"
    md = load(conformance, f"{base}/metadata/v7.metadata.json")
    raw = raw_json(conformance, f"{base}/metadata/v7.metadata.json")
    assert len(md.snapshots) == 6
    assert [s.sequence_number for s in md.snapshots] == [s["sequence-number"] for s in raw["snapshots"]]
    assert (
        md.last_sequence_number == raw["last-sequence-number"] == max(s.sequence_number for s in md.snapshots)
    )
    head = md.current_snapshot()
    assert head is not None
    chain = md.ancestors_of(head.snapshot_id)
    assert [s.sequence_number for s in chain] == sorted((s.sequence_number for s in chain), reverse=True)
    for entry in md.snapshot_log:
        snap = md.snapshot_as_of(entry.timestamp_ms)
        assert snap is not None and snap.timestamp_ms <= entry.timestamp_ms


# ---------------------------------------------------------------------------------------------
# Version rules and validation on edited goldens
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def v2(conformance: Path) -> dict[str, Any]:
    return raw_json(conformance, f"{JAVA}/TableMetadataV2Valid.json")


@pytest.fixture
def v3(conformance: Path) -> dict[str, Any]:
    return raw_json(conformance, f"{GO}/TableMetadataV3WithPartitionStatistics.json")


def refused(obj: dict[str, Any], kind: type[IcebergError] = InvalidMetadataError) -> str:
    with pytest.raises(kind) as info:
        parse_table_metadata(obj, path="s3://b/t/metadata/00001.metadata.json")
    text = str(info.value)
    assert "s3://b/t/metadata/00001.metadata.json" in text
    return text


def test_format_version_4_is_refused(v2: dict[str, Any]) -> None:
    v2["format-version"] = 4
    assert refused(v2, UnsupportedFormatError) == (
        "unsupported format-version 4 in s3://b/t/metadata/00001.metadata.json; iceduck reads 1, 2 and 3"
    )
    with pytest.raises(UnsupportedFormatError, match="format-version 4"):
        read_table_metadata(json.dumps(v2).encode())
    for bad in ("2", 2.0, True, None):
        v2["format-version"] = bad
        assert "format-version" in refused(v2)


@pytest.mark.parametrize(
    "key",
    [
        "table-uuid",
        "location",
        "last-sequence-number",
        "last-updated-ms",
        "last-column-id",
        "schemas",
        "current-schema-id",
        "partition-specs",
        "default-spec-id",
        "last-partition-id",
        "sort-orders",
        "default-sort-order-id",
    ],
)
def test_v2_required_fields(v2: dict[str, Any], key: str) -> None:
    del v2[key]
    assert f"missing {key!r}" in refused(v2)


@pytest.mark.parametrize("key", ["location", "last-updated-ms", "last-column-id", "schema", "partition-spec"])
def test_v1_required_fields(conformance: Path, key: str) -> None:
    obj = raw_json(conformance, f"{JAVA}/TableMetadataV1Valid.json")
    del obj[key]
    assert repr(key) in refused(obj)


def test_v3_only_fields_in_a_v2_file(v2: dict[str, Any], v3: dict[str, Any]) -> None:
    obj = copy.deepcopy(v2)
    obj["next-row-id"] = 0
    assert "'next-row-id' is not allowed before format-version 3" in refused(obj)
    obj = copy.deepcopy(v2)
    obj["encryption-keys"] = []
    assert "'encryption-keys' is not allowed" in refused(obj)
    for key, value in (("first-row-id", 0), ("added-rows", 1), ("key-id", "k")):
        obj = copy.deepcopy(v2)
        obj["snapshots"][0][key] = value
        assert f"{key!r} is not allowed before format-version 3" in refused(obj)
    for type_name in (
        "timestamp_ns",
        "timestamptz_ns",
        "variant",
        "unknown",
        "geometry",
        "geography(srid:4326)",
    ):
        obj = copy.deepcopy(v2)
        obj["schemas"][1]["fields"].append({"id": 4, "name": "n", "required": False, "type": type_name})
        assert "needs format-version 3 (table is v2)" in refused(obj), type_name
        # ... while a v3 table may have them.
        obj = copy.deepcopy(v3)
        obj["schemas"][1]["fields"].append({"id": 4, "name": "n", "required": False, "type": type_name})
        parse_table_metadata(obj)
    obj = copy.deepcopy(v2)
    obj["schemas"][1]["fields"].append(
        {
            "id": 4,
            "name": "l",
            "required": False,
            "type": {"type": "list", "element-id": 5, "element": "variant", "element-required": False},
        }
    )
    assert "'l.element'" in refused(obj)


def test_multi_argument_fields_need_v3(v2: dict[str, Any], v3: dict[str, Any]) -> None:
    multi = {"name": "xy", "transform": "zorder", "source-ids": [1, 2], "field-id": 1001}
    obj = copy.deepcopy(v2)
    obj["partition-specs"][0]["fields"].append(multi)
    assert "need format-version 3" in refused(obj)
    obj = copy.deepcopy(v3)
    obj["partition-specs"][0]["fields"].append(multi)
    obj["last-partition-id"] = 1001
    obj["sort-orders"][0]["fields"].append(
        {"transform": "zorder", "source-ids": [2, 3], "direction": "asc", "null-order": "nulls-first"}
    )
    md = parse_table_metadata(obj)
    field = md.default_spec.fields[1]
    assert field.source_ids == (1, 2) and str(field.transform) == "zorder"
    with pytest.raises(ValidationError):
        _ = field.source_id
    # An unknown transform gives an `unknown` partition value type; it is kept verbatim.
    assert md.default_spec.partition_type(md.schema).fields[1].type == UNKNOWN
    out = table_metadata_to_json(md)
    assert out["partition-specs"][0]["fields"][1] == multi | {"source-ids": [1, 2]}
    assert "source-id" not in out["partition-specs"][0]["fields"][1]
    assert out["partition-specs"][0]["fields"][0]["source-id"] == 1
    assert "source-ids" not in out["partition-specs"][0]["fields"][0]
    assert out["sort-orders"][0]["fields"][2]["source-ids"] == [2, 3]
    assert parse_table_metadata(out) == md
    # source-id and source-ids must agree when both are given.
    obj["partition-specs"][0]["fields"][0]["source-ids"] = [2]
    assert "disagrees" in refused(obj)


def test_ids_that_refer_to_nothing(v2: dict[str, Any]) -> None:
    cases = [
        ("current-schema-id", 7, "current-schema-id 7 refers to no schema"),
        ("default-spec-id", 7, "default-spec-id 7 refers to no partition spec"),
        ("default-sort-order-id", 7, "default-sort-order-id 7 refers to no sort order"),
        ("current-snapshot-id", 7, "current-snapshot-id 7 refers to no snapshot"),
    ]
    for key, value, message in cases:
        obj = copy.deepcopy(v2)
        obj[key] = value
        assert message in refused(obj), key
    obj = copy.deepcopy(v2)
    obj["refs"] = {"tag1": {"snapshot-id": 99, "type": "tag"}}
    assert "ref 'tag1' refers to snapshot 99" in refused(obj)
    obj = copy.deepcopy(v2)
    obj["refs"] = {"main": {"snapshot-id": 3051729675574597004, "type": "branch"}}
    assert "disagrees with the main branch" in refused(obj)


def test_duplicates(v2: dict[str, Any]) -> None:
    obj = copy.deepcopy(v2)
    obj["schemas"][1]["fields"].append({"id": 2, "name": "again", "required": False, "type": "int"})
    assert "duplicate field id 2" in refused(obj)
    obj = copy.deepcopy(v2)
    obj["schemas"][1]["schema-id"] = 0
    obj["current-schema-id"] = 0
    assert "duplicate schema id 0" in refused(obj)
    obj = copy.deepcopy(v2)
    obj["snapshots"].append(copy.deepcopy(obj["snapshots"][0]))
    assert "duplicate snapshot id" in refused(obj)
    obj = copy.deepcopy(v2)
    obj["partition-specs"].append(copy.deepcopy(obj["partition-specs"][0]))
    assert "duplicate partition spec id 0" in refused(obj)
    obj = copy.deepcopy(v2)
    obj["partition-specs"][0]["fields"].append(
        {"name": "y", "transform": "identity", "source-id": 2, "field-id": 1000}
    )
    assert "duplicate partition field id 1000" in refused(obj)


def test_malformed_values(v2: dict[str, Any]) -> None:
    cases: list[tuple[str, Any, str]] = [
        ("table-uuid", "not-a-uuid", "'table-uuid' is not a UUID"),
        ("last-column-id", "3", "'last-column-id' must be an integer"),
        ("location", 5, "'location' must be a string"),
        ("properties", {"a": 1}, "'properties' must be a map of strings to strings"),
        ("snapshots", {}, "'snapshots' must be a list"),
    ]
    for key, value, message in cases:
        obj = copy.deepcopy(v2)
        obj[key] = value
        assert message in refused(obj), key
    obj = copy.deepcopy(v2)
    del obj["snapshots"][0]["summary"]
    assert "missing 'summary'" in refused(obj)
    obj = copy.deepcopy(v2)
    obj["snapshots"][1]["summary"] = {"added-files": "1"}
    assert "no 'operation'" in refused(obj)
    obj = copy.deepcopy(v2)
    obj["snapshots"][0]["manifests"] = ["m.avro"]
    assert "'manifests' is a v1 field" in refused(obj)
    obj = copy.deepcopy(v2)
    obj["sort-orders"][0]["fields"][0]["direction"] = "up"
    assert "'direction' must be one of" in refused(obj)
    obj = copy.deepcopy(v2)
    obj["refs"] = {"t": {"snapshot-id": 3051729675574597004, "type": "tag", "min-snapshots-to-keep": 2}}
    assert "applies to branches only" in refused(obj)
    obj = copy.deepcopy(v2)
    obj["partition-specs"][0]["fields"][0].pop("field-id")
    assert "missing 'field-id'" in refused(obj)
    obj = copy.deepcopy(v2)
    obj["schemas"][1]["fields"][0]["type"] = "varchar"
    assert "unknown type" in refused(obj)
    assert "must be a JSON object" in refused([1, 2])  # type: ignore[arg-type]


def test_null_only_defaults_and_unknown_columns(v3: dict[str, Any]) -> None:
    obj = copy.deepcopy(v3)
    obj["schemas"][1]["fields"].append(
        {"id": 4, "name": "v", "required": False, "type": "variant", "initial-default": {"a": 1}}
    )
    assert "must default to null" in refused(obj)
    obj = copy.deepcopy(v3)
    obj["schemas"][1]["fields"].append({"id": 4, "name": "u", "required": True, "type": "unknown"})
    assert "must be optional" in refused(obj)
    obj = copy.deepcopy(v3)
    obj["schemas"][1]["fields"].append(
        {"id": 4, "name": "w", "required": False, "type": "int", "initial-default": 5, "write-default": 6}
    )
    for snap in obj["snapshots"]:
        snap["added-rows"] = 1000  # so that strict mode has nothing else to refuse
    md = parse_table_metadata(obj, strict=True)
    w = md.schema.field_by_name("w")
    assert w is not None and (w.initial_default, w.write_default) == (5, 6)


def test_row_lineage_rules(v3: dict[str, Any]) -> None:
    obj = copy.deepcopy(v3)
    obj["snapshots"][1]["added-rows"] = 1500
    assert "next-row-id 3000 is not above the row ids of snapshot" in refused(obj)
    obj["next-row-id"] = 3500
    assert parse_table_metadata(obj).next_row_id == 3500
    del obj["next-row-id"]
    # Without next-row-id (tolerated), it is one past the highest assigned row id.
    assert parse_table_metadata(obj).next_row_id == 3500
    with pytest.raises(InvalidMetadataError, match="missing 'next-row-id'"):
        parse_table_metadata(obj, strict=True)


def test_current_snapshot_minus_one_and_from_main(v2: dict[str, Any], v3: dict[str, Any]) -> None:
    obj = copy.deepcopy(v3)
    obj["current-snapshot-id"] = -1
    del obj["refs"]["main"]
    md = parse_table_metadata(obj)
    assert md.current_snapshot_id is None and "main" not in md.refs
    out = table_metadata_to_json(md)
    assert "current-snapshot-id" not in out  # v3 writes no -1
    v2_obj = copy.deepcopy(v2)
    v2_obj["current-snapshot-id"] = -1
    v2_obj["snapshot-log"] = []
    assert table_metadata_to_json(parse_table_metadata(v2_obj))["current-snapshot-id"] == -1
    # No current-snapshot-id but a main branch: main says which snapshot is current.
    obj = copy.deepcopy(v3)
    del obj["current-snapshot-id"]
    md = parse_table_metadata(obj)
    assert md.current_snapshot_id == obj["refs"]["main"]["snapshot-id"]


def test_v1_partition_field_ids_are_assigned_from_1000(conformance: Path) -> None:
    obj = raw_json(conformance, f"{JAVA}/TableMetadataV1Valid.json")
    obj["partition-spec"] = [
        {"name": "x", "transform": "identity", "source-id": 1},
        {"name": "y_bucket", "transform": "bucket[8]", "source-id": 2},
        {"name": "z_trunc", "transform": "truncate[4]", "source-id": 3},
    ]
    md = parse_table_metadata(obj)
    assert [f.field_id for f in md.default_spec.fields] == [1000, 1001, 1002]
    assert md.last_partition_id == 1002
    ptype = md.default_spec.partition_type(md.schema)
    assert [(f.id, f.type, f.required) for f in ptype.fields] == [
        (1000, LONG, False),
        (1001, INT, False),
        (1002, LONG, False),
    ]
    # v2 must carry them.
    with pytest.raises(InvalidMetadataError, match="missing 'field-id'"):
        parse_partition_fields(obj["partition-spec"], format_version=2)


def test_partition_type_with_a_dropped_source_column() -> None:
    schema = Schema((NestedField(1, "ts", DATE),), schema_id=0)
    spec = parse_partition_spec(
        {
            "spec-id": 1,
            "fields": [
                {"name": "d", "transform": "day", "source-id": 1, "field-id": 1000},
                {"name": "gone", "transform": "bucket[4]", "source-id": 9, "field-id": 1001},
            ],
        }
    )
    ptype = spec.partition_type(schema)
    assert [f.type for f in ptype.fields][1] == UNKNOWN
    with pytest.raises(InvalidMetadataError, match="partition spec 1 field 'd'"):
        parse_partition_spec(
            {"spec-id": 1, "fields": [{"name": "d", "transform": "year", "source-id": 1, "field-id": 1000}]}
        ).partition_type(Schema((NestedField(1, "s", INT),)))


def test_unpartitioned_and_void() -> None:
    assert PartitionSpec(0, ()).is_unpartitioned
    voided = parse_partition_spec(
        {"spec-id": 1, "fields": [{"name": "x", "transform": "void", "source-id": 1, "field-id": 1000}]}
    )
    assert voided.is_unpartitioned
    assert not parse_partition_spec(
        {"spec-id": 2, "fields": [{"name": "x", "transform": "identity", "source-id": 1, "field-id": 1000}]}
    ).is_unpartitioned


def test_malformed_json_and_damaged_compression() -> None:
    with pytest.raises(InvalidMetadataError) as info:
        read_table_metadata(
            b'{\n  "format-version": 2,\n  "location": ,\n}', path="t/metadata/v1.metadata.json"
        )
    assert str(info.value).startswith("t/metadata/v1.metadata.json: malformed JSON at line 3 column 15")
    with pytest.raises(InvalidMetadataError, match="malformed JSON"):
        read_table_metadata(b'{"format-version": NaN}', path="p")
    with pytest.raises(InvalidMetadataError, match="not UTF-8"):
        read_table_metadata(b'{"location": "\xff"}', path="p")
    good = gzip.compress(b'{"format-version": 2}')
    with pytest.raises(CorruptFileError) as cinfo:
        read_table_metadata(good[:-6], path="t/metadata/v1.gz.metadata.json")
    assert str(cinfo.value).startswith("t/metadata/v1.gz.metadata.json: damaged gzip")
    zdata = zstandard.ZstdCompressor().compress(b'{"format-version": 2}' * 10)
    with pytest.raises(CorruptFileError, match="damaged zstd"):
        read_table_metadata(zdata[:-3] + b"\x00\x00\x00", path="t.zstd.metadata.json")


# ---------------------------------------------------------------------------------------------
# Properties of the partition spec and sort order JSON forms
# ---------------------------------------------------------------------------------------------

_transforms = st.sampled_from(
    ["identity", "year", "month", "day", "hour", "void", "bucket[16]", "truncate[3]"]
)
_ids = st.integers(min_value=1, max_value=2**31 - 1)


@settings(max_examples=200, deadline=None)
@given(
    spec_id=st.integers(min_value=0, max_value=1000),
    fields=st.lists(st.tuples(_ids, st.text(min_size=1, max_size=8), _transforms), max_size=6),
    version=st.sampled_from([1, 2, 3]),
)
def test_partition_spec_json_round_trip(
    spec_id: int, fields: list[tuple[int, str, str]], version: int
) -> None:
    spec = PartitionSpec(
        spec_id,
        tuple(
            PartitionField((src,), 1000 + i, name, parse_transform(t))
            for i, (src, name, t) in enumerate(fields)
        ),
    )
    out = partition_spec_to_json(spec)
    assert all("source-id" in f and "source-ids" not in f for f in out["fields"])
    assert parse_partition_spec(json.loads(json.dumps(out)), format_version=version) == spec
    # v1 readers that drop field ids get the same ids back, since they are sequential from 1000.
    bare = [{k: v for k, v in f.items() if k != "field-id"} for f in out["fields"]]
    assert parse_partition_fields(bare, spec_id=spec_id, format_version=1) == spec


@settings(max_examples=200, deadline=None)
@given(
    order_id=st.integers(min_value=1, max_value=1000),
    fields=st.lists(
        st.tuples(
            st.lists(_ids, min_size=1, max_size=3),
            _transforms,
            st.sampled_from(list(SortDirection)),
            st.sampled_from(list(NullOrder)),
        ),
        min_size=1,
        max_size=5,
    ),
)
def test_sort_order_json_round_trip(
    order_id: int, fields: list[tuple[list[int], str, SortDirection, NullOrder]]
) -> None:
    order = SortOrder(order_id, tuple(SortField(tuple(s), parse_transform(t), d, n) for s, t, d, n in fields))
    out = sort_order_to_json(order)
    for f, (sources, *_rest) in zip(out["fields"], fields, strict=True):
        assert ("source-id" in f) == (len(sources) == 1) and ("source-ids" in f) == (len(sources) > 1)
    assert parse_sort_order(json.loads(json.dumps(out)), format_version=3) == order
    # Other spellings writers use for the enums read the same.
    shouted = copy.deepcopy(out)
    for f in shouted["fields"]:
        f["direction"] = f["direction"].upper()
        f["null-order"] = f["null-order"].upper().replace("-", "_")
    assert parse_sort_order(shouted, format_version=3) == order


def _long(snapshot_id: int | None) -> int | None:
    """PyIceberg keeps hand-edited ids beyond a long as they are; iceduck reads their 64 bits signed."""
    if snapshot_id is not None and snapshot_id >= 1 << 63:
        return snapshot_id - (1 << 64)
    return snapshot_id


# ---------------------------------------------------------------------------------------------
# The plain-shape fast path of snapshot parsing
# ---------------------------------------------------------------------------------------------


def _parse_both(
    monkeypatch: pytest.MonkeyPatch, obj: Any, version: int, strict: bool
) -> tuple[Any, Any]:
    """parse_snapshot's result (or error text) with and without the fast path."""
    from iceduck.spec import snapshots as snapshots_module

    def run() -> Any:
        try:
            return snapshots_module.parse_snapshot(obj, format_version=version, path="p", strict=strict)
        except InvalidMetadataError as e:
            return str(e)

    fast = run()
    with monkeypatch.context() as m:
        m.setattr(snapshots_module, "_plain_snapshot", lambda *a: None)
        slow = run()
    return fast, slow


def test_fast_snapshot_parsing_agrees_on_every_corpus_snapshot(
    conformance: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from iceduck.spec.snapshots import _plain_snapshot

    fast_taken = 0
    for p in metadata_files(conformance):
        name = rel(conformance, p)
        if name in INVALID:
            continue
        obj = raw_json(conformance, name)
        for snap in obj.get("snapshots") or []:
            for strict in (False, True):
                fast, slow = _parse_both(monkeypatch, snap, obj["format-version"], strict)
                assert fast == slow, name
            fast_taken += _plain_snapshot(snap, obj["format-version"], False) is not None
    assert fast_taken > 100


_SNAPSHOT_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.text(max_size=3),
    st.just({"operation": "append"}),
    st.just({"operation": "append", "n": 1}),
    st.just({"added-files": "1"}),
    st.just([]),
    st.floats(allow_nan=False, max_value=10, min_value=-10),
)


@settings(max_examples=300)
@given(
    version=st.sampled_from([1, 2, 3]),
    strict=st.booleans(),
    changes=st.dictionaries(
        st.sampled_from(
            ["snapshot-id", "parent-snapshot-id", "sequence-number", "timestamp-ms", "manifest-list", "summary",
             "schema-id", "first-row-id", "added-rows", "key-id", "manifests", "other"]
        ),
        st.one_of(st.just("<delete>"), _SNAPSHOT_VALUES),
        max_size=3,
    ),
)  # fmt: skip
def test_fast_snapshot_parsing_agrees_on_edited_snapshots(
    version: int, strict: bool, changes: dict[str, Any]
) -> None:
    base: dict[str, Any] = {
        "snapshot-id": 7, "parent-snapshot-id": 6, "sequence-number": 3, "timestamp-ms": 1700000000000,
        "manifest-list": "s3://b/t/metadata/snap-7.avro", "summary": {"operation": "append", "added-files": "1"},
        "schema-id": 0,
    }  # fmt: skip
    if version == 3:
        base.update({"first-row-id": 10, "added-rows": 5})
    for key, value in changes.items():
        if value == "<delete>":
            base.pop(key, None)
        else:
            base[key] = value
    with pytest.MonkeyPatch.context() as monkeypatch:
        fast, slow = _parse_both(monkeypatch, base, version, strict)
    assert fast == slow


_FIELD_NAMES = (
    "snapshot_id", "parent_snapshot_id", "sequence_number", "timestamp_ms", "manifest_list", "summary",
    "schema_id", "first_row_id", "added_rows", "key_id", "operation",
)  # fmt: skip


def _values(fields: Any) -> tuple[Any, ...]:
    return tuple(getattr(fields, a) for a in _FIELD_NAMES)


def test_snapshot_fields_equal_the_parsed_snapshots_on_every_corpus_file(conformance: Path) -> None:
    # iceberg_snapshots reads every snapshot's fields without building Snapshots: the same values as
    # parsing, for every snapshot (each checked as parsing checks it), and the same errors.
    read_plain = 0
    for p in metadata_files(conformance):
        name = rel(conformance, p)
        data = p.read_bytes()
        if name in INVALID:
            kind, reason = INVALID[name]
            with pytest.raises(kind) as info:
                read_table_metadata(data, path=name, lazy=True).snapshot_fields()
            assert reason in str(info.value) and name in str(info.value), name
            continue
        eager = read_table_metadata(data, path=name)
        lazy = read_table_metadata(data, path=name, lazy=True)
        built = list(lazy.snapshots._items)  # type: ignore[attr-defined]  # (the current one, at load)
        got = lazy.snapshot_fields()
        assert list(eager.snapshot_fields()) == list(eager.snapshots), name
        assert len(got) == len(eager.snapshots), name
        for fields, snap in zip(got, eager.snapshots, strict=True):
            read_plain += isinstance(fields, SnapshotFields)
            for attr in _FIELD_NAMES:
                assert getattr(fields, attr) == getattr(snap, attr), (name, attr)
        # only the snapshots whose JSON is not of the plain shape are parsed (and kept)
        now = lazy.snapshots._items  # type: ignore[attr-defined]
        for before, after, fields in zip(built, now, got, strict=True):
            assert before is not None or after is None or not isinstance(fields, SnapshotFields), name
    assert read_plain > 100


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    version=st.sampled_from([1, 2, 3]),
    at=st.integers(min_value=0, max_value=2),
    changes=st.dictionaries(
        st.sampled_from(
            ["sequence-number", "timestamp-ms", "manifest-list", "summary", "schema-id",
             "first-row-id", "added-rows", "key-id", "manifests", "other", "parent-snapshot-id"]
        ),
        st.one_of(st.just("<delete>"), _SNAPSHOT_VALUES),
        min_size=1,
        max_size=2,
    ),
)  # fmt: skip
def test_snapshot_fields_give_the_parsers_error_or_its_values(
    version: int, at: int, changes: dict[str, Any], conformance: Path
) -> None:
    # One edited snapshot among plain ones: reading the fields of all of them raises what parsing
    # that snapshot raises (one line naming the file and the snapshot), or gives its values. (Ids and
    # row-id ranges are read at load, and a problem with them is refused there first.)
    golden = "TableMetadataV3WithPartitionStatistics.json" if version == 3 else "TableMetadataV2Valid.json"
    obj = raw_json(conformance, f"{GO if version == 3 else JAVA}/{golden}")
    obj["format-version"] = version
    base = obj["snapshots"][-1]
    snaps = []
    for i in range(3):
        s = copy.deepcopy(base)
        s["snapshot-id"] = 1000 + i
        s.pop("parent-snapshot-id", None)
        snaps.append(s)
    for key, value in changes.items():
        if value == "<delete>":
            snaps[at].pop(key, None)
        else:
            snaps[at][key] = value
    obj.update({"snapshots": snaps, "refs": {}, "snapshot-log": [], "current-snapshot-id": -1})
    if version != 3:
        obj.pop("next-row-id", None)
    data = json.dumps(obj).encode()
    try:  # parsing every snapshot of the same lazy reading (which checks row-id ranges at load)
        expected: Any = [_values(s) for s in read_table_metadata(data, path="m.json", lazy=True).snapshots]
    except IcebergError as e:
        expected = str(e)
    try:
        lazy = read_table_metadata(data, path="m.json", lazy=True)
        got: Any = [tuple(getattr(s, a) for a in _FIELD_NAMES) for s in lazy.snapshot_fields()]
    except IcebergError as e:
        got = str(e)
    assert got == expected
    if isinstance(got, str):
        assert "m.json" in got and "\n" not in got


# ---------------------------------------------------------------------------------------------
# msgspec decodes metadata JSON; json decodes (and names the problem in) whatever msgspec refuses
# ---------------------------------------------------------------------------------------------


def _json_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(table_metadata_module, "decode_metadata_json", lambda text, strict=False: None)


def _read_both(
    monkeypatch: pytest.MonkeyPatch, data: bytes, *, lazy: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """(what reading gives, what reading with json alone gives): a TableMetadata, or the error."""

    def run() -> Any:
        try:
            md = read_table_metadata(data, path="m.json", lazy=lazy, strict=strict)
            fields = [_values(s) for s in md.snapshot_fields()]
            # every lazily read item too (its error, if any, is part of what reading gives)
            return (md, fields, tuple(md.snapshots), tuple(md.snapshot_log), tuple(md.metadata_log))
        except IcebergError as e:
            return (type(e), str(e))

    fast = run()
    with monkeypatch.context() as m:
        _json_only(m)
        slow = run()
    return fast, slow


def _plain_json(value: Any) -> Any:
    """`SnapshotFields` as the JSON object parsing reads from (v3 fields only where set)."""
    if isinstance(value, list):
        return [_plain_json(v) for v in value]
    if not isinstance(value, SnapshotFields):
        return value
    keys = {"first_row_id": "first-row-id", "added_rows": "added-rows", "key_id": "key-id"}
    return {n: getattr(value, a) for a, n in (*_SNAPSHOT_KEYS, *keys.items()) if getattr(value, a) is not None}


_SNAPSHOT_KEYS = (
    ("snapshot_id", "snapshot-id"), ("parent_snapshot_id", "parent-snapshot-id"),
    ("sequence_number", "sequence-number"), ("timestamp_ms", "timestamp-ms"), ("manifest_list", "manifest-list"),
    ("summary", "summary"), ("schema_id", "schema-id"),
)  # fmt: skip


def test_msgspec_decodes_every_corpus_file_as_json_does(conformance: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    typed = 0
    for p in metadata_files(conformance):
        name = rel(conformance, p)
        data = p.read_bytes()
        try:
            text = raw_json_text(data)
        except UnicodeDecodeError:
            continue
        fast = decode_metadata_json(text)
        if fast is not None:
            expected = json.loads(text)
            snaps = fast.get("snapshots")
            if isinstance(snaps, list) and snaps and isinstance(snaps[0], SnapshotFields):
                typed += 1
                # each one what the plain shape reads from its JSON object
                got = [plain_snapshot_fields(s, expected["format-version"], False) for s in expected["snapshots"]]
                assert [_values(s) for s in snaps] == [_values(s) for s in got], name
                expected = {**expected, "snapshots": [_plain_json(s) for s in got]}
                fast = {**fast, "snapshots": _plain_json(snaps)}
            assert fast == expected, name
        for lazy in (False, True):
            for strict in (False, True):
                got_md, want = _read_both(monkeypatch, data, lazy=lazy, strict=strict)
                assert got_md == want, (name, lazy, strict)
    assert typed > 80


def raw_json_text(data: bytes) -> str:
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    elif data[:4] == b"\x28\xb5\x2f\xfd":
        data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return data.decode("utf-8-sig")


# JSON text with what decoders disagree on: big and negative integers, floats at the edges of a
# double (and beyond it), -0.0, escapes (surrogate pairs, lone surrogates, NUL), duplicate keys.
_NUMBER_TEXT = st.sampled_from(
    ["0", "-0", "-0.0", "1.0", "1e2", "1E-2", "0.1", "5e-324", "1e-400", "2.2250738585072014e-308",
     "1.7976931348623157e308", "1e309", "-1e309", "9223372036854775807", "9223372036854775808",
     "-9223372036854775809", "18446744073709551616", "123456789012345678901234567890", "NaN", "Infinity",
     "-Infinity", "01", "1.", ".5", "+1", "true", "false", "null"]
)  # fmt: skip
_STRING_TEXT = st.sampled_from(
    ['"a"', '"\\u00e9"', '"\\ud83d\\ude00"', '"\\ud800"', '"\\udc00x"', '"\\u0000"', '"\\/"', '"é"', '"\\x"', '"tab\t"']
)  # fmt: skip
_VALUE_TEXT = st.recursive(
    st.one_of(_NUMBER_TEXT, _STRING_TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(st.tuples(st.sampled_from(['"k"', '"k2"', '"é"']), inner), max_size=3).map(
            lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}"
        ),
    ),
    max_leaves=8,
)


@settings(max_examples=400)
@given(value=_VALUE_TEXT)
def test_msgspec_takes_a_json_value_only_as_json_reads_it(value: str) -> None:
    # Wherever msgspec decodes a value, it is json's value (same types, -0.0's sign, big integers,
    # the last of duplicate keys); anything else it refuses, and json is the judge.
    text = '{"format-version": 2, "v": ' + value + "}"
    got = decode_metadata_json(text)
    try:
        want = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except ValueError:
        assert got is None
        return
    if got is not None:
        assert got == want
        assert repr(got) == repr(want)  # types and the sign of zero too


def _edited_metadata(conformance: Path, version: int, at: int, changes: dict[str, Any]) -> bytes:
    """A golden's metadata with three plain snapshots, one of them edited: a value, `"<delete>"`,
    or `("<text>", t)` to splice the JSON text t (numbers json and msgspec may read apart)."""
    golden = "TableMetadataV3WithPartitionStatistics.json" if version == 3 else "TableMetadataV2Valid.json"
    obj = raw_json(conformance, f"{GO if version == 3 else JAVA}/{golden}")
    obj["format-version"] = version
    base = obj["snapshots"][-1]
    snaps = []
    for i in range(3):
        s = copy.deepcopy(base)
        s["snapshot-id"] = 1000 + i
        s.pop("parent-snapshot-id", None)
        snaps.append(s)
    spliced: dict[str, str] = {}
    for key, value in changes.items():
        if value == "<delete>":
            snaps[at].pop(key, None)
        elif isinstance(value, tuple):
            snaps[at][key] = marker = f"@@{len(spliced)}@@"
            spliced[json.dumps(marker)] = value[1]
        else:
            snaps[at][key] = value
    obj.update({"snapshots": snaps, "refs": {}, "snapshot-log": [], "current-snapshot-id": -1})
    if version != 3:
        obj.pop("next-row-id", None)
    text = json.dumps(obj)
    for marker, number in spliced.items():
        text = text.replace(marker, number)
    return text.encode()


# Each a shape the typed decoder must refuse (or read as parsing does), for v2 and v3.
_EDITS: list[dict[str, Any]] = [
    {"summary": {"added-files": "1"}}, {"summary": {"operation": "append", "n": 1}}, {"summary": None},
    {"summary": "<delete>"}, {"sequence-number": None}, {"sequence-number": "<delete>"},
    {"sequence-number": ("<text>", "1.0")}, {"sequence-number": True}, {"timestamp-ms": ("<text>", "1e3")},
    {"snapshot-id": 2**63}, {"snapshot-id": -(2**63) - 1}, {"parent-snapshot-id": 2**64 - 1},
    {"schema-id": ("<text>", "-0")}, {"manifest-list": None}, {"manifest-list": 5}, {"manifests": ["a"]},
    {"first-row-id": None}, {"first-row-id": 5, "added-rows": "<delete>"}, {"added-rows": -1}, {"added-rows": 2**63},
    {"key-id": 3}, {"key-id": None}, {"other": 1}, {"summary": {"operation": "append", "x": "\ud800"}},
    {"manifest-list": ("<text>", '"\\ud800"')}, {"manifest-list": ("<text>", '"\\ud83d\\ude00 \\u0000"')},
    {"timestamp-ms": ("<text>", "NaN")}, {"schema-id": ("<text>", "1e400")},
]  # fmt: skip


@pytest.mark.parametrize("edit", _EDITS, ids=lambda e: json.dumps(e, default=str)[:40])
@pytest.mark.parametrize("version", [2, 3])
def test_metadata_read_with_msgspec_equals_json_on_each_edit(
    conformance: Path, monkeypatch: pytest.MonkeyPatch, version: int, edit: dict[str, Any]
) -> None:
    data = _edited_metadata(conformance, version, 1, edit)
    for lazy in (False, True):
        for strict in (False, True):
            fast, slow = _read_both(monkeypatch, data, lazy=lazy, strict=strict)
            assert fast == slow, (lazy, strict)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    version=st.sampled_from([1, 2, 3]),
    strict=st.booleans(),
    lazy=st.booleans(),
    at=st.integers(min_value=0, max_value=2),
    changes=st.dictionaries(
        st.sampled_from(
            ["snapshot-id", "parent-snapshot-id", "sequence-number", "timestamp-ms", "manifest-list", "summary",
             "schema-id", "first-row-id", "added-rows", "key-id", "manifests", "other"]
        ),
        st.one_of(st.just("<delete>"), _SNAPSHOT_VALUES, _NUMBER_TEXT.map(lambda t: ("<text>", t))),
        min_size=1,
        max_size=2,
    ),
)  # fmt: skip
def test_metadata_read_with_msgspec_equals_json_on_edited_snapshots(
    version: int, strict: bool, lazy: bool, at: int, changes: dict[str, Any], conformance: Path
) -> None:
    # An edited snapshot among plain ones (values, or raw number text spliced into the file): the
    # same metadata and snapshot fields, or the same error, as reading with json alone.
    data = _edited_metadata(conformance, version, at, changes)
    with pytest.MonkeyPatch.context() as monkeypatch:
        fast, slow = _read_both(monkeypatch, data, lazy=lazy, strict=strict)
    assert fast == slow


def test_damaged_metadata_reads_with_msgspec_as_with_json(conformance: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Single-byte damage anywhere in real metadata files (v1, v2, v3 writers): msgspec's reading
    # gives the same metadata, or the same one-line error, as json's. Where msgspec refuses, json
    # decides; where msgspec takes the text, the values it gives are json's.
    rng = random.Random(2027)
    names = [
        f"{JAVA}/TableMetadataV2Valid.json",
        f"{GO}/TableMetadataV3WithPartitionStatistics.json",
        f"{DUCK}/hive_partitioned_table/metadata/v4.metadata.json",
    ]
    names += [rel(conformance, p) for p in metadata_files(conformance) if p.name.endswith(".metadata.json")][:: 25]
    same = 0
    for name in names:
        data = (conformance / name).read_bytes()
        if data[:2] == b"\x1f\x8b" or data[:4] == b"\x28\xb5\x2f\xfd":
            continue
        for _ in range(60):
            i = rng.randrange(len(data))
            b = rng.choice(b'"}]{[,:1-.eE0\\x \xff\x00nt')
            damaged = data[:i] + bytes([b]) + data[i + 1 :]
            fast, slow = _read_both(monkeypatch, damaged, lazy=rng.random() < 0.5)
            assert fast == slow, (name, i, bytes([b]))
            same += isinstance(fast[0], TableMetadata)
    assert same > 50  # some damage leaves the file readable (a digit for a digit, ...)
