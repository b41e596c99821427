"""Row-level operations behind the Python API: delete and update rows matching a predicate.

`write.delete.mode` / `write.update.mode` = `merge-on-read` (default for v2+: deletion vectors on
v3, position delete files on v2) or `copy-on-write` (rewrite the files that hold matching rows).
The predicate is DuckDB SQL over the table's column names. Each commits at most once.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from iceduck.errors import ValidationError
from iceduck.expr import Predicate
from iceduck.read.live import TableState, live_state
from iceduck.read.strict import wholly_matching
from iceduck.spec.types import Schema
from iceduck.table import Table
from iceduck.transaction.changes import (
    KIND_DELETE,
    KIND_REWRITE,
    KIND_UPDATE,
    RowDeletes,
    RowsMovedError,
    SnapshotChange,
    check_rewritable,
    write_target,
)
from iceduck.transaction.commit import CommitResult, RetryPolicy, TableCommitter, crash_point, no_change
from iceduck.vocabulary import quote_ident
from iceduck.write.matching import (
    FILE_COLUMN,
    POS_COLUMN,
    live_rows_sql,
    matching_positions,
    session_zone,
    unregister,
)
from iceduck.write.parquet import prepare_connection, write_data_files
from iceduck.write.types import LAST_UPDATED_SEQUENCE_NUMBER, ROW_ID, duck_type

MERGE_ON_READ = "merge-on-read"
COPY_ON_WRITE = "copy-on-write"


def _mode(table: Table, key: str) -> str:
    default = MERGE_ON_READ if table.metadata.format_version >= 2 else COPY_ON_WRITE
    mode = table.metadata.properties.get(key, default).lower()
    if mode not in (MERGE_ON_READ, COPY_ON_WRITE):
        raise ValidationError(f"{table.name}: {key} must be {MERGE_ON_READ} or {COPY_ON_WRITE}, not {mode!r}")
    if mode == MERGE_ON_READ and table.metadata.format_version < 2:
        mode = COPY_ON_WRITE  # v1 tables have no delete files
    return mode


def _row_deletes(state: TableState, positions: Mapping[str, np.ndarray]) -> RowDeletes:
    state.preload_deleted(positions)
    return RowDeletes(dict(positions), {p: state.deleted(p) for p in positions})


def _rewrite(
    con: Any,
    table: Table,
    state: TableState,
    files: Sequence[str],
    keep_where: str,
    projections: Mapping[str, str] | None = None,
    matched_flag: str | None = None,
    extra_sources: Iterable[str] = (),
    zone: str | None = None,
) -> list[Any]:
    """Write the live rows of `files` that satisfy `keep_where` (SQL over the row columns and
    `__iceduck_file`/`__iceduck_pos`), with optional column projections, keeping row lineage.

    `zone`: the session's TimeZone, which the projections (an UPDATE's SET values) are evaluated
    in, as DuckDB evaluates them (`CAST(ts AS DATE)` of a TIMESTAMPTZ is that zone's date). The
    writer's COPY itself runs in UTC (it reads the statistics it returns as UTC text), so outside
    UTC the rows are first computed into a temporary table in the session's zone."""
    md = table.metadata
    lineage = md.format_version >= 3
    schema = md.schema
    prepare_connection(con, table.io)
    sql, registered = live_rows_sql(con, state, schema, files, lineage=lineage)
    try:
        cols = []
        for f in schema.fields:
            if f.type.name == "unknown":
                continue
            expr = (projections or {}).get(f.name)
            if expr is None:
                cols.append(quote_ident(f.name))
            else:
                cols.append(f"CAST({expr} AS {duck_type(f.type, f.name)}) AS {quote_ident(f.name)}")
        if lineage:
            cols.append(quote_ident(ROW_ID))
            if matched_flag is not None:
                cols.append(
                    f"CASE WHEN {matched_flag} THEN NULL ELSE {quote_ident(LAST_UPDATED_SEQUENCE_NUMBER)} END "
                    f"AS {quote_ident(LAST_UPDATED_SEQUENCE_NUMBER)}"
                )
            else:
                cols.append(quote_ident(LAST_UPDATED_SEQUENCE_NUMBER))
        select = f"SELECT {', '.join(cols)} FROM ({sql}) AS __iceduck_live {' '.join(extra_sources)} WHERE {keep_where}"
        if not projections or zone is None or zone.upper() == "UTC":
            return write_data_files(con, select, write_target(table), lineage=lineage)
        staged = f"__iceduck_set_{uuid.uuid4().hex}"
        with session_zone(con, zone):
            con.execute(f"CREATE TEMPORARY TABLE {staged} AS {select}")
        try:
            return write_data_files(con, f"SELECT * FROM {staged}", write_target(table), lineage=lineage)
        finally:
            con.execute(f"DROP TABLE IF EXISTS {staged}")
    finally:
        unregister(con, registered)


# Names that cannot collide with a table's columns, which SET and WHERE expressions use bare.
_MATCHED_FILE, _MATCHED_POS = "__iceduck_matched_file", "__iceduck_matched_pos"


def _matched_join(matched: str) -> str:
    return (
        f"LEFT JOIN {matched} AS __iceduck_m ON __iceduck_m.{_MATCHED_FILE} = __iceduck_live.{FILE_COLUMN} "
        f"AND __iceduck_m.{_MATCHED_POS} = __iceduck_live.{POS_COLUMN}"
    )


def _matched_table(con: Any, positions: Mapping[str, np.ndarray]) -> str:
    """Register (recorded path, position) of matched rows; returns the registered name."""
    paths = sorted(positions)
    counts = [len(positions[p]) for p in paths]
    table = pa.table(
        {
            _MATCHED_FILE: pa.array(np.repeat(np.array(paths, dtype=object), counts), pa.string()),
            _MATCHED_POS: pa.array(
                np.concatenate([positions[p] for p in paths]) if paths else np.zeros(0, np.int64)
            ),
        }
    )
    name = f"__iceduck_matched_{uuid.uuid4().hex}"
    con.register(name, table)
    return name


# Derives from a row filter's SQL text the predicate planning prunes by (None: no pruning), given
# the schema the filter is read with. The binding derives it with DuckDB (`Lake`); the predicate must
# be implied by the filter: planning then only leaves out files that hold no matching row.
Pruner = Callable[[Schema], Predicate | None]


def pruned(base: Table, prune: Pruner | None) -> Predicate | None:
    return None if prune is None else prune(base.metadata.schema)


def delete(
    committer: TableCommitter, con: Any, where: str | None, *, prune: Pruner | None = None,
    exact: Pruner | None = None, zone: str | None = None,
) -> CommitResult:  # fmt: skip
    """Delete the rows matching `where` (every row when None); one commit (none if nothing matches).

    With `prune`, only the data files planning keeps for the filter are read (like a scan). With
    `exact` (the predicate that is exactly `where`, when there is one), a file whose partition or
    metrics prove every row matches (`iceduck.read.strict`) is dropped whole, unread, in either mode.
    When a concurrent commit moved rows it deletes into new files (`RowsMovedError`: an UPDATE
    committed first), the delete is planned again on the table as it is then, as the commit retries are."""
    replans = 0
    while True:
        base = committer.load()
        if base.metadata.format_version < 2 and _mode(base, "write.delete.mode") == MERGE_ON_READ:
            raise ValidationError(f"{committer.identifier}: format v1 has no row-level deletes")
        state = live_state(base, predicate=pruned(base, prune))
        prepare_connection(con, base.io)
        dropped = _wholly_matching(state, base.metadata.schema, exact)
        read = [p for p in state.files if p not in dropped]
        positions = matching_positions(con, state, base.metadata.schema, where, read, zone=zone) if read else {}
        if not positions and not dropped:
            return no_change(committer, base, "delete", "no rows matched")
        change = delete_change(
            committer, con, base, state, positions, where, kind=KIND_DELETE, dropped=dropped
        )
        try:
            return committer.commit(change, base)
        except RowsMovedError:
            replans += 1
            if replans > RetryPolicy.of(base.metadata).retries:
                raise


def _wholly_matching(state: TableState, schema: Schema, exact: Pruner | None) -> frozenset[str]:
    return wholly_matching(state, schema, exact)  # the one rule: iceduck.read.strict


def delete_change(
    committer: TableCommitter,
    con: Any,
    base: Table,
    state: TableState,
    positions: Mapping[str, np.ndarray],
    where: str | None,
    *,
    kind: str,
    added: Sequence[Any] = (),
    operation: str = "auto",
    dropped: frozenset[str] = frozenset(),
) -> SnapshotChange:
    """`dropped`: files removed whole without reading them (every row matches by their metrics)."""
    mode = _mode(base, "write.delete.mode")
    whole = {
        p
        for p, pos in positions.items()
        if len(pos) + state.deleted(p).cardinality >= state.files[p].record_count
    } | dropped
    if mode == MERGE_ON_READ:
        return SnapshotChange(
            kind=kind, operation=operation, added_data_files=added, row_deletes=_row_deletes(state, positions),
            removed=dropped, planned_schema_id=base.metadata.current_schema_id, planned_state=state,
        )  # fmt: skip
    check_rewritable(state, "delete with copy-on-write")
    partial = sorted(set(positions) - whole)
    new_files: list[Any] = []
    if partial:
        matched = _matched_table(con, {p: positions[p] for p in partial})
        try:
            new_files = _rewrite(
                con, base, state, partial, f"__iceduck_m.{_MATCHED_POS} IS NULL",
                extra_sources=[_matched_join(matched)],
            )  # fmt: skip
        finally:
            unregister(con, [matched])
        crash_point("data-written")
    planned = {p: state.deleted(p) for p in partial}
    return SnapshotChange(
        kind=KIND_REWRITE if partial else kind,
        operation=operation,
        added_data_files=[*added, *new_files],
        rewritten=planned,
        removed=whole,
        planned_schema_id=base.metadata.current_schema_id,
        rewrite_deleted_rows=sum(len(positions[p]) for p in partial),
        planned_state=state,
    )


def update(
    committer: TableCommitter, con: Any, assignments: Mapping[str, str], where: str | None = None, *,
    prune: Pruner | None = None, zone: str | None = None,
) -> CommitResult:  # fmt: skip
    """Set columns to SQL expressions (over the row's columns) for rows matching `where`; one commit.

    With `prune`, only the data files planning keeps for the filter are read (like a scan)."""
    base = committer.load()
    md = base.metadata
    if md.format_version < 2 and _mode(base, "write.update.mode") == MERGE_ON_READ:
        raise ValidationError(f"{committer.identifier}: format v1 has no row-level deletes")
    if not assignments:
        raise ValidationError(f"{committer.identifier}: UPDATE needs at least one column to set")
    schema = md.schema
    projections: dict[str, str] = {}
    for column, expr in assignments.items():
        f = schema.field_by_name(column) if "." not in column else None
        if f is None:
            f = next((x for x in schema.fields if x.name.lower() == column.lower()), None)
        if f is None or schema.field_by_name(f.name) is None or f not in schema.fields:
            raise ValidationError(
                f"{committer.identifier}: cannot set {column!r}: no such top-level column "
                f"(columns: {', '.join(x.name for x in schema.fields)})"
            )
        projections[f.name] = str(expr)
    state = live_state(base, predicate=pruned(base, prune))
    check_rewritable(state, "update rows")
    prepare_connection(con, base.io)
    positions = matching_positions(con, state, schema, where, zone=zone)
    if not positions:
        return no_change(committer, base, "overwrite", "no rows matched")
    mode = _mode(base, "write.update.mode")
    matched = _matched_table(con, positions)
    join = _matched_join(matched)
    flag = f"(__iceduck_m.{_MATCHED_POS} IS NOT NULL)"
    try:
        if mode == MERGE_ON_READ:
            new_files = _rewrite(
                con,
                base,
                state,
                sorted(positions),
                flag,
                projections,
                matched_flag="true",
                extra_sources=[join],
                zone=zone,
            )
            crash_point("data-written")
            change = SnapshotChange(
                kind=KIND_UPDATE, operation="overwrite", added_data_files=new_files,
                row_deletes=_row_deletes(state, positions), planned_schema_id=md.current_schema_id,
                planned_state=state,
            )  # fmt: skip
        else:
            conditional = {
                name: f"CASE WHEN {flag} THEN {expr} ELSE {quote_ident(name)} END"
                for name, expr in projections.items()
            }
            new_files = _rewrite(
                con,
                base,
                state,
                sorted(positions),
                "true",
                conditional,
                matched_flag=flag,
                extra_sources=[join],
                zone=zone,
            )
            crash_point("data-written")
            change = SnapshotChange(
                kind=KIND_REWRITE, operation="overwrite", added_data_files=new_files,
                rewritten={p: state.deleted(p) for p in positions}, planned_schema_id=md.current_schema_id,
                planned_state=state,
            )  # fmt: skip
    finally:
        unregister(con, [matched])
    result = committer.commit(change, base)
    updated = int(sum(len(v) for v in positions.values()))
    return dataclasses.replace(result, deleted_rows=0, updated_rows=updated)


__all__ = ["COPY_ON_WRITE", "MERGE_ON_READ", "Pruner", "delete", "delete_change", "pruned", "update"]
