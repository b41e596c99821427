"""Single-file mutations of a real table (Trino 480, v3, two data files and two deletion vectors) that
today's readers would accept silently while returning other rows: each must be one clear error
naming the damaged file (issue 13, class 4). The mutations are the ones a corrupt-input campaign
found accepted: a DV without referenced_data_file, unknown status and content values, content of the
wrong kind for the manifest, negative sequence numbers, duplicated entries and manifests, partition
fields with a source id no schema has or a malformed transform, and `as_of := '-infinity'`."""

from __future__ import annotations

import copy
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import fastavro
import pytest

TRINO_DV = "more/lithium-tech-iceberg-cxx/tests/tables/deletion_vectors"
TRINO_BUCKETS = "more/lithium-tech-iceberg-cxx/tests/tables/bucket_partitioning"
# The rows create.sql implies: 0..15, minus c1 % 3 = 0 of the first insert, minus c1 % 3 = 1 of both.
EXPECTED = [(2, 2314), (5, 12831), (8, 12318231), (9, 999), (11, 11), (12, 1212), (14, 91121), (15, 182222)]


@pytest.fixture
def table(conformance: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "deletion_vectors"
    shutil.copytree(conformance / TRINO_DV, dest)
    for p in dest.rglob("*"):
        p.chmod(0o644 if p.is_file() else 0o755)
    return dest


def _local(table: Path, recorded: str) -> Path:
    return table / recorded.split("deletion_vectors/", 1)[1]


def _manifests(con: duckdb.DuckDBPyConnection, table: Path, content: str) -> list[Path]:
    rows = con.execute(
        f"SELECT path FROM iceberg_manifests('{table}') WHERE content = '{content}'"
    ).fetchall()
    return [_local(table, r[0]) for r in rows]


def _manifest_list(table: Path) -> Path:
    md = json.loads(sorted((table / "metadata").glob("00004-*.metadata.json"))[0].read_text())
    current = next(s for s in md["snapshots"] if s["snapshot-id"] == md["current-snapshot-id"])
    return _local(table, current["manifest-list"])


def _rewrite(path: Path, change: Callable[[list[dict[str, Any]]], None]) -> None:
    """Rewrite an Avro file with the same schema and metadata, its records changed in place."""
    reader = fastavro.reader(io.BytesIO(path.read_bytes()))
    schema = reader.writer_schema
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    records = list(reader)
    change(records)
    out = io.BytesIO()
    fastavro.writer(out, schema, records, metadata=meta, codec="deflate")
    path.write_bytes(out.getvalue())


def _scan(con: duckdb.DuckDBPyConnection, table: Path) -> list[tuple[Any, ...]]:
    return con.execute(f"SELECT * FROM iceberg_scan('{table}') ORDER BY ALL").fetchall()


def test_the_unchanged_copy_reads_the_rows_create_sql_implies(
    con: duckdb.DuckDBPyConnection, table: Path
) -> None:
    assert _scan(con, table) == EXPECTED


def _set_first(field: str, value: Any, inner: str | None = None) -> Callable[[list[dict[str, Any]]], None]:
    def change(records: list[dict[str, Any]]) -> None:
        target = records[0][inner] if inner else records[0]
        target[field] = value

    return change


@pytest.mark.parametrize(
    ("content", "change", "message"),
    [
        (
            "DELETES",
            _set_first("referenced_data_file", None, "data_file"),
            "deletion vector .* null referenced_data_file",
        ),
        ("DELETES", _set_first("content_offset", None, "data_file"), "without content_offset"),
        ("DATA", _set_first("status", 3), r"status 3; the spec defines 0 \(EXISTING\)"),
        ("DATA", _set_first("content", 7, "data_file"), r"data_file.content 7; the spec defines"),
        ("DATA", _set_first("content", 1, "data_file"), r"content 1 \(position deletes\) in a data manifest"),
        ("DELETES", _set_first("content", 0, "data_file"), r"content 0 \(data\) in a delete manifest"),
        ("DATA", _set_first("sequence_number", -3), "negative sequence number"),
        ("DATA", _set_first("file_sequence_number", -1), "negative sequence number"),
        ("DATA", _set_first("record_count", -8, "data_file"), "negative data_file.record_count"),
        ("DATA", lambda rs: rs.append(copy.deepcopy(rs[0])), "lists .*parquet a second time as live"),
        ("DELETES", lambda rs: rs.append(copy.deepcopy(rs[0])), "lists .*puffin a second time as live"),
    ],
)
def test_a_damaged_manifest_entry_is_an_error_naming_the_manifest(
    con: duckdb.DuckDBPyConnection, table: Path, content: str, change: Any, message: str
) -> None:
    manifest = _manifests(con, table, content)[0]
    _rewrite(manifest, change)
    for sql in (f"SELECT * FROM iceberg_scan('{table}')", f"SELECT * FROM iceberg_files('{table}')"):
        with pytest.raises(duckdb.Error, match=rf"{manifest.name}: manifest entry \d+ .*{message}") as info:
            con.execute(sql).fetchall()
        assert "Traceback" not in str(info.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_set_first("content", 2), r"row 0 has content 2; the spec defines 0 \(data\) and 1 \(deletes\)"),
        (_set_first("sequence_number", -4), "row 0 has a negative sequence number"),
        (_set_first("min_sequence_number", -1), "row 0 has a negative sequence number"),
        (lambda rs: rs.append(copy.deepcopy(rs[0])), "row 4 lists manifest .*-m0.avro a second time"),
    ],
)
def test_a_damaged_manifest_list_is_an_error_naming_it(
    con: duckdb.DuckDBPyConnection, table: Path, change: Any, message: str
) -> None:
    mlist = _manifest_list(table)
    # Row 0 is a data manifest: listed twice it would return its rows twice.
    _rewrite(mlist, change)
    with pytest.raises(duckdb.Error, match=rf"{mlist.name}: manifest list {message}"):
        _scan(con, table)


def test_an_identical_repeat_of_a_delete_manifest_changes_nothing(
    con: duckdb.DuckDBPyConnection, table: Path
) -> None:
    # A repeated delete manifest applies the same deletes again (the DuckDB corpus has such a list).
    def repeat_deletes(rs: list[dict[str, Any]]) -> None:
        rs.append(copy.deepcopy(next(r for r in rs if r["content"] == 1)))

    _rewrite(_manifest_list(table), repeat_deletes)
    assert _scan(con, table) == EXPECTED


def test_a_data_file_live_in_two_manifests_is_an_error(con: duckdb.DuckDBPyConnection, table: Path) -> None:
    first, second = _manifests(con, table, "DATA")
    other = next(iter(fastavro.reader(io.BytesIO(second.read_bytes()))))
    _rewrite(first, lambda rs: rs.append(copy.deepcopy(other)))

    def count_it(rows: list[dict[str, Any]]) -> None:  # the list agrees, else its count check says so first
        row = next(r for r in rows if r["manifest_path"].endswith(first.name))
        row["added_files_count"] += 1

    _rewrite(_manifest_list(table), count_it)
    with pytest.raises(duckdb.Error, match=r"lists data file .*\.parquet live in two manifests"):
        _scan(con, table)


@pytest.fixture
def bucket_table(conformance: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "bucket_partitioning"
    shutil.copytree(conformance / TRINO_BUCKETS, dest)
    for p in dest.rglob("*"):
        p.chmod(0o644 if p.is_file() else 0o755)
    return dest


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("source-id", 999, "source-id 999 is not a field of any schema"),
        (
            "transform",
            "bucket[0]",
            r"transform 'bucket\[0\]' does not parse: bucket takes a positive integer width",
        ),
        ("transform", "truncate[x]", r"transform 'truncate\[x\]' does not parse"),
    ],
)
def test_a_damaged_partition_field_is_an_error_naming_the_metadata_file(
    con: duckdb.DuckDBPyConnection, bucket_table: Path, key: str, value: Any, message: str
) -> None:
    meta = sorted((bucket_table / "metadata").glob("00002-*.metadata.json"))[0]
    doc = json.loads(meta.read_text())
    (spec,) = [s for s in doc["partition-specs"] if s["spec-id"] == doc["default-spec-id"]]
    spec["fields"][0][key] = value
    meta.write_text(json.dumps(doc))
    with pytest.raises(duckdb.Error, match=rf"{meta.name}: partition.*{message}"):
        _scan(con, bucket_table)


def test_an_unknown_transform_name_is_still_read(con: duckdb.DuckDBPyConnection, bucket_table: Path) -> None:
    # The spec has readers ignore transforms they do not know (v3 requires it): not an error.
    before = _scan(con, bucket_table)
    meta = sorted((bucket_table / "metadata").glob("00002-*.metadata.json"))[0]
    doc = json.loads(meta.read_text())
    (spec,) = [s for s in doc["partition-specs"] if s["spec-id"] == doc["default-spec-id"]]
    spec["fields"][0]["transform"] = "zorder"
    meta.write_text(json.dumps(doc))
    assert _scan(con, bucket_table) == before and before


@pytest.mark.parametrize("name", ["iceberg_scan", "iceberg_files"])
def test_as_of_minus_infinity_finds_no_snapshot(
    con: duckdb.DuckDBPyConnection, table: Path, name: str
) -> None:
    for ts in ("'-infinity'::TIMESTAMPTZ", "'-infinity'::TIMESTAMP"):
        with pytest.raises(duckdb.Error, match="no snapshot was current at -infinity"):
            con.execute(f"SELECT count(*) FROM {name}('{table}', as_of := {ts})").fetchall()
    # 'infinity' is after every snapshot: the newest one was current then.
    current = con.execute(f"SELECT count(*) FROM {name}('{table}')").fetchall()
    assert (
        con.execute(f"SELECT count(*) FROM {name}('{table}', as_of := 'infinity'::TIMESTAMPTZ)").fetchall()
        == current
    )
