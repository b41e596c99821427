"""Health states as the maintenance design defines them: debt (a high deleted share, many small files,
many manifests) is MAINTENANCE_DUE with the action that pays it, never AT_RISK; AT_RISK is danger:
a reader lease outliving retention, failed runs climbing, an orphan scan's anomaly or a large share of
unreferenced files. The deleted share is recomputed from the files (pyarrow over the data files,
the DV cardinalities from the manifests) rather than taken from iceduck's metrics."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from iceduck.maintenance import Maintainer
from iceduck.maintenance.health import (
    AT_RISK,
    MAINTENANCE_DUE,
    Evidence,
    ReaderNeed,
    RunFact,
    compute_health,
)
from iceduck.maintenance.readers import ReaderLeases
from iceduck.maintenance.store import now_ms
from iceduck.table import Table
from tests.support import maintenance_helpers as mh
from tests.support.write_helpers import new_lake

HOUR = 3600_000


def _ordinary_delete(folder: Path):  # type: ignore[no-untyped-def]
    lake = new_lake(folder)
    lake.sql("CREATE SCHEMA lake.s")
    lake.create_table("s.t", [("k", "BIGINT")], format_version=3)
    lake.sql("INSERT INTO lake.s.t SELECT range AS k FROM range(100)")
    lake.sql("INSERT INTO lake.s.t SELECT range AS k FROM range(100, 200)")
    lake.sql("DELETE FROM lake.s.t WHERE k % 2 = 0")
    return lake


def test_an_ordinary_delete_is_debt_not_danger(tmp_path: Path) -> None:
    lake = _ordinary_delete(tmp_path / "wh")
    table = lake.table("s.t")
    md = mh.metadata(table.metadata_location)
    # independent truth: rows stored in the data files, rows the DVs delete
    stored = sum(
        pq.read_metadata(e["data_file"]["file_path"]).num_rows
        for mf, e in mh.live_entries(md)
        if mf["content"] == 0
    )
    deleted = sum(e["data_file"]["record_count"] for mf, e in mh.live_entries(md) if mf["content"] == 1)
    assert (stored, deleted) == (200, 100)
    h = Maintainer.for_lake(lake, "s.t").health()
    assert h.metrics["deleted_row_share"] == deleted / stored == 0.5
    assert h.state == MAINTENANCE_DUE, h.reasons
    (reason,) = [r for r in h.reasons if r.check == "deleted_rows"]
    assert reason.state == MAINTENANCE_DUE and reason.threshold == 0.1
    assert not [r for r in h.reasons if r.state == AT_RISK]
    rewrite = next(a for a in h.actions if a.action == "rewrite_data_files")
    assert "deleted_rows" in rewrite.because and rewrite.parameters["delete_ratio_threshold"] == 0.1
    # the rewrite it recommends pays the debt
    Maintainer.for_lake(lake, "s.t").rewrite_data_files(delete_ratio_threshold=0.1, dry_run=False)
    after = Maintainer.for_lake(lake, "s.t").health()
    assert after.metrics["deleted_row_share"] == 0.0
    assert not [r for r in after.reasons if r.check == "deleted_rows"]
    assert lake.sql("SELECT count(*), sum(k) FROM lake.s.t").fetchall() == [(100, sum(range(1, 200, 2)))]
    lake.close()


def test_debt_far_past_due_stays_due(tmp_path: Path) -> None:
    lake = _ordinary_delete(tmp_path / "wh")
    t = lake.table("s.t")
    t.set_properties({"iceduck.health.max-compactable-files": "1", "iceduck.health.min-input-files": "2",
                      "iceduck.health.max-deleted-row-share": "0.01"})  # fmt: skip
    h = compute_health(Table.load(t.metadata_location))
    assert h.state == MAINTENANCE_DUE
    assert {r.check for r in h.reasons} >= {"deleted_rows", "small_files"}
    lake.close()


def test_a_reader_lease_longer_than_retention_is_at_risk(tmp_path: Path) -> None:
    lake = _ordinary_delete(tmp_path / "wh")
    t = lake.table("s.t")
    t.set_properties({"history.expire.max-snapshot-age-ms": str(2 * HOUR)})
    m = Maintainer.for_lake(lake, "s.t")
    leases = ReaderLeases(m.store(m.load()))
    short = leases.declare(m.load(), who="dashboard", duration_ms=HOUR)
    assert m.health().state == MAINTENANCE_DUE  # one hour inside a two-hour retention
    leases.release(short)
    leases.declare(m.load(), who="nightly export", duration_ms=5 * HOUR)
    h = m.health()
    assert h.state == AT_RISK
    (risk,) = [r for r in h.reasons if r.state == AT_RISK]
    assert risk.check == "readers" and risk.threshold == 2 * HOUR
    assert 5 * HOUR <= risk.value < 5 * HOUR + 60_000
    assert "nightly export" in risk.message and "history.expire.max-snapshot-age-ms" in risk.message
    lake.close()


def test_failed_runs_climbing_and_orphan_anomalies_are_at_risk(tmp_path: Path) -> None:
    lake = _ordinary_delete(tmp_path / "wh")
    table = Table.load(lake.table("s.t").metadata_location)
    now = now_ms()
    ago = [now - h * HOUR for h in (1, 2, 3)]

    def states(ev: Evidence) -> set[tuple[str, str]]:
        h = compute_health(table, now_ms=now, evidence=ev)
        return {(r.state, r.check) for r in h.reasons}

    climbing = Evidence(runs=tuple(RunFact("rewrite_data_files", t, True) for t in ago))
    assert (AT_RISK, "commit_failures") in states(climbing)
    # as many the day before: not climbing
    steady = Evidence(
        runs=climbing.runs + tuple(RunFact("rewrite_data_files", t - 24 * HOUR, True) for t in ago)
    )
    assert (AT_RISK, "commit_failures") not in states(steady)
    anomaly = Evidence(
        runs=(RunFact("remove_orphan_files", now - HOUR, True, 0, "a listed path is outside"),)
    )
    assert (AT_RISK, "unreferenced_files") in states(anomaly)
    many = Evidence(runs=(RunFact("remove_orphan_files", now - HOUR, False, 10),))  # 10 beside 2 data files
    assert (AT_RISK, "unreferenced_files") in states(many)
    few = Evidence(runs=(RunFact("remove_orphan_files", now - HOUR, False, 1),))
    assert (AT_RISK, "unreferenced_files") not in states(few)
    leases = Evidence(readers=(ReaderNeed("l1", "x", 1, now - HOUR, now + HOUR),))
    assert AT_RISK not in {s for s, _ in states(leases)}  # 2 h needed, 5 days kept
    lake.close()
