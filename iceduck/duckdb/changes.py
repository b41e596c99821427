"""`iceberg_changes(t, from_snapshot, to_snapshot)`: the rows each snapshot inserted, deleted or updated.

A table macro over `query()` of the SQL a UDF writes (`changes_sql_for`): each snapshot compared
with its parent over native `read_parquet`, like `iceberg_scan`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from iceduck._lazy import LazyModule
from iceduck.duckdb.context import (
    TABLE,
    VERSION,
)
from iceduck.duckdb.functions import Param
from iceduck.duckdb.scan import QueryMacro
from iceduck.errors import ValidationError
from iceduck.read.sql import (
    ReadOptions,
    empty_sql,
    output_columns,
    scan_sql,
)
from iceduck.scan import ScanPlan, plan_scan, plan_since
from iceduck.table import Table
from iceduck.vocabulary import quote_ident, quote_str

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = LazyModule("pyarrow")


CHANGES = QueryMacro(
    "iceberg_changes",
    "__iceduck_changes_sql",
    (
        TABLE,
        Param(
            "from_snapshot",
            "BIGINT",
            doc="changes after this snapshot (default: since the table was created)",
        ),
        Param("to_snapshot", "BIGINT", doc="up to and including this snapshot (default: the current one)"),
        VERSION,
    ),
)


def changes_schema() -> pa.Schema:
    """The fixed columns of `iceberg_changes` (the table's own columns follow them)."""
    return pa.schema(
        [("change_type", pa.string()), ("snapshot_id", pa.int64()), ("sequence_number", pa.int64())]
    )


def changes_sql_for(table: Table, *, from_snapshot: int | None, to_snapshot: int | None) -> str:
    """SQL listing the rows each snapshot after `from_snapshot` up to `to_snapshot` inserted, deleted or updated.

    Each snapshot is compared with its parent, reading only the data files whose rows or deletes
    changed. On v3 tables rows are paired by `_row_id`: a row present before and after whose
    `_last_updated_sequence_number` changed is an update (`update_before`, `update_after`); on
    older tables a row is identified by its file and position, so an update shows as delete + insert.
    """
    md = table.metadata
    to = table.snapshot(snapshot_id=to_snapshot)
    schema = md.schema
    options = ReadOptions(row_lineage=True, metadata_columns=True)
    names = [f.name for f in schema.fields]
    cols = ", ".join(quote_ident(n) for n in names)
    head = [("change_type", "VARCHAR"), ("snapshot_id", "BIGINT"), ("sequence_number", "BIGINT")]
    out_columns = [
        *head,
        *(
            (f.name, c)
            for f, (_, c) in zip(schema.fields, output_columns(schema, ReadOptions()), strict=True)
        ),
        ("_row_id", "BIGINT"),
    ]
    if to is None:
        return empty_sql(out_columns)
    chain = list(reversed(md.ancestors_of(to.snapshot_id)))
    if from_snapshot is not None:
        ids = [s.snapshot_id for s in chain]
        if from_snapshot not in ids:
            raise ValidationError(
                f"{table.metadata_location}: snapshot {from_snapshot} is not an ancestor of {to.snapshot_id}"
            )
        chain = chain[ids.index(from_snapshot) + 1 :]
    v3 = md.format_version >= 3
    parts: list[str] = []
    after: ScanPlan | None = None
    for i, snap in enumerate(chain):
        if after is None:
            parent = (
                md.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
            )
            before = plan_scan(table, parent, schema=schema)
        else:
            before = after  # the chain is consecutive: the last snapshot's plan is this one's parent's
        # only the manifests this snapshot added are read (the planner's incremental form)
        after = plan_since(table, snap, before)
        if snap.operation == "replace":
            # The spec's `replace`: files were rewritten, no row changed (compaction, manifest
            # rewrites). On v2 its rows would pair by file and position and show as deleted and
            # re-inserted; Java's changelog scan skips these snapshots too.
            continue
        before_tasks = {t.path: t for t in before.tasks}
        after_tasks = {t.path: t for t in after.tasks}
        changed = {
            p
            for p in set(before_tasks) | set(after_tasks)
            if p not in before_tasks
            or p not in after_tasks
            or _deletes_of(before_tasks[p]) != _deletes_of(after_tasks[p])
        }
        if not changed:
            continue
        b_sql = scan_sql(_restrict(before, changed), options)
        a_sql = scan_sql(_restrict(after, changed), options)
        sid, seq = snap.snapshot_id, snap.sequence_number
        tag = f"{quote_str(str(sid))}::BIGINT AS snapshot_id, {seq}::BIGINT AS sequence_number"
        b, a = f"__b{i}", f"__a{i}"
        ctes = f"WITH {b} AS ({b_sql}), {a} AS ({a_sql}) "
        if v3:
            key = "USING (_row_id)"
            parts.append(
                ctes
                + f"SELECT 'delete' AS change_type, {tag}, {cols}, _row_id FROM {b} ANTI JOIN {a} {key} "
                + f"UNION ALL SELECT 'insert', {tag}, {cols}, _row_id FROM {a} ANTI JOIN {b} {key} "
                + f"UNION ALL SELECT 'update_before', {tag}, {_qualified(b, names)}, {b}._row_id FROM {b} JOIN {a} {key} "
                + f"WHERE {a}._last_updated_sequence_number IS DISTINCT FROM {b}._last_updated_sequence_number "
                + f"UNION ALL SELECT 'update_after', {tag}, {_qualified(a, names)}, {a}._row_id FROM {a} JOIN {b} {key} "
                + f"WHERE {a}._last_updated_sequence_number IS DISTINCT FROM {b}._last_updated_sequence_number"
            )
        else:
            on = f"ON {b}._file = {a}._file AND {b}._pos = {a}._pos"
            parts.append(
                ctes
                + f"SELECT 'delete' AS change_type, {tag}, {_qualified(b, names)}, {b}._row_id FROM {b} ANTI JOIN {a} {on} "
                + f"UNION ALL SELECT 'insert', {tag}, {_qualified(a, names)}, {a}._row_id FROM {a} ANTI JOIN {b} {on}"
            )
    if not parts:
        return empty_sql(out_columns)
    return "\nUNION ALL\n".join(f"({p})" for p in parts)


def _deletes_of(task: Any) -> list[tuple[str, int | None]]:
    return sorted((d.path, d.file.content_offset) for d in task.deletes)


def _qualified(alias: str, names: list[str]) -> str:
    return ", ".join(f"{alias}.{quote_ident(n)}" for n in names)


def _restrict(plan: ScanPlan, paths: set[str]) -> ScanPlan:
    return ScanPlan(
        plan.table,
        plan.snapshot,
        plan.schema,
        plan.predicate,
        tuple(t for t in plan.tasks if t.path in paths),
    )
