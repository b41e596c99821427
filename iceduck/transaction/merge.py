"""Row changes worked out elsewhere (a MERGE, an UPDATE ... FROM, a DELETE ... USING), committed as one
merge-on-read snapshot.

The caller plans the table (`plan_rows`: the files a changed row can be in, with their deletes),
decides which live rows go and which rows are written anew, and hands over
* the positions to delete, per data file (rows deleted, and the old copies of rows updated), and
* SQL selecting the rows to write: the schema's columns plus `_row_id` (kept for an updated row,
  NULL for an inserted one) and `_last_updated_sequence_number` (NULL: the commit's sequence number).

`commit_rows` writes the new data files and commits deletion vectors (v3) or position delete files
(v2) and the files in one snapshot, validated against concurrent commits as an UPDATE is
(`iceduck.transaction.changes.SnapshotChange` with kind `update`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from iceduck.errors import CommitConflictError, ValidationError
from iceduck.expr import Predicate
from iceduck.read.live import TableState, live_state
from iceduck.spec.table_metadata import TableMetadata
from iceduck.table import Table
from iceduck.transaction.changes import (
    KIND_APPEND,
    KIND_UPDATE,
    RowDeletes,
    SnapshotChange,
    check_rewritable,
    write_target,
)
from iceduck.transaction.commit import Attempt, Change, CommitResult, TableCommitter, crash_point
from iceduck.write.parquet import prepare_connection, remove_files, write_data_files

MERGE_ON_READ = "merge-on-read"


def plan_rows(base: Table, identifier: str, what: str, predicate: Predicate | None) -> TableState:
    """The live files of `base` a row matching `predicate` (None: any row) can be in, for a row-level
    change `what` (a MERGE, ...); refuses tables that cannot take merge-on-read deletes."""
    md = base.metadata
    if md.format_version < 2:
        raise ValidationError(
            f"{identifier}: {what} needs format version 2 or 3 (v1 has no row-level deletes)"
        )
    for key in ("write.merge.mode", "write.update.mode", "write.delete.mode"):
        mode = md.properties.get(key, MERGE_ON_READ).lower()
        if mode != MERGE_ON_READ:
            raise ValidationError(
                f"{identifier}: {what} writes merge-on-read only, and the table sets {key} = {mode!r}; "
                f"ALTER TABLE ... RESET ('{key}') or use UPDATE / DELETE / INSERT"
            )
    state = live_state(base, predicate=predicate)
    check_rewritable(state, what)
    return state


class _Guarded(Change):
    """A change that first asks `check(current)` on every attempt after the first (a concurrent
    commit moved the table): raising `CommitConflictError` there fails the commit."""

    def __init__(self, inner: Change, check: Callable[[Table], None], base: Table) -> None:
        self.inner = inner
        self.operation = inner.operation
        self.check = check
        self.base_snapshot = base.metadata.current_snapshot_id

    def apply(self, current: Table, attempt: int) -> Attempt:
        if current.metadata.current_snapshot_id != self.base_snapshot:
            self.check(current)
        return self.inner.apply(current, attempt)

    def abort(self) -> None:
        self.inner.abort()

    def result(self, table: str, metadata: TableMetadata, location: str, attempts: int) -> CommitResult:
        return self.inner.result(table, metadata, location, attempts)


def no_new_files(
    identifier: str, planned: TableState, predicate: Predicate | None
) -> Callable[[Table], None]:
    """A check for `commit_rows`: no data file that can hold a row matching `predicate` (None: any
    row) was added since `planned` (an upsert would miss a key another writer inserted meanwhile;
    Java's "validate no conflicting data")."""

    def check(current: Table) -> None:
        now = live_state(current, predicate=predicate)
        new = sorted(set(now.files) - set(planned.files))
        if new:
            raise CommitConflictError(
                f"{identifier}: a concurrent commit added data file {new[0]}, which can hold a key this "
                "statement inserts; nothing was committed"
            )

    return check


def commit_rows(
    committer: TableCommitter,
    con: Any,
    base: Table,
    state: TableState,
    deleted: Mapping[str, np.ndarray],
    rows_sql: str | None,
    *,
    updated_rows: int = 0,
    check: Callable[[Table], None] | None = None,
) -> CommitResult | None:
    """Write the rows of `rows_sql` (see the module docstring) and delete the positions `deleted`
    (sorted, live, per recorded data file path of `state`) in one commit; None when there is
    nothing to change. `con` is a cursor of its own (it is prepared for writing). `check(current)`
    runs before each attempt on a table another commit moved (see `no_new_files`)."""
    md = base.metadata
    prepare_connection(con, base.io)
    files = (
        write_data_files(con, rows_sql, write_target(base), lineage=md.format_version >= 3)
        if rows_sql is not None
        else []
    )
    positions = {p: np.asarray(v, dtype=np.int64) for p, v in deleted.items() if len(v)}
    if not files and not positions:
        return None
    try:
        crash_point("data-written")
        if positions:
            state.preload_deleted(positions)
            row_deletes = RowDeletes(dict(positions), {p: state.deleted(p) for p in positions})
            change = SnapshotChange(
                kind=KIND_UPDATE, operation="overwrite" if files else "delete", added_data_files=files,
                row_deletes=row_deletes, planned_schema_id=md.current_schema_id, planned_state=state,
            )  # fmt: skip
        else:
            change = SnapshotChange(kind=KIND_APPEND, operation="append", added_data_files=files)
    except BaseException:
        remove_files([d.file_path for d in files], base.io)
        raise
    result = committer.commit(_Guarded(change, check, base) if check is not None else change, base)
    if updated_rows:
        result = dataclasses.replace(result, updated_rows=updated_rows)
    return result
