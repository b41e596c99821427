"""The maintenance loop: every table of a catalog (or a namespace), by debt and policy, within
windows and budgets, with every decision recorded and every run verified.

    loop = MaintenanceLoop.for_lake(lake, budget=Budget(rewrite_bytes=256 * 1024**2))
    loop.plan("sales")        # what one pass would do: decisions, nothing changed
    loop.run("sales")         # one pass: run what fits, defer the rest with reasons
    loop.report("sales")      # the last pass per table, with before/after evidence

One pass:

1. For each table: its policy (`policy.parse_policy` of its properties), health (recorded in the
   health log on real passes: the debt-over-time series), reader leases, its maintenance log (the
   budget ledger and the commit failure rate) and, on real passes, a delete-permission probe.
2. Tables in order of severity (AT_RISK first), then debt (compactable files + delete files +
   excess manifests + expirable snapshots), then name; on each, the actions in `ACTION_ORDER`
   (compaction, manifests, expiry, orphan removal).
3. Each needed action is checked in turn; the first gate that stops it is its decision:
   the table's policy cannot be read (blocked), health blocks it (equality deletes, a transform
   iceduck cannot write), the policy does not let it run automatically, no window is open
   (deferred until the window opens), too many of the table's recent runs failed or conflicted
   (blocked), delete permission is missing (blocked, for actions that delete), a reader lease or
   the retention floor holds back everything expiry would do (blocked), the budget is spent
   (deferred: until when), another maintenance run holds the table (deferred).
4. What passes is planned as a dry run, trimmed to the budget that is left (a compaction keeps the
   file groups with the most files that fit; an expiry keeps the oldest snapshots whose files fit
   the delete requests left), then run with exactly that plan (`plan_id`), measured before and
   after (`verify`), and its evidence added to the maintenance log (`verified`). A compaction asks
   the window (at `clock()`) at each file group boundary: one that closed ends the run there, the
   groups done committed, where it stopped in the run's summary (`stopped`, `groups_left`).
5. Every decision of the pass is recorded per table (`decisions/` in its maintenance store).

Budgets: the table's (its properties) and the pass's (`budget=`, for the whole catalog); an action
must fit both. Hourly limits count the runs of the last hour plus this pass: a run the loop made at
its pass's instant (from the recorded decisions), any other run at the time the log says it ended.
The instant comes from `clock` (a fake clock in tests); nothing below it reads the wall clock for a
decision. The actions themselves stamp their records with the real time.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from iceduck.errors import IcebergError, NamespaceNotFoundError
from iceduck.io.fileio import FileIO
from iceduck.io.paths import join_path, normalize_path
from iceduck.maintenance import audit as audit_mod
from iceduck.maintenance.actions import ActionResult, Maintainer
from iceduck.maintenance.audit import AuditLog, RunRecord
from iceduck.maintenance.expire import ExpirePlan
from iceduck.maintenance.health import MAINTENANCE_BLOCKED, SEVERITY, Health
from iceduck.maintenance.lease import MaintenanceBusyError
from iceduck.maintenance.orphans import OrphanPlan
from iceduck.maintenance.policy import (
    ACTION_ORDER,
    BYTES,
    COMMIT_FAILURE_MIN_RUNS,
    DELETES,
    EXPIRE,
    FILE_GROUPS,
    ORPHANS,
    REWRITE_DATA,
    REWRITE_MANIFESTS,
    Budget,
    Cost,
    Policy,
    Refusal,
    Spend,
    Window,
    check_budget,
    expiry_cutoff,
    failure_rate,
    iso,
    parse_policy,
    room,
)
from iceduck.maintenance.readers import ReaderLeases
from iceduck.maintenance.rewrite_data import RewriteOptions, RewritePlan
from iceduck.maintenance.store import MaintenanceStore, now_ms
from iceduck.maintenance.verify import Measurement, QueryRegistry, ReadRows, Translate, judge, measure
from iceduck.table import Table

# decisions
WOULD_RUN = "would_run"  # a plan: this pass would run it
RAN = "ran"
FAILED = "failed"
DEFERRED = "deferred"  # later: a window, a budget, a busy table
BLOCKED = "blocked"  # not until something changes: policy, permission, a lease, failures
NOTHING_TO_DO = "nothing_to_do"
ADVICE = "advice"  # for the table's owner: the loop cannot fix it alone
_DECISIONS = "decisions"
_DELETE_OUTCOMES = ("deleted", "not_found", "permission_denied")


@dataclass(frozen=True, slots=True)
class Decision:
    """What one pass decided about one action on one table, and why."""

    order: int
    table: str
    action: str | None  # None: about the table as a whole (its policy or metadata cannot be read)
    decision: str
    reason: str  # a code: window_closed, budget_rewrite_bytes, reader_lease, ...
    message: str  # one line for people
    state: str | None = None
    debt: float = 0.0
    cost: Cost = field(default_factory=Cost)  # planned
    spent: Cost = field(default_factory=Cost)  # measured from the run's log record
    resume_at_ms: int | None = None
    plan_id: str | None = None
    run_id: str | None = None
    status: str | None = None
    verdict: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["cost"] = self.cost.to_json()
        out["spent"] = self.spent.to_json()
        out["verdict"] = dict(self.verdict) if self.verdict is not None else None
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Decision:
        def opt_int(key: str) -> int | None:
            value = obj.get(key)
            return None if value is None else int(value)

        def opt_str(key: str) -> str | None:
            value = obj.get(key)
            return None if value is None else str(value)

        return cls(
            int(obj.get("order") or 0), str(obj.get("table")), opt_str("action"), str(obj.get("decision")),
            str(obj.get("reason")), str(obj.get("message")), opt_str("state"), float(obj.get("debt") or 0.0),
            Cost(**(obj.get("cost") or {})), Cost(**(obj.get("spent") or {})), opt_int("resume_at_ms"),
            opt_str("plan_id"), opt_str("run_id"), opt_str("status"), obj.get("verdict"),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class LoopReport:
    """One pass: its decisions in the order they were taken."""

    loop_id: str
    mode: str  # plan | run
    scope: str | None
    at_ms: int
    budget: Budget
    decisions: tuple[Decision, ...]

    def by(self, decision: str) -> list[Decision]:
        return [d for d in self.decisions if d.decision == decision]

    @property
    def spent(self) -> Cost:
        total = Cost()
        for d in self.decisions:
            total = total + d.spent
        return total

    @property
    def planned(self) -> Cost:
        total = Cost()
        for d in self.decisions:
            if d.decision in (WOULD_RUN, RAN):
                total = total + d.cost
        return total


def run_cost(run: RunRecord) -> Cost:
    """What a logged run spent: data bytes it rewrote, commits, file groups, delete requests."""
    s = run.summary or {}
    groups = int(s.get("groups_committed", 0) or 0) + int(s.get("groups_failed", 0) or 0)
    deletes = sum(
        1
        for o in run.outcomes
        if o.outcome in _DELETE_OUTCOMES or (o.outcome == "other" and o.kind != "files")
    )
    return Cost(int(s.get("bytes_read", 0) or 0), len(run.commits), groups, deletes)


def ledger(runs: Iterable[RunRecord]) -> list[Spend]:
    """The spending of logged runs, at the time each finished (or started, if it died)."""
    return [Spend(r.finished_ms or r.started_ms, run_cost(r)) for r in runs]


def debt_of(h: Health) -> float:
    """The loop's debt score of a table: work a maintenance pass would remove."""
    m = h.metrics
    return float(
        sum(int(m.get(k) or 0) for k in ("compactable_files", "delete_files", "excess_manifests"))
        + int(m.get("expirable_snapshots") or 0)
    )


def probe_delete(table: Table) -> str | None:
    """None when this process may create and delete files in the table's folder; else why not.
    (The probe file lives a moment in `metadata/`; orphan removal never deletes young files.)"""
    folder = join_path(normalize_path(table.resolver.actual_location), "metadata")
    path = join_path(folder, f".iceduck-delete-probe-{uuid.uuid4().hex}")
    try:
        table.io.write_new(path, b"")
    except (OSError, IcebergError) as e:
        return f"cannot create a file in {folder}: {e}"
    try:
        table.io.delete(path)
    except (OSError, IcebergError) as e:
        return f"delete permission missing in {folder}: {e} (the probe file {path} stays)"
    return None


@dataclass(slots=True)
class _Table:
    """What a pass knows about one table."""

    name: str
    maintainer: Maintainer
    table: Table | None = None
    policy: Policy | None = None
    health: Health | None = None
    error: str | None = None
    history: list[Spend] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)
    leases: list[tuple[int, int, str]] = field(default_factory=list)  # (snapshot ms, snapshot id, who)
    spent: Cost = field(default_factory=Cost)  # by this pass

    @property
    def severity(self) -> int:
        return SEVERITY[self.health.state] if self.health is not None else len(SEVERITY)

    @property
    def debt(self) -> float:
        return debt_of(self.health) if self.health is not None else 0.0


class MaintenanceLoop:
    """Plan and run maintenance over the tables of a catalog (see the module docstring)."""

    def __init__(
        self,
        catalog: Any,
        *,
        io: FileIO | None = None,
        store_root: str | None = None,
        budget: Budget | None = None,
        clock: Callable[[], int] = now_ms,
        translate: Translate | None = None,
        read_rows: ReadRows | None = None,
        probe: Callable[[Table], str | None] = probe_delete,
    ) -> None:
        self.catalog = catalog
        self.io = io
        self.store_root = store_root
        self.budget = budget or Budget()
        self.clock = clock
        self.translate = translate
        self.read_rows = read_rows
        self.probe = probe

    @classmethod
    def for_lake(cls, lake: Any, **options: Any) -> MaintenanceLoop:
        """The loop over a `Lake`'s catalog, verifying recorded queries with DuckDB's reading of their
        filters and the recovery check with a time-travel count through `iceberg_scan`."""

        def read_rows(table: Table, snapshot_id: int) -> int:
            row = lake.con.execute(
                "SELECT count(*) FROM iceberg_scan(?, snapshot_id := ?)",
                [table.metadata_location, snapshot_id],
            ).fetchone()
            return int(row[0]) if row else 0

        options.setdefault("translate", lambda where: lake.pruner(where, lake.con))
        options.setdefault("read_rows", read_rows)
        options.setdefault("io", lake.io)
        return cls(lake.catalog, **options)

    # -- scope ----------------------------------------------------------------------------------------

    def tables(self, scope: str | None = None) -> list[str]:
        """`ns.table` names in `scope`: a namespace (and those below it), or everything (None, '',
        '*' or the catalog's name)."""
        name = getattr(self.catalog, "name", None)
        everything = scope is None or scope.strip() in ("", "*") or (name is not None and scope == name)
        roots = list(self.catalog.list_namespaces()) if everything else [str(scope).strip()]
        if not everything and not self.catalog.namespace_exists(roots[0]):
            raise NamespaceNotFoundError(f"no namespace {roots[0]!r} in the catalog")
        out: list[str] = []
        seen: set[str] = set()
        todo = list(roots)
        while todo:
            ns = todo.pop(0)
            if ns in seen:
                continue
            seen.add(ns)
            out += [f"{ns}.{t}" for t in self.catalog.list_tables(ns)]
            todo += list(self.catalog.list_namespaces(ns))  # dotted names: nested namespaces too
        return sorted(out)

    def maintainer(self, name: str) -> Maintainer:
        return Maintainer.locate(name, catalog=self.catalog, io=self.io, store_root=self.store_root)

    def store(self, table: Table) -> MaintenanceStore:
        return MaintenanceStore.for_table(table, catalog=self.catalog, root=self.store_root)

    def leases(self, name: str) -> ReaderLeases:
        """The reader leases of table `name` (declare one before a long read)."""
        return ReaderLeases(self.store(self.maintainer(name).load()))

    def queries(self, name: str) -> QueryRegistry:
        """The recorded queries of table `name` (register the filters whose cost should fall)."""
        return QueryRegistry(self.store(self.maintainer(name).load()))

    # -- passes ---------------------------------------------------------------------------------------

    def plan(self, scope: str | None = None) -> LoopReport:
        """What one pass would do now (nothing is changed, nothing recorded, no probe)."""
        return self._pass(scope, execute=False)

    def run(
        self, scope: str | None = None, *, on_decision: Callable[[Decision], None] | None = None
    ) -> LoopReport:
        """One pass: run what fits, defer the rest, record every decision."""
        return self._pass(scope, execute=True, on_decision=on_decision)

    def _pass(
        self, scope: str | None, *, execute: bool, on_decision: Callable[[Decision], None] | None = None
    ) -> LoopReport:
        now = self.clock()
        loop_id = uuid.uuid4().hex[:16]
        work = [self._look(name, now, execute) for name in self.tables(scope)]
        work.sort(key=lambda w: (-w.severity, -w.debt, w.name))
        everyone = [s for w in work for s in w.history]
        decisions: list[Decision] = []

        def decide(w: _Table, d: Decision) -> None:
            d = dataclasses.replace(d, order=len(decisions) + 1, state=w.health.state if w.health else None,
                                    debt=w.debt)  # fmt: skip
            decisions.append(d)
            if on_decision is not None:
                on_decision(d)

        totals = [Cost()]  # this pass's spending (planned, for a plan), read by each check
        for w in work:
            for d in self._table(w, now, execute, everyone, lambda: totals[0]):
                if d.decision == RAN:
                    totals[0] = totals[0] + d.spent
                elif d.decision == WOULD_RUN:
                    totals[0] = totals[0] + d.cost
                decide(w, d)
            if execute:
                self._record(w, loop_id, now, [d for d in decisions if d.table == w.name])
        return LoopReport(loop_id, "run" if execute else "plan", scope, now, self.budget, tuple(decisions))

    def _look(self, name: str, now: int, execute: bool) -> _Table:
        m = self.maintainer(name)
        w = _Table(name, m)
        try:
            w.table = m.load()
            w.health = m.health(record=execute, now=now, with_partitions=False)
            store = m.store(w.table)
            w.runs = AuditLog(store).runs()
            w.history = self._ledger(store, w.runs)
            for lease in ReaderLeases(store).active(now):
                w.leases.append((lease.snapshot_ms, lease.snapshot_id, lease.who))
            w.policy = parse_policy(w.table.metadata.properties, table=name)
        except IcebergError as e:
            w.error = str(e)
        return w

    @staticmethod
    def _ledger(store: MaintenanceStore, runs: Sequence[RunRecord]) -> list[Spend]:
        """The table's spending: runs the loop made count at their pass's instant (its clock, which
        the budget rules compare with), any other run at the time the log says it finished."""
        by_loop: dict[str, Spend] = {}
        for record in store.records(_DECISIONS):
            for d in record.get("decisions") or ():
                if d.get("run_id") and d.get("decision") in (RAN, FAILED):
                    by_loop[str(d["run_id"])] = Spend(int(record["at_ms"]), Cost(**(d.get("spent") or {})))
        return [*by_loop.values(), *ledger(r for r in runs if r.run_id not in by_loop)]

    def _record(self, w: _Table, loop_id: str, now: int, decisions: Sequence[Decision]) -> None:
        if w.table is None:
            return
        self.store(w.table).append(
            _DECISIONS,
            {
                "loop_id": loop_id,
                "at_ms": now,
                "table": w.name,
                "decisions": [d.to_json() for d in decisions],
            },
        )

    # -- one table ------------------------------------------------------------------------------------

    def _table(
        self, w: _Table, now: int, execute: bool, everyone: list[Spend], run_spent: Callable[[], Cost]
    ) -> Iterable[Decision]:
        if w.error is not None or w.policy is None or w.health is None or w.table is None:
            yield Decision(0, w.name, None, BLOCKED, "unreadable", w.error or "the table could not be read")
            return
        health = w.health
        needed = self._needed(w)
        if not needed:
            yield Decision(0, w.name, None, NOTHING_TO_DO, "healthy", f"{health.state}: nothing to do")
            return
        advice = self._advice(w)
        if advice is not None:
            yield advice
        probed: list[str | None] = []
        for action in ACTION_ORDER:
            if action not in needed:
                continue
            why_needed = needed[action]
            gate = self._gate(w, action, why_needed, now, execute, probed)
            if gate is not None:
                yield gate
                continue
            yield from self._action(w, action, now, execute, everyone, run_spent())
            if execute:  # the next action plans on the table this one left
                try:
                    w.table = w.maintainer.load()
                except IcebergError as e:
                    yield Decision(0, w.name, None, BLOCKED, "unreadable", str(e))
                    return

    def _needed(self, w: _Table) -> dict[str, str]:
        """Action -> why it is needed (from health; orphan removal when the policy runs it)."""
        assert w.health is not None and w.policy is not None
        out: dict[str, str] = {}
        for a in w.health.actions:
            out[a.action] = ", ".join(a.because)
        for r in w.health.reasons:
            if r.state == MAINTENANCE_BLOCKED and r.check in ("small_files", "deleted_rows", "delete_files"):
                out.setdefault(REWRITE_DATA, r.check)
        if EXPIRE in w.policy.auto or int(w.health.metrics.get("expirable_snapshots") or 0):
            out.setdefault(EXPIRE, "retention")
        if ORPHANS in w.policy.auto:
            out.setdefault(ORPHANS, "policy")
        return out

    def _gate(
        self, w: _Table, action: str, why: str, now: int, execute: bool, probed: list[str | None]
    ) -> Decision | None:
        assert w.policy is not None and w.health is not None and w.table is not None
        p = w.policy
        if action == REWRITE_DATA and all(a.action != REWRITE_DATA for a in w.health.actions):
            blocked = [r.message for r in w.health.reasons if r.state == MAINTENANCE_BLOCKED]
            return Decision(
                0, w.name, action, BLOCKED, "health_blocked", blocked[0] if blocked else "blocked"
            )
        if action not in p.auto:
            return Decision(
                0, w.name, action, BLOCKED, "not_automatic",
                f"needed ({why}) but iceduck.maintenance.auto does not let the loop run it",
            )  # fmt: skip
        if not p.window.is_open(now):
            opens = p.window.next_open(now)
            return Decision(
                0, w.name, action, DEFERRED, "window_closed",
                f"no maintenance window open (window {p.window.describe()})"
                + (f"; opens {iso(opens)}" if opens is not None else "; it never opens"),
                resume_at_ms=opens,
            )  # fmt: skip
        if action != ORPHANS:
            outcomes = [
                (r.finished_ms, r.status in (audit_mod.FAILED, audit_mod.PARTIAL))
                for r in w.runs
                if r.finished_ms is not None and r.status != audit_mod.NOTHING_TO_DO
            ]
            rate, n = failure_rate(outcomes, now)
            if n >= COMMIT_FAILURE_MIN_RUNS and rate > p.max_commit_failure_rate:
                return Decision(
                    0, w.name, action, BLOCKED, "commit_failures",
                    f"{rate:.0%} of the table's last day of maintenance runs ({n}) failed or conflicted, above "
                    f"iceduck.maintenance.max-commit-failure-rate = {p.max_commit_failure_rate:g}",
                )  # fmt: skip
        if action in (EXPIRE, ORPHANS) and execute:
            if not probed:
                probed.append(self.probe(w.table))
            if probed[0] is not None:
                return Decision(0, w.name, action, BLOCKED, "delete_permission", probed[0])
        return None

    def _advice(self, w: _Table) -> Decision | None:
        """Small files arriving faster than the rewrite budget can retire them: ask the writer to
        commit less often (the loop cannot keep up by itself)."""
        assert w.health is not None and w.policy is not None
        limit = w.policy.budget.tightest(self.budget).rewrite_bytes
        m = w.health.metrics
        if limit is None or not int(m.get("compactable_files") or 0):
            return None
        arriving = int(m.get("commits_last_24h") or 0) / 24 * float(m.get("file_size_p50") or 0)
        if arriving <= limit:
            return None
        return Decision(
            0, w.name, REWRITE_DATA, ADVICE, "commit_rate",
            f"{m.get('commits_last_24h')} commits in 24 h add about {arriving:,.0f} bytes of small files an hour, more "
            f"than the rewrite budget of {limit:,} bytes an hour retires: batch the writer's commits (or raise the "
            "budget)",
        )  # fmt: skip

    # -- planning and running one action ------------------------------------------------------------------

    def _refusal(self, w: _Table, everyone: list[Spend], run: Cost, now: int, cost: Cost) -> Refusal | None:
        assert w.policy is not None
        return check_budget(w.policy.budget, w.history, now, w.spent, cost) or check_budget(
            self.budget, everyone, now, run, cost
        )

    def _room(self, w: _Table, everyone: list[Spend], run: Cost, now: int, dim: str) -> int | None:
        assert w.policy is not None
        return _least(
            room(w.policy.budget, w.history, now, w.spent, dim), room(self.budget, everyone, now, run, dim)
        )

    def _action(
        self, w: _Table, action: str, now: int, execute: bool, everyone: list[Spend], run: Cost
    ) -> Iterable[Decision]:
        m = w.maintainer
        try:
            planned = self._fit(w, action, now, everyone, run)
        except MaintenanceBusyError as e:
            yield Decision(0, w.name, action, DEFERRED, "busy", str(e))
            return
        except IcebergError as e:
            yield Decision(0, w.name, action, FAILED, "plan_failed", f"planning failed: {e}")
            return
        if isinstance(planned, Decision):
            yield planned
            return
        result, cost, note, run_action = planned
        if not execute:
            w.spent = w.spent + cost  # a plan counts what it would spend as spent
            yield Decision(0, w.name, action, WOULD_RUN, "fits", note, cost=cost, plan_id=result.plan_id)
            return
        assert w.table is not None and w.health is not None
        store = m.store(w.table)
        queries = QueryRegistry(store).queries()
        before = self._measure(w.table, queries, w.health.metrics)
        try:
            r = run_action(result.plan_id)
        except MaintenanceBusyError as e:
            yield Decision(0, w.name, action, DEFERRED, "busy", str(e), cost=cost)
            return
        except IcebergError as e:
            yield Decision(0, w.name, action, FAILED, "run_failed", str(e), cost=cost, plan_id=result.plan_id)
            return
        record = next((x for x in AuditLog(store).runs() if x.run_id == r.run_id), None)
        spent = run_cost(record) if record is not None else Cost()
        w.spent = w.spent + spent
        verdict = None
        if r.run_id is not None and r.status not in (audit_mod.NOTHING_TO_DO, "already_run"):
            after_table = m.load()
            after = self._measure(after_table, queries, (r.health_after or {}).get("metrics") or {})
            v = judge(action, before, after)
            verdict = v.to_json()
            AuditLog(store).verify(
                run_id=r.run_id, evidence={"before": before.to_json(), "after": after.to_json(), **verdict}
            )
            if r.health_after is not None:
                w.health = m.health(now=now, with_partitions=False)
        decision = RAN if r.status != audit_mod.FAILED else FAILED
        message = note if not r.error else f"{note}; {r.error}"
        if verdict is not None and verdict["flagged"]:
            message += f"; FLAGGED: {verdict['why']}"
        yield Decision(
            0, w.name, action, decision, r.status, message, cost=cost, spent=spent, plan_id=r.plan_id,
            run_id=r.run_id, status=r.status, verdict=verdict,
        )  # fmt: skip

    def _measure(self, table: Table, queries: Sequence[Any], metrics: Mapping[str, Any]) -> Measurement:
        return measure(table, queries, metrics, translate=self.translate, read_rows=self.read_rows)

    def _fit(
        self, w: _Table, action: str, now: int, everyone: list[Spend], run: Cost
    ) -> Decision | tuple[ActionResult, Cost, str, Callable[[str], ActionResult]]:
        """A dry-run plan of `action` trimmed to the budget left, its cost, a note and how to run it;
        or the decision that stops it."""
        m = w.maintainer
        assert w.policy is not None and w.health is not None
        if action == REWRITE_DATA:
            return self._fit_rewrite(w, now, everyone, run)
        if action == REWRITE_MANIFESTS:
            r = m.rewrite_manifests()
            if r.plan is None or r.plan.empty:
                return Decision(0, w.name, action, NOTHING_TO_DO, "empty", "manifests are packed already")
            cost = Cost(commits=1)
            refusal = self._refusal(w, everyone, run, now, cost)
            if refusal is not None:
                return _deferred(w.name, action, refusal, cost)
            note = f"{len(r.plan.manifests)} manifest(s) -> about {r.plan.expected_manifests}"
            return r, cost, note, lambda pid: m.rewrite_manifests(dry_run=False, plan_id=pid)
        if action == EXPIRE:
            return self._fit_expire(w, now, everyone, run)
        r = m.remove_orphan_files()
        p = r.plan
        assert isinstance(p, OrphanPlan)
        if p.anomalies:
            return Decision(
                0, w.name, action, BLOCKED, "orphan_anomaly", f"orphan removal would stop: {p.anomalies[0]}"
            )
        if p.empty:
            return Decision(
                0, w.name, action, NOTHING_TO_DO, "empty", f"no orphan files among {p.listed} listed"
            )
        cost = Cost(delete_requests=len(p.candidates))
        refusal = self._refusal(w, everyone, run, now, cost)
        if refusal is not None:
            return _deferred(w.name, action, refusal, cost)
        return (
            r,
            cost,
            f"{len(p.candidates)} orphan file(s)",
            lambda pid: m.remove_orphan_files(dry_run=False, plan_id=pid),
        )

    def _fit_rewrite(
        self, w: _Table, now: int, everyone: list[Spend], run: Cost
    ) -> Decision | tuple[ActionResult, Cost, str, Callable[[str], ActionResult]]:
        m = w.maintainer
        assert w.policy is not None and w.health is not None and w.table is not None
        rec = next(a for a in w.health.actions if a.action == REWRITE_DATA)
        params = dict(rec.parameters)
        order = w.policy.sort_order
        if order is None and not w.table.metadata.default_sort_order.is_unsorted:
            params["strategy"] = "sort"
        elif order is not None:
            params.update(strategy="sort", sort_order=order)
        if w.policy.target_file_size is not None:
            params["target_file_size_bytes"] = w.policy.target_file_size
        options = RewriteOptions(**params)
        r = m.rewrite_data_files(options)
        p = r.plan
        assert isinstance(p, RewritePlan)
        if p.empty:
            return Decision(0, w.name, REWRITE_DATA, NOTHING_TO_DO, "empty", "no file group worth rewriting")
        full = Cost(rewrite_bytes=sum(g.bytes for g in p.groups), commits=1, file_groups=len(p.groups))
        if self._refusal(w, everyone, run, now, full) is None:
            return r, full, _rewrite_note(p, len(p.groups)), self._run_rewrite(m, options, w.policy.window)
        # the smallest unit of work: one group (the smallest) in one commit; what stops it says
        # whether the rest waits (deferred) or can never fit (blocked)
        unit = Cost(rewrite_bytes=min(g.bytes for g in p.groups), commits=1, file_groups=1)
        if self._refusal(w, everyone, run, now, unit) is not None:
            refusal = self._refusal(w, everyone, run, now, unit)
            assert refusal is not None
            return _deferred(w.name, REWRITE_DATA, refusal, full)
        groups = self._room(w, everyone, run, now, FILE_GROUPS)
        size = self._room(w, everyone, run, now, BYTES)
        trimmed = dataclasses.replace(options, max_groups=groups, max_rewrite_bytes=size)
        r2 = m.rewrite_data_files(trimmed)
        p2 = r2.plan
        assert isinstance(p2, RewritePlan)
        if p2.empty:
            refusal = self._refusal(w, everyone, run, now, full) or self._refusal(w, everyone, run, now, unit)
            assert refusal is not None
            return _deferred(w.name, REWRITE_DATA, dataclasses.replace(refusal, never=False), full)
        cost = Cost(rewrite_bytes=sum(g.bytes for g in p2.groups), commits=1, file_groups=len(p2.groups))
        note = _rewrite_note(p2, len(p.groups)) + "; the rest waits for budget"
        return r2, cost, note, self._run_rewrite(m, trimmed, w.policy.window)

    def _run_rewrite(
        self, m: Maintainer, options: RewriteOptions, window: Window
    ) -> Callable[[str], ActionResult]:
        def stop() -> str | None:
            # asked at each file group boundary: a window that closed mid-run ends the run there, the
            # groups done committed, the rest left for the next window (recorded in the run's summary)
            at = self.clock()
            return (
                None
                if window.is_open(at)
                else f"the maintenance window ({window.describe()}) closed at {iso(at)}"
            )

        return lambda pid: m.rewrite_data_files(options, dry_run=False, plan_id=pid, stop=stop)

    def _fit_expire(
        self, w: _Table, now: int, everyone: list[Spend], run: Cost
    ) -> Decision | tuple[ActionResult, Cost, str, Callable[[str], ActionResult]]:
        m = w.maintainer
        assert w.policy is not None and w.table is not None
        cut = expiry_cutoff(w.policy, now, [(ts, who) for ts, _sid, who in w.leases])
        leased = {sid for _ts, sid, _who in w.leases}

        def plan(older_than: int) -> ExpirePlan:
            p = m.expire_snapshots(older_than=older_than).plan
            assert isinstance(p, ExpirePlan)
            return p

        p = plan(cut.cutoff_ms)
        held = ""
        if cut.limited_by is not None:
            unlimited = plan(cut.policy_cutoff_ms)
            n_held = len(unlimited.expired) - len(p.expired)
            if n_held > 0:
                held = f"; {n_held} snapshot(s) held back: {cut.detail}"
                if p.empty:
                    return Decision(0, w.name, EXPIRE, BLOCKED, cut.limited_by, f"expiry blocked{held}")
        if p.empty:
            return Decision(0, w.name, EXPIRE, NOTHING_TO_DO, "empty", "no snapshot past its retention")
        # a ref's own max-snapshot-age or an aged-out ref could still reach below the floor or a lease
        unsafe = [s for s in p.expired if s.snapshot_id in leased or s.timestamp_ms >= cut.cutoff_ms]
        if unsafe:
            s = unsafe[0]
            why = (
                "a reader lease holds it"
                if s.snapshot_id in leased
                else "it is younger than the expiry cut-off"
            )
            return Decision(
                0, w.name, EXPIRE, BLOCKED, "reader_lease" if s.snapshot_id in leased else "retention_floor",
                f"expiry would remove snapshot {s.snapshot_id} (a ref's own retention) but {why}",
            )  # fmt: skip
        cost = Cost(commits=1, delete_requests=len(p.files))
        refusal = self._refusal(w, everyone, run, now, cost)
        older = cut.cutoff_ms
        if (
            refusal is not None
            and refusal.dimension == DELETES
            and self._refusal(w, everyone, run, now, Cost(commits=1)) is None
        ):
            left = self._room(w, everyone, run, now, DELETES) or 0
            # fewer (the oldest) snapshots: the longest prefix whose files fit the requests left
            stamps = sorted({s.timestamp_ms for s in p.expired})
            best: ExpirePlan | None = None
            lo, hi = 1, len(stamps) - 1
            while lo <= hi:
                mid = (lo + hi) // 2
                candidate = plan(stamps[mid])
                if not candidate.empty and len(candidate.files) <= left:
                    best, older, lo = candidate, stamps[mid], mid + 1
                else:
                    hi = mid - 1
            if best is not None:
                total = len(p.expired)
                p, cost, refusal = best, Cost(commits=1, delete_requests=len(best.files)), None
                held += f"; {total - len(p.expired)} more wait for delete budget"
        if refusal is not None:
            return _deferred(w.name, EXPIRE, refusal, cost)
        result = m.expire_snapshots(older_than=older)
        note = f"expire {len(p.expired)} snapshot(s), delete {len(p.files)} file(s){held}"
        return (
            result,
            cost,
            note,
            lambda pid: m.expire_snapshots(older_than=older, dry_run=False, plan_id=pid),
        )

    # -- reading back ---------------------------------------------------------------------------------

    def report(self, scope: str | None = None) -> list[dict[str, Any]]:
        """Per table: its last recorded pass (decisions) and the runs of that pass with their evidence."""
        out: list[dict[str, Any]] = []
        for name in self.tables(scope):
            m = self.maintainer(name)
            try:
                table = m.load()
            except IcebergError as e:
                out.append({"table": name, "error": str(e), "decisions": [], "runs": []})
                continue
            store = m.store(table)
            passes = list(store.records(_DECISIONS))
            last = passes[-1] if passes else None
            decisions = [Decision.from_json(d) for d in (last or {}).get("decisions", [])]
            run_ids = {d.run_id for d in decisions if d.run_id}
            runs = [r for r in AuditLog(store).runs() if r.run_id in run_ids]
            out.append({
                "table": name, "loop_id": (last or {}).get("loop_id"), "at_ms": (last or {}).get("at_ms"),
                "passes": len(passes), "decisions": decisions, "runs": runs,
                "health": m.health(with_partitions=False),
            })  # fmt: skip
        return out

    def history(self, name: str) -> list[Mapping[str, Any]]:
        """The recorded passes of one table, oldest first."""
        m = self.maintainer(name)
        return list(self.store(m.load()).records(_DECISIONS))


def _least(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _deferred(table: str, action: str, refusal: Refusal, cost: Cost) -> Decision:
    if refusal.never:
        return Decision(0, table, action, BLOCKED, f"budget_{refusal.dimension}", refusal.message, cost=cost)
    when = f"; room again {iso(refusal.resume_at_ms)}" if refusal.resume_at_ms is not None else ""
    return Decision(
        0, table, action, DEFERRED, f"budget_{refusal.dimension}", refusal.message + when, cost=cost,
        resume_at_ms=refusal.resume_at_ms,
    )  # fmt: skip


def _rewrite_note(p: RewritePlan, of: int) -> str:
    files = sum(len(g.files) for g in p.groups)
    return f"rewrite {len(p.groups)} of {of} file group(s), {files} file(s), {sum(g.bytes for g in p.groups):,} bytes"
