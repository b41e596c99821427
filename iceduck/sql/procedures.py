"""Spark's Iceberg procedures through CALL, where they map to what iceduck has:

    CALL system.rollback_to_snapshot('ns.t', 123);                        -- DuckDB-style positional
    CALL lake.system.expire_snapshots(table => 'ns.t', older_than => TIMESTAMP '2026-01-01', retain_last => 5);
    CALL rewrite_data_files(table := 'ns.t', strategy := 'sort', sort_order := 'id DESC');

Names: `rollback_to_snapshot`, `rollback_to_timestamp`, `set_current_snapshot`, `fast_forward`,
`expire_snapshots`, `remove_orphan_files`, `rewrite_data_files`, `rewrite_manifests`, bare or
qualified by `system` / `<catalog>.system`. Arguments by Spark's names (`=>`, or DuckDB's `:=`) or in
Spark's order; values are SQL expressions DuckDB evaluates (`TIMESTAMP '...'`, `now() - INTERVAL 7
DAY`). Each returns Spark's result columns. The maintenance ones run for real, as Spark's do
(`remove_orphan_files(dry_run => true)` only lists), through `iceduck.maintenance` (planned, audited,
committed with its validations). `cherrypick_snapshot` and any other `system.` procedure get one line
saying what iceduck has instead; so does a CALL of a peer-only name (`iceberg_to_ducklake`), which
DuckDB would otherwise try to download an extension for.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb

from iceduck.errors import ValidationError
from iceduck.sql import clauses
from iceduck.sql.tokens import Token, closing, split_arguments

# Spark's argument names, in Spark's order
PROCEDURES: dict[str, tuple[str, ...]] = {
    "rollback_to_snapshot": ("table", "snapshot_id"),
    "rollback_to_timestamp": ("table", "timestamp"),
    "set_current_snapshot": ("table", "snapshot_id", "ref"),
    "fast_forward": ("table", "branch", "to"),
    "expire_snapshots": (
        "table", "older_than", "retain_last", "max_concurrent_deletes", "stream_results", "snapshot_ids",
        "clean_expired_metadata",
    ),
    "remove_orphan_files": (
        "table", "older_than", "location", "dry_run", "max_concurrent_deletes", "file_list_view",
        "equal_schemes", "equal_authorities", "prefix_mismatch_mode",
    ),
    "rewrite_data_files": ("table", "strategy", "sort_order", "options", "where"),
    "rewrite_manifests": ("table", "use_caching", "spec_id"),
}  # fmt: skip
_NOT_HERE = {
    "cherrypick_snapshot": "cherry-picking a snapshot is not supported by iceduck; use "
    "CALL system.set_current_snapshot(...) or CALL system.fast_forward(...)",
}
_PEER_ONLY = {"iceberg_to_ducklake"}  # DuckDB's iceberg extension: DuckDB would try to install it


class ProcedureError(ValidationError):
    """A CALL of an Iceberg procedure that cannot run as written; nothing was changed."""


@dataclass(frozen=True, slots=True)
class Call:
    name: str  # lower case
    arguments: tuple[tuple[str | None, str], ...]  # (name or None for positional, SQL expression)


def recognise(tokens: list[Token], text: str) -> Call | None:
    """The CALL when it names a procedure of this module (or a `system.` one, or a peer-only name)."""
    toks = clauses.strip(tokens)
    if len(toks) < 4 or not toks[0].is_word("CALL"):
        return None
    i = clauses.name_end(toks, 1)
    parts = clauses.name_parts(toks, 1, i)
    if not parts or i >= len(toks) or not toks[i].is_op("(") or closing(toks, i) != len(toks) - 1:
        return None
    name = parts[-1].lower()
    qualified = len(parts) >= 2 and parts[-2].lower() == "system"
    if not (qualified or name in PROCEDURES or name in _NOT_HERE or name in _PEER_ONLY):
        return None
    return Call(name, _arguments(text, toks[i + 1 : len(toks) - 1]))


def _arguments(text: str, toks: list[Token]) -> tuple[tuple[str | None, str], ...]:
    split = split_arguments(text, toks, "=>", ":=")
    if split is None:
        raise ProcedureError("CALL: an empty argument")
    return tuple((None if name is None else name.lower(), value) for name, value in split)


def table_argument(call: Call, con: duckdb.DuckDBPyConnection) -> str | None:
    """The value of `call`'s `table` argument (named, or the first positional one), evaluated alone;
    None when there is none or it is not a string. Says which catalog a call is about."""
    if call.name not in PROCEDURES:
        return None
    expression = next((e for n, e in call.arguments if n == "table"), None)
    if expression is None and call.arguments and call.arguments[0][0] is None:
        expression = call.arguments[0][1]
    if expression is None:
        return None
    try:
        value = con.execute(f"SELECT {expression}").fetchall()[0][0]
    except duckdb.Error:
        return None  # run() reports it with the rest of the arguments
    return value if isinstance(value, str) else None


def run(call: Call, con: duckdb.DuckDBPyConnection, lake: Any, resolve: Callable[[str], str]) -> Any:
    """Run `call` on the lake (`resolve`: the `table` argument to the lake's `ns.t`); Spark's rows."""
    if call.name in _PEER_ONLY:
        raise ProcedureError(
            f"CALL {call.name}: a procedure of DuckDB's iceberg extension, not of iceduck (iceduck never installs "
            "extensions); iceduck's procedures: " + ", ".join(sorted(PROCEDURES))
        )
    if call.name in _NOT_HERE:
        raise ProcedureError(f"CALL {call.name}: {_NOT_HERE[call.name]}")
    if call.name not in PROCEDURES:
        raise ProcedureError(
            f"CALL system.{call.name}: no such procedure in iceduck; it has " + ", ".join(sorted(PROCEDURES))
        )
    args = _bind(call, con)
    if "table" not in args or args["table"] is None:
        raise ProcedureError(f"CALL {call.name}: the table argument is required (table => 'ns.t')")
    identifier = resolve(str(args.pop("table")))
    rows, columns = _RUN[call.name](lake, identifier, args)
    return _relation(con, columns, rows)


def _bind(call: Call, con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    names = PROCEDURES[call.name]
    out: dict[str, Any] = {}
    positional = True
    for k, (name, expression) in enumerate(call.arguments):
        if name is None:
            if not positional:
                raise ProcedureError(f"CALL {call.name}: a positional argument after a named one")
            if k >= len(names):
                raise ProcedureError(f"CALL {call.name}: too many arguments (it takes {', '.join(names)})")
            name = names[k]
        else:
            positional = False
            if name not in names:
                raise ProcedureError(f"CALL {call.name}: no argument {name!r} (it takes {', '.join(names)})")
        if name in out:
            raise ProcedureError(f"CALL {call.name}: argument {name} given twice")
        try:
            out[name] = con.execute(f"SELECT {expression}").fetchall()[0][0]
        except duckdb.Error as e:
            raise ProcedureError(f"CALL {call.name}: argument {name} = {expression}: {e}") from None
    return out


def _relation(
    con: duckdb.DuckDBPyConnection, columns: list[tuple[str, str]], rows: list[tuple[Any, ...]]
) -> Any:
    import pyarrow as pa

    types = {"BIGINT": pa.int64(), "VARCHAR": pa.string(), "INTEGER": pa.int32()}
    schema = pa.schema([(name, types[kind]) for name, kind in columns])
    data = {name: [r[k] for r in rows] for k, (name, _) in enumerate(columns)}
    return con.from_arrow(pa.Table.from_pydict(data, schema=schema))


# -- snapshot management ---------------------------------------------------------------------------


def _ms(value: Any, what: str) -> int:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return int(value.timestamp() * 1000)
    if isinstance(value, dt.date):
        return int(dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC).timestamp() * 1000)
    if isinstance(value, int):
        return value
    raise ProcedureError(f"{what}: expected a timestamp, not {value!r}")


def _move_main(
    lake: Any, identifier: str, operation: str, pick: Callable[[Any], int]
) -> tuple[int | None, int]:
    """Point `main` at the snapshot `pick(metadata)` chooses; (previous, new) current snapshot ids."""
    from iceduck.spec.snapshots import MAIN_BRANCH, SnapshotRef
    from iceduck.spec.updates import SetSnapshotRef
    from iceduck.transaction.changes import MetadataChange
    from iceduck.transaction.commit import TableCommitter

    namespace, _, name = identifier.rpartition(".")
    committer = TableCommitter(lake.catalog, namespace, name, lake.io)
    base = committer.load()
    previous = base.metadata.current_snapshot_id
    chosen = pick(base.metadata)

    def plan(md: Any) -> list[Any]:
        target = pick(md)
        if target != chosen:
            raise ProcedureError(f"{identifier}: changed by another writer; {operation} not committed")
        ref = md.refs.get(MAIN_BRANCH)
        kept = dataclasses.replace(ref, snapshot_id=target) if ref is not None else SnapshotRef(target)
        return [SetSnapshotRef(MAIN_BRANCH, kept)]

    if chosen != previous:
        committer.commit(MetadataChange(operation, plan), base)
    return previous, chosen


def _snapshot(md: Any, value: Any, identifier: str) -> int:
    try:
        sid = int(value)
    except (TypeError, ValueError):
        raise ProcedureError(f"{identifier}: snapshot_id must be a number, not {value!r}") from None
    if md.snapshot_by_id(sid) is None:
        raise ProcedureError(f"{identifier}: no snapshot {sid}")
    return sid


def _ancestor_ids(md: Any) -> list[int]:
    current = md.current_snapshot_id
    return [s.snapshot_id for s in md.ancestors_of(current)] if current is not None else []


_SNAPSHOT_COLUMNS = [("previous_snapshot_id", "BIGINT"), ("current_snapshot_id", "BIGINT")]


def _rollback(lake: Any, identifier: str, args: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    def pick(md: Any) -> int:
        sid = _snapshot(md, args.get("snapshot_id"), identifier)
        if sid not in _ancestor_ids(md):
            raise ProcedureError(
                f"{identifier}: cannot roll back to snapshot {sid}: it is not an ancestor of the current "
                "snapshot (use set_current_snapshot)"
            )
        return sid

    return [_move_main(lake, identifier, "rollback", pick)], _SNAPSHOT_COLUMNS


def _rollback_to_time(lake: Any, identifier: str, args: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    at = _ms(args.get("timestamp"), "rollback_to_timestamp")

    def pick(md: Any) -> int:
        older = [md.snapshot_by_id(i) for i in _ancestor_ids(md)]
        before = [s for s in older if s.timestamp_ms < at]
        if not before:
            raise ProcedureError(
                f"{identifier}: no snapshot of the current history is older than the timestamp"
            )
        return int(max(before, key=lambda s: s.timestamp_ms).snapshot_id)

    return [_move_main(lake, identifier, "rollback", pick)], _SNAPSHOT_COLUMNS


def _set_current(lake: Any, identifier: str, args: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    sid, ref = args.get("snapshot_id"), args.get("ref")
    if (sid is None) == (ref is None):
        raise ProcedureError("set_current_snapshot: give exactly one of snapshot_id and ref")

    def pick(md: Any) -> int:
        if ref is not None:
            found = md.refs.get(str(ref))
            if found is None:
                raise ProcedureError(f"{identifier}: no branch or tag {ref!r}")
            return int(found.snapshot_id)
        return _snapshot(md, sid, identifier)

    return [_move_main(lake, identifier, "set-current-snapshot", pick)], _SNAPSHOT_COLUMNS


def _fast_forward(lake: Any, identifier: str, args: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    from iceduck.spec.updates import SetSnapshotRef
    from iceduck.transaction.changes import MetadataChange
    from iceduck.transaction.commit import TableCommitter

    branch, to = str(args.get("branch") or ""), str(args.get("to") or "")
    namespace, _, name = identifier.rpartition(".")
    committer = TableCommitter(lake.catalog, namespace, name, lake.io)
    base = committer.load()

    def plan(md: Any) -> list[Any]:
        source, target = md.refs.get(branch), md.refs.get(to)
        if source is None or not source.is_branch:
            raise ProcedureError(f"{identifier}: no branch {branch!r}")
        if target is None:
            raise ProcedureError(f"{identifier}: no branch or tag {to!r}")
        if source.snapshot_id not in {s.snapshot_id for s in md.ancestors_of(target.snapshot_id)}:
            raise ProcedureError(f"{identifier}: cannot fast-forward {branch}: it is not an ancestor of {to}")
        return [SetSnapshotRef(branch, dataclasses.replace(source, snapshot_id=target.snapshot_id))]

    plan(base.metadata)  # refuse before committing
    before = base.metadata.refs[branch].snapshot_id
    after = base.metadata.refs[to].snapshot_id
    if before != after:
        committer.commit(MetadataChange("fast-forward", plan), base)
    return [(branch, before, after)], [
        ("branch_updated", "VARCHAR"),
        ("previous_ref", "BIGINT"),
        ("updated_ref", "BIGINT"),
    ]


# -- maintenance -------------------------------------------------------------------------------------


def _maintainer(lake: Any, identifier: str) -> Any:
    from iceduck.maintenance.actions import Maintainer

    return Maintainer.for_lake(lake, identifier)


def _failed(r: Any, what: str) -> None:
    """Raise what a run could not do; nothing to do is no error (Spark's counts are then 0)."""
    if r.error and r.status != "nothing_to_do":
        raise ProcedureError(f"{what}: {r.error}")


def _count(r: Any, *kinds: str, outcome: str) -> int:
    return sum(1 for o in r.outcomes if o.kind in kinds and o.outcome == outcome)


def _expire(lake: Any, identifier: str, args: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    if args.get("snapshot_ids") is not None:
        raise ProcedureError("expire_snapshots: snapshot_ids is not supported by iceduck; use older_than")
    older = args.get("older_than")
    r = _maintainer(lake, identifier).expire_snapshots(
        older_than=_ms(older, "expire_snapshots older_than") if older is not None else None,
        retain_last=int(args["retain_last"]) if args.get("retain_last") is not None else None,
        dry_run=False,
    )
    _failed(r, f"expire_snapshots {identifier}")
    row = (
        _count(r, "data", outcome="deleted"),
        _count(r, "position_deletes", "deletion_vectors", outcome="deleted"),
        _count(r, "equality_deletes", outcome="deleted"),
        _count(r, "manifest", outcome="deleted"),
        _count(r, "manifest_list", outcome="deleted"),
        _count(r, "statistics", "partition_statistics", outcome="deleted"),
    )
    columns = [
        (c, "BIGINT")
        for c in (
            "deleted_data_files_count", "deleted_position_delete_files_count",
            "deleted_equality_delete_files_count", "deleted_manifest_files_count",
            "deleted_manifest_lists_count", "deleted_statistics_files_count",
        )
    ]  # fmt: skip
    return [row], columns


def _orphans(lake: Any, identifier: str, args: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    if args.get("location") is not None:
        raise ProcedureError(
            "remove_orphan_files: location is not supported by iceduck (it lists the table's own)"
        )
    older = args.get("older_than")
    dry = bool(args.get("dry_run") or False)
    r = _maintainer(lake, identifier).remove_orphan_files(
        older_than=_ms(older, "remove_orphan_files older_than") if older is not None else None,
        dry_run=dry,
    )
    _failed(r, f"remove_orphan_files {identifier}")
    if dry:
        from iceduck.maintenance.orphans import OrphanPlan

        files = r.plan.candidates_list() if isinstance(r.plan, OrphanPlan) else []
    else:
        files = [o.item for o in r.outcomes if o.outcome == "deleted"]
    return [(f,) for f in files], [("orphan_file_location", "VARCHAR")]


def _rewrite_data(lake: Any, identifier: str, args: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    from iceduck.maintenance.rewrite_data import RewriteOptions

    if args.get("where") is not None:
        raise ProcedureError(
            "rewrite_data_files: where is not supported by iceduck; it rewrites what needs it"
        )
    options = dict(args.get("options") or {})
    known = {
        "target-file-size-bytes": "target_file_size_bytes", "min-file-size-bytes": "min_file_size_bytes",
        "max-file-size-bytes": "max_file_size_bytes", "min-input-files": "min_input_files",
        "rewrite-all": "rewrite_all", "delete-file-threshold": "delete_file_threshold",
        "partial-progress.enabled": "partial_progress", "partial-progress.max-commits": "max_commits",
        "max-file-group-size-bytes": "max_file_group_size_bytes",
    }  # fmt: skip
    kwargs: dict[str, Any] = {}
    for key, value in options.items():
        if key not in known:
            raise ProcedureError(f"rewrite_data_files: option {key!r} is not supported by iceduck")
        field = known[key]
        kwargs[field] = (
            str(value).lower() == "true" if field in ("rewrite_all", "partial_progress") else int(value)
        )
    strategy = str(args.get("strategy") or "binpack").lower()
    sort_order = args.get("sort_order")
    if sort_order is not None and strategy == "binpack" and args.get("strategy") is None:
        strategy = "sort"
    r = _maintainer(lake, identifier).rewrite_data_files(
        RewriteOptions(strategy=strategy, sort_order=sort_order, **kwargs), dry_run=False
    )
    _failed(r, f"rewrite_data_files {identifier}")
    rewritten = [o for o in r.outcomes if o.kind == "data" and o.outcome == "rewritten"]
    summary = r.summary or {}
    row = (
        len(rewritten),
        _count(r, "data", outcome="added"),
        int(summary.get("bytes_read", 0)) if rewritten else 0,
        _count(r, "data", outcome="failed"),
        _count(r, "position_deletes", "deletion_vectors", "equality_deletes", outcome="removed"),
    )
    columns = [
        (c, "BIGINT" if c.endswith("bytes_count") else "INTEGER")
        for c in (
            "rewritten_data_files_count", "added_data_files_count", "rewritten_bytes_count",
            "failed_data_files_count", "removed_delete_files_count",
        )
    ]  # fmt: skip
    return [row], columns


def _rewrite_manifests(lake: Any, identifier: str, args: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    spec_id = args.get("spec_id")
    r = _maintainer(lake, identifier).rewrite_manifests(
        spec_id=int(spec_id) if spec_id is not None else None, dry_run=False
    )
    _failed(r, f"rewrite_manifests {identifier}")
    row = (_count(r, "manifest", outcome="replaced"), _count(r, "manifest", outcome="added"))
    return [row], [("rewritten_manifests_count", "INTEGER"), ("added_manifests_count", "INTEGER")]


_RUN: dict[str, Callable[[Any, str, dict[str, Any]], tuple[list[Any], list[Any]]]] = {
    "rollback_to_snapshot": _rollback,
    "rollback_to_timestamp": _rollback_to_time,
    "set_current_snapshot": _set_current,
    "fast_forward": _fast_forward,
    "expire_snapshots": _expire,
    "remove_orphan_files": _orphans,
    "rewrite_data_files": _rewrite_data,
    "rewrite_manifests": _rewrite_manifests,
}


__all__ = ["PROCEDURES", "Call", "ProcedureError", "recognise", "run"]
