"""`iceduck demo`: builds demo.services through SQL and prints its tree.

The printed facts are checked against the files themselves, read independently: metadata.json with
`json`, the manifest list and manifests with fastavro (first row ids inherited by the spec's rule here),
file sizes from the file system, and the rows and deletes the statements should produce from plain
DuckDB running the same SELECT on its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from iceduck import cli, demo, describe
from tests.support.peer import Peer, sql_string
from tests.support.write_helpers import avro_records

ROWS_SQL = demo._ROWS.format(start=1, stop=4001)
DELETE_WHERE = "delay_min >= 29 AND service_date >= DATE '2026-10-02'"


def run_demo(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(["--warehouse", str(warehouse), "demo"]) == 0
    return capsys.readouterr().out


def current_metadata(warehouse: Path) -> Path:
    folder = warehouse / "demo" / "services" / "metadata"
    return max(folder.glob("*.metadata.json"), key=lambda p: int(p.name.split("-")[0]))


def test_demo_tree_matches_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = tmp_path / "wh"
    out = run_demo(warehouse, capsys)
    for _, statement in demo.STEPS:
        assert "D " + statement.replace("\n", "\n  ") + ";" in out
    location = warehouse / "demo" / "services"

    meta_path = current_metadata(warehouse)
    md = json.loads(meta_path.read_text())
    assert md["format-version"] == 3
    assert f"metadata.json  {meta_path.relative_to(location)}  {describe._size(meta_path.stat().st_size)}" in out
    assert f"format v3 · 3 snapshots · last sequence number 3 · next-row-id {md['next-row-id']}" in out
    assert md["next-row-id"] == 4000

    # the snapshots, in order, with their sequence numbers and operations
    snaps = sorted(md["snapshots"], key=lambda s: s["sequence-number"])
    assert [(s["sequence-number"], s["summary"]["operation"]) for s in snaps] == [
        (1, "append"),
        (2, "append"),
        (3, "delete"),
    ]
    for s in snaps:
        assert f"snapshot {s['snapshot-id']}  seq {s['sequence-number']}  {s['summary']['operation']}" in out
    assert out.count("← current") == 1
    current = snaps[-1]
    assert current["snapshot-id"] == md["current-snapshot-id"]

    # the manifest list and every manifest and file in it
    manifest_list = current["manifest-list"]
    manifests = avro_records(manifest_list)
    assert (
        f"manifest list  {os.path.relpath(manifest_list, location)}  {describe._size(os.path.getsize(manifest_list))}"
        f"  {len(manifests)} manifests" in out
    )
    assert len(manifests) == 3
    dv_counts: dict[str, int] = {}
    row_ids: dict[str, tuple[int, int]] = {}
    for mf in manifests:
        assert (
            f"manifest  {os.path.relpath(mf['manifest_path'], location)}  {describe._size(mf['manifest_length'])}"
            in out
        )
        running = mf.get("first_row_id")
        for entry in avro_records(mf["manifest_path"]):
            d = entry["data_file"]
            rel = os.path.relpath(d["file_path"], location)
            if mf["content"] == 0:
                first = d.get("first_row_id")
                if first is None:  # inherited from the manifest, in manifest order
                    first, running = running, running + d["record_count"]
                row_ids[rel] = (first, first + d["record_count"] - 1)
                line = f"data  {rel}  {d['record_count']} rows  {describe._size(d['file_size_in_bytes'])}"
                assert line in out
                assert f"row ids {first}–{first + d['record_count'] - 1}" in out
            else:
                target = os.path.relpath(d["referenced_data_file"], location)
                dv_counts[target.split("/")[1]] = d["record_count"]
                assert f"DV for {target}: {d['record_count']} deleted positions" in out
                assert f"puffin  {rel}" in out
    assert sorted(row_ids.values()) == [(0, 999), (1000, 1999), (2000, 2999), (3000, 3999)]

    # what the statements should have done, from DuckDB alone
    plain = duckdb.connect()
    want_deleted = dict(
        plain.execute(
            f"SELECT 'service_date_day=' || service_date, count(*) FROM ({ROWS_SQL}) WHERE {DELETE_WHERE} GROUP BY 1"
        ).fetchall()
    )
    assert dv_counts == want_deleted
    left = plain.execute(f"SELECT count(*) FROM ({ROWS_SQL}) WHERE NOT ({DELETE_WHERE})").fetchall()[0][0]
    assert f"demo.services now reads as {left} rows" in out
    assert "BROKEN" not in out and out.count("  ok\n") == 3


@pytest.mark.peer
def test_demo_table_reads_in_the_reference_peer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], peer: Peer
) -> None:
    run_demo(tmp_path / "wh", capsys)
    got = peer.query(
        f"SELECT service_id, service_date, station, delay_min FROM iceberg_scan({sql_string(str(current_metadata(tmp_path / 'wh')))}) ORDER BY 1"
    )
    plain = duckdb.connect()
    want = plain.execute(f"SELECT * FROM ({ROWS_SQL}) WHERE NOT ({DELETE_WHERE}) ORDER BY 1").fetchall()
    assert got == want


def test_demo_twice_rebuilds_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = tmp_path / "wh"
    first = run_demo(warehouse, capsys)
    files_before = {p.name for p in (warehouse / "demo").rglob("*") if p.is_file()}
    second = run_demo(warehouse, capsys)
    assert "existed: dropped it and its files" not in first
    assert "existed: dropped it and its files, building it again" in second
    files_after = {p.name for p in (warehouse / "demo").rglob("*") if p.is_file()}
    assert len(files_after) == len(files_before)
    assert not files_before & files_after  # the old table's files are gone, not left behind
    assert second.count("snapshot ") == first.count("snapshot ")


def test_readme_first_command_on_a_fresh_folder(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ICEDUCK_WAREHOUSE"}
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from iceduck.cli import main; sys.exit(main(['demo']))"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert (tmp_path / "warehouse" / "catalog.db").is_file()
    assert "iceduck -c \"SELECT * FROM iceberg_snapshots('demo.services')\"" in result.stdout
