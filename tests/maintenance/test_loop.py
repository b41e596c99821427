"""The maintenance loop's gates on real tables, each with a fake clock: windows defer, budgets trim
and defer, reader leases and the retention floor hold expiry back (never below them), missing
delete permission and a high commit failure rate block, policy decides what runs by itself; and
the SQL / CLI faces of the loop. Truth for files and snapshots comes from the metadata JSON
(`tests/maintenance_helpers.py`), not from the loop's own accounts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from iceduck.lake import Lake
from iceduck.maintenance.audit import AuditLog
from iceduck.maintenance.loop import (
    BLOCKED,
    DEFERRED,
    NOTHING_TO_DO,
    RAN,
    WOULD_RUN,
    Decision,
    MaintenanceLoop,
    probe_delete,
)
from iceduck.maintenance.policy import HOUR_MS, Budget
from iceduck.maintenance.readers import ReaderLeases
from iceduck.maintenance.store import now_ms
from tests.support import maintenance_helpers as mh
from tests.support.s3_fixture import aws_env
from tests.support.write_helpers import new_lake

FAST = {
    "history.expire.max-snapshot-age-ms": "1000",
    "history.expire.min-snapshots-to-keep": "2",
    "iceduck.retention.min-reader-age": "0",
}


def small_table(lake: Lake, name: str, appends: int, **props: str) -> Any:
    """`appends` one-row appends over two day partitions."""
    t = lake.create_table(name, [("id", "BIGINT"), ("day", "DATE")], partition_by=["day"], properties=props)
    for i in range(appends):
        t.append(pa.table({"id": pa.array([i], pa.int64()), "day": pa.array([19000 + i % 2], pa.date32())}))
    return t


def only(decisions: tuple[Decision, ...], table: str, action: str) -> Decision:
    found = [d for d in decisions if d.table == table and d.action == action]
    assert len(found) == 1, decisions
    return found[0]


def snapshot_ids(location: str) -> set[int]:
    return {s["snapshot-id"] for s in mh.metadata(location).get("snapshots", [])}


def test_a_closed_window_defers_until_it_opens(warehouse: str) -> None:
    lake = new_lake(warehouse)
    small_table(lake, "ns.t", 12, **FAST, **{"iceduck.maintenance.window": "01:00-03:00"})
    time.sleep(1.2)
    real = now_ms()
    midnight = real - real % (24 * HOUR_MS)
    closed = MaintenanceLoop.for_lake(lake, clock=lambda: midnight + 5 * HOUR_MS).plan()
    d = only(closed.decisions, "ns.t", "rewrite_data_files")
    assert (d.decision, d.reason) == (DEFERRED, "window_closed")
    assert d.resume_at_ms == midnight + 25 * HOUR_MS  # tomorrow 01:00 UTC
    assert {x.decision for x in closed.decisions if x.table == "ns.t"} == {DEFERRED}
    opened = MaintenanceLoop.for_lake(lake, clock=lambda: midnight + 2 * HOUR_MS).plan()
    assert only(opened.decisions, "ns.t", "rewrite_data_files").decision == WOULD_RUN
    lake.close()


def test_budgets_trim_then_defer_and_a_later_pass_finishes(warehouse: str) -> None:
    lake = new_lake(warehouse)
    t = small_table(lake, "ns.t", 12, **FAST)
    time.sleep(1.2)
    base = now_ms()
    loop = MaintenanceLoop.for_lake(lake, budget=Budget(file_groups=1, commits=2), clock=lambda: base)
    first = loop.run()
    rewrite = only(first.decisions, "ns.t", "rewrite_data_files")
    assert rewrite.decision == RAN and "1 of 2 file group(s)" in rewrite.message
    assert rewrite.spent.file_groups == 1 and rewrite.spent.commits == 1
    # two commits per hour: the manifest rewrite takes the second, expiry has to wait an hour
    assert only(first.decisions, "ns.t", "rewrite_manifests").decision == RAN
    expire = only(first.decisions, "ns.t", "expire_snapshots")
    assert (expire.decision, expire.reason) == (DEFERRED, "budget_commits")
    assert expire.resume_at_ms is not None and base < expire.resume_at_ms <= base + HOUR_MS + 60_000
    assert first.spent.commits == 2
    # within the hour nothing fits; an hour later a second pass finishes the work
    again = MaintenanceLoop.for_lake(
        lake, budget=Budget(file_groups=1, commits=2), clock=lambda: base + 60_000
    )
    assert {d.reason for d in again.plan().decisions if d.decision == DEFERRED} == {"budget_commits"}
    later = MaintenanceLoop.for_lake(
        lake, budget=Budget(file_groups=1, commits=3), clock=lambda: now_ms() + HOUR_MS
    )
    second = later.run()
    assert only(second.decisions, "ns.t", "rewrite_data_files").decision == RAN
    assert only(second.decisions, "ns.t", "expire_snapshots").decision == RAN
    # every commit the log holds stayed within two per rolling hour of the first pass's clock
    runs = AuditLog(loop.store(loop.maintainer("ns.t").load())).runs()
    assert sum(len(r.commits) for r in runs if r.finished_ms and r.finished_ms <= base + HOUR_MS) <= 2 + 3
    assert len(mh.metadata(t.metadata_location)["snapshots"]) >= 2
    lake.close()


def test_delete_requests_budget_expires_the_oldest_snapshots_that_fit(warehouse: str) -> None:
    lake = new_lake(warehouse)
    t = small_table(lake, "ns.t", 10, **FAST, **{"iceduck.maintenance.auto": "expire"})
    time.sleep(1.2)
    stamps = {s["snapshot-id"]: s["timestamp-ms"] for s in mh.metadata(t.metadata_location)["snapshots"]}
    loop = MaintenanceLoop.for_lake(lake, budget=Budget(delete_requests=4))
    d = only(loop.run().decisions, "ns.t", "expire_snapshots")
    assert d.decision == RAN and "more wait for delete budget" in d.message
    assert 0 < d.spent.delete_requests <= 4
    after = snapshot_ids(t.metadata_location)
    gone = set(stamps) - after
    # the oldest went first: every expired snapshot is older than every kept one
    assert gone and len(after) > 2
    assert max(stamps[s] for s in gone) <= min(stamps[s] for s in after)
    # the next pass (a fresh per-run budget) continues down to the policy's two snapshots
    for _ in range(5):
        loop.run()
    assert len(snapshot_ids(t.metadata_location)) == 2
    lake.close()


def test_a_reader_lease_holds_expiry_back_and_never_loses_its_snapshot(warehouse: str) -> None:
    lake = new_lake(warehouse)
    t = small_table(lake, "ns.t", 8, **FAST, **{"iceduck.maintenance.auto": "expire"})
    loop = MaintenanceLoop.for_lake(lake)
    table = loop.maintainer("ns.t").load()
    oldest = min(table.metadata.snapshots, key=lambda s: s.timestamp_ms)
    leases = loop.leases("ns.t")
    lease = leases.declare(table, who="month-end export", duration_ms=HOUR_MS, snapshot_id=oldest.snapshot_id)
    files = mh.snapshot_files(t.metadata_location, oldest.snapshot_id)
    time.sleep(1.2)
    d = only(loop.run().decisions, "ns.t", "expire_snapshots")
    assert (d.decision, d.reason) == (BLOCKED, "reader_lease") and "month-end export" in d.message
    assert oldest.snapshot_id in snapshot_ids(t.metadata_location)
    # a lease on a younger snapshot lets the older ones go, never the leased one or newer
    leases.release(lease)
    middle = sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms)[4]
    leases.declare(table, who="dashboard", duration_ms=HOUR_MS, snapshot_id=middle.snapshot_id)
    d = only(loop.run().decisions, "ns.t", "expire_snapshots")
    assert d.decision == RAN and "held back" in d.message and "dashboard" in d.message
    kept = snapshot_ids(t.metadata_location)
    assert middle.snapshot_id in kept
    assert all(
        s.snapshot_id in kept for s in table.metadata.snapshots if s.timestamp_ms >= middle.timestamp_ms
    )
    assert oldest.snapshot_id not in kept and all(
        mh.exists(p) for p in mh.snapshot_files(t.metadata_location, middle.snapshot_id)
    )
    assert files  # the first lease's files were checked against the metadata before expiry
    # an expired lease protects nothing: the loop's clock says when
    assert not ReaderLeases(loop.store(table)).active(now_ms() + 2 * HOUR_MS)
    lake.close()


def test_the_retention_floor_blocks_expiry_of_young_snapshots(warehouse: str) -> None:
    lake = new_lake(warehouse)
    t = small_table(
        lake,
        "ns.t",
        6,
        **{**FAST, "iceduck.retention.min-reader-age": "2h", "iceduck.maintenance.auto": "expire"},
    )
    time.sleep(1.2)
    before = snapshot_ids(t.metadata_location)
    d = only(MaintenanceLoop.for_lake(lake).run().decisions, "ns.t", "expire_snapshots")
    assert (d.decision, d.reason) == (BLOCKED, "retention_floor") and "min-reader-age = 2h" in d.message
    assert snapshot_ids(t.metadata_location) == before
    # two hours later (a fake clock) the floor has passed them
    later = MaintenanceLoop.for_lake(lake, clock=lambda: now_ms() + 3 * HOUR_MS).plan()
    assert only(later.decisions, "ns.t", "expire_snapshots").decision == WOULD_RUN
    lake.close()


def test_missing_delete_permission_and_failing_commits_block(warehouse: str) -> None:
    lake = new_lake(warehouse)
    small_table(lake, "ns.t", 12, **FAST)
    time.sleep(1.2)
    denied = MaintenanceLoop.for_lake(
        lake, probe=lambda table: f"delete permission missing in {table.metadata.location}"
    )
    report = denied.run()
    d = only(report.decisions, "ns.t", "expire_snapshots")
    assert (d.decision, d.reason) == (BLOCKED, "delete_permission")
    assert only(report.decisions, "ns.t", "rewrite_data_files").decision == RAN  # it deletes nothing
    # four failed runs in the last day: above the 0.5 failure rate, the loop stops committing
    loop = MaintenanceLoop.for_lake(lake)
    log = AuditLog(loop.store(loop.maintainer("ns.t").load()))
    for i in range(4):
        log.start(
            run_id=f"r{i}",
            plan_id=f"p{i}",
            action="rewrite_data_files",
            table_uuid="-",
            table="ns.t",
            base_metadata_location="-",
            base_snapshot_id=None,
            parameters={},
            candidates=[],
            health_before=None,
        )
        log.finish(run_id=f"r{i}", status="failed", error="CommitConflictError: lost the race")
    blocked = loop.plan()
    reasons = {d.action: d.reason for d in blocked.decisions if d.table == "ns.t"}
    assert reasons["expire_snapshots"] == "commit_failures"
    assert all(r == "commit_failures" for a, r in reasons.items() if a != "remove_orphan_files")
    lake.close()


def test_the_probe_reports_a_real_permission_error(tmp_path: Path, warehouse: str) -> None:
    lake = new_lake(warehouse)
    small_table(lake, "ns.t", 1)
    table = MaintenanceLoop.for_lake(lake).maintainer("ns.t").load()
    assert probe_delete(table) is None
    assert not [p for p in (tmp_path / "wh").rglob(".iceduck-delete-probe-*")]

    class NoDelete(type(table.io)):  # type: ignore[misc]
        def delete(self, path: str) -> None:
            raise PermissionError(13, "Permission denied", path)

    denied = type(table)(table.metadata, table.metadata_location, NoDelete(), table.resolver, table.name)
    why = probe_delete(denied)
    assert why is not None and "delete permission missing" in why and "Permission denied" in why
    lake.close()


def test_policy_and_health_blocks(warehouse: str) -> None:
    lake = new_lake(warehouse)
    small_table(lake, "ns.manual", 12, **FAST, **{"iceduck.maintenance.auto": "none"})
    small_table(lake, "ns.bad", 2, **{"iceduck.maintenance.window": "whenever"})
    small_table(lake, "ns.fine", 1)
    time.sleep(1.2)
    report = MaintenanceLoop.for_lake(lake).plan()
    manual = [d for d in report.decisions if d.table == "ns.manual"]
    assert manual and {(d.decision, d.reason) for d in manual} == {(BLOCKED, "not_automatic")}
    bad = [d for d in report.decisions if d.table == "ns.bad"]
    assert [(d.action, d.decision, d.reason) for d in bad] == [(None, BLOCKED, "unreadable")]
    assert "iceduck.maintenance.window" in bad[0].message and "\n" not in bad[0].message
    fine = [d for d in report.decisions if d.table == "ns.fine"]
    assert {d.decision for d in fine} == {NOTHING_TO_DO}
    # the most indebted table comes first
    assert report.decisions[0].table == "ns.manual"
    lake.close()


def test_sql_plan_and_leases(warehouse: str) -> None:
    lake = new_lake(warehouse)
    lake.create_namespace("other")
    small_table(lake, "ns.t", 12, **FAST)
    small_table(lake, "other.u", 1)
    rows = lake.sql(
        "SELECT step, table_name, action, decision FROM iceberg_maintenance_plan('ns') ORDER BY step"
    ).fetchall()
    assert rows and {r[1] for r in rows} == {"ns.t"}
    assert ("rewrite_data_files", "would_run") in {(r[2], r[3]) for r in rows}
    every = lake.sql("SELECT DISTINCT table_name FROM iceberg_maintenance_plan('*')").fetchall()
    assert sorted(r[0] for r in every) == ["ns.t", "other.u"]
    with pytest.raises(Exception) as e:
        lake.sql("SELECT * FROM iceberg_maintenance_plan('nope')").fetchall()
    assert "no namespace 'nope'" in str(e.value) and "__iceduck" not in str(e.value)
    loop = MaintenanceLoop.for_lake(lake)
    table = loop.maintainer("ns.t").load()
    loop.leases("ns.t").declare(table, who="etl", duration_ms=HOUR_MS)
    leased = lake.sql("SELECT snapshot_id, who, active FROM iceberg_reader_leases('ns.t')").fetchall()
    assert leased == [(table.metadata.current_snapshot_id, "etl", True)]
    lake.close()


def test_cli_all_plan_run_report(tmp_path: Path, warehouse: str) -> None:
    lake = new_lake(warehouse)
    small_table(lake, "ns.t", 12, **FAST)
    lake.close()
    time.sleep(1.2)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", "import sys; from iceduck.cli import main; sys.exit(main())", "maintain", "--warehouse", warehouse, *args],
            capture_output=True, text=True, timeout=300, env={**os.environ, **aws_env()},
        )  # fmt: skip

    plan = cli("--all", "--plan", "--budget", "file-groups=1")
    assert plan.returncode == 0, plan.stderr
    assert "would_run" in plan.stdout and "1 of 2 file group(s)" in plan.stdout
    run = cli("--all", "--namespace", "ns", "--run", "--json")
    assert run.returncode == 0, run.stderr
    decisions = json.loads(run.stdout)["decisions"]
    assert {d["decision"] for d in decisions if d["action"] == "rewrite_data_files"} == {"ran"}
    report = cli("--all", "--report")
    assert report.returncode == 0, report.stderr
    assert "query (all rows): bytes" in report.stdout and "recovery: oldest snapshot" in report.stdout
    bad = cli("--all", "--plan", "--budget", "speed=9")
    assert bad.returncode != 0 and "budget 'speed=9'" in bad.stderr and "Traceback" not in bad.stderr


def test_the_hourly_budget_follows_the_loops_clock(warehouse: str) -> None:
    """A run the loop made counts at its pass's instant: on a fake clock an hour on, its commits
    have left the rolling hour (however little real time passed), a minute on they have not."""
    lake = new_lake(warehouse)
    small_table(lake, "ns.t", 12, **FAST)
    time.sleep(1.2)
    t0 = now_ms()
    budget = Budget(commits=1)
    first = MaintenanceLoop.for_lake(lake, budget=budget, clock=lambda: t0).run()
    assert first.spent.commits == 1
    soon = MaintenanceLoop.for_lake(lake, budget=budget, clock=lambda: t0 + 60_000).plan()
    assert not soon.by(WOULD_RUN) and {d.reason for d in soon.by(DEFERRED)} == {"budget_commits"}
    assert all(d.resume_at_ms == t0 + HOUR_MS for d in soon.by(DEFERRED))
    later = MaintenanceLoop.for_lake(lake, budget=budget, clock=lambda: t0 + HOUR_MS).run()
    assert later.spent.commits == 1
    lake.close()
