"""Maintenance through SQL: dry runs never change anything, a real run happens once per statement
and once per plan, refs and retention are respected, orphans are found and anomalies stop the run,
rewrites sort and drop dead delete files, and the log holds the evidence."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from iceduck.errors import IcebergError
from iceduck.maintenance import Maintainer
from iceduck.maintenance.orphans import _path_part
from iceduck.spec.snapshots import SnapshotRef, SnapshotRefType
from iceduck.spec.updates import SetSnapshotRef
from iceduck.transaction.changes import MetadataChange
from iceduck.transaction.commit import TableCommitter
from tests.support import maintenance_helpers as mh
from tests.support.write_helpers import new_lake, pyiceberg_rows

COLUMNS = ["id", "part", "v"]
DAY_S = 24 * 3600


def _table(folder: Path | str, appends: int = 8, deletes: int = 2, **kwargs: Any) -> tuple[Any, Any]:
    lake = new_lake(folder)
    t = lake.create_table(
        "ns.t", [("id", "BIGINT"), ("part", "VARCHAR"), ("v", "VARCHAR")], partition_by=["part"], **kwargs
    )
    for i in range(appends):
        ids = range(i * 5, i * 5 + 5)
        t.append(
            pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "part": ["a" if i % 2 else "b"] * 5,
                    "v": [f"v{x % 7}" for x in ids],
                }
            )
        )
    for k in range(deletes):
        t.delete(f"id % 11 = {k}")
    return lake, t


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    row = con.execute(sql).fetchone()
    assert row is not None
    return row[0]


def _snapshots(con: duckdb.DuckDBPyConnection) -> int:
    return int(_one(con, "SELECT count(*) FROM iceberg_snapshots('ns.t')"))


def _runs(con: duckdb.DuckDBPyConnection) -> int:
    return int(_one(con, "SELECT count(*) FROM iceberg_maintenance_log('ns.t')"))


@pytest.mark.local_only("compares the local warehouse tree byte for byte, and ages a file with os.utime")
def test_dry_runs_change_nothing(tmp_path: Path, warehouse: str) -> None:
    lake, _t = _table(warehouse)
    old = tmp_path / "wh" / "ns" / "t" / "data" / "left-behind.parquet"
    old.write_bytes(b"not referenced")
    os.utime(old, (time.time() - 5 * DAY_S, time.time() - 5 * DAY_S))
    before = mh.tree(tmp_path / "wh")
    con = lake.con
    planned = {
        "expire": con.execute(
            "SELECT count(*) FROM iceberg_expire_snapshots('ns.t', older_than := now(), retain_last := 1) WHERE kind = 'snapshot'"
        ).fetchone(),
        "expire-null": con.execute(
            "SELECT count(*) FROM iceberg_expire_snapshots('ns.t', older_than := now(), dry_run := NULL) WHERE kind = 'snapshot'"
        ).fetchone(),
        "orphans": con.execute(
            "SELECT count(*) FROM iceberg_remove_orphan_files('ns.t') WHERE kind = 'orphan'"
        ).fetchone(),
        "rewrite": con.execute(
            "SELECT count(*) FROM iceberg_rewrite_data_files('ns.t', min_input_files := 2, dry_run := true) WHERE kind = 'data'"
        ).fetchone(),
        "manifests": con.execute(
            "SELECT count(*) FROM iceberg_rewrite_manifests('ns.t') WHERE kind = 'manifest'"
        ).fetchone(),
    }
    assert all(v is not None and v[0] > 0 for v in planned.values()), planned
    for sql in (
        "SELECT * FROM iceberg_health('ns.t')",
        "SELECT * FROM iceberg_health_partitions('ns.t')",
        "SELECT * FROM iceberg_health_history('ns.t')",
        "SELECT * FROM iceberg_maintenance_log('ns.t')",
    ):
        con.execute(sql).fetchall()
    assert con.execute(
        "SELECT DISTINCT status, dry_run FROM iceberg_rewrite_manifests('ns.t')"
    ).fetchall() == [("planned", True)]
    assert mh.tree(tmp_path / "wh") == before  # table files, catalog and maintenance store alike
    lake.close()


def test_a_real_run_happens_once_per_statement(warehouse: str) -> None:
    lake, _t = _table(warehouse)
    con = lake.con
    n = _snapshots(con)
    rows = con.execute(
        "SELECT run_id, status FROM iceberg_rewrite_data_files('ns.t', min_input_files := 2, dry_run := false) "
        "UNION ALL SELECT run_id, status FROM iceberg_rewrite_data_files('ns.t', min_input_files := 2, dry_run := false)"
    ).fetchall()
    assert {r for r in rows} == {(rows[0][0], "succeeded")} and rows[0][0] is not None
    assert _snapshots(con) == n + 1 and _runs(con) == 1

    # nothing runs for EXPLAIN; EXPLAIN ANALYZE runs once; a view read twice runs once
    con.execute("EXPLAIN SELECT * FROM iceberg_rewrite_manifests('ns.t', dry_run := false)").fetchall()
    assert _snapshots(con) == n + 1 and _runs(con) == 1
    con.execute(
        "EXPLAIN ANALYZE SELECT * FROM iceberg_rewrite_manifests('ns.t', dry_run := false)"
    ).fetchall()
    assert _snapshots(con) == n + 2 and _runs(con) == 2
    con.execute(
        "CREATE TEMP VIEW again AS SELECT * FROM iceberg_expire_snapshots('ns.t', older_than := now(), retain_last := 2, dry_run := false)"
    )
    pair = con.execute("SELECT DISTINCT a.run_id, b.run_id FROM again a, again b").fetchall()
    assert len(pair) == 1 and pair[0][0] == pair[0][1]
    assert _runs(con) == 3
    # a new statement is a new run (planned on the new state)
    status = _one(
        con, "SELECT status FROM iceberg_rewrite_manifests('ns.t', dry_run := false) WHERE kind = 'summary'"
    )
    assert status == "nothing_to_do" and _runs(con) == 4
    lake.close()


def test_a_plan_runs_once(warehouse: str) -> None:
    lake, t = _table(warehouse)
    con = lake.con
    plan_id = _one(
        con, "SELECT plan_id FROM iceberg_rewrite_data_files('ns.t', min_input_files := 2) LIMIT 1"
    )
    n = _snapshots(con)
    sql = f"SELECT status, run_id FROM iceberg_rewrite_data_files('ns.t', min_input_files := 2, dry_run := false, plan_id := '{plan_id}') WHERE kind = 'summary'"
    first = con.execute(sql).fetchone()
    second = con.execute(sql).fetchone()
    assert first is not None and second is not None
    assert first[0] == "succeeded" and second == ("already_run", first[1])
    assert _snapshots(con) == n + 1 and _runs(con) == 1
    # a plan made before the table changed is refused
    stale = _one(con, "SELECT plan_id FROM iceberg_rewrite_manifests('ns.t') LIMIT 1")
    t.append(pa.table({"id": pa.array([999], pa.int64()), "part": ["a"], "v": ["x"]}))
    with pytest.raises(duckdb.Error, match="no longer matches the table"):
        con.execute(
            f"SELECT * FROM iceberg_rewrite_manifests('ns.t', dry_run := false, plan_id := '{stale}')"
        ).fetchall()
    lake.close()


def test_committing_needs_a_catalog_table(warehouse: str) -> None:
    lake, t = _table(warehouse)
    path = t.metadata_location
    con = duckdb.connect()
    import iceduck

    iceduck.register(con)
    assert _one(con, f"SELECT count(*) FROM iceberg_rewrite_manifests('{path}')") > 1  # a dry run works
    with pytest.raises(duckdb.Error, match="needs a catalog table"):
        con.execute(f"SELECT * FROM iceberg_rewrite_manifests('{path}', dry_run := false)").fetchall()
    lake.close()


def _set_ref(lake: Any, name: str, snapshot_id: int, kind: str, **retention: int) -> None:
    committer = TableCommitter(lake.catalog, "ns", "t", lake.io)

    def update(md: Any) -> Any:

        return [SetSnapshotRef(name, SnapshotRef(snapshot_id, SnapshotRefType(kind), **retention))]

    committer.commit(MetadataChange("set-ref", update), committer.load())


def test_expiry_respects_branches_tags_and_shared_files(warehouse: str) -> None:
    lake, t = _table(warehouse, appends=6, deletes=0)
    ids = [s.snapshot_id for s in sorted(t.load().metadata.snapshots, key=lambda s: s.sequence_number)]
    _set_ref(lake, "keep", ids[1], "tag")
    _set_ref(lake, "old", ids[2], "tag", max_ref_age_ms=1)
    _set_ref(lake, "dev", ids[3], "branch", min_snapshots_to_keep=2)
    # a compaction after the refs: the small files now live only in the old snapshots
    m = Maintainer.for_lake(lake, "ns.t")
    assert m.rewrite_data_files(min_input_files=2, dry_run=False).status == "succeeded"
    location = t.metadata_location
    md = mh.metadata(location)
    files_of = {s["snapshot-id"]: mh.snapshot_files(location, s["snapshot-id"]) for s in md["snapshots"]}
    rows_of = {
        s["snapshot-id"]: mh.checksum(mh.rows(location, s["snapshot-id"]), COLUMNS) for s in md["snapshots"]
    }
    time.sleep(0.01)
    out = lake.con.execute(
        "SELECT kind, item, outcome FROM iceberg_expire_snapshots('ns.t', older_than := now(), retain_last := 1, dry_run := false)"
    ).fetchall()
    expired = {int(item) for kind, item, outcome in out if kind == "snapshot" and outcome == "expired"}
    # main keeps its head only; tag keep keeps ids[1]; branch dev keeps ids[3] and its parent ids[2];
    # tag old is past its max age; the rest (ids[0], ids[4], ids[5]) expire
    assert expired == {ids[0], ids[4], ids[5]}
    assert ("ref", "old", "removed") in out
    final = t.metadata_location
    fmd = mh.metadata(final)
    assert sorted(fmd["refs"]) == ["dev", "keep", "main"]
    kept = {s["snapshot-id"] for s in fmd["snapshots"]}
    assert kept == {ids[1], ids[2], ids[3], md["current-snapshot-id"]}
    assert all(e["snapshot-id"] in kept for e in fmd.get("snapshot-log", []))
    for sid in kept:  # every kept snapshot reads as before, its files all there
        assert all(mh.exists(p) for p in files_of[sid])
        assert mh.checksum(mh.rows(final, sid), COLUMNS) == rows_of[sid]
    # deleted: exactly what only expired snapshots reached; a file shared with kept ones survives
    gone = set().union(*(files_of[s] for s in expired)) - set().union(*(files_of[s] for s in kept))
    deleted = {item for kind, item, outcome in out if outcome == "deleted"}
    assert {mh.norm(p) for p in deleted} == gone
    shared = set().union(*(files_of[s] for s in expired)) & set().union(*(files_of[s] for s in kept))
    assert shared and all(mh.exists(p) for p in shared)
    lake.close()


@pytest.mark.local_only("ages files with os.utime: S3 objects have no settable modification time (the S3 orphan twin: tests/io/test_s3.py)")
def test_orphans_found_deleted_and_anomalies_stop_everything(tmp_path: Path, warehouse: str) -> None:
    lake, t = _table(warehouse)
    root = tmp_path / "wh" / "ns" / "t"
    old = time.time() - 4 * DAY_S
    junk = [root / "data" / "part=a" / "crashed-writer.parquet", root / "metadata" / "crashed-1-m0.avro"]
    for p in junk:
        p.write_bytes(b"x" * 10)
        os.utime(p, (old, old))
    recent = root / "data" / "in-flight.parquet"
    recent.write_bytes(b"y")
    con = lake.con
    rows_before = mh.checksum(mh.rows(t.metadata_location), COLUMNS)
    with pytest.raises(duckdb.Error, match="less than an hour ago"):
        con.execute("SELECT * FROM iceberg_remove_orphan_files('ns.t', older_than := now())").fetchall()
    # an orphan whose real path is outside the table: the whole run stops, nothing is deleted
    outside = tmp_path / "elsewhere.parquet"
    outside.write_bytes(b"z")
    os.utime(outside, (old, old))
    link = root / "data" / "link.parquet"
    link.symlink_to(outside)
    planned = con.execute(
        "SELECT kind, item FROM iceberg_remove_orphan_files('ns.t') WHERE kind IN ('anomaly', 'orphan')"
    ).fetchall()
    assert [k for k, _ in planned] == ["anomaly"] + ["orphan"] * 2
    with pytest.raises(duckdb.Error, match="nothing deleted"):
        con.execute("SELECT * FROM iceberg_remove_orphan_files('ns.t', dry_run := false)").fetchall()
    assert all(p.exists() for p in junk) and outside.exists()
    link.unlink()
    out = con.execute(
        "SELECT kind, item, outcome FROM iceberg_remove_orphan_files('ns.t', dry_run := false) WHERE kind = 'orphan'"
    ).fetchall()
    assert sorted(out) == sorted(("orphan", str(p), "deleted") for p in junk)
    assert not any(p.exists() for p in junk) and recent.exists()
    assert mh.checksum(mh.rows(t.metadata_location), COLUMNS) == rows_before
    (run_failed, run_ok) = Maintainer.for_lake(lake, "ns.t").log()
    assert run_failed.status == "failed" and "outside the table location" in (run_failed.error or "")
    assert run_ok.status == "succeeded" and {o.outcome for o in run_ok.outcomes} == {"deleted"}
    lake.close()


def test_paths_differing_only_in_scheme_or_authority_are_the_same_file() -> None:
    assert _path_part("s3://bucket/t/data/a.parquet") == _path_part("s3a://bucket/t/data/a.parquet")
    assert _path_part("s3://b1/t/a") == _path_part("s3://b2/t/a") == "/t/a"
    assert _path_part("file:///t/a") == _path_part("/t/a") == "/t/a"


def test_sort_rewrite_writes_sorted_files_with_lineage(warehouse: str) -> None:
    lake, t = _table(warehouse, appends=6, deletes=1)
    before = mh.rows(t.metadata_location)
    r = lake.con.execute(
        "SELECT status FROM iceberg_rewrite_data_files('ns.t', strategy := 'sort', sort_order := 'v DESC, id', dry_run := false) WHERE kind = 'summary'"
    ).fetchone()
    assert r == ("succeeded",)
    after = mh.rows(t.metadata_location)
    assert mh.checksum(after, [*COLUMNS, "_row_id", "_last_updated_sequence_number"]) == mh.checksum(
        before, [*COLUMNS, "_row_id", "_last_updated_sequence_number"]
    )
    entries = [e for mf, e in mh.live_entries(mh.metadata(t.metadata_location)) if mf["content"] == 0]
    assert len(entries) == 2  # one per partition
    for _, e in [(None, e) for e in entries]:
        assert e["data_file"].get("sort_order_id") is None  # an order the table does not declare
        data = mh.read_parquet(e["data_file"]["file_path"]).to_pylist()
        keys = [(r["v"], -r["id"]) for r in data]
        assert keys == sorted(keys, reverse=True)
    # with the table's own order: files record its id
    t.set_sort_order(["id DESC"])
    lake.con.execute(
        "SELECT * FROM iceberg_rewrite_data_files('ns.t', strategy := 'sort', dry_run := false)"
    ).fetchall()
    entries = [e for mf, e in mh.live_entries(mh.metadata(t.metadata_location)) if mf["content"] == 0]
    assert {e["data_file"]["sort_order_id"] for e in entries} == {1}
    lake.close()


def test_v2_rewrite_applies_position_deletes_and_drops_them(warehouse: str) -> None:
    lake, t = _table(warehouse, appends=6, deletes=2, format_version=2)
    before = pyiceberg_rows(t.metadata_location, sort_by="id")
    m = Maintainer.for_lake(lake, "ns.t")
    assert m.health().metrics["position_delete_files"] > 0
    assert m.rewrite_data_files(rewrite_all=True, dry_run=False).status == "succeeded"
    h = m.health()
    assert h.metrics["delete_files"] == 0 and h.metrics["data_files"] == 2
    assert pyiceberg_rows(t.metadata_location, sort_by="id") == before
    lake.close()


def test_log_holds_the_evidence(warehouse: str) -> None:
    lake, t = _table(warehouse)
    base = t.current_snapshot()
    assert base is not None
    plan = Maintainer.for_lake(lake, "ns.t").rewrite_data_files(min_input_files=2)
    lake.con.execute(
        "SELECT * FROM iceberg_rewrite_data_files('ns.t', min_input_files := 2, dry_run := false)"
    ).fetchall()
    row = lake.con.execute(
        "SELECT action, status, base_snapshot_id, result_snapshot_ids, candidates, outcomes, parameters, "
        "health_before_state, health_after_state, table_uuid FROM iceberg_maintenance_log('ns.t')"
    ).fetchall()
    assert len(row) == 1
    action, status, base_id, results, candidates, outcomes, params, hb, ha, uuid_ = row[0]
    assert (action, status, base_id) == ("rewrite_data_files", "succeeded", base.snapshot_id)
    assert results == [t.current_snapshot().snapshot_id]
    assert sorted(c.split(":", 2)[2] for c in candidates) == sorted(plan.plan.files)
    rewritten = {o["item"] for o in outcomes if o["outcome"] == "rewritten"}
    added = {o["item"] for o in outcomes if o["outcome"] == "added"}
    assert rewritten == set(plan.plan.files)
    live = {
        e["data_file"]["file_path"]
        for mf, e in mh.live_entries(mh.metadata(t.metadata_location))
        if mf["content"] == 0
    }
    assert added == live
    assert '"min_input_files": 2' in params and hb and ha
    assert uuid_ == str(t.load().metadata.table_uuid)
    lake.close()


def test_health_history_is_per_table_uuid(warehouse: str) -> None:
    lake, _t = _table(warehouse)
    con = lake.con
    con.execute(
        "SELECT * FROM iceberg_health('ns.t', record := true) UNION ALL SELECT * FROM iceberg_health('ns.t', record := true)"
    ).fetchall()
    con.execute("SELECT * FROM iceberg_health('ns.t', record := true)").fetchall()
    assert _one(con, "SELECT count(*) FROM iceberg_health_history('ns.t')") == 2  # one per statement
    lake.drop_table("ns.t")
    _table_again = lake.create_table("ns.t", [("id", "BIGINT")])
    assert _one(con, "SELECT count(*) FROM iceberg_health_history('ns.t')") == 0
    lake.close()


def test_errors_name_the_table(warehouse: str) -> None:
    lake, _t = _table(warehouse)
    with pytest.raises(duckdb.Error, match="strategy must be"):
        lake.con.execute("SELECT * FROM iceberg_rewrite_data_files('ns.t', strategy := 'zorder')").fetchall()
    with pytest.raises(duckdb.Error, match="retain_last must be at least 1"):
        lake.con.execute("SELECT * FROM iceberg_expire_snapshots('ns.t', retain_last := 0)").fetchall()
    with pytest.raises(IcebergError):
        Maintainer.locate("ns.missing", catalog=lake.catalog)
    lake.close()
