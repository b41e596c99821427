"""Table operations behind the Python API that write rows: append and overwrite.

Each function takes a `TableCommitter` (catalog + table name) and a DuckDB connection of its own (a
cursor; see `iceduck.write.parquet.prepare_connection`). Each commits at most once and returns a
`CommitResult`; errors leave the table unchanged and the files they wrote removed.

Data: a `pyarrow.Table`, `RecordBatch`, `RecordBatchReader`, a DuckDB relation (of any
connection: its rows stream in as Arrow), or a pandas DataFrame (`write_input.py`). The other
operations: `create.py` (create a table), `row_level.py` (delete, update), `evolve.py` (schema,
spec, sort order, properties, format version).
"""

from __future__ import annotations

from typing import Any

from iceduck.read.live import live_state
from iceduck.transaction.changes import KIND_APPEND, KIND_DELETE, SnapshotChange
from iceduck.transaction.commit import CommitResult, TableCommitter, no_change
from iceduck.transaction.row_level import Pruner, delete_change, pruned
from iceduck.transaction.write_input import write_input
from iceduck.write.matching import matching_positions
from iceduck.write.parquet import prepare_connection, remove_files


def append(committer: TableCommitter, con: Any, data: Any, *, by_name: bool = True) -> CommitResult:
    """Append rows; one commit (none when there are no rows)."""
    base = committer.load()
    files = write_input(con, base, data, by_name=by_name)
    if not files:
        return no_change(committer, base, "append", "no rows to append")
    change = SnapshotChange(kind=KIND_APPEND, operation="append", added_data_files=files)
    return committer.commit(change, base)


def overwrite(
    committer: TableCommitter, con: Any, data: Any, where: str | None = None, *, by_name: bool = True,
    prune: Pruner | None = None, zone: str | None = None,
) -> CommitResult:  # fmt: skip
    """Replace the rows matching `where` (every row when None) with `data`; one commit."""
    base = committer.load()
    files = write_input(con, base, data, by_name=by_name)
    state = live_state(base, predicate=pruned(base, prune) if where is not None else None)
    try:
        if where is None:
            change = SnapshotChange(
                kind=KIND_DELETE, operation="overwrite" if files else "delete", added_data_files=files,
                removed=set(state.files), planned_data_files=set(state.files), remove_all_deletes=True,
                planned_state=state,
            )  # fmt: skip
            if not files and not state.files:
                raise _NothingToDo()
        else:
            prepare_connection(con, base.io)
            positions = matching_positions(con, state, base.metadata.schema, where, zone=zone)
            if not positions and not files:
                raise _NothingToDo()
            change = delete_change(
                committer, con, base, state, positions, where, kind=KIND_DELETE, added=files,
                operation="overwrite" if files else "auto",
            )  # fmt: skip
    except _NothingToDo:
        return no_change(committer, base, "overwrite", "nothing to overwrite")
    except BaseException:
        remove_files([d.file_path for d in files], base.io)
        raise
    return committer.commit(change, base)


class _NothingToDo(Exception):
    pass


__all__ = ["append", "overwrite"]
