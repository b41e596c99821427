"""The metadata SQL functions on every table of the conformance corpus, checked against the
corpus inventory and against PyIceberg 0.12 reading the same files (an independent reader)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from tests.conftest import conformance_dir, pyiceberg_cwd

_CORPUS = conformance_dir()
_INVENTORY: list[dict[str, Any]] = (
    json.loads((_CORPUS / "TABLE_INVENTORY.json").read_text()) if _CORPUS is not None else []
)
_BROKEN = {
    t["path"] for t in _INVENTORY if t.get("missing_manifest_refs")
}  # tables whose metadata references files the corpus does not ship


def _ids(t: dict[str, Any]) -> str:
    return t["path"].split("data/persistent/", 1)[-1]


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    iceduck.register(c)
    yield c
    c.close()


@contextmanager
def _cwd(path: Path) -> Iterator[None]:
    # The corpus records relative locations: PyIceberg resolves them from the working folder.
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def _metadata_path(t: dict[str, Any]) -> Path:
    assert _CORPUS is not None
    return _CORPUS / t["path"] / t["current_metadata"]


@pytest.mark.parametrize("table", _INVENTORY, ids=_ids)
def test_every_corpus_table_loads_and_matches_the_inventory(
    conformance: Path, con: duckdb.DuckDBPyConnection, table: dict[str, Any]
) -> None:
    folder = str(conformance / table["path"])
    snaps = con.sql(f"SELECT count(*) FROM iceberg_snapshots('{_metadata_path(table)}')").fetchall()[0][0]
    assert snaps == table["n_snapshots"]
    if table["path"] in _BROKEN or table["n_snapshots"] == 0:
        return
    rows = con.sql(
        f"SELECT content, count(*), sum(record_count) FROM iceberg_files('{_metadata_path(table)}') GROUP BY ALL"
    ).fetchall()
    by_content = {c: (n, r) for c, n, r in rows}
    live = table["current_live"]
    assert by_content.get("DATA", (0, 0))[0] == live["data"]
    assert by_content.get("POSITION_DELETES", (0, 0))[0] == live["pos_del"]
    assert by_content.get("EQUALITY_DELETES", (0, 0))[0] == live["eq_del"]
    assert (by_content.get("DATA", (0, 0))[1] or 0) == table["current_data_records_sum"]
    # The folder form finds the same current metadata (version-hint or highest version).
    hint = Path(folder) / "metadata" / "version-hint.text"
    if hint.exists():
        assert con.sql(f"SELECT count(*) FROM iceberg_snapshots('{folder}')").fetchall()[0][0] == snaps


def _pyiceberg_table(t: dict[str, Any]) -> Any:
    from pyiceberg.table import StaticTable

    assert _CORPUS is not None
    return StaticTable.from_metadata(str(_metadata_path(t)))


_COMPARABLE = [t for t in _INVENTORY if t["path"] not in _BROKEN and t["n_snapshots"] > 0]


@pytest.mark.parametrize("table", _COMPARABLE, ids=_ids)
def test_metadata_functions_agree_with_pyiceberg(
    conformance: Path, con: duckdb.DuckDBPyConnection, table: dict[str, Any]
) -> None:
    path = _metadata_path(table)
    with _cwd(pyiceberg_cwd(path, conformance / "duckdb-iceberg")):
        try:
            pt = _pyiceberg_table(table)
            their_snaps = pt.inspect.snapshots().to_pylist()
            their_files = pt.inspect.files().to_pylist()
            their_manifests = pt.inspect.manifests().to_pylist()
            their_entries = pt.inspect.entries().to_pylist()
        except Exception as e:  # PyIceberg cannot read every table (e.g. v3 types): say which
            pytest.skip(f"PyIceberg 0.12 cannot inspect this table: {type(e).__name__}: {e}")

    ours = con.sql(
        f"SELECT snapshot_id, parent_id, operation, manifest_list, summary FROM iceberg_snapshots('{path}')"
    )
    mine = {r[0]: r for r in ours.fetchall()}
    assert set(mine) == {s["snapshot_id"] for s in their_snaps}
    for s in their_snaps:
        _sid, parent, op, mlist, summary = mine[s["snapshot_id"]]
        assert (parent, op, mlist) == (s["parent_id"], s["operation"], s["manifest_list"])
        assert dict(summary) == {k: v for k, v in s["summary"] if k != "operation"} | {"operation": op}

    files = con.sql(
        f"SELECT file_path, record_count, file_size_in_bytes, spec_id, column_sizes, null_value_counts, "
        f"lower_bounds, equality_ids FROM iceberg_files('{path}')"
    ).fetchall()
    assert sorted((f[0], f[1], f[2], f[3]) for f in files) == sorted(
        (f["file_path"], f["record_count"], f["file_size_in_bytes"], f["spec_id"]) for f in their_files
    )
    theirs_by_path = {f["file_path"]: f for f in their_files}
    for fp, _, _, _, sizes, nulls, lower, eq in files:
        t = theirs_by_path[fp]
        assert dict(sizes) == dict(t["column_sizes"] or {})
        assert dict(nulls) == dict(t["null_value_counts"] or {})
        assert dict(lower) == dict(t["lower_bounds"] or {})
        assert (eq or None) == (t["equality_ids"] or None)

    manifests = con.sql(
        f"SELECT path, length, partition_spec_id, added_snapshot_id FROM iceberg_manifests('{path}')"
    ).fetchall()
    assert sorted(manifests) == sorted(
        (m["path"], m["length"], m["partition_spec_id"], m["added_snapshot_id"]) for m in their_manifests
    )

    entries = con.sql(
        f"SELECT status, snapshot_id, sequence_number, file_sequence_number, file_path FROM iceberg_entries('{path}')"
    ).fetchall()
    status_code = {"EXISTING": 0, "ADDED": 1, "DELETED": 2}
    assert sorted((status_code[e[0]], *e[1:]) for e in entries) == sorted(
        (
            e["status"],
            e["snapshot_id"],
            e["sequence_number"],
            e["file_sequence_number"],
            e["data_file"]["file_path"],
        )
        for e in their_entries
    )


def test_time_travel_parameters_select_the_snapshot(
    conformance: Path, con: duckdb.DuckDBPyConnection
) -> None:
    path = conformance / "duckdb-iceberg/data/persistent/equality_deletes/warehouse/mydb/mytable"
    snaps = con.sql(
        f"SELECT snapshot_id, committed_at FROM iceberg_snapshots('{path}') ORDER BY committed_at"
    ).fetchall()
    first, second = snaps[0], snaps[1]
    count = "SELECT count(*) FROM iceberg_files('{p}', {arg})"
    assert con.sql(count.format(p=path, arg=f"snapshot_id := {first[0]}")).fetchall() == [(1,)]
    # as_of a moment after the first commit reads the first snapshot, before the second
    at = f"as_of := TIMESTAMPTZ '{first[1].isoformat()}' + INTERVAL 1 MILLISECOND"
    assert con.sql(count.format(p=path, arg=at)).fetchall() == [(1,)]
    assert (
        con.sql(count.format(p=path, arg="ref := 'main'")).fetchall()
        == con.sql(f"SELECT count(*) FROM iceberg_files('{path}')").fetchall()
    )
    assert second[1] > first[1]
    with pytest.raises(duckdb.Error, match="no snapshot with id 42"):
        con.sql(count.format(p=path, arg="snapshot_id := 42")).fetchall()
    with pytest.raises(duckdb.Error, match="no branch or tag named 'nope'"):
        con.sql(count.format(p=path, arg="ref := 'nope'")).fetchall()
    with pytest.raises(duckdb.Error, match="no snapshot was current"):
        con.sql(count.format(p=path, arg="as_of := TIMESTAMPTZ '2001-01-01 00:00:00+00'")).fetchall()


def test_all_manifests_lists_each_snapshot(conformance: Path, con: duckdb.DuckDBPyConnection) -> None:
    path = conformance / "duckdb-iceberg/data/persistent/is_null_is_not_null"
    per_snapshot = con.sql(
        f"SELECT reference_snapshot_id, count(*) FROM iceberg_manifests('{path}', \"all\" := true) GROUP BY ALL"
    ).fetchall()
    snaps = con.sql(f"SELECT snapshot_id FROM iceberg_snapshots('{path}')").fetchall()
    assert {s for s, _ in per_snapshot} == {s for (s,) in snaps}
    for sid, n in per_snapshot:
        assert (
            n
            == con.sql(f"SELECT count(*) FROM iceberg_manifests('{path}', snapshot_id := {sid})").fetchall()[
                0
            ][0]
        )


def test_readable_metrics_and_partitions_decode_values(
    conformance: Path, con: duckdb.DuckDBPyConnection
) -> None:
    path = conformance / "duckdb-iceberg/data/persistent/hive_partitioned_table"
    parts = con.sql(
        f"SELECT partition['event_date'] AS d, sum(record_count) FROM iceberg_partitions('{path}') GROUP BY ALL ORDER BY d"
    ).fetchall()
    assert [d for d, _ in parts] == ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]
    assert sum(n for _, n in parts) == 6
    bounds = con.sql(
        f"SELECT readable_metrics['event_date'].lower_bound FROM iceberg_files('{path}') ORDER BY 1"
    ).fetchall()
    assert bounds[0] == ("2024-01-01",)


def test_missing_manifest_list_is_named(conformance: Path, con: duckdb.DuckDBPyConnection) -> None:
    # The corpus ships this table without one historical manifest list (TABLE_INVENTORY.json).
    path = conformance / "duckdb-iceberg/data/persistent/equality_deletes/warehouse/mydb/mytable"
    with pytest.raises(duckdb.Error, match=r"manifest list not found: .*snap-7342794868382145167-1-34f7dec7"):
        con.sql(f"SELECT * FROM iceberg_manifests('{path}', \"all\" := true)").fetchall()
    # the current snapshot does not need it
    assert con.sql(f"SELECT count(*) FROM iceberg_manifests('{path}')").fetchall()[0][0] > 0
