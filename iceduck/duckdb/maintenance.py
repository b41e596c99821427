"""Maintenance as SQL: health, its history, the four actions and their log.

    SELECT * FROM iceberg_health('demo.orders');                     -- one row: metrics, state, reasons
    SELECT * FROM iceberg_health_partitions('demo.orders') LIMIT 10; -- worst partitions first
    SELECT * FROM iceberg_health_history('demo.orders');             -- recorded health snapshots
    SELECT * FROM iceberg_expire_snapshots('demo.orders', older_than := now() - INTERVAL 7 DAY, retain_last := 10);
    SELECT * FROM iceberg_remove_orphan_files('demo.orders');        -- files older than 3 days
    SELECT * FROM iceberg_rewrite_data_files('demo.orders', strategy := 'sort', sort_order := 'ts DESC');
    SELECT * FROM iceberg_rewrite_manifests('demo.orders');
    SELECT * FROM iceberg_maintenance_log('demo.orders');            -- what every run did, with evidence
    SELECT * FROM iceberg_maintenance_plan('demo');                  -- the loop: one pass over a namespace
    SELECT * FROM iceberg_reader_leases('demo.orders');              -- readers holding old snapshots

The four actions are dry runs unless `dry_run := false` is given (NULL counts as a dry run): a dry
run only reads and returns the plan, with its `plan_id`. A real run can name that plan
(`plan_id := '...'`): it then runs only if the table still gives the same plan, and a plan that
ran already is never run again (its recorded outcome comes back, status `already_run`).

DuckDB may read a table function more than once in one statement (a view referenced twice, a
UNION ALL of the same call, EXPLAIN ANALYZE) and never for plain EXPLAIN or `LIMIT 0`. Mutating
calls therefore run at most once per statement: their macro adds the statement's transaction start
time (`get_current_timestamp()`, the same for every reference in one statement and different for
the next) to the arguments, and identical arguments within one statement share one run and its
rows. Inside an explicit transaction every statement shares that time, so an identical real run
there also happens only once. Across statements and processes the audit log's run-once marker
guards the plan.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from iceduck._lazy import LazyModule
from iceduck.duckdb.context import Context
from iceduck.duckdb.functions import Args, Param, TableFunction, check_cancelled, report_progress
from iceduck.errors import TableNotFoundError, ValidationError

if TYPE_CHECKING:
    import pyarrow as pa

    from iceduck.inspect.metadata import Column
else:
    pa = LazyModule("pyarrow")


# The modules that build Arrow rows (pyarrow objects made at their import) load at the first call
# or bind of a function here, not when a connection registers them.
def _health_rows() -> ModuleType:
    from iceduck.duckdb import health_rows

    return health_rows


def _tables() -> ModuleType:
    from iceduck.inspect import metadata

    return metadata

# The actions and the commit stack under them load on the first maintenance call, not when a
# connection registers these functions: `iceduck -c "select 1"` never needs them. (A startup cost,
# not a cycle: the import-graph test counts these imports like any other.)
if TYPE_CHECKING:
    from iceduck.maintenance.actions import ActionResult, Maintainer
    from iceduck.maintenance.audit import RunRecord

TABLE = Param("tbl", default=None, doc="ns.table in the catalog (dry runs and health also take a path)")
DRY_RUN = Param("dry_run", "BOOLEAN", "true", doc="only plan (default); false runs")
PLAN_ID = Param("plan_id", doc="run exactly the plan a dry run printed")
_SEP = "\x1f"


# The rows of the functions here, built at first use (pyarrow loads then).
@functools.cache
def action_rows_schema() -> pa.Schema:
    """One row per planned or performed step of a maintenance action."""
    return pa.schema(
        [
            ("plan_id", pa.string()),
            ("run_id", pa.string()),
            ("action", pa.string()),
            ("dry_run", pa.bool_()),
            ("status", pa.string()),
            ("kind", pa.string()),
            ("item", pa.string()),
            ("partition", pa.string()),
            ("snapshot_id", pa.int64()),
            ("at", _tables().TS),
            ("files", pa.int64()),
            ("bytes", pa.int64()),
            ("records", pa.int64()),
            ("outcome", pa.string()),
            ("detail", pa.string()),
        ]
    )


@functools.cache
def _outcome_type() -> pa.DataType:
    return pa.struct(
        [("item", pa.string()), ("kind", pa.string()), ("outcome", pa.string()), ("detail", pa.string())]
    )


def _json(value: Any) -> str | None:
    return json.dumps(value, sort_keys=True) if value else None


# `iceberg_maintenance_log`: one row per run (the columns and how each is read off the run, once)
@functools.cache
def _log_columns() -> list[Column]:
    ts = _tables().TS
    return [
        ("run_id", pa.string(), lambda run, _: run.run_id),
        ("plan_id", pa.string(), lambda run, _: run.plan_id),
        ("action", pa.string(), lambda run, _: run.action),
        ("status", pa.string(), lambda run, _: run.status),
        ("started_at", ts, lambda run, _: run.started_ms),
        ("finished_at", ts, lambda run, _: run.finished_ms),
        ("table_name", pa.string(), lambda run, _: run.table),
        ("table_uuid", pa.string(), lambda run, _: run.table_uuid),
        ("base_metadata_location", pa.string(), lambda run, _: run.base_metadata_location),
        ("base_snapshot_id", pa.int64(), lambda run, _: run.base_snapshot_id),
        ("result_snapshot_ids", pa.list_(pa.int64()), lambda run, _: list(run.result_snapshot_ids)),
        ("result_metadata_location", pa.string(), lambda run, _: run.result_metadata_location),
        ("parameters", pa.string(), lambda run, _: json.dumps(dict(run.parameters), sort_keys=True, default=str)),
        ("candidates", pa.list_(pa.string()), lambda run, _: list(run.candidates)),
        ("outcomes", pa.list_(_outcome_type()), lambda run, _: [o.to_json() for o in run.outcomes]),
        ("summary", pa.string(), lambda run, _: json.dumps(dict(run.summary), sort_keys=True, default=str)),
        ("health_before_state", pa.string(), lambda run, _: (run.health_before or {}).get("state")),
        ("health_after_state", pa.string(), lambda run, _: (run.health_after or {}).get("state")),
        ("health_before", pa.string(), lambda run, _: _json(run.health_before)),
        ("health_after", pa.string(), lambda run, _: _json(run.health_after)),
        ("error", pa.string(), lambda run, _: run.error),
        # each commit's base metadata file, requirements and updates (REST JSON)
        ("commits", pa.list_(pa.string()), lambda run, _: [json.dumps(c, sort_keys=True) for c in run.commits]),
        # the loop's before/after evidence (recorded queries, physical targets, recovery)
        ("verdict", pa.string(), lambda run, _: (run.verification or {}).get("verdict")),
        ("flagged", pa.bool_(), lambda run, _: (run.verification or {}).get("flagged")),
        ("verification", pa.string(), lambda run, _: _json(run.verification)),
    ]


@functools.cache
def maintenance_log_schema() -> pa.Schema:
    """`iceberg_maintenance_log`'s rows."""
    return _tables().columns_schema(_log_columns())


# `iceberg_maintenance_plan`: one row per decision of the loop's plan
@functools.cache
def _plan_columns() -> list[Column]:
    ts = _tables().TS
    return [
        ("step", pa.int64(), lambda d, _: d.order),
        ("table_name", pa.string(), lambda d, _: d.table),
        ("action", pa.string(), lambda d, _: d.action),
        ("decision", pa.string(), lambda d, _: d.decision),
        ("reason", pa.string(), lambda d, _: d.reason),
        ("message", pa.string(), lambda d, _: d.message),
        ("state", pa.string(), lambda d, _: d.state),
        ("debt", pa.float64(), lambda d, _: d.debt),
        ("rewrite_bytes", pa.int64(), lambda d, _: d.cost.rewrite_bytes),
        ("commits", pa.int64(), lambda d, _: d.cost.commits),
        ("file_groups", pa.int64(), lambda d, _: d.cost.file_groups),
        ("delete_requests", pa.int64(), lambda d, _: d.cost.delete_requests),
        ("resume_at", ts, lambda d, _: d.resume_at_ms),
        ("plan_id", pa.string(), lambda d, _: d.plan_id),
    ]


@functools.cache
def maintenance_plan_schema() -> pa.Schema:
    """`iceberg_maintenance_plan`'s rows."""
    return _tables().columns_schema(_plan_columns())


# `iceberg_reader_leases`: one row per lease (the context: now, for `active`)
@functools.cache
def _lease_columns() -> list[Column]:
    ts = _tables().TS
    return [
        ("lease_id", pa.string(), lambda x, _: x.lease_id),
        ("snapshot_id", pa.int64(), lambda x, _: x.snapshot_id),
        ("snapshot_at", ts, lambda x, _: x.snapshot_ms),
        ("who", pa.string(), lambda x, _: x.who),
        ("acquired_at", ts, lambda x, _: x.acquired_ms),
        ("expires_at", ts, lambda x, _: x.expires_ms),
        ("active", pa.bool_(), lambda x, now: x.active(now)),
    ]


@functools.cache
def reader_leases_schema() -> pa.Schema:
    """`iceberg_reader_leases`' rows."""
    return _tables().columns_schema(_lease_columns())


@dataclass(frozen=True, slots=True)
class OncePerStatement(TableFunction):
    """A table function whose arguments carry the statement's start time, so one statement runs it
    once however often DuckDB reads it (see the module docstring)."""

    def bind_args(self) -> list[str]:
        return ["CAST(epoch_us(get_current_timestamp()) AS VARCHAR)", *TableFunction.bind_args(self)]

    def decode(self, key: str) -> dict[str, Any]:
        statement, _, rest = key.partition(_SEP)
        args = TableFunction.decode(self, rest)
        args["__statement"] = statement
        return args


class _Entry:
    __slots__ = ("done", "error", "lock", "result")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = False
        self.result: pa.Table | None = None
        self.error: BaseException | None = None


class StatementMemo:
    """Results of recent calls by (function, arguments with the statement time); one run each."""

    def __init__(self, capacity: int = 32) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def run(self, name: str, args: Args, fn: Callable[[], pa.Table]) -> pa.Table:
        key = (name, tuple(sorted((k, repr(v)) for k, v in args.items())))
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
                while len(self._entries) > self._capacity:
                    self._entries.popitem(last=False)
        with entry.lock:  # a second reader of the same statement waits for the first
            if not entry.done:
                try:
                    entry.result = fn()
                except BaseException as e:
                    entry.error = e
                    raise
                finally:
                    entry.done = True
            if entry.error is not None:
                raise entry.error
            assert entry.result is not None
            return entry.result


def maintainer(ctx: Context, args: Args) -> Maintainer:
    """The maintainer of the table the `tbl` argument names (`lake.` prefix of catalog views allowed)."""
    from iceduck.maintenance.actions import Maintainer

    arg = str(args["tbl"])
    try:
        return Maintainer.locate(arg, catalog=ctx.catalog)
    except TableNotFoundError:
        parts = arg.split(".")
        if ctx.catalog is not None and len(parts) >= 3 and parts[0] == "lake":
            return Maintainer.locate(".".join(parts[1:]), catalog=ctx.catalog)
        raise


def _cancellable(done: int, total: int, what: str) -> None:
    """The progress callback of SQL runs: shown by the shell; stops the run at its next step after Ctrl-C."""
    report_progress(done, total, what)
    check_cancelled(what)


def _flag(args: Args, name: str, default: bool) -> bool:
    value = args.get(name)
    return default if value is None else bool(value)


def _float(args: Args, name: str) -> float | None:
    value = args.get(name)
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        raise ValidationError(f"{name} must be a number, not {value!r}") from None


# -- rows ----------------------------------------------------------------------------------------------


def _row(r: ActionResult, kind: str, item: str | None, **values: Any) -> dict[str, Any]:
    row = dict.fromkeys(action_rows_schema().names)
    row.update(
        plan_id=r.plan_id,
        run_id=r.run_id,
        action=r.action,
        dry_run=r.dry_run,
        status=r.status,
        kind=kind,
        item=item,
    )
    row.update(values)
    return row


def action_rows(r: ActionResult) -> list[dict[str, Any]]:
    """The rows an action function returns: a summary row, then one per planned or handled item."""
    from iceduck.maintenance.analyze import AnalyzePlan
    from iceduck.maintenance.expire import ExpirePlan
    from iceduck.maintenance.orphans import OrphanPlan
    from iceduck.maintenance.rewrite_data import RewritePlan
    from iceduck.maintenance.rewrite_manifests import ManifestsPlan

    summary = json.dumps(dict(r.summary), sort_keys=True, default=str)
    rows = [
        _row(
            r,
            "summary",
            r.table,
            outcome=r.status,
            detail=summary if not r.error else f"{summary}; {r.error}",
        )
    ]
    p = r.plan
    if not r.dry_run:
        if r.snapshot_ids:
            rows[0]["snapshot_id"] = r.snapshot_ids[-1]
        rows += [_row(r, o.kind, o.item, outcome=o.outcome, detail=o.detail) for o in r.outcomes]
        return rows
    if isinstance(p, ExpirePlan):
        rows[0]["files"] = len(p.files)
        if p.oldest_kept is not None:
            rows[0]["snapshot_id"] = p.oldest_kept.snapshot_id
            rows[0]["at"] = p.oldest_kept.timestamp_ms
        span = p.time_range
        rows[0]["detail"] = (
            f"expires {len(p.expired)} snapshot(s)"
            + (f" committed {_iso(span[0])} .. {_iso(span[1])}" if span else "")
            + f", removes {len(p.removed_refs)} ref(s), keeps {p.kept}"
            + (
                f" (oldest kept {p.oldest_kept.snapshot_id} at {_iso(p.oldest_kept.timestamp_ms)})"
                if p.oldest_kept
                else ""
            )
            + f"; {len(p.files)} file(s) become unreachable"
        )
        rows += [
            _row(r, "snapshot", str(s.snapshot_id), snapshot_id=s.snapshot_id, at=s.timestamp_ms,
                 outcome="would expire", detail=s.operation)
            for s in p.expired
        ]  # fmt: skip
        rows += [_row(r, "ref", name, outcome="would remove") for name in p.removed_refs]
        rows += [_row(r, kind, path, outcome="would delete") for path, kind in p.files]
        rows += [
            _row(r, kind, path, outcome="would keep", detail=f"belongs to table {owner}")
            for path, kind, owner in p.others_files
        ]
    elif isinstance(p, OrphanPlan):
        rows[0].update(files=len(p.candidates), bytes=sum(c.size for c in p.candidates))
        rows[0]["detail"] = (
            f"listed {p.listed} file(s) under {p.location}: {p.reachable} reachable from metadata, {p.recent} "
            f"unreferenced but newer than {_iso(p.older_than_ms)}, {len(p.candidates)} orphan(s)"
            + (f"; {p.other_tables} file(s) of other tables left alone" if p.other_tables else "")
            + (
                f"; {len(p.anomalies)} anomal{'y' if len(p.anomalies) == 1 else 'ies'}: a real run stops"
                if p.anomalies
                else ""
            )
        )
        rows += [_row(r, "anomaly", None, outcome="stop", detail=a) for a in p.anomalies]
        rows += [
            _row(r, "orphan", c.path, at=c.mtime_ms, bytes=c.size, outcome="would delete")
            for c in p.candidates
        ]
    elif isinstance(p, RewritePlan):
        rows[0].update(
            files=len(p.files), bytes=sum(g.bytes for g in p.groups), records=sum(g.records for g in p.groups)
        )
        rows[0]["detail"] = f"{len(p.groups)} file group(s), {len(p.files)} file(s); {summary}"
        for g in p.groups:
            rows.append(
                _row(r, "file_group", g.group_id, partition=g.partition_text, files=len(g.files), bytes=g.bytes,
                     records=g.records, outcome="would rewrite",
                     detail=", ".join(sorted({x for f in g.files for x in f.reasons})))
            )  # fmt: skip
            rows += [
                _row(r, "data", f.path, partition=g.partition_text, bytes=f.size, records=f.records - f.deleted,
                     outcome="would rewrite", detail=f"group {g.group_id}: {', '.join(f.reasons)}")
                for f in g.files
            ]  # fmt: skip
        rows += [_row(r, "data", path, outcome="skipped", detail=why) for path, why in p.skipped]
    elif isinstance(p, AnalyzePlan):
        rows[0].update(files=len(p.files), snapshot_id=p.snapshot_id)
        rows[0]["detail"] = (
            f"sketches {len(p.columns)} column(s) of snapshot {p.snapshot_id} from {len(p.files)} file(s)"
            + (f", merged into {p.base.statistics_path}" if p.base is not None else "")
        )
        rows += [_row(r, "column", name, outcome="would sketch", detail=f"field {fid}") for fid, name in p.columns]
    elif isinstance(p, ManifestsPlan):
        rows[0].update(files=len(p.manifests), bytes=sum(m[3] for m in p.manifests))
        rows[0]["detail"] = (
            f"{len(p.manifests)} manifest(s) -> about {p.expected_manifests} (target {p.target_size_bytes} bytes); "
            f"{p.kept} kept"
        )
        rows += [
            _row(r, "manifest", m[0], bytes=m[3], records=m[4], outcome="would replace",
                 detail=f"{'data' if m[1] == 0 else 'deletes'}, spec {m[2]}")
            for m in p.manifests
        ]  # fmt: skip
    return rows


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def action_table(r: ActionResult) -> pa.Table:
    """An action's rows as Arrow."""
    return pa.Table.from_pylist(action_rows(r), schema=action_rows_schema())


def log_table(runs: Iterable[RunRecord]) -> pa.Table:
    """`iceberg_maintenance_log` rows."""
    return _tables().columns_table(_log_columns(), maintenance_log_schema(), runs, None)


# -- the functions ---------------------------------------------------------------------------------------


def maintenance_functions(ctx: Context) -> list[TableFunction]:
    """The maintenance SQL functions of one connection (for `binding.all_functions`)."""
    memo = StatementMemo()

    def once(name: str, fn: Callable[[Args], pa.Table]) -> Callable[[Args, list[str] | None], pa.Table]:
        def run(args: Args, _columns: list[str] | None) -> pa.Table:
            return memo.run(name, args, lambda: fn(args))

        return run

    def health(args: Args) -> pa.Table:
        m = maintainer(ctx, args)
        h = m.health(record=_flag(args, "record", False), with_partitions=False)
        return _health_rows().health_table([_health_rows().health_row(h, str(args["tbl"]))])

    def partitions(args: Args, _c: list[str] | None) -> pa.Table:
        return _health_rows().partitions_table(maintainer(ctx, args).health())

    def history(args: Args, _c: list[str] | None) -> pa.Table:
        records = maintainer(ctx, args).health_history()
        return _health_rows().health_table(_health_rows().health_row(r, str(args["tbl"])) for r in records)

    def expire(args: Args) -> pa.Table:
        from iceduck.maintenance.actions import to_ms

        r = maintainer(ctx, args).expire_snapshots(
            older_than=to_ms(args.get("older_than")),
            retain_last=args.get("retain_last"),
            dry_run=_flag(args, "dry_run", True),
            plan_id=args.get("plan_id"),
            progress=_cancellable,
        )
        return action_table(r)

    def orphans(args: Args) -> pa.Table:
        from iceduck.maintenance.actions import to_ms

        r = maintainer(ctx, args).remove_orphan_files(
            older_than=to_ms(args.get("older_than")),
            allow_recent=_flag(args, "allow_recent", False),
            dry_run=_flag(args, "dry_run", True),
            plan_id=args.get("plan_id"),
            progress=_cancellable,
        )
        return action_table(r)

    def rewrite_data(args: Args) -> pa.Table:
        from iceduck.maintenance.rewrite_data import RewriteOptions

        options = RewriteOptions(
            strategy=str(args.get("strategy") or "binpack").lower(),
            sort_order=args.get("sort_order"),
            target_file_size_bytes=args.get("target_file_size_bytes"),
            min_file_size_bytes=args.get("min_file_size_bytes"),
            max_file_size_bytes=args.get("max_file_size_bytes"),
            min_input_files=args.get("min_input_files") or 5,
            rewrite_all=_flag(args, "rewrite_all", False),
            delete_file_threshold=args.get("delete_file_threshold"),
            delete_ratio_threshold=_float(args, "delete_ratio_threshold") or 0.3,
            max_file_group_size_bytes=args.get("max_file_group_size_bytes") or 100 * 1024**3,
            partial_progress=_flag(args, "partial_progress", False),
            max_commits=args.get("max_commits") or 10,
        )
        r = maintainer(ctx, args).rewrite_data_files(
            options,
            dry_run=_flag(args, "dry_run", True),
            plan_id=args.get("plan_id"),
            progress=_cancellable,
            before_commit=lambda _groups: check_cancelled("rewrite_data_files"),
        )
        return action_table(r)

    def rewrite_manifests(args: Args) -> pa.Table:
        r = maintainer(ctx, args).rewrite_manifests(
            target_size_bytes=args.get("target_size_bytes"),
            spec_id=args.get("spec_id"),
            dry_run=_flag(args, "dry_run", True),
            plan_id=args.get("plan_id"),
            progress=_cancellable,
        )
        return action_table(r)

    def analyze(args: Args) -> pa.Table:
        columns = [c.strip() for c in str(args.get("columns") or "").split(",") if c.strip()]
        r = maintainer(ctx, args).analyze(
            columns or None,
            incremental=_flag(args, "incremental", True),
            dry_run=_flag(args, "dry_run", True),
            plan_id=args.get("plan_id"),
            progress=_cancellable,
        )
        return action_table(r)

    def log(args: Args, _c: list[str] | None) -> pa.Table:
        return log_table(maintainer(ctx, args).log())

    def plan_scope(args: Args) -> str | None:
        """The namespace `scope` names (None: every table); checked when DuckDB binds the call."""
        if ctx.catalog is None:
            raise ValidationError(
                "iceberg_maintenance_plan needs a catalog (iceduck.register(con, catalog=...))"
            )
        scope = str(args.get("scope") or "").strip()
        if scope in ("", "lake", "*") or scope == getattr(ctx.catalog, "name", None):
            return None
        if not ctx.catalog.namespace_exists(scope):
            raise TableNotFoundError(f"no namespace {scope!r} in the catalog")
        return scope

    def check_scope(args: Args) -> None:
        plan_scope(args)  # refuse a bad scope when DuckDB binds the call

    def loop_plan(args: Args, _c: list[str] | None) -> pa.Table:
        from iceduck.maintenance.loop import MaintenanceLoop

        report = MaintenanceLoop(ctx.catalog).plan(plan_scope(args))
        return _tables().columns_table(_plan_columns(), maintenance_plan_schema(), report.decisions, None)

    def reader_leases(args: Args, _c: list[str] | None) -> pa.Table:
        from iceduck.maintenance.readers import ReaderLeases
        from iceduck.maintenance.store import now_ms

        m = maintainer(ctx, args)
        return _tables().columns_table(_lease_columns(), reader_leases_schema(), ReaderLeases(m.store()).leases(), now_ms())

    older = Param("older_than", "TIMESTAMPTZ", doc="expire / delete only what is older than this")
    return [
        OncePerStatement(
            "iceberg_health",
            (TABLE, Param("record", "BOOLEAN", "false", doc="append to the health log")),
            lambda: _health_rows().HEALTH,
            once("iceberg_health", health),
            "Table health from metadata alone: one row with the state, its reasons, recommended actions and "
            "metrics (record := true appends it to the health log)",
            rows_estimate=1,
        ),
        TableFunction(
            "iceberg_health_partitions",
            (TABLE,),
            lambda: _health_rows().HEALTH_PARTITIONS,
            partitions,
            "Health per partition, worst first (most files a rewrite would touch)",
        ),
        TableFunction(
            "iceberg_health_history",
            (TABLE,),
            lambda: _health_rows().HEALTH,
            history,
            "Recorded health snapshots of the table (by table UUID), oldest first",
        ),
        OncePerStatement(
            "iceberg_expire_snapshots",
            (TABLE, older, Param("retain_last", "BIGINT"), DRY_RUN, PLAN_ID),
            action_rows_schema,
            once("iceberg_expire_snapshots", expire),
            "Expire snapshots by the retention policy (older_than, retain_last, refs' own settings) and delete "
            "files no retained snapshot reaches; a dry run unless dry_run := false",
        ),
        OncePerStatement(
            "iceberg_remove_orphan_files",
            (TABLE, older, Param("allow_recent", "BOOLEAN", "false"), DRY_RUN, PLAN_ID),
            action_rows_schema,
            once("iceberg_remove_orphan_files", orphans),
            "Delete files under the table location that no metadata reaches and older than older_than "
            "(default 3 days); stops on any anomaly; a dry run unless dry_run := false",
        ),
        OncePerStatement(
            "iceberg_rewrite_data_files",
            (
                TABLE,
                Param("strategy", default="'binpack'"),
                Param("sort_order"),
                Param("target_file_size_bytes", "BIGINT"),
                Param("min_file_size_bytes", "BIGINT"),
                Param("max_file_size_bytes", "BIGINT"),
                Param("min_input_files", "BIGINT"),
                Param("rewrite_all", "BOOLEAN", "false"),
                Param("delete_file_threshold", "BIGINT"),
                Param("delete_ratio_threshold", "DOUBLE"),
                Param("max_file_group_size_bytes", "BIGINT"),
                Param("partial_progress", "BOOLEAN", "false"),
                Param("max_commits", "BIGINT"),
                DRY_RUN,
                PLAN_ID,
            ),
            action_rows_schema,
            once("iceberg_rewrite_data_files", rewrite_data),
            "Compact (binpack) or sort data files per partition, applying deletes and keeping row lineage; "
            "a dry run unless dry_run := false",
        ),
        OncePerStatement(
            "iceberg_rewrite_manifests",
            (TABLE, Param("target_size_bytes", "BIGINT"), Param("spec_id", "BIGINT"), DRY_RUN, PLAN_ID),
            action_rows_schema,
            once("iceberg_rewrite_manifests", rewrite_manifests),
            "Regroup the current snapshot's manifests by partition to a target size; a dry run unless "
            "dry_run := false",
        ),
        OncePerStatement(
            "iceberg_analyze",
            (
                TABLE,
                Param("columns", doc="comma-separated column names (default: every column it can sketch)"),
                Param("incremental", "BOOLEAN", "true"),
                DRY_RUN,
                PLAN_ID,
            ),
            action_rows_schema,
            once("iceberg_analyze", analyze),
            "Distinct-count statistics (theta sketches in a Puffin statistics file registered on the current "
            "snapshot, as ANALYZE lake.ns.t); incremental when only appends came since the last statistics; "
            "a dry run unless dry_run := false",
        ),
        TableFunction(
            "iceberg_maintenance_log",
            (TABLE,),
            maintenance_log_schema,
            log,
            "Every maintenance run of the table: parameters, candidates, outcomes per item, snapshots, "
            "health before and after, each commit's requirements and updates (REST JSON), and the loop's "
            "before/after evidence (verdict, flagged, verification)",
        ),
        TableFunction(
            "iceberg_maintenance_plan",
            (
                Param(
                    "scope", default=None, doc="a namespace, or '' / '*' / the catalog's name for every table"
                ),
            ),
            maintenance_plan_schema,
            loop_plan,
            "The maintenance loop's plan over many tables: every decision one pass would take (would_run, "
            "deferred, blocked, nothing_to_do) with its reason and cost, in the order it would take them",
            check=check_scope,
        ),
        TableFunction(
            "iceberg_reader_leases",
            (TABLE,),
            reader_leases_schema,
            reader_leases,
            "Reader leases of the table: snapshots long readers declared, which expiry keeps until they end",
        ),
    ]
