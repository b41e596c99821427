"""The issue's SQL walk through a table's tree, with `cat` attached to `iceduck serve`, in `Lake.sql`
and in the iceduck shell: every step answers as the DuckDB iceberg extension (the reference peer,
attached to the same server) does on the same table.

    SELECT * FROM iceberg_snapshots(cat.demo.services);
    SELECT * FROM iceberg_load_table_response(cat.demo.services);
    SET VARIABLE metadata_file = (SELECT metadata_location FROM iceberg_load_table_response(cat.demo.services));
    SELECT * FROM read_json(getvariable('metadata_file'));
    SET VARIABLE manifest_list = (SELECT manifest_list FROM iceberg_snapshots(cat.demo.services) ...);
    SELECT * FROM read_avro(getvariable('manifest_list'));
    SELECT * FROM read_avro('<table>/metadata/*-m*.avro');
    SELECT * FROM iceberg_metadata(cat.demo.services);
    SELECT * FROM iceberg_column_stats(cat.demo.services);
    SELECT * FROM iceberg_partition_stats(cat.demo.services);
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import iceduck
from iceduck.serve.server import RestServer
from tests.rest.test_rest_interop import rest_peer  # noqa: F401  (the peer with httpfs, a fixture)
from tests.support.peer import Peer
from tests.support.rest_helpers import serving

pytestmark = pytest.mark.peer

TABLE = "cat.demo.services"
BUILD = [
    "CREATE SCHEMA cat.demo",
    f"CREATE TABLE {TABLE} (service_id BIGINT, service_date DATE, station VARCHAR, delay_min INTEGER) "
    "PARTITIONED BY (day(service_date)) WITH ('commit.retry.num-retries' = '7')",
    f"INSERT INTO {TABLE} SELECT i, DATE '2026-10-01' + (i % 4)::INT, 'st' || (i % 5), (i % 7)::INTEGER "
    "FROM range(4000) r(i)",
    f"DELETE FROM {TABLE} WHERE service_date = DATE '2026-10-02' AND delay_min = 4",
    f"UPDATE {TABLE} SET delay_min = 0 WHERE service_id % 100 = 7",
]
SET_METADATA_FILE = (
    f"SET VARIABLE metadata_file = (SELECT metadata_location FROM iceberg_load_table_response({TABLE}))"
)
SET_MANIFEST_LIST = (
    f"SET VARIABLE manifest_list = (SELECT manifest_list FROM iceberg_snapshots({TABLE}) "
    "ORDER BY sequence_number DESC LIMIT 1)"
)
# each step, the columns both sides have, compared row for row (order-free)
STEPS = [
    f"SELECT snapshot_id, sequence_number, manifest_list FROM iceberg_snapshots({TABLE})",
    f"SELECT metadata_location, request_url FROM iceberg_load_table_response({TABLE})",
    SET_METADATA_FILE,
    'SELECT "format-version", "table-uuid", location, "current-snapshot-id", "last-sequence-number" '
    "FROM read_json(getvariable('metadata_file'))",
    SET_MANIFEST_LIST,
    "SELECT manifest_path, manifest_length, content, sequence_number, added_snapshot_id, added_files_count, "
    "existing_files_count, deleted_files_count, added_rows_count FROM read_avro(getvariable('manifest_list'))",
    "SELECT status, snapshot_id, sequence_number, data_file.content, data_file.file_path, data_file.record_count "
    "FROM read_avro('{location}/metadata/*-m*.avro')",
    f"SELECT manifest_path, manifest_sequence_number, manifest_content, status, content, file_path, "
    f"file_format, record_count FROM iceberg_metadata({TABLE})",
    f"SELECT status, content, file_path, column_name, column_type, lower_bound, upper_bound, value_count, "
    f"null_value_count FROM iceberg_column_stats({TABLE})",
    f"SELECT key, value FROM iceberg_table_properties({TABLE})",
    "SELECT key, value FROM iceberg_schema_properties(cat.demo)",
    f"SELECT manifest_path, added_snapshot_id, partition_spec_id, partition_field_id, partition_field_name, "
    f"partition_source_columns, partition_field_transform, partition_field_type, lower_bound, upper_bound, "
    f"contains_null, contains_nan FROM iceberg_partition_stats({TABLE})",
]


@pytest.fixture
def walked(tmp_path: Path, rest_peer: Peer) -> Iterator[tuple[RestServer, iceduck.Lake, str]]:  # noqa: F811
    """The server with `cat.demo.services` built through iceduck's ATTACH; the lake and the peer
    both attached as `cat`; the table's location."""
    with serving(tmp_path / "served") as server, iceduck.connect(tmp_path / "local") as lake:
        attach = (
            f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )
        lake.sql(attach)
        for statement in BUILD:
            lake.sql(statement)
        rest_peer.execute(attach)
        try:
            md = server.warehouse.catalog.load_table("demo", "services")
            yield server, lake, md.rsplit("/metadata/", 1)[0]
        finally:
            rest_peer.execute("DETACH cat")
            rest_peer.execute("RESET VARIABLE metadata_file")
            rest_peer.execute("RESET VARIABLE manifest_list")


def _normal(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows compared as text (both engines' Python values for the same SQL types agree in text)."""
    return sorted(tuple(json.dumps(v, default=str, sort_keys=True) for v in row) for row in rows)


def _content_as_spec_names(rows: list[tuple[Any, ...]], at: int) -> list[tuple[Any, ...]]:
    """The extension (1.5.5) prints a data file's `content` (0) with the entry-status names
    ('EXISTING'); iceduck prints the spec's name ('DATA'). Every other value must agree."""
    return [(*row[:at], "DATA", *row[at + 1 :]) if row[at] == "EXISTING" else row for row in rows]


def _without_empty_delete_rows(
    theirs: list[tuple[Any, ...]], ours: list[tuple[Any, ...]]
) -> list[tuple[Any, ...]]:
    """The extension also gives a deletion vector (which has no column metrics) one row per column,
    with the text 'NULL' as bounds and no counts; iceduck gives rows only where a file has metrics.
    Those rows, and only those, are left out of the comparison."""
    empty = [r for r in theirs if r[1] != "DATA"]
    assert empty and all(r[5:7] == ("NULL", "NULL") and r[7:] == (None, None) for r in empty), empty
    assert all(r[1] == "DATA" for r in ours)
    return [r for r in theirs if r[1] == "DATA"]


def _day_bounds_as_dates(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """For a `day` partition field the extension gives the type INTEGER and the bounds as days since
    1970-01-01 ('20728'); iceduck gives DATE and '2026-10-02' (Java's result type for `day`). The
    same days, compared as dates."""
    out = []
    for row in rows:
        if row[6] == "day":
            assert row[7] == "INTEGER", row
            as_date = [
                None if b is None else str(dt.date(1970, 1, 1) + dt.timedelta(days=int(b))) for b in row[8:10]
            ]
            row = (*row[:7], "DATE", *as_date, *row[10:])
        out.append(row)
    return out


def test_the_walk_answers_as_the_extension_does(
    walked: tuple[RestServer, iceduck.Lake, str],
    rest_peer: Peer,  # noqa: F811
) -> None:
    server, lake, location = walked
    for step in STEPS:
        sql = step.format(location=location)
        ours = lake.sql(sql)
        theirs = rest_peer.query(sql)
        if step.startswith("SET"):
            assert (ours is None or ours.fetchall() == []) and theirs == []
            continue
        assert ours is not None
        got = ours.fetchall()
        assert got or "schema_properties" in sql, sql  # every step shows something on this table
        content = {"iceberg_metadata(": 4, "iceberg_column_stats(": 1}
        for function, at in content.items():
            if function in sql:
                assert "EXISTING" not in {row[at] for row in got}
                assert "EXISTING" in {row[at] for row in theirs}  # the extension's reading, still
                theirs = _content_as_spec_names(theirs, at)
        if "iceberg_column_stats(" in sql:
            theirs = _without_empty_delete_rows(theirs, got)
        if "iceberg_partition_stats(" in sql:
            theirs = _day_bounds_as_dates(theirs)
        assert _normal(got) == _normal(theirs), sql
    deleted = lake.sql(f"SELECT count(*) FROM iceberg_metadata({TABLE}) WHERE file_format = 'PUFFIN'")
    assert deleted is not None and deleted.fetchall()[0][0] >= 1  # the DELETE wrote a deletion vector
    assert server.url in str(lake.sql(STEPS[1]).fetchall())  # type: ignore[union-attr]


def test_the_walk_runs_as_written_in_the_shell(
    walked: tuple[RestServer, iceduck.Lake, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from iceduck.cli import main

    server, lake, location = walked
    script = [
        f"ATTACH 'warehouse' AS cat (TYPE iceberg, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')",
        f"SELECT * FROM iceberg_snapshots({TABLE})",
        f"SELECT * FROM iceberg_load_table_response({TABLE})",
        SET_METADATA_FILE,
        "SELECT * FROM read_json(getvariable('metadata_file'))",
        SET_MANIFEST_LIST,
        "SELECT * FROM read_avro(getvariable('manifest_list'))",
        f"SELECT * FROM read_avro('{location}/metadata/*-m*.avro')",
        f"SELECT * FROM iceberg_metadata({TABLE})",
        f"SELECT * FROM iceberg_column_stats({TABLE})",
        f"SELECT * FROM iceberg_partition_stats({TABLE})",
    ]
    args = ["--warehouse", str(tmp_path / "shell"), "--create", "-c", ".mode jsonlines"]
    for statement in script:
        args += ["-c", statement]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "Error" not in captured.err, captured.err
    printed = [json.loads(line) for line in captured.out.splitlines() if line.startswith("{")]
    snapshots = lake.sql(f"SELECT snapshot_id FROM iceberg_snapshots({TABLE})").fetchall()  # type: ignore[union-attr]
    assert {r["snapshot_id"] for r in printed if "snapshot_id" in r and "parent_id" in r} >= {
        s for (s,) in snapshots
    }
    assert any(r.get("metadata_location", "").startswith(location) for r in printed)
    assert any("format-version" in r for r in printed)  # read_json of the metadata file
    assert any("manifest_path" in r and "added_files_count" in r for r in printed)  # the manifest list
    assert any("data_file" in r for r in printed)  # the manifests
    assert any("column_name" in r and "column_size" in r for r in printed) and any(
        "partition_field_id" in r for r in printed
    )
