"""`iceberg_scan_plan(t, ...)`: one row per data file of a scan, kept (with its deletes) or skipped, and why."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from iceduck._lazy import LazyModule
from iceduck.duckdb.context import Context
from iceduck.duckdb.functions import (
    Args,
    TableFunction,
)
from iceduck.duckdb.scan import SESSION_ZONE, plan_for
from iceduck.scan import ScanPlan
from iceduck.spec.types import Schema
from iceduck.table import Table

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = LazyModule("pyarrow")


def with_session_zone(fn: TableFunction) -> TableFunction:
    """`fn` with its generated macro reading the session's time zone when `timezone` is not given."""
    given = 'CAST("timezone" AS VARCHAR)'
    macro = fn.macro_sql()
    assert given in macro
    return dataclasses.replace(fn, macro=macro.replace(given, f"coalesce({given}, {SESSION_ZONE})"))


@functools.cache
def scan_plan_schema() -> pa.Schema:
    """`iceberg_scan_plan`'s rows (built at first use: pyarrow loads then)."""
    delete_file = pa.struct(
        [
            ("path", pa.string()),
            ("kind", pa.string()),
            ("sequence_number", pa.int64()),
            ("record_count", pa.int64()),
        ]
    )
    return pa.schema(
        [
            ("file_path", pa.string()),
            ("partition", pa.string()),
            ("spec_id", pa.int32()),
            ("record_count", pa.int64()),
            ("file_size_in_bytes", pa.int64()),
            ("data_sequence_number", pa.int64()),
            ("kept", pa.bool_()),
            ("skipped_at", pa.string()),
            ("reason", pa.string()),
            ("delete_files", pa.list_(delete_file)),
        ]
    )


def _partition_text(table: Table, schema: Schema, spec_id: int, partition: Sequence[Any]) -> str:
    spec = table.metadata.spec_by_id(spec_id)
    if spec is None or not spec.fields:
        return ""
    parts = []
    try:
        types = spec.partition_type(schema).fields
    except Exception:
        types = ()
    for i, (f, value) in enumerate(zip(spec.fields, partition, strict=False)):
        try:
            shown = f.transform.to_human(types[i].type, value) if i < len(types) else str(value)
        except Exception:
            shown = "null" if value is None else str(value)
        parts.append(f"{f.name}={shown}")
    return "/".join(parts)


def scan_plan_table(plan: ScanPlan) -> pa.Table:
    """One row per data file of the snapshot: kept (with its deletes) or skipped (level and reason)."""
    rows: dict[str, list[Any]] = {n: [] for n in scan_plan_schema().names}
    table, schema = plan.table, plan.schema

    def add(
        d: Any, seq: int, kept: bool, level: str | None, reason: str | None, deletes: list[dict[str, Any]]
    ) -> None:
        for name, value in (
            ("file_path", d.file_path),
            ("partition", _partition_text(table, schema, d.spec_id, d.partition)),
            ("spec_id", d.spec_id),
            ("record_count", d.record_count),
            ("file_size_in_bytes", d.file_size_in_bytes),
            ("data_sequence_number", seq),
            ("kept", kept),
            ("skipped_at", level),
            ("reason", reason),
            ("delete_files", deletes),
        ):
            rows[name].append(value)

    for t in plan.tasks:
        deletes = [
            {
                "path": x.path,
                "kind": x.kind,
                "sequence_number": x.sequence_number,
                "record_count": x.file.record_count,
            }
            for x in t.deletes
        ]
        add(t.file, t.data_sequence_number, True, None, None, deletes)
    for s in plan.skipped:
        add(s.file, s.data_sequence_number, False, s.level, s.reason, [])
    return pa.table(rows, schema=scan_plan_schema())


def plan_run(ctx: Context) -> Any:
    def run(args: Args, columns: list[str] | None) -> pa.Table:
        plan = plan_for(
            ctx.table(args),
            snapshot_id=args.get("snapshot_id"),
            as_of=args.get("as_of"),
            ref=args.get("ref"),
            filter_text=args.get("filter"),
            timezone=args.get("timezone"),
            report_all=True,
        )
        return scan_plan_table(plan)

    return run
