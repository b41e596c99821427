"""The reference peer runs offline from its own venv and answers like DuckDB's own tests expect."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.support.peer import PEER_DUCKDB_VERSION, Peer, PeerError, PeerQueryError, sql_string

pytestmark = pytest.mark.peer

LINEITEM = Path("duckdb-iceberg/data/persistent/iceberg/lineitem_iceberg")


def _expected_lineitem_live_records(conformance: Path) -> int:
    """Records of live (ADDED/EXISTING) files in lineitem_iceberg, from DuckDB's test expectations."""
    cases = json.loads((conformance / "duckdb-iceberg/EXPECTED_RESULTS_FROM_DUCKDB_TESTS.json").read_text())
    wanted = "ICEBERG_METADATA('{WORKING_DIRECTORY}/data/persistent/iceberg/lineitem_iceberg', ALLOW_MOVED_PATHS=TRUE);"
    (case,) = [c for c in cases if c["kind"] == "query" and c["sql"].endswith(wanted)]
    rows = [line.split("\t") for line in case["expected_rows"]]
    # columns: manifest_path, sequence number, manifest content, status, content, file_path, format, record_count
    return sum(int(r[7]) for r in rows if r[3] in ("ADDED", "EXISTING"))


def test_peer_is_duckdb_155_with_iceberg_loaded_offline(peer: Peer) -> None:
    (row,) = peer.query(
        "SELECT version(), current_setting('autoinstall_known_extensions'), "
        "list_sort(list(extension_name) FILTER (WHERE loaded AND extension_name IN ('avro', 'iceberg'))) "
        "FROM duckdb_extensions()"
    )
    assert row == (f"v{PEER_DUCKDB_VERSION}", False, ["avro", "iceberg"])
    assert peer.duckdb_version == PEER_DUCKDB_VERSION


def test_peer_counts_lineitem_from_metadata_json(conformance: Path) -> None:
    # the table's location is relative ("./lineitem_iceberg"): it resolves against the peer's cwd
    expected = _expected_lineitem_live_records(conformance)
    assert expected == 51793  # also the live record count TABLE_INVENTORY.md lists
    table = conformance / LINEITEM
    with Peer.ensure(quiet=True, cwd=table.parent) as local:
        metadata = sql_string(str(table / "metadata/v2.metadata.json"))
        assert local.query(f"SELECT count(*) FROM iceberg_scan({metadata})") == [(expected,)]


def test_peer_counts_lineitem_with_moved_paths(peer: Peer, conformance: Path) -> None:
    table = sql_string(str(conformance / LINEITEM))
    expected = _expected_lineitem_live_records(conformance)
    assert peer.query(f"SELECT count(*) FROM iceberg_scan({table}, allow_moved_paths = true)") == [
        (expected,)
    ]


def test_peer_snapshots_match_metadata_json(peer: Peer, conformance: Path) -> None:
    metadata = json.loads((conformance / LINEITEM / "metadata/v2.metadata.json").read_text())
    expected = sorted((s["sequence-number"], s["snapshot-id"]) for s in metadata["snapshots"])
    table = sql_string(str(conformance / LINEITEM))
    rows = peer.query(f"SELECT sequence_number, snapshot_id FROM iceberg_snapshots({table}) ORDER BY 1")
    assert rows == expected


def test_query_returns_python_values_and_arrow(peer: Peer) -> None:
    sql = "SELECT 1.25::DECIMAL(10, 2) AS d, 'x' AS s, [1, 2] AS l, NULL::INTEGER AS n"
    assert peer.query(sql) == [(Decimal("1.25"), "x", [1, 2], None)]
    table = peer.query_arrow(sql)
    assert table.schema.field("d").type == pa.decimal128(10, 2)
    assert table.to_pylist() == [{"d": Decimal("1.25"), "s": "x", "l": [1, 2], "n": None}]


def test_timestamptz_values_need_no_pytz_on_the_caller_side(peer: Peer) -> None:
    (row,) = peer.query("SELECT TIMESTAMPTZ '2024-01-02 03:04:05+00' = TIMESTAMPTZ '2024-01-02 03:04:05+00'")
    assert row == (True,)
    ((value,),) = peer.query("SELECT TIMESTAMPTZ '2024-01-02 03:04:05+00'")
    assert value.timestamp() == 1704164645.0
    assert type(value.tzinfo).__module__ == "datetime"


def test_errors_name_duckdb_exception_and_connection_survives(peer: Peer) -> None:
    with pytest.raises(PeerQueryError) as info:
        peer.query("SELECT * FROM iceberg_scan('/nonexistent/metadata/v1.metadata.json')")
    assert info.value.error_type == "IOException"
    assert "/nonexistent/metadata/v1.metadata.json" in str(info.value)
    assert peer.query("SELECT 42") == [(42,)]


def test_reset_gives_a_fresh_connection(peer: Peer) -> None:
    peer.execute("CREATE TABLE reset_probe AS SELECT 1 AS a")
    assert peer.query("SELECT a FROM reset_probe") == [(1,)]
    peer.reset()
    with pytest.raises(PeerQueryError):
        peer.query("SELECT a FROM reset_probe")


def test_time_reports_runs_and_result(peer: Peer) -> None:
    timings = peer.time(["SELECT sum(range) FROM range(1000000)", "SELECT 1"], repeat=3, keep_result=True)
    assert [t.sql for t in timings] == ["SELECT sum(range) FROM range(1000000)", "SELECT 1"]
    first: Any = timings[0]
    assert len(first.runs) == 3 and all(r > 0 for r in first.runs)
    assert min(first.runs) <= first.seconds <= max(first.runs)
    assert first.result == ((sum(range(1000000)),),)
    assert first.rows == 1
    if first.peak_rss_bytes is not None:
        assert first.base_rss_bytes is not None and first.peak_rss_bytes >= first.base_rss_bytes > 0


def test_missing_venv_is_unavailable_and_never_installed_implicitly(tmp_path: Path) -> None:
    missing = Peer(tmp_path / "no-peer-here")
    assert not missing.available()
    with pytest.raises(PeerError, match="not installed"):
        missing.query("SELECT 1")
    assert not (tmp_path / "no-peer-here").exists()
