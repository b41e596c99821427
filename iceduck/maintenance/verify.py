"""Verified improvement: what a maintenance run changed for the table's queries, its physical
shape and its recovery, measured before and after, and whether the run paid off.

* Recorded queries: the table owner registers the filters that matter (`QueryRegistry.register(
  name, where)`, kept in the table's maintenance store); with none, the whole-table scan stands in.
  For each, `measure_query` plans the scan (the one planner, `plan_scan`) and records planning
  time, manifests read and kept, data files kept, delete files applied and bytes to scan (data
  files plus the delete files they need).
* Physical targets: small-file share, delete-file ratio, manifests and snapshots (from health).
* Recovery: the oldest retained snapshot, the refs, and a time-travel read of that snapshot: every
  file its plan needs exists, and (with a `read_rows` reader from the layer above) it reads.

`judge` turns before/after into a verdict per run. Planning time is recorded but not judged (a
shared machine makes it noise); counts and bytes are. A compaction or manifest rewrite whose
recorded queries did not get cheaper (none improved, or one got worse) is *flagged*: a rewrite that
shrank the file count but not what a filtered query scans (a sort order that does not match the
filters) is not a success. Expiry and orphan removal must leave query costs as they were and the
recovery check passing; anything else is flagged too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from iceduck.errors import IcebergError, ValidationError
from iceduck.expr import Predicate
from iceduck.maintenance.store import MaintenanceStore, now_ms
from iceduck.scan.planner import plan_scan, scan_schema
from iceduck.spec.types import Schema
from iceduck.table import Table
from iceduck.transaction.summary import content_size

# where text -> (schema -> predicate), e.g. `lambda where: lake.pruner(where, lake.con)`: how SQL
# filters become pruning predicates lives in the DuckDB binding, above this layer.
Translate = Callable[[str], Callable[[Schema], Predicate | None] | None]
ReadRows = Callable[[Table, int], int]  # (table, snapshot id) -> rows read by time travel
ALL_ROWS = "(all rows)"
_QUERIES = "queries"
READ_ACTIONS = ("rewrite_data_files", "rewrite_manifests")  # actions meant to make reads cheaper


@dataclass(frozen=True, slots=True)
class RecordedQuery:
    """A query the owner cares about: a name and a SQL filter on the table's columns (None: all rows)."""

    name: str
    where: str | None


class QueryRegistry:
    """The recorded queries of one table (append-only records; the newest record of a name wins)."""

    def __init__(self, store: MaintenanceStore) -> None:
        self.store = store

    def register(self, name: str, where: str | None) -> None:
        """Record (or replace) query `name` with filter `where`."""
        if not name.strip():
            raise ValidationError("a recorded query needs a name")
        self.store.append(_QUERIES, {"name": name, "where": where, "removed": False, "at": now_ms()})

    def remove(self, name: str) -> None:
        """Stop verifying query `name`."""
        self.store.append(_QUERIES, {"name": name, "where": None, "removed": True, "at": now_ms()})

    def queries(self) -> list[RecordedQuery]:
        """The queries in force, by name."""
        latest: dict[str, Mapping[str, Any]] = {}
        for record in self.store.records(_QUERIES):
            latest[str(record.get("name"))] = record
        return [
            RecordedQuery(name, r.get("where")) for name, r in sorted(latest.items()) if not r.get("removed")
        ]


@dataclass(frozen=True, slots=True)
class QueryCost:
    """What planning one query found."""

    name: str
    where: str | None
    planning_ms: float
    manifests: int
    manifests_kept: int
    data_files_kept: int
    delete_files: int
    bytes_to_scan: int
    error: str | None = None

    def key(self, action: str) -> tuple[int, ...]:
        """The components judged for `action` (planning time is never one): what a compaction should
        lower (bytes and files to scan), what a manifest rewrite should (manifests kept), and all of
        them for actions that must leave them as they were."""
        if action == "rewrite_data_files":
            return (self.bytes_to_scan, self.data_files_kept + self.delete_files)
        if action == "rewrite_manifests":
            return (self.manifests_kept,)
        return (self.bytes_to_scan, self.data_files_kept + self.delete_files, self.manifests_kept)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "where": self.where, "planning_ms": round(self.planning_ms, 3),
            "manifests": self.manifests, "manifests_kept": self.manifests_kept,
            "data_files_kept": self.data_files_kept, "delete_files": self.delete_files,
            "bytes_to_scan": self.bytes_to_scan, "error": self.error,
        }  # fmt: skip


def measure_query(table: Table, query: RecordedQuery, translate: Translate | None = None) -> QueryCost:
    """Plan `query` on the table's current snapshot and count what the scan would read."""
    md = table.metadata
    snapshot = md.current_snapshot()
    predicate: Predicate | None = None
    error = None
    if query.where is not None:
        prune = translate(query.where) if translate is not None else None
        if prune is None:
            error = "no filter reader: measured as a full scan"
        else:
            predicate = prune(scan_schema(table, snapshot))
            if predicate is None:
                error = "the filter could not be read for pruning: measured as a full scan"
    started = time.perf_counter()
    plan = plan_scan(table, snapshot, predicate)
    planning_ms = (time.perf_counter() - started) * 1000
    deletes = {d.path: d.file for t in plan.tasks for d in t.deletes}
    data_bytes = sum(t.file.file_size_in_bytes for t in plan.tasks)
    r = plan.report
    return QueryCost(
        query.name, query.where, planning_ms, r.manifests + r.delete_manifests,
        r.manifests + r.delete_manifests - r.manifests_skipped - r.delete_manifests_skipped,
        len(plan.tasks), len(deletes), data_bytes + sum(content_size(f) for f in deletes.values()), error,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class RecoveryCheck:
    """Can the oldest retained snapshot still be read?"""

    oldest_snapshot_id: int | None
    oldest_ms: int | None
    snapshots: int
    refs: tuple[str, ...]
    files_checked: int
    files_missing: tuple[str, ...]
    rows: int | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.files_missing

    def to_json(self) -> dict[str, Any]:
        return {
            "oldest_snapshot_id": self.oldest_snapshot_id, "oldest_ms": self.oldest_ms,
            "snapshots": self.snapshots, "refs": list(self.refs), "files_checked": self.files_checked,
            "files_missing": list(self.files_missing), "rows": self.rows, "error": self.error, "ok": self.ok,
        }  # fmt: skip


def recovery_check(table: Table, read_rows: ReadRows | None = None) -> RecoveryCheck:
    """Time travel to the oldest retained snapshot: plan it, check every file it needs exists, and
    read it with `read_rows` when given."""
    md = table.metadata
    refs = tuple(sorted(md.refs))
    if not md.snapshots:
        return RecoveryCheck(None, None, 0, refs, 0, (), None, None)
    oldest = min(md.snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number))
    try:
        plan = plan_scan(table, oldest, schema=scan_schema(table, oldest, time_travel=True))
        paths = {t.path for t in plan.tasks} | {d.path for t in plan.tasks for d in t.deletes}
        missing = tuple(sorted(p for p in paths if not table.io.exists(table.resolve(p))))
        rows = read_rows(table, oldest.snapshot_id) if read_rows is not None and not missing else None
    except (IcebergError, OSError) as e:
        return RecoveryCheck(
            oldest.snapshot_id, oldest.timestamp_ms, len(md.snapshots), refs, 0, (), None, str(e)
        )
    return RecoveryCheck(
        oldest.snapshot_id, oldest.timestamp_ms, len(md.snapshots), refs, len(paths), missing, rows, None
    )


PHYSICAL = ("small_file_share", "delete_file_ratio", "manifests", "snapshots", "data_files", "delete_files")


@dataclass(frozen=True, slots=True)
class Measurement:
    """A table's recorded queries, physical targets and recovery at one instant."""

    at_ms: int
    metadata_location: str
    queries: tuple[QueryCost, ...]
    physical: Mapping[str, Any]
    recovery: RecoveryCheck | None

    def to_json(self) -> dict[str, Any]:
        return {
            "at_ms": self.at_ms, "metadata_location": self.metadata_location,
            "queries": [q.to_json() for q in self.queries], "physical": dict(self.physical),
            "recovery": self.recovery.to_json() if self.recovery is not None else None,
        }  # fmt: skip


def measure(
    table: Table,
    queries: Sequence[RecordedQuery],
    metrics: Mapping[str, Any],
    *,
    translate: Translate | None = None,
    read_rows: ReadRows | None = None,
    recovery: bool = True,
    at_ms: int | None = None,
) -> Measurement:
    """Measure `table` now: each query (the whole-table scan when none is recorded), the physical
    targets out of health `metrics`, and (with `recovery`) the recovery check."""
    qs = list(queries) or [RecordedQuery(ALL_ROWS, None)]
    return Measurement(
        now_ms() if at_ms is None else at_ms, table.metadata_location,
        tuple(measure_query(table, q, translate) for q in qs),
        {k: metrics.get(k) for k in PHYSICAL},
        recovery_check(table, read_rows) if recovery else None,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Verdict:
    """Did a run pay off? `verdict`: improved, unchanged, mixed or worse; `flagged` with why."""

    verdict: str
    flagged: bool
    why: str
    per_query: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict, "flagged": self.flagged, "why": self.why, "per_query": dict(self.per_query)
        }  # fmt: skip


def _compare(action: str, before: QueryCost, after: QueryCost) -> str:
    pairs = list(zip(before.key(action), after.key(action), strict=True))
    lower = any(a < b for b, a in pairs)
    higher = any(a > b for b, a in pairs)
    if lower and not higher:
        return "improved"
    if higher and not lower:
        return "worse"
    return "mixed" if lower else "unchanged"


def judge(action: str, before: Measurement, after: Measurement) -> Verdict:
    """The verdict of one run of `action` from measurements before and after it."""
    by_name = {q.name: q for q in after.queries}
    per_query = {q.name: _compare(action, q, by_name[q.name]) for q in before.queries if q.name in by_name}
    values = set(per_query.values())
    if "worse" in values:
        verdict = "worse"
    elif "improved" in values and values <= {"improved", "unchanged"}:
        verdict = "improved"
    elif "improved" in values or "mixed" in values:
        verdict = "mixed"
    else:
        verdict = "unchanged"
    reasons = []
    if after.recovery is not None and not after.recovery.ok:
        reasons.append(
            "recovery check failed: "
            + (
                after.recovery.error
                or f"{len(after.recovery.files_missing)} file(s) of the oldest snapshot missing"
            )
        )
    if action in READ_ACTIONS and verdict != "improved":
        reasons.append(f"{action} ran but the recorded queries' scan costs are {verdict}")
    elif action not in READ_ACTIONS and verdict in ("worse", "mixed"):
        reasons.append(f"{action} changed the recorded queries' scan costs ({verdict})")
    worse = sorted(n for n, v in per_query.items() if v in ("worse", "mixed"))
    if worse and reasons:
        reasons[-1] += f" ({', '.join(worse)})"
    if reasons:
        return Verdict(verdict, True, "; ".join(reasons), per_query)
    why = "the recorded queries scan less" if action in READ_ACTIONS else "query costs kept, recovery ok"
    return Verdict(verdict, False, why, per_query)
