"""`iceduck health <table>` and `iceduck maintain <table> --plan | --run`.

    iceduck health demo.orders                 # state, reasons, recommended actions, key metrics
    iceduck health demo.orders --record        # ... and append it to the health log (for trends)
    iceduck health demo.orders --json          # the whole record as JSON
    iceduck maintain demo.orders --plan        # what the recommended actions would do (dry runs)
    iceduck maintain demo.orders --run         # run them, with progress on stderr
    iceduck maintain demo.orders --run --orphans   # ... and remove orphan files (3-day window)
    iceduck maintain --all --plan              # the loop over every table: what one pass would do
    iceduck maintain --all --namespace demo --run --budget rewrite-bytes=256MB,delete-requests=500
    iceduck maintain --all --report            # each table's last pass: decisions, before/after costs

`health --check` exits 0 when the table is HEALTHY or DEBT_GROWING, 1 when maintenance is due, 2
when it is blocked or the table is at risk (for schedulers and monitors).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, TextIO

from iceduck.commands import Command, open_lake, register_command
from iceduck.maintenance.actions import ActionResult, Maintainer
from iceduck.maintenance.audit import RunRecord
from iceduck.maintenance.health import (
    AT_RISK,
    MAINTENANCE_BLOCKED,
    MAINTENANCE_DUE,
    Health,
)
from iceduck.maintenance.loop import BLOCKED, FAILED, Decision, LoopReport, MaintenanceLoop
from iceduck.maintenance.policy import POLICY_PROPERTIES, Budget, iso, parse_budget


def _size(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


class ProgressLine:
    """A one-line progress bar on stderr (redrawn in place on a terminal, a line per 10% otherwise)."""

    def __init__(self, stream: TextIO, label: str) -> None:
        self.stream = stream
        self.label = label
        self.tty = stream.isatty()
        self.last_step = -1
        self.started = time.monotonic()
        self.drawn = False

    def __call__(self, done: int, total: int, what: str) -> None:
        frac = done / total if total else 1.0
        if self.tty:
            width = 24
            filled = round(frac * width)
            bar = "#" * filled + "." * (width - filled)
            line = f"\r[{self.label}] [{bar}] {frac:4.0%} {what[:40]:<40} {time.monotonic() - self.started:5.1f}s"
            self.stream.write(line)
            self.stream.flush()
            self.drawn = True
        else:
            step = int(frac * 10)
            if step != self.last_step:
                self.last_step = step
                self.stream.write(f"[{self.label}] {frac:.0%} {what}\n")
                self.stream.flush()

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def render_health(h: Health, out: TextIO, partitions: int = 5) -> None:
    """A human-readable health report."""
    m = h.metrics
    out.write(f"{h.table or h.metadata_location}: {h.state}\n")
    out.write(f"  table uuid {h.table_uuid}\n  metadata   {h.metadata_location}\n")
    if h.reasons:
        out.write("reasons:\n")
        for r in h.reasons:
            out.write(f"  {r.state:<19} {r.check}: {r.message}\n")
    if h.actions:
        out.write("recommended actions:\n")
        for i, a in enumerate(h.actions, 1):
            out.write(
                f"  {i}. {a.sql(h.table or h.metadata_location)}\n     because: {', '.join(a.because)}\n"
            )
    ops = ", ".join(f"{k} {v}" for k, v in (m.get("operations") or []))
    out.write("metrics:\n")
    rows = [
        ("snapshots", f"{m['snapshots']} (last 24 h: {m['snapshots_last_24h']}, commits {m['commits_last_24h']}; "
                      f"expirable {m['expirable_snapshots']}; {ops})"),
        ("data files", f"{m['data_files']} ({_size(m['data_bytes'])}, {m['records']} rows); sizes p10/p50/p90 "
                       f"{_size(m['file_size_p10'])} / {_size(m['file_size_p50'])} / {_size(m['file_size_p90'])}; "
                       f"{_share(m['small_file_share'])} below target {_size(m['target_file_size'])}"),
        ("compaction", f"{m['compactable_files']} compactable, {m['small_files']} small, {m['oversized_files']} oversized"),
        ("deletes", f"{m['delete_files']} delete files ({m['dv_count']} DVs, {m['position_delete_files']} position, "
                    f"{m['equality_delete_files']} equality); {m['deleted_rows']} rows deleted "
                    f"({_share(m['deleted_row_share'])}); per file p50/p90/max {_share(m['deleted_share_p50'])} / "
                    f"{_share(m['deleted_share_p90'])} / {_share(m['deleted_share_max'])}"),
        ("manifests", f"{m['manifests']} ({_size(m['manifest_bytes'])}); entries p10/p50/p90 "
                      f"{m['entries_per_manifest_p10']} / {m['entries_per_manifest_p50']} / {m['entries_per_manifest_p90']}; "
                      f"{m['excess_manifests']} excess"),
        ("metadata", f"{_size(m['metadata_json_bytes'])}, {m['previous_metadata_versions']} previous versions; "
                     f"{m['branches']} branch(es), {m['tags']} tag(s)"),
        ("all snapshots", f"{m['all_data_files']} data files ({_size(m['all_data_bytes'])}), {m['all_delete_files']} "
                          f"delete files, {m['all_manifests']} manifests"),
    ]  # fmt: skip
    for name, text in rows:
        out.write(f"  {name:<14} {text}\n")
    worst = [p for p in h.partitions if p.debt or p.state != "HEALTHY"][:partitions]
    if worst:
        out.write("worst partitions:\n")
        for p in worst:
            label = "/".join(f"{k}={v}" for k, v in p.partition) or "(unpartitioned)"
            out.write(f"  {label}: {p.data_files} files, {'; '.join(p.reasons)}\n")


def render_result(r: ActionResult, out: TextIO) -> None:
    """One line per action result, plus errors."""
    summary = ", ".join(f"{k} {v}" for k, v in r.summary.items())
    ids = f"{'dry run, ' if r.dry_run else ''}plan {r.plan_id}" + (f", run {r.run_id}" if r.run_id else "")
    out.write(f"{r.action}: {r.status} ({ids}) {summary}\n")
    if r.error:
        out.write(f"  error: {r.error}\n")


def _maintainer(args: argparse.Namespace) -> tuple[Any, Maintainer]:
    lake = open_lake(args)
    return lake, Maintainer.locate(args.table, catalog=lake.catalog)


def _configure_health(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", help="ns.table in the warehouse's catalog, or a table path")
    p.add_argument("--record", action="store_true", help="append this health snapshot to the health log")
    p.add_argument("--json", action="store_true", help="print the health record as JSON")
    p.add_argument(
        "--partitions", type=int, default=5, metavar="N", help="worst partitions to show (default 5)"
    )
    p.add_argument(
        "--check", action="store_true", help="exit 1 when maintenance is due, 2 when blocked or at risk"
    )


def _run_health(args: argparse.Namespace) -> int:
    lake, m = _maintainer(args)
    with lake:
        h = m.health(record=args.record)
    if args.json:
        print(json.dumps(h.to_json(), indent=2, sort_keys=True, default=str))
    else:
        render_health(h, sys.stdout, args.partitions)
        if args.record:
            print("recorded in the health log")
    if not args.check:
        return 0
    if h.state in (AT_RISK, MAINTENANCE_BLOCKED):
        return 2
    return 1 if h.state == MAINTENANCE_DUE else 0


def _configure_maintain(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", nargs="?", help="ns.table in the warehouse's catalog (or --all)")
    p.add_argument("--all", action="store_true", help="every table of the catalog: the maintenance loop")
    p.add_argument("--namespace", metavar="NS", help="with --all: only this namespace (and those below it)")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--plan", action="store_true", help="show what the recommended actions would do (dry runs)"
    )
    mode.add_argument("--run", action="store_true", help="run the recommended actions")
    mode.add_argument(
        "--report", action="store_true", help="with --all: each table's last pass, with before/after evidence"
    )
    p.add_argument("--orphans", action="store_true", help="also remove orphan files older than 3 days")
    p.add_argument(
        "--budget",
        metavar="SPEC",
        help="with --all: the pass's budget, e.g. rewrite-bytes=256MB,commits=10,file-groups=4,"
        "delete-requests=1000 (bytes and commits per hour, groups and deletes per run)",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.epilog = "table policy properties (defaults): " + "; ".join(
        f"{name} ({default})" for name, default, _ in POLICY_PROPERTIES
    )


def _run_maintain(args: argparse.Namespace) -> int:
    if args.all or args.namespace:
        if args.table:
            raise SystemExit("iceduck maintain: give a table or --all, not both")
        return _run_loop(args)
    if not args.table:
        raise SystemExit("iceduck maintain: give a table (ns.table) or --all")
    if args.report or args.budget:
        raise SystemExit("iceduck maintain: --report and --budget go with --all")
    lake, m = _maintainer(args)
    failed = False
    results: list[ActionResult] = []
    with lake:
        before = m.health(with_partitions=False)
        if not args.json:
            print(f"{args.table}: {before.state}" + ("" if before.actions else " - nothing to do"))
        for action in before.actions if not args.orphans else [*before.actions, None]:
            name = action.action if action is not None else "remove_orphan_files"
            bar = ProgressLine(sys.stderr, name) if args.run else None
            try:
                if action is None:
                    r = m.remove_orphan_files(dry_run=not args.run, progress=bar)
                else:
                    r = m.run_recommended(action, dry_run=not args.run, progress=bar)
            except Exception as e:  # one failing action must not hide the others' results
                if bar is not None:
                    bar.close()
                print(f"{name}: failed: {e}", file=sys.stderr)
                failed = True
                continue
            if bar is not None:
                bar.close()
            results.append(r)
            failed = failed or r.status == "failed"
            if not args.json:
                render_result(r, sys.stdout)
        after = m.health(with_partitions=False) if args.run else before
    if args.json:
        payload = {
            "before": before.to_json(),
            "results": [
                {"action": r.action, "plan_id": r.plan_id, "run_id": r.run_id, "status": r.status,
                 "summary": dict(r.summary), "error": r.error}
                for r in results
            ],
            "after": after.to_json(),
        }  # fmt: skip
        print(json.dumps(payload, indent=2, sort_keys=True, default=str))
    elif args.run:
        print(f"{args.table}: {after.state}")
        for reason in after.reasons:
            print(f"  {reason.state:<19} {reason.check}: {reason.message}")
    return 1 if failed else 0


def render_decision(d: Decision, out: TextIO) -> None:
    """One line per decision of a pass."""
    action = d.action or "(table)"
    out.write(f"  {d.order:>3}. {d.table:<24} {action:<20} {d.decision:<13} {d.message}\n")


def render_pass(r: LoopReport, out: TextIO) -> None:
    """A pass: what it decided, in order, and what it spent."""
    spent = r.spent if r.mode == "run" else r.planned
    what = "spent" if r.mode == "run" else "would spend"
    out.write(
        f"maintenance pass {r.loop_id} ({r.mode}) at {iso(r.at_ms)}, scope {r.scope or 'all tables'}: "
        f"{len(r.decisions)} decision(s); {what} {spent.rewrite_bytes:,} bytes rewritten, {spent.commits} "
        f"commit(s), {spent.file_groups} file group(s), {spent.delete_requests} delete request(s)\n"
    )
    for d in r.decisions:
        render_decision(d, out)


def _cost_line(before: dict[str, Any], after: dict[str, Any]) -> str:
    parts = []
    for key, label in (("bytes_to_scan", "bytes"), ("data_files_kept", "files"), ("delete_files", "deletes"),
                       ("manifests_kept", "manifests")):  # fmt: skip
        parts.append(f"{label} {before.get(key)} -> {after.get(key)}")
    parts.append(f"planning {before.get('planning_ms', 0):.1f} -> {after.get('planning_ms', 0):.1f} ms")
    return ", ".join(parts)


def render_report(tables: list[dict[str, Any]], out: TextIO) -> None:
    """Each table's last pass: decisions, and for what ran the before/after evidence."""
    for t in tables:
        if t.get("error"):
            out.write(f"{t['table']}: cannot be read: {t['error']}\n")
            continue
        h = t["health"]
        when = iso(t["at_ms"]) if t.get("at_ms") else "never"
        out.write(f"{t['table']}: {h.state} ({t['passes']} pass(es) recorded, last {when})\n")
        for d in t["decisions"]:
            render_decision(d, out)
        for run in t["runs"]:
            _render_evidence(run, out)


def _render_evidence(run: RunRecord, out: TextIO) -> None:
    v = run.verification
    if not v:
        return
    flag = "FLAGGED: " + str(v.get("why")) if v.get("flagged") else str(v.get("why"))
    out.write(f"       {run.action} ({run.status}): {v.get('verdict')}; {flag}\n")
    after = {q["name"]: q for q in v["after"]["queries"]}
    for q in v["before"]["queries"]:
        if q["name"] in after:
            out.write(f"         query {q['name']}: {_cost_line(q, after[q['name']])}\n")
    pb, pa_ = v["before"]["physical"], v["after"]["physical"]
    out.write("         physical: " + ", ".join(f"{k} {pb.get(k)} -> {pa_.get(k)}" for k in pb) + "\n")
    rec = v["after"].get("recovery") or {}
    if rec:
        out.write(
            f"         recovery: oldest snapshot {rec.get('oldest_snapshot_id')}, {rec.get('snapshots')} "
            f"snapshot(s), refs {', '.join(rec.get('refs') or []) or '-'}, {rec.get('files_checked')} file(s) "
            f"checked, rows {rec.get('rows')}: {'ok' if rec.get('ok') else 'FAILED ' + str(rec.get('error') or rec.get('files_missing'))}\n"
        )


def _run_loop(args: argparse.Namespace) -> int:
    lake = open_lake(args)
    budget = parse_budget(args.budget) if args.budget else Budget()
    with lake:
        loop = MaintenanceLoop.for_lake(lake, budget=budget)
        if args.report:
            tables = loop.report(args.namespace)
            if args.json:
                print(json.dumps(_report_json(tables), indent=2, sort_keys=True, default=str))
            else:
                render_report(tables, sys.stdout)
            return 0
        live = None if args.json or not args.run else (lambda d: render_decision(d, sys.stdout))
        if live is not None:
            print(f"maintenance pass (run), scope {args.namespace or 'all tables'}:")
        report = loop.run(args.namespace, on_decision=live) if args.run else loop.plan(args.namespace)
    if args.json:
        payload = {
            "loop_id": report.loop_id, "mode": report.mode, "at_ms": report.at_ms,
            "decisions": [d.to_json() for d in report.decisions],
        }  # fmt: skip
        print(json.dumps(payload, indent=2, sort_keys=True, default=str))
    elif args.run:
        s = report.spent
        print(
            f"spent {s.rewrite_bytes:,} bytes rewritten, {s.commits} commit(s), {s.file_groups} file group(s), "
            f"{s.delete_requests} delete request(s); {len(report.by('deferred'))} deferred, "
            f"{len(report.by(BLOCKED))} blocked"
        )
    else:
        render_pass(report, sys.stdout)
    return 1 if report.by(FAILED) else 0


def _report_json(tables: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for t in tables:
        h = t.get("health")
        out.append({
            "table": t["table"], "error": t.get("error"), "state": h.state if h is not None else None,
            "passes": t.get("passes"), "at_ms": t.get("at_ms"),
            "decisions": [d.to_json() for d in t.get("decisions", [])],
            "runs": [{"run_id": r.run_id, "action": r.action, "status": r.status, "verification": r.verification}
                     for r in t.get("runs", [])],
        })  # fmt: skip
    return out


register_command(
    Command("health", "Report on a table's health (metadata only)", _configure_health, _run_health)
)
register_command(
    Command(
        "maintain",
        "Plan or run the maintenance a table's health recommends",
        _configure_maintain,
        _run_maintain,
    )
)
