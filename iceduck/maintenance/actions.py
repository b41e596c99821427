"""Maintenance of one table, as a Python API: plan, execute, audit.

    m = Maintainer.for_lake(lake, "demo.orders")        # or Maintainer.locate("demo.orders", catalog)
    m.health()                                          # metrics, state, reasons, recommended actions
    m.rewrite_data_files(strategy="sort", sort_order="created_at DESC")      # a dry run: the plan
    m.rewrite_data_files(strategy="sort", sort_order="created_at DESC", dry_run=False)
    m.maintain(dry_run=False)                          # run the recommended actions

Every action is a dry run unless `dry_run=False` is given. A dry run only reads: it changes neither
the table nor the maintenance store. A real run:

1. takes the table's lease lock and plans on the table as it is then, around files other runs
   have claimed (`lease`); with `plan_id` it must find the same plan (the table has not changed
   since the dry run that printed it), else it refuses;
2. takes the plan's run-once marker (`audit.AuditLog.begin`): a plan that ran already is not run
   again, its recorded outcome comes back with status `already_run`;
3. claims its files (or the table, for orphan removal) and releases the lock;
4. records `started` (parameters, candidates, health before), executes, records `finished`
   (outcomes per item, snapshots committed, health after), and releases the claim.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from iceduck.catalog.locate import locate_table
from iceduck.catalog.locations import known_tables
from iceduck.errors import IcebergError, ValidationError
from iceduck.io.fileio import FileIO
from iceduck.io.storage import default_io
from iceduck.maintenance import audit as audit_mod
from iceduck.maintenance.analyze import AnalyzePlan, execute_analyze, plan_analyze
from iceduck.maintenance.audit import AlreadyRun, AuditLog, Outcome, RunRecord
from iceduck.maintenance.commits import NothingToCommit
from iceduck.maintenance.expire import ExpirePlan, execute_expire, plan_expire
from iceduck.maintenance.health import Health, RecommendedAction, compute_health
from iceduck.maintenance.health.danger import Evidence, ReaderNeed, RunFact
from iceduck.maintenance.health_log import HealthLog
from iceduck.maintenance.lease import DEFAULT_TTL_MS, TTL_PROPERTY, Claim, MaintenanceLease
from iceduck.maintenance.neighbours import Neighbours
from iceduck.maintenance.orphans import OrphanAnomalyError, OrphanPlan, execute_orphans, plan_orphans
from iceduck.maintenance.policy import orphan_age_ms
from iceduck.maintenance.readers import ReaderLeases
from iceduck.maintenance.rewrite_data import (
    RewriteOptions,
    RewritePlan,
    execute_rewrite_data,
    plan_rewrite_data,
)
from iceduck.maintenance.rewrite_manifests import (
    ManifestsPlan,
    execute_rewrite_manifests,
    plan_rewrite_manifests,
)
from iceduck.maintenance.store import MaintenanceStore, now_ms
from iceduck.table import Table
from iceduck.transaction import CommitResult, TableCommitter

Progress = Callable[[int, int, str], None]
PLANNED = "planned"
ALREADY_RUN = "already_run"

EXPIRE = "expire_snapshots"
ORPHANS = "remove_orphan_files"
REWRITE_DATA = "rewrite_data_files"
REWRITE_MANIFESTS = "rewrite_manifests"
ANALYZE = "analyze"


def to_ms(value: dt.datetime | int | None) -> int | None:
    """Milliseconds since the epoch of a datetime (naive = UTC) or an int (already ms)."""
    if value is None or isinstance(value, int):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return int(value.timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class ActionResult:
    """A dry run's plan or a real run's outcome."""

    action: str
    table: str | None
    plan_id: str
    dry_run: bool
    status: str
    plan: Any = None
    run_id: str | None = None
    outcomes: tuple[Outcome, ...] = ()
    snapshot_ids: tuple[int, ...] = ()
    metadata_location: str | None = None
    error: str | None = None
    health_before: Mapping[str, Any] | None = None
    health_after: Mapping[str, Any] | None = None
    summary: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_record(cls, record: RunRecord, status: str = ALREADY_RUN) -> ActionResult:
        """The outcome of a run as the audit log recorded it."""
        return cls(
            record.action, record.table, record.plan_id, False, status, None, record.run_id, record.outcomes,
            record.result_snapshot_ids, record.result_metadata_location, record.error, record.health_before,
            record.health_after, {**record.summary, "recorded_status": record.status},
        )  # fmt: skip


class Maintainer:
    """Maintenance of one table: health, the four actions, their log.

    `load()` gives the table as it is now; `committer` commits to it (None: the table was found by
    path, not in a catalog, and only dry runs and health are possible).
    """

    def __init__(
        self,
        load: Callable[[], Table],
        *,
        committer: TableCommitter | None = None,
        catalog: Any = None,
        store_root: str | None = None,
        name: str | None = None,
    ) -> None:
        self._load = load
        self.committer = committer
        self.catalog = catalog
        self.store_root = store_root
        self.name = name
        self._commits: list[dict[str, Any]] = []  # JSON records of the running action's commits

    @classmethod
    def for_lake(cls, lake: Any, identifier: str, *, store_root: str | None = None) -> Maintainer:
        """Maintenance of table `identifier` (`ns.table`) of a `Lake`."""
        handle = lake.table(identifier)
        committer = TableCommitter(lake.catalog, handle.namespace, handle.name, lake.io)
        return cls(
            committer.load, committer=committer, catalog=lake.catalog, store_root=store_root, name=identifier
        )

    @classmethod
    def locate(
        cls, arg: str, *, catalog: Any = None, io: FileIO | None = None, store_root: str | None = None
    ) -> Maintainer:
        """Maintenance of the table `arg` names: a catalog name (which can commit), or a path."""
        fio = io or default_io()
        loc = locate_table(arg, catalog=catalog, io=fio)
        if loc.name is not None and catalog is not None:
            namespace, _, table = loc.name.rpartition(".")
            committer = TableCommitter(catalog, namespace, table, fio)
            return cls(
                committer.load, committer=committer, catalog=catalog, store_root=store_root, name=loc.name
            )
        return cls(
            lambda: Table.load(arg, catalog=catalog, io=fio),
            catalog=catalog,
            store_root=store_root,
            name=None,
        )

    # -- state -------------------------------------------------------------------------------------------

    def load(self) -> Table:
        """The table as it is now."""
        return self._load()

    def store(self, table: Table | None = None) -> MaintenanceStore:
        """The table's maintenance store."""
        return MaintenanceStore.for_table(table or self.load(), catalog=self.catalog, root=self.store_root)

    def _lease(self, table: Table) -> MaintenanceLease:
        try:
            ttl = int(table.metadata.properties.get(TTL_PROPERTY, DEFAULT_TTL_MS))
        except ValueError:
            ttl = DEFAULT_TTL_MS
        return MaintenanceLease(self.store(table), ttl_ms=ttl)

    def neighbours(self, table: Table) -> Neighbours:
        """The other tables of the catalog, as they are now: their files are never deleted."""
        return Neighbours.of(table, known_tables(self.catalog, table.io), name=self.name)

    def health(self, *, record: bool = False, now: int | None = None, with_partitions: bool = True) -> Health:
        """The table's health now; `record` appends it to the health log (trends need history)."""
        table = self.load()
        log = HealthLog(self.store(table))
        history = log.records()
        h = compute_health(
            table, now_ms=now, history=history, with_partitions=with_partitions,
            evidence=self.evidence(table, now_ms() if now is None else now),
        )  # fmt: skip
        if record:
            log.record(h)
        return h

    def evidence(self, table: Table, at_ms: int) -> Evidence:
        """What the maintenance store knows of the table's dangers: active readers, finished runs."""
        store = self.store(table)
        readers = tuple(
            ReaderNeed(r.lease_id, r.who, r.snapshot_id, r.snapshot_ms, r.expires_ms)
            for r in ReaderLeases(store).active(at_ms)
        )
        runs = []
        for r in AuditLog(store).runs():
            if r.finished_ms is None or (r.status == audit_mod.NOTHING_TO_DO and r.action != ORPHANS):
                continue
            orphans = r.action == ORPHANS
            anomaly = r.error if orphans and r.error and "orphan removal stopped" in r.error else None
            runs.append(
                RunFact(
                    r.action, r.finished_ms, r.status in (audit_mod.FAILED, audit_mod.PARTIAL),
                    len(r.candidates) if orphans else None, anomaly,
                )
            )  # fmt: skip
        return Evidence(readers, tuple(runs))

    def health_history(self) -> list[Mapping[str, Any]]:
        """The recorded health snapshots, oldest first."""
        return HealthLog(self.store()).records()

    def log(self) -> list[RunRecord]:
        """Every maintenance run of this table, oldest first."""
        return AuditLog(self.store()).runs()

    # -- actions -----------------------------------------------------------------------------------------

    def expire_snapshots(
        self,
        *,
        older_than: dt.datetime | int | None = None,
        retain_last: int | None = None,
        dry_run: bool = True,
        plan_id: str | None = None,
        progress: Progress | None = None,
    ) -> ActionResult:
        """Expire snapshots by the retention policy (see `expire`); delete what became unreachable."""
        older = to_ms(older_than)

        def make_plan(table: Table, _claimed: frozenset[str]) -> ExpirePlan:
            return plan_expire(
                table, now_ms=now_ms(), older_than_ms=older, retain_last=retain_last,
                neighbours=self.neighbours(table),
            )  # fmt: skip

        def execute(p: ExpirePlan, progress: Progress) -> _Done:
            try:
                r = execute_expire(self.load, self._commit, p, progress=progress, neighbours=self.neighbours)
            except NothingToCommit as e:
                return _Done(audit_mod.NOTHING_TO_DO, [], (), None, str(e))
            return _deleted_files(r.outcomes, r.metadata_location, expired=len(r.expired))

        return self._run(EXPIRE, dry_run, plan_id, make_plan, execute, exclusive="expire", progress=progress)

    def remove_orphan_files(
        self,
        *,
        older_than: dt.datetime | int | None = None,
        allow_recent: bool = False,
        dry_run: bool = True,
        plan_id: str | None = None,
        progress: Progress | None = None,
    ) -> ActionResult:
        """Delete files under the table location that no metadata reaches (see `orphans`), older than
        `older_than` (default: the table's `iceduck.maintenance.orphans.older-than`, else 3 days)."""
        older = to_ms(older_than)

        def make_plan(table: Table, _claimed: frozenset[str]) -> OrphanPlan:
            at = now_ms()
            cutoff = older
            if cutoff is None:
                cutoff = at - orphan_age_ms(table.metadata.properties, table=self.name or table.name or "table")
            return plan_orphans(
                table, now_ms=at, older_than_ms=cutoff, allow_recent=allow_recent,
                neighbours=self.neighbours(table),
            )  # fmt: skip

        def execute(p: OrphanPlan, progress: Progress) -> _Done:
            if p.empty and not p.anomalies:
                return _Done(audit_mod.NOTHING_TO_DO, [], (), None, None)
            if p.anomalies:
                raise OrphanAnomalyError("orphan removal stopped, nothing deleted: " + "; ".join(p.anomalies))
            r = execute_orphans(self.load, p, now_ms=now_ms(), progress=progress, neighbours=self.neighbours)
            return _deleted_files(r.outcomes, None)

        return self._run(
            ORPHANS,
            dry_run,
            plan_id,
            make_plan,
            execute,
            exclusive="orphans",
            progress=progress,
            commits=False,
        )

    def rewrite_data_files(
        self,
        options: RewriteOptions | None = None,
        *,
        dry_run: bool = True,
        plan_id: str | None = None,
        progress: Progress | None = None,
        before_commit: Callable[[Sequence[Any]], None] | None = None,
        stop: Callable[[], str | None] | None = None,
        **option_values: Any,
    ) -> ActionResult:
        """Compact (bin-pack) or sort data files, applying deletes (see `rewrite_data`). Options are
        `RewriteOptions` fields, given as an object or as keyword arguments. `stop()`, asked at each
        file group boundary, ends the run there with a reason (committing the groups done)."""
        opts = options or RewriteOptions(**{k: v for k, v in option_values.items() if v is not None})

        def make_plan(table: Table, claimed: frozenset[str]) -> RewritePlan:
            return plan_rewrite_data(table, opts, claimed=claimed)

        def execute(p: RewritePlan, progress: Progress) -> _Done:
            if p.empty:
                return _Done(audit_mod.NOTHING_TO_DO, [], (), None, None)
            r = execute_rewrite_data(
                self.load, self._commit, p, progress=progress, before_commit=before_commit, stop=stop
            )
            if r.committed_groups and r.failed_groups:
                status = audit_mod.PARTIAL
            elif r.committed_groups:
                status = audit_mod.SUCCEEDED
            elif r.stopped is not None and not r.failed_groups:
                status = audit_mod.NOTHING_TO_DO  # stopped before its first group
            else:
                status = audit_mod.FAILED
            error = None
            if r.failed_groups:
                error = "; ".join(f"group {g}: {why}" for g, why in r.failed_groups.items())
            summary: dict[str, Any] = {
                "groups_committed": len(r.committed_groups),
                "groups_failed": len(r.failed_groups),
                "rows_written": r.rows_written,
                "bytes_read": r.bytes_read,
                "bytes_written": r.bytes_written,
                "seconds_writing": round(r.seconds_writing, 3),
            }
            if r.stopped is not None:
                summary.update(stopped=r.stopped, groups_left=list(r.groups_left))
            return _Done(status, r.outcomes, tuple(r.snapshot_ids), r.metadata_location, error, summary)

        def files(p: RewritePlan) -> tuple[str, ...]:
            return p.files

        return self._run(REWRITE_DATA, dry_run, plan_id, make_plan, execute, files=files, progress=progress)

    def rewrite_manifests(
        self,
        *,
        target_size_bytes: int | None = None,
        spec_id: int | None = None,
        dry_run: bool = True,
        plan_id: str | None = None,
        progress: Progress | None = None,
    ) -> ActionResult:
        """Regroup manifests by partition to a target size (see `rewrite_manifests`)."""

        def make_plan(table: Table, _claimed: frozenset[str]) -> ManifestsPlan:
            return plan_rewrite_manifests(table, target_size_bytes=target_size_bytes, spec_id=spec_id)

        def execute(p: ManifestsPlan, progress: Progress) -> _Done:
            if p.empty:
                return _Done(audit_mod.NOTHING_TO_DO, [], (), None, None)
            try:
                r = execute_rewrite_manifests(self.load, self._commit, p, progress=progress)
            except NothingToCommit as e:
                return _Done(audit_mod.NOTHING_TO_DO, [], (), None, str(e))
            snaps = (int(r.snapshot_id),) if r.snapshot_id is not None else ()
            summary = {"manifests_replaced": sum(o.outcome == "replaced" for o in r.outcomes)}
            return _Done(audit_mod.SUCCEEDED, r.outcomes, snaps, r.metadata_location, None, summary)

        return self._run(
            REWRITE_MANIFESTS, dry_run, plan_id, make_plan, execute, exclusive="manifests", progress=progress
        )

    def analyze(
        self,
        columns: Sequence[str] | None = None,
        *,
        incremental: bool = True,
        dry_run: bool = True,
        plan_id: str | None = None,
        progress: Progress | None = None,
    ) -> ActionResult:
        """Theta sketches of the current snapshot's columns in a Puffin statistics file registered on
        it (see `analyze`); incremental over the last statistics when only appends came since."""

        def make_plan(table: Table, _claimed: frozenset[str]) -> AnalyzePlan:
            return plan_analyze(table, columns, incremental=incremental)

        def execute(p: AnalyzePlan, progress: Progress) -> _Done:
            if p.empty:
                return _Done(audit_mod.NOTHING_TO_DO, [], (), None, None)
            r = execute_analyze(self.load, self._commit, p)
            assert r.statistics is not None
            outcomes = [Outcome(name, "column", "sketched", f"ndv {n}") for name, n in r.ndv.items()]
            summary = {
                "statistics_path": r.statistics.statistics_path, "snapshot_id": p.snapshot_id,
                "ndv": dict(r.ndv), "incremental": r.incremental, "files_read": len(p.files),
            }  # fmt: skip
            return _Done(audit_mod.SUCCEEDED, outcomes, (), r.metadata_location, None, summary)

        return self._run(ANALYZE, dry_run, plan_id, make_plan, execute, progress=progress)

    def run_recommended(
        self, action: RecommendedAction, *, dry_run: bool = True, progress: Progress | None = None
    ) -> ActionResult:
        """Run (or plan) one recommended action with its parameters."""
        params = dict(action.parameters)
        if action.action == REWRITE_DATA:
            return self.rewrite_data_files(dry_run=dry_run, progress=progress, **params)
        if action.action == REWRITE_MANIFESTS:
            return self.rewrite_manifests(dry_run=dry_run, progress=progress, **params)
        if action.action == EXPIRE:
            return self.expire_snapshots(dry_run=dry_run, progress=progress, **params)
        if action.action == ORPHANS:
            return self.remove_orphan_files(dry_run=dry_run, progress=progress, **params)
        if action.action == ANALYZE:
            return self.analyze(dry_run=dry_run, progress=progress, **params)
        raise ValidationError(f"unknown maintenance action {action.action!r}")

    def maintain(
        self,
        *,
        dry_run: bool = True,
        orphans: bool = False,
        progress: Progress | None = None,
        on_result: Callable[[ActionResult], None] | None = None,
    ) -> list[ActionResult]:
        """Plan (dry run) or run the actions health recommends, in order; `orphans` adds orphan removal
        (default window) at the end. Real runs re-plan each action on the table as the previous left it."""
        actions = list(self.health(with_partitions=False).actions)
        if orphans:
            actions.append(RecommendedAction(ORPHANS, {}, ("requested",)))
        results = []
        for a in actions:
            r = self.run_recommended(a, dry_run=dry_run, progress=progress)
            results.append(r)
            if on_result is not None:
                on_result(r)
        return results

    # -- the run protocol ----------------------------------------------------------------------------------

    def _commit(self, change: Any, base: Table) -> Any:
        if self.committer is None:
            raise ValidationError("not a catalog table: committing needs one")
        result: CommitResult = self.committer.commit(change, base)
        if result.commit is not None:
            self._commits.append(result.commit.to_json())  # for the run's `finished` record
        return result

    def _run(
        self,
        action: str,
        dry_run: bool,
        plan_id: str | None,
        make_plan: Callable[[Table, frozenset[str]], Any],
        execute: Callable[[Any, Progress], _Done],
        *,
        exclusive: str | None = None,
        files: Callable[[Any], Sequence[str]] | None = None,
        progress: Progress | None = None,
        commits: bool = True,
    ) -> ActionResult:
        table = self.load()
        who = self.name or table.name or table.metadata_location
        lease = self._lease(table)
        if dry_run:
            p = make_plan(table, lease.claimed_files())
            return ActionResult(action, who, p.plan_id, True, PLANNED, p, summary=_plan_summary(p))
        if commits and self.committer is None:
            raise ValidationError(
                f"{who}: {action} commits to the table, which needs a catalog table (ns.table), not a path"
            )
        log = AuditLog(lease.store)
        if plan_id is not None:
            previous = log.find_plan(plan_id)
            if (
                previous is not None
                and previous.finished
                and not (previous.status == audit_mod.FAILED and not previous.committed)
            ):
                return ActionResult.from_record(previous)
        run_id = log.new_run_id()
        with lease.locked():
            table = self.load()
            p = make_plan(table, lease.claimed_files())
            if plan_id is not None and p.plan_id != plan_id:
                raise ValidationError(
                    f"{who}: plan {plan_id} no longer matches the table (it changed since that dry run; the plan "
                    f"now is {p.plan_id}): plan again"
                )
            try:
                log.begin(p.plan_id, run_id, lambda rid: any(c.run_id == rid for c in lease.active_claims()))
            except AlreadyRun as e:
                if e.record is None or not e.record.finished:
                    raise ValidationError(f"{who}: {e}") from None
                return ActionResult.from_record(e.record)
            claim = lease.claim(
                action, files=files(p) if files is not None else (), exclusive=exclusive, plan_id=p.plan_id,
                run_id=run_id,
            )  # fmt: skip
        try:
            return self._execute(action, who, table, p, run_id, claim, lease, log, execute, progress)
        finally:
            lease.release(claim)

    def _execute(
        self,
        action: str,
        who: str,
        table: Table,
        p: Any,
        run_id: str,
        claim: Claim,
        lease: MaintenanceLease,
        log: AuditLog,
        execute: Callable[[Any, Progress], _Done],
        progress: Progress | None,
    ) -> ActionResult:
        before = compute_health(table, with_partitions=False).to_json()
        snapshot = table.metadata.current_snapshot()
        self._commits = []
        log.start(
            run_id=run_id, plan_id=p.plan_id, action=action, table_uuid=lease.store.key, table=who,
            base_metadata_location=table.metadata_location,
            base_snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
            parameters=p.parameters, candidates=_candidates(p), health_before=before,
        )  # fmt: skip
        renewed = [time.monotonic()]

        def report(done: int, total: int, what: str) -> None:
            if time.monotonic() - renewed[0] > 60:  # keep the claim alive through long runs
                lease.renew(claim)
                renewed[0] = time.monotonic()
            if progress is not None:
                progress(done, total, what)

        try:
            done = execute(p, report)
        except BaseException as e:
            after = _health_quietly(self)
            log.finish(
                run_id=run_id, status=audit_mod.FAILED, error=f"{type(e).__name__}: {e}", health_after=after,
                commits=self._commits,
            )  # fmt: skip
            raise
        after = _health_quietly(self)
        log.finish(
            run_id=run_id, status=done.status, result_snapshot_ids=done.snapshot_ids,
            result_metadata_location=done.metadata_location, outcomes=done.outcomes, health_after=after,
            error=done.error, summary=done.summary, commits=self._commits,
        )  # fmt: skip
        return ActionResult(
            action, who, p.plan_id, False, done.status, p, run_id, tuple(done.outcomes), done.snapshot_ids,
            done.metadata_location, done.error, before, after, {**_plan_summary(p), **done.summary},
        )  # fmt: skip


@dataclass(slots=True)
class _Done:
    status: str
    outcomes: Sequence[Outcome]
    snapshot_ids: tuple[int, ...]
    metadata_location: str | None
    error: str | None
    summary: Mapping[str, Any] = field(default_factory=dict)


def _deleted_files(outcomes: Sequence[Outcome], metadata_location: str | None, **summary: Any) -> _Done:
    """The end of a run that deletes files (expiry, orphan removal): PARTIAL when a file could not
    be deleted, the count of deleted files in the summary."""
    failed = any(o.outcome in ("permission_denied", "other") for o in outcomes)
    deleted = sum(o.outcome == "deleted" for o in outcomes)
    status = audit_mod.PARTIAL if failed else audit_mod.SUCCEEDED
    return _Done(status, outcomes, (), metadata_location, None, {**summary, "files_deleted": deleted})


def _health_quietly(m: Maintainer) -> Mapping[str, Any] | None:
    try:
        return m.health(with_partitions=False).to_json()
    except IcebergError:
        return None


def _candidates(p: Any) -> list[str]:
    if isinstance(p, OrphanPlan):
        return p.candidates_list()
    return list(p.candidates())


def _plan_summary(p: Any) -> dict[str, Any]:
    if isinstance(p, ExpirePlan):
        return {
            "snapshots": len(p.expired),
            "refs": len(p.removed_refs),
            "files": len(p.files),
            "kept": p.kept,
        }
    if isinstance(p, OrphanPlan):
        return {"candidates": len(p.candidates), "anomalies": len(p.anomalies), "listed": p.listed}
    if isinstance(p, RewritePlan):
        return {"groups": len(p.groups), "files": len(p.files), "bytes": sum(g.bytes for g in p.groups)}
    if isinstance(p, AnalyzePlan):
        return {
            "snapshot_id": p.snapshot_id, "columns": [n for _, n in p.columns], "files": len(p.files),
            "incremental": p.base is not None,
        }  # fmt: skip
    if isinstance(p, ManifestsPlan):
        return {"manifests": len(p.manifests), "expected_manifests": p.expected_manifests}
    return {}
