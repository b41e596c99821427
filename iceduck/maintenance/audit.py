"""The maintenance log: what every action did, with the evidence to check it.

A real run writes two immutable records to the table's maintenance store (`store.py`):

* `started`: run id, plan id, action, table UUID and name, base metadata location and snapshot,
  the parameters, the candidates (snapshots, files, groups, manifests) and the health before;
* `finished`: status, the snapshots committed and the metadata location after, one outcome per item
  (a deleted file, a rewritten group, a conflict...), the health after, the error if any, and each
  commit's record (`commits`: base metadata file, requirements and updates in the REST spec's JSON;
  `iceduck.transaction.commit.CommitRecord.from_json` reads one back, `replay` rebuilds its metadata).

A run that dies in between leaves only `started`: the log shows it as `incomplete`. The
maintenance loop adds a third record, `verified` (`verify`): the table's recorded queries,
physical targets and recovery check measured before and after the run, and its verdict
(`maintenance.verify`).

Running a plan at most once: before starting, a run creates the marker `runs/<plan id>.<n>.json`
with an exclusive create. Only one process can create it, so two runs of the same plan (the same
action on the same table state with the same candidates) never both start. `n` counts earlier
attempts that failed without committing anything (or died without an active lease); those may be
retried, anything else is reported as already run.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from iceduck.maintenance.store import MaintenanceStore, now_ms

LOG = "log"
RUNS = "runs"

# Run statuses
SUCCEEDED = "succeeded"
PARTIAL = "partial"  # some items failed (a conflicting file group), the rest committed
FAILED = "failed"
NOTHING_TO_DO = "nothing_to_do"
INCOMPLETE = "incomplete"  # started, never finished (the process died)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one item of a run: a file, a snapshot, a file group or a manifest."""

    item: str
    kind: str
    outcome: str
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"item": self.item, "kind": self.kind, "outcome": self.outcome, "detail": self.detail}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Outcome:
        return cls(str(obj["item"]), str(obj["kind"]), str(obj["outcome"]), obj.get("detail"))


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run as the log tells it (started and, unless it died, finished)."""

    run_id: str
    plan_id: str
    action: str
    table_uuid: str
    table: str | None
    started_ms: int
    base_metadata_location: str
    base_snapshot_id: int | None
    parameters: Mapping[str, Any]
    candidates: tuple[str, ...]
    health_before: Mapping[str, Any] | None
    status: str = INCOMPLETE
    finished_ms: int | None = None
    result_snapshot_ids: tuple[int, ...] = ()
    result_metadata_location: str | None = None
    outcomes: tuple[Outcome, ...] = ()
    health_after: Mapping[str, Any] | None = None
    error: str | None = None
    summary: Mapping[str, Any] = field(default_factory=dict)
    commits: tuple[Mapping[str, Any], ...] = ()
    verification: Mapping[str, Any] | None = None

    @property
    def finished(self) -> bool:
        return self.finished_ms is not None

    @property
    def committed(self) -> bool:
        return bool(self.result_snapshot_ids) or any(o.outcome == "deleted" for o in self.outcomes)


class AlreadyRun(Exception):
    """The plan ran (or is running) already; `record` is that run."""

    def __init__(self, record: RunRecord | None, message: str) -> None:
        super().__init__(message)
        self.record = record


class AuditLog:
    """The maintenance log of one table."""

    def __init__(self, store: MaintenanceStore) -> None:
        self.store = store

    @staticmethod
    def new_run_id() -> str:
        return uuid.uuid4().hex[:16]

    # -- writing --------------------------------------------------------------------------------------

    def begin(self, plan_id: str, run_id: str, is_active: Callable[[str], bool]) -> int:
        """Take the run-once marker of `plan_id` for `run_id`; returns the attempt number.

        Raises `AlreadyRun` if the plan ran already (or is running: `is_active(run_id)` says whether
        a run still holds its lease)."""
        runs = {r.run_id: r for r in self.runs()}
        attempt = 0
        while True:
            name = f"{plan_id}.{attempt}.json"
            marker = self.store.read(RUNS, name)
            if marker is None:
                if self.store.try_append(RUNS, name, {"plan_id": plan_id, "run_id": run_id, "at": now_ms()}):
                    return attempt
                continue  # another process took it this instant: look at it
            previous = runs.get(str(marker.get("run_id")))
            if previous is None or not previous.finished:
                if previous is not None and is_active(previous.run_id):
                    raise AlreadyRun(previous, f"plan {plan_id} is running (run {previous.run_id})")
                if previous is None and is_active(str(marker.get("run_id"))):
                    raise AlreadyRun(None, f"plan {plan_id} is starting (run {marker.get('run_id')})")
                attempt += 1  # died without finishing, and its lease is gone: nothing of it holds
                continue
            if previous.status == FAILED and not previous.committed:
                attempt += 1
                continue
            raise AlreadyRun(
                previous, f"plan {plan_id} ran already (run {previous.run_id}, {previous.status})"
            )

    def start(
        self,
        *,
        run_id: str,
        plan_id: str,
        action: str,
        table_uuid: str,
        table: str | None,
        base_metadata_location: str,
        base_snapshot_id: int | None,
        parameters: Mapping[str, Any],
        candidates: Sequence[str],
        health_before: Mapping[str, Any] | None,
    ) -> None:
        """Record that a run started."""
        record = {
            "phase": "started",
            "run_id": run_id,
            "plan_id": plan_id,
            "action": action,
            "table_uuid": table_uuid,
            "table": table,
            "started_ms": now_ms(),
            "base_metadata_location": base_metadata_location,
            "base_snapshot_id": base_snapshot_id,
            "parameters": dict(parameters),
            "candidates": list(candidates),
            "health_before": health_before,
        }
        self.store.append(LOG, record, name=f"{now_ms():013d}-{run_id}-started.json")

    def finish(
        self,
        *,
        run_id: str,
        status: str,
        result_snapshot_ids: Sequence[int] = (),
        result_metadata_location: str | None = None,
        outcomes: Sequence[Outcome] = (),
        health_after: Mapping[str, Any] | None = None,
        error: str | None = None,
        summary: Mapping[str, Any] | None = None,
        commits: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Record how a run ended; `commits` are the JSON records of the commits it made."""
        record = {
            "phase": "finished",
            "run_id": run_id,
            "status": status,
            "finished_ms": now_ms(),
            "result_snapshot_ids": list(result_snapshot_ids),
            "result_metadata_location": result_metadata_location,
            "outcomes": [o.to_json() for o in outcomes],
            "health_after": health_after,
            "error": error,
            "summary": dict(summary or {}),
            "commits": [dict(c) for c in commits],
        }
        self.store.append(LOG, record, name=f"{now_ms():013d}-{run_id}-finished.json")

    def verify(self, *, run_id: str, evidence: Mapping[str, Any]) -> None:
        """Record what a finished run changed for the table's queries, shape and recovery."""
        record = {"phase": "verified", "run_id": run_id, "verified_ms": now_ms(), "evidence": dict(evidence)}
        self.store.append(LOG, record, name=f"{now_ms():013d}-{run_id}-verified.json")

    # -- reading --------------------------------------------------------------------------------------

    def runs(self) -> list[RunRecord]:
        """Every run, oldest first."""
        started: dict[str, dict[str, Any]] = {}
        finished: dict[str, dict[str, Any]] = {}
        verified: dict[str, dict[str, Any]] = {}
        order: list[str] = []
        for record in self.store.records(LOG):
            rid = str(record.get("run_id"))
            if record.get("phase") == "started":
                started[rid] = record
                order.append(rid)
            elif record.get("phase") == "finished":
                finished[rid] = record
            elif record.get("phase") == "verified":
                verified[rid] = record
        runs = [_run(started[rid], finished.get(rid)) for rid in order]
        return [
            dataclasses.replace(r, verification=verified[r.run_id].get("evidence")) if r.run_id in verified else r
            for r in runs
        ]

    def find_plan(self, plan_id: str) -> RunRecord | None:
        """The latest run of `plan_id`, if any."""
        found = [r for r in self.runs() if r.plan_id == plan_id]
        return found[-1] if found else None


def _run(s: Mapping[str, Any], f: Mapping[str, Any] | None) -> RunRecord:
    base = RunRecord(
        run_id=str(s["run_id"]),
        plan_id=str(s.get("plan_id")),
        action=str(s.get("action")),
        table_uuid=str(s.get("table_uuid")),
        table=s.get("table"),
        started_ms=int(s.get("started_ms", 0)),
        base_metadata_location=str(s.get("base_metadata_location")),
        base_snapshot_id=s.get("base_snapshot_id"),
        parameters=s.get("parameters") or {},
        candidates=tuple(s.get("candidates") or ()),
        health_before=s.get("health_before"),
    )
    if f is None:
        return base
    return dataclasses.replace(
        base,
        status=str(f.get("status")),
        finished_ms=int(f.get("finished_ms", 0)),
        result_snapshot_ids=tuple(int(x) for x in f.get("result_snapshot_ids") or ()),
        result_metadata_location=f.get("result_metadata_location"),
        outcomes=tuple(Outcome.from_json(o) for o in f.get("outcomes") or ()),
        health_after=f.get("health_after"),
        error=f.get("error"),
        summary=f.get("summary") or {},
        commits=tuple(f.get("commits") or ()),
    )
