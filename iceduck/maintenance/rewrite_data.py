"""Rewriting data files: bin-pack small files together, or sort them, applying deletes on the way.

Planning (`plan_rewrite_data`) takes the live data files of the current snapshot with the deletes
that apply to each, and picks, per partition (spec and values), the files worth rewriting:

* files below `min_file_size_bytes` (default 75% of the target size) or above
  `max_file_size_bytes` (180%);
* files with at least `delete_file_threshold` delete files, or whose deleted share (deleted
  positions / record count) reaches `delete_ratio_threshold` (default 0.3);
* with the `sort` strategy, files not written in the requested sort order;
* every file with `rewrite_all`.

Candidates of a partition are packed into file groups of at most `max_file_group_size_bytes`; a
group is rewritten when it has at least `min_input_files` files (default 5), or more than one file
and enough bytes for a target-size file, or more bytes than the maximum file size, or any file with
too many deletes, or `rewrite_all`. Files with equality deletes are left alone (their rows cannot
be moved without undoing those deletes), and so are files another maintenance run has claimed.
These are the option names and defaults of Java's `RewriteDataFiles` (as `snake_case`).

Executing (`execute_rewrite_data`) reads each group's live rows (deletes applied) with their row
lineage (`_row_id`, `_last_updated_sequence_number`, kept as the v3 rules say: rows that move keep
both) and writes them with the writer (`iceduck.write.parquet`) in the table's current spec, at the
target size, sorted for the `sort` strategy. Groups are committed by `RewriteGroupsChange`: in one
commit, or with `partial_progress` in up to `max_commits` commits; a group that conflicts with a
concurrent commit fails alone (its files are removed) and is reported.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from iceduck.errors import CommitConflictError, ValidationError
from iceduck.maintenance.audit import Outcome
from iceduck.maintenance.commits import RewriteGroupsChange, RewrittenGroup
from iceduck.read.live import LiveFile, TableState, live_state
from iceduck.spec.sorting import SortOrder
from iceduck.table import Table
from iceduck.transaction import sort_order as parse_sort_order
from iceduck.vocabulary import quote_ident
from iceduck.write.matching import live_rows_sql, unregister
from iceduck.write.parquet import WriteTarget, prepare_connection, remove_files, write_data_files
from iceduck.write.types import LAST_UPDATED_SEQUENCE_NUMBER, ROW_ID

BINPACK = "binpack"
SORT = "sort"
DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024


def split_terms(text: str) -> list[str]:
    """Comma-separated terms, commas inside parentheses kept (`bucket(4, id) DESC, ts`)."""
    out: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "," and depth == 0:
            out.append("".join(current).strip())
            current = []
            continue
        depth += ch == "("
        depth -= ch == ")"
        current.append(ch)
    if "".join(current).strip():
        out.append("".join(current).strip())
    return [t for t in out if t]


@dataclass(frozen=True, slots=True)
class RewriteOptions:
    """Options of a data file rewrite (None: the table property or Java's default)."""

    strategy: str = BINPACK
    sort_order: str | None = None  # "col DESC, bucket(4, id)"; default: the table's sort order
    target_file_size_bytes: int | None = None
    min_file_size_bytes: int | None = None
    max_file_size_bytes: int | None = None
    min_input_files: int = 5
    rewrite_all: bool = False
    delete_file_threshold: int | None = None
    delete_ratio_threshold: float = 0.3
    max_file_group_size_bytes: int = 100 * 1024 * 1024 * 1024
    partial_progress: bool = False
    max_commits: int = 10
    # budget limits (the maintenance loop's): at most this many groups / input bytes, the groups
    # with the most files first; the rest is left for a later run
    max_groups: int | None = None
    max_rewrite_bytes: int | None = None

    def resolved(self, table: Table) -> RewriteOptions:
        """The options with table-dependent defaults filled in, checked."""
        if self.strategy not in (BINPACK, SORT):
            raise ValidationError(f"rewrite strategy must be '{BINPACK}' or '{SORT}', not {self.strategy!r}")
        if self.sort_order is not None and self.strategy != SORT:
            raise ValidationError("sort_order needs strategy 'sort'")
        props = table.metadata.properties
        target = self.target_file_size_bytes
        if target is None:
            try:
                target = int(props.get("write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE))
            except ValueError:
                raise ValidationError("write.target-file-size-bytes must be an integer") from None
        if target <= 0:
            raise ValidationError(f"target_file_size_bytes must be positive, not {target}")
        if self.min_input_files < 1 or self.max_commits < 1:
            raise ValidationError("min_input_files and max_commits must be at least 1")
        if not 0 < self.delete_ratio_threshold <= 1:
            raise ValidationError(
                f"delete_ratio_threshold must be in (0, 1], not {self.delete_ratio_threshold}"
            )
        return dataclasses.replace(
            self,
            target_file_size_bytes=target,
            min_file_size_bytes=self.min_file_size_bytes
            if self.min_file_size_bytes is not None
            else int(target * 0.75),
            max_file_size_bytes=self.max_file_size_bytes
            if self.max_file_size_bytes is not None
            else int(target * 1.8),
        )


@dataclass(frozen=True, slots=True)
class PlannedFile:
    path: str
    size: int
    records: int
    deleted: int
    delete_files: int
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FileGroup:
    """Files of one partition rewritten together."""

    group_id: str
    spec_id: int
    partition: tuple[Any, ...]
    partition_text: str
    files: tuple[PlannedFile, ...]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def records(self) -> int:
        return sum(f.records - f.deleted for f in self.files)


@dataclass(frozen=True, slots=True)
class RewritePlan:
    """What a data file rewrite would do, planned on one metadata file."""

    plan_id: str
    options: RewriteOptions
    groups: tuple[FileGroup, ...]
    skipped: tuple[tuple[str, str], ...]  # (path, why) of candidates left alone
    sort_order: SortOrder | None
    parameters: Mapping[str, Any] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.groups

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(f.path for g in self.groups for f in g.files)

    def candidates(self) -> list[str]:
        return [f"group:{g.group_id}:{f.path}" for g in self.groups for f in g.files]


def target_sort_order(table: Table, options: RewriteOptions) -> SortOrder | None:
    """The order output files are written in: None for bin-pack; for sort, the requested order
    (its id is the table's equal order, else 0 = not recorded) or the table's default order."""
    md = table.metadata
    if options.strategy != SORT:
        return None
    if options.sort_order is None:
        if md.default_sort_order.is_unsorted:
            raise ValidationError(
                f"{table.name or table.metadata_location}: strategy 'sort' needs sort_order (the table has none)"
            )
        return md.default_sort_order
    order = parse_sort_order(md.schema, split_terms(options.sort_order))
    if order.is_unsorted:
        raise ValidationError("sort_order names no column")
    for existing in md.sort_orders:
        if existing.fields == order.fields:
            return existing
    return dataclasses.replace(order, order_id=0)


def _file_reasons(lf: LiveFile, deleted: int, o: RewriteOptions, order: SortOrder | None) -> list[str]:
    d = lf.file
    assert o.min_file_size_bytes is not None and o.max_file_size_bytes is not None
    reasons = []
    if o.rewrite_all:
        reasons.append("rewrite_all")
    if d.file_size_in_bytes < o.min_file_size_bytes:
        reasons.append("small")
    if d.file_size_in_bytes > o.max_file_size_bytes:
        reasons.append("large")
    n_deletes = (1 if lf.dv is not None else 0) + len(lf.position_deletes)
    if o.delete_file_threshold is not None and n_deletes >= o.delete_file_threshold and n_deletes:
        reasons.append("delete_files")
    if deleted and d.record_count and deleted / d.record_count >= o.delete_ratio_threshold:
        reasons.append("deleted_ratio")
    if order is not None and (order.order_id == 0 or d.sort_order_id != order.order_id):
        reasons.append("unsorted")
    return reasons


def plan_rewrite_data(
    table: Table, options: RewriteOptions | None = None, *, claimed: frozenset[str] = frozenset()
) -> RewritePlan:
    """Plan a rewrite of `table`'s current snapshot (nothing is changed); `claimed` files are left out."""
    o = (options or RewriteOptions()).resolved(table)
    assert o.target_file_size_bytes is not None and o.max_file_size_bytes is not None
    order = target_sort_order(table, o)
    state = live_state(table)
    state.preload_deleted(state.files)
    skipped: list[tuple[str, str]] = []
    by_partition: dict[tuple[int, tuple[str, ...]], list[tuple[LiveFile, PlannedFile]]] = {}
    for path, lf in sorted(state.files.items()):
        deleted = state.deleted(path).cardinality
        reasons = _file_reasons(lf, deleted, o, order)
        if not reasons:
            continue
        if lf.equality_deletes:
            skipped.append((path, "equality deletes apply to it"))
            continue
        if path in claimed:
            skipped.append((path, "claimed by another maintenance run"))
            continue
        d = lf.file
        n_deletes = (1 if lf.dv is not None else 0) + len(lf.position_deletes)
        pf = PlannedFile(path, d.file_size_in_bytes, d.record_count, deleted, n_deletes, tuple(reasons))
        by_partition.setdefault((d.spec_id, tuple(repr(v) for v in d.partition)), []).append((lf, pf))
    groups: list[FileGroup] = []
    for (spec_id, _), members in sorted(by_partition.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        sample = members[0][0].entry.data_file
        text = _partition_text(table, spec_id, sample.partition)
        for chunk in _pack(members, o.max_file_group_size_bytes):
            files = tuple(pf for _, pf in chunk)
            if not _worth_it(files, o):
                continue
            gid = hashlib.sha256("\n".join(f.path for f in files).encode()).hexdigest()[:12]
            groups.append(FileGroup(gid, spec_id, sample.partition, text, files))
    if o.max_groups is not None or o.max_rewrite_bytes is not None:
        groups, later = _within_budget(groups, o.max_groups, o.max_rewrite_bytes)
        skipped += [(f.path, "left for a later run (maintenance budget)") for g in later for f in g.files]
    parameters = _parameters(o)
    content = {
        "action": "rewrite_data_files",
        "table_uuid": str(table.metadata.table_uuid),
        "metadata": table.metadata_location,
        "parameters": parameters,
        "groups": [[f.path for f in g.files] for g in groups],
    }
    plan_id = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]
    return RewritePlan(plan_id, o, tuple(groups), tuple(skipped), order, parameters)


def _within_budget(
    groups: list[FileGroup], max_groups: int | None, max_bytes: int | None
) -> tuple[list[FileGroup], list[FileGroup]]:
    """(kept, left for later): the groups with the most files first while both limits hold; kept
    groups stay in plan order."""
    kept: set[str] = set()
    used = 0
    for g in sorted(groups, key=lambda g: (-len(g.files), g.bytes, g.group_id)):
        if max_groups is not None and len(kept) >= max_groups:
            break
        if max_bytes is not None and used + g.bytes > max_bytes:
            continue
        kept.add(g.group_id)
        used += g.bytes
    return [g for g in groups if g.group_id in kept], [g for g in groups if g.group_id not in kept]


def _parameters(o: RewriteOptions) -> dict[str, Any]:
    return {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}


def _pack(
    members: list[tuple[LiveFile, PlannedFile]], max_bytes: int
) -> list[list[tuple[LiveFile, PlannedFile]]]:
    """Split a partition's candidates into groups of at most `max_bytes` (largest first, first fit)."""
    bins: list[tuple[int, list[tuple[LiveFile, PlannedFile]]]] = []
    for item in sorted(members, key=lambda m: (-m[1].size, m[1].path)):
        for i, (used, items) in enumerate(bins):
            if used + item[1].size <= max_bytes:
                items.append(item)
                bins[i] = (used + item[1].size, items)
                break
        else:
            bins.append((item[1].size, [item]))
    return [sorted(items, key=lambda m: m[1].path) for _, items in bins]


def _worth_it(files: Sequence[PlannedFile], o: RewriteOptions) -> bool:
    assert o.target_file_size_bytes is not None and o.max_file_size_bytes is not None
    total = sum(f.size for f in files)
    if o.rewrite_all:
        return True
    if len(files) > 1 and (len(files) >= o.min_input_files or total >= o.target_file_size_bytes):
        return True
    if total > o.max_file_size_bytes:
        return True
    return any({"delete_files", "deleted_ratio", "unsorted"} & set(f.reasons) for f in files)


def _partition_text(table: Table, spec_id: int, values: Sequence[Any]) -> str:
    md = table.metadata
    spec = md.spec_by_id(spec_id)
    if spec is None or spec.is_unpartitioned:
        return ""
    parts = []
    for pf, value in zip(spec.fields, values, strict=False):
        source = md.schema.find_type(pf.source_ids[0]) if len(pf.source_ids) == 1 else None
        try:
            text = (
                "null" if value is None else (pf.transform.to_human(source, value) if source else str(value))
            )
        except Exception:  # an oddly encoded value must not stop the plan
            text = str(value)
        parts.append(f"{pf.name}={text}")
    return "/".join(parts)


# -- execution ------------------------------------------------------------------------------------------


@dataclass(slots=True)
class RewriteResult:
    """What a rewrite did."""

    committed_groups: list[str] = field(default_factory=list)
    failed_groups: dict[str, str] = field(default_factory=dict)
    snapshot_ids: list[int] = field(default_factory=list)
    metadata_location: str | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    rows_written: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    seconds_writing: float = 0.0
    stopped: str | None = None  # why the run stopped before its last group (a maintenance window closed)
    groups_left: list[str] = field(default_factory=list)  # the groups it did not start, in plan order


def write_group(
    con: duckdb.DuckDBPyConnection, table: Table, state: TableState, group: FileGroup, plan: RewritePlan
) -> RewrittenGroup:
    """Write the live rows of `group` into new files (nothing committed)."""
    md = table.metadata
    lineage = md.format_version >= 3
    paths = [f.path for f in group.files]
    state.preload_deleted(paths)
    inputs = {p: state.deleted(p) for p in paths}
    sql, registered = live_rows_sql(con, state, md.schema, paths, lineage=lineage)
    try:
        columns = [quote_ident(f.name) for f in md.schema.fields if f.type.name != "unknown"]
        if lineage:
            columns += [quote_ident(ROW_ID), quote_ident(LAST_UPDATED_SEQUENCE_NUMBER)]
        select = f"SELECT {', '.join(columns)} FROM ({sql}) AS __iceduck_live"
        o = plan.options
        props = dict(md.properties)
        props["write.target-file-size-bytes"] = str(o.target_file_size_bytes)
        order = plan.sort_order
        target = WriteTarget(
            table.resolver.actual_location, md.schema, md.default_spec,
            order if order is not None else SortOrder(0, ()), props,
        )  # fmt: skip
        files = write_data_files(con, select, target, lineage=lineage)
        if order is not None and order.order_id == 0:
            files = [dataclasses.replace(d, sort_order_id=None) for d in files]
    finally:
        unregister(con, registered)
    return RewrittenGroup(group.group_id, inputs, list(files))


def execute_rewrite_data(
    load: Callable[[], Table],
    commit: Callable[[Any, Table], Any],
    plan_: RewritePlan,
    *,
    progress: Callable[[int, int, str], None] | None = None,
    before_commit: Callable[[Sequence[RewrittenGroup]], None] | None = None,
    stop: Callable[[], str | None] | None = None,
) -> RewriteResult:
    """Write and commit the groups of `plan_`.

    `before_commit(groups)` is called after a batch's files are written and before it is committed
    (tests use it to commit concurrently at the worst moment). `stop()` is asked before each group
    (a group boundary): a reason (a maintenance window closed) ends the run there, the groups
    written so far are committed, and the rest are recorded as not started (`stopped`,
    `groups_left`, outcome `deferred`)."""
    result = RewriteResult()
    if plan_.empty:
        return result
    base = load()
    state = live_state(base)
    batches = _batches(list(plan_.groups), plan_.options)
    total = sum(g.bytes for g in plan_.groups)
    done = 0
    con = duckdb.connect()
    try:
        prepare_connection(con, base.io)
        for batch in batches:
            written: list[RewrittenGroup] = []
            by_id = {g.group_id: g for g in batch}
            gone = [g for g in batch if any(f.path not in state.files for f in g.files)]
            for g in gone:
                why = "a file of the group is no longer live: a concurrent commit deleted or rewrote it"
                result.failed_groups[g.group_id] = why
                _record_group(result, g, RewrittenGroup(g.group_id, {}), "conflict", why)
            batch = [g for g in batch if g not in gone]
            if not batch:
                continue
            try:
                for g in batch:
                    reason = stop() if stop is not None and result.stopped is None else None
                    if reason is not None:
                        result.stopped = reason
                    if result.stopped is not None:
                        result.groups_left.append(g.group_id)
                        result.outcomes.append(Outcome(g.group_id, "file_group", "deferred", result.stopped))
                        continue
                    started = time.perf_counter()
                    rg = write_group(con, base, state, g, plan_)
                    result.seconds_writing += time.perf_counter() - started
                    written.append(rg)
                    done += g.bytes
                    if progress is not None:
                        progress(done, total, f"rewriting {g.partition_text or 'table'}")
                if not written:
                    continue
                if before_commit is not None:
                    before_commit(written)
                change = RewriteGroupsChange(
                    written,
                    planned_schema_id=base.metadata.current_schema_id,
                    planned_state=state,
                    extra_summary={
                        "iceduck.maintenance": "rewrite_data_files",
                        "iceduck.plan-id": plan_.plan_id,
                    },
                )
                commit_result = commit(change, base)
            except CommitConflictError as e:
                for rg in written:
                    reason = getattr(e, "args", [""])[0]
                    result.failed_groups[rg.group_id] = str(reason)
                    remove_files(rg.output_paths, base.io)
                    _record_group(result, by_id[rg.group_id], rg, "conflict", str(reason))
                continue
            except BaseException:
                for rg in written:
                    remove_files(rg.output_paths, base.io)
                raise
            result.snapshot_ids.append(int(commit_result.snapshot_id))
            result.metadata_location = commit_result.metadata_location
            for rg in written:
                g = by_id[rg.group_id]
                if rg.group_id in change.failed:
                    result.failed_groups[rg.group_id] = change.failed[rg.group_id]
                    _record_group(result, g, rg, "conflict", change.failed[rg.group_id])
                else:
                    result.committed_groups.append(rg.group_id)
                    result.rows_written += sum(d.record_count for d in rg.outputs)
                    result.bytes_read += g.bytes
                    result.bytes_written += sum(d.file_size_in_bytes for d in rg.outputs)
                    _record_group(result, g, rg, "rewritten", f"snapshot {commit_result.snapshot_id}")
            base = load()  # the next batch commits on top of this one
            state = live_state(base)
    finally:
        con.close()
    return result


def _record_group(result: RewriteResult, g: FileGroup, rg: RewrittenGroup, outcome: str, detail: str) -> None:
    result.outcomes.append(
        Outcome(g.group_id, "file_group", "committed" if outcome == "rewritten" else outcome,
                f"{g.partition_text or 'unpartitioned'}: {len(g.files)} file(s) -> {len(rg.outputs)}; {detail}")
    )  # fmt: skip
    for f in g.files:
        result.outcomes.append(Outcome(f.path, "data", outcome, f"group {g.group_id}"))
    if outcome == "rewritten":
        for d in rg.outputs:
            result.outcomes.append(Outcome(d.file_path, "data", "added", f"group {g.group_id}"))


def _batches(groups: list[FileGroup], o: RewriteOptions) -> list[list[FileGroup]]:
    if not o.partial_progress:
        return [groups]
    n = min(len(groups), o.max_commits)
    size = -(-len(groups) // n)
    return [groups[i : i + size] for i in range(0, len(groups), size)]
