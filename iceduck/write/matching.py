"""Which rows of a table a predicate touches, and the live rows of chosen files, as DuckDB SQL.

The files and their deletes come from the one planner: a `TableState` (`iceduck.read.live`) is a
view over a scan plan made with the statement's predicate, so DELETE/UPDATE open only the files a
matching row can be in, and apply exactly the deletes a read applies. This module only writes the
SQL: `read_parquet([...], filename := true, file_row_number := true, schema := MAP {...})` maps
columns by field id with the scan's own schema map (`iceduck.read.sql.schema_map`: renames, added
columns with their `initial-default`), and the predicate is plain SQL over the current column names.
Deleted positions are subtracted in NumPy (matching) or anti-joined (live rows).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from iceduck.errors import ValidationError
from iceduck.read.live import TableState
from iceduck.read.sql import FIELD_ID_LAST_UPDATED, FIELD_ID_ROW_ID, schema_map
from iceduck.spec.types import LONG, NestedField, Schema
from iceduck.vocabulary import quote_ident, quote_str
from iceduck.write.types import LAST_UPDATED_SEQUENCE_NUMBER, ROW_ID

FILE_COLUMN = "__iceduck_file"
POS_COLUMN = "__iceduck_pos"


def read_parquet_schema_sql(schema: Schema, *, lineage: bool = False) -> str:
    """The `schema := MAP {...}` argument mapping the schema's columns (nested ones too) by field id."""
    fields = [(f.name, f) for f in schema.fields if f.type.name != "unknown"]
    if lineage:
        fields.append((ROW_ID, NestedField(FIELD_ID_ROW_ID, ROW_ID, LONG)))
        fields.append(
            (
                LAST_UPDATED_SEQUENCE_NUMBER,
                NestedField(FIELD_ID_LAST_UPDATED, LAST_UPDATED_SEQUENCE_NUMBER, LONG),
            )
        )
    return schema_map(fields)


def read_sql(local_paths: Sequence[str], schema: Schema, *, lineage: bool = False) -> str:
    """SQL reading `files` with the schema's columns, plus `__iceduck_file` (local path) and
    `__iceduck_pos` (row position), and the stored lineage columns when `lineage`."""
    paths = "[" + ", ".join(quote_str(p) for p in local_paths) + "]"
    return (
        f"SELECT * RENAME (filename AS {FILE_COLUMN}, file_row_number AS {POS_COLUMN}) FROM read_parquet({paths}, "
        f"filename := true, file_row_number := true, schema := {read_parquet_schema_sql(schema, lineage=lineage)})"
    )


def matching_positions(
    con: Any,
    state: TableState,
    schema: Schema,
    predicate: str | None,
    files: Iterable[str] | None = None,
    *,
    zone: str | None = None,
) -> dict[str, np.ndarray]:
    """Sorted live positions matching `predicate` (SQL over column names; None matches every row)
    in each candidate file (default: every live data file); files without matches are left out.

    `zone`: the TimeZone DuckDB reads `predicate` in (the user's session's: a TIMESTAMPTZ literal
    and a TIMESTAMP compared with one mean what they mean there); `con`, the writer's cursor, is
    set to it for the query and back to its own zone after. None: `con`'s zone as it is."""
    candidates = [state.files[p] for p in files] if files is not None else list(state.files.values())
    if not candidates:
        return {}
    out: dict[str, np.ndarray] = {}
    if predicate is None:
        for lf in candidates:
            out[lf.path] = np.arange(lf.record_count, dtype=np.int64)
    else:
        by_local = {state.local_path(lf.path): lf.path for lf in candidates}
        # One row per file with a list of its positions: DuckDB groups them and hands them over in
        # its own Arrow buffers, NumPy sorts each file's (cheaper than list(... ORDER BY), which
        # buffers every row again). A (file path, position) row per match copied ~100 bytes per
        # row into pyarrow's memory pool (1.2 M rows: 115 MB), which its allocator keeps from the
        # OS until pyarrow next allocates: never, in a process that only scans afterwards.
        sql = (
            f"SELECT {FILE_COLUMN}, list({POS_COLUMN}) FROM "
            f"({read_sql(list(by_local), schema)}) AS __iceduck_rows WHERE ({predicate}) GROUP BY {FILE_COLUMN}"
        )
        try:
            with session_zone(con, zone):
                result = con.sql(sql).to_arrow_table()
        except Exception as e:
            raise ValidationError(
                f"cannot evaluate predicate {predicate!r} on {state.table.name}: {e}"
            ) from None
        for names, lists in zip(result.column(0).chunks, result.column(1).chunks, strict=True):
            offsets = lists.offsets.to_numpy()
            values = lists.values.to_numpy().astype(np.int64, copy=False)
            for k, name in enumerate(names.to_pylist()):
                out[by_local[name]] = np.sort(values[offsets[k] : offsets[k + 1]])
    state.preload_deleted(out)
    live: dict[str, np.ndarray] = {}
    for path, positions in out.items():
        deleted = state.deleted(path)
        if deleted.cardinality:
            positions = positions[~np.isin(positions, deleted.to_numpy(), assume_unique=True)]
        if len(positions):
            live[path] = positions
    return live


@contextlib.contextmanager
def session_zone(con: Any, zone: str | None) -> Iterator[None]:
    """`con` (a cursor of the writer's own) in TimeZone `zone` for the block, then back in the zone
    it had (None: left as it is)."""
    if zone is None:
        yield
        return
    ((before,),) = con.execute("SELECT current_setting('TimeZone')").fetchall()
    con.execute(f"SET TimeZone = {quote_str(zone)}")
    try:
        yield
    finally:
        con.execute(f"SET TimeZone = {quote_str(str(before))}")


def live_rows_sql(
    con: Any, state: TableState, schema: Schema, files: Sequence[str], *, lineage: bool
) -> tuple[str, list[str]]:
    """SQL of the live rows of `files` with the schema's columns, `__iceduck_file` (recorded path),
    `__iceduck_pos`, and (when `lineage`) `_row_id` / `_last_updated_sequence_number` as the spec
    says a reader sees them: stored values, else inherited from the file's first row id and data
    sequence number (null when the file has no first row id).

    Returns the SQL and the names of objects registered on `con` for it (unregister them after use).
    """
    chosen = [state.files[p] for p in files]
    if not chosen:
        raise ValidationError("no files to read")
    registered: list[str] = []
    info = pa.table(
        {
            "local": [state.local_path(lf.path) for lf in chosen],
            "recorded": [lf.path for lf in chosen],
            "first_row_id": pa.array([lf.file.first_row_id for lf in chosen], pa.int64()),
            "data_seq": pa.array([lf.data_sequence_number for lf in chosen], pa.int64()),
        }
    )
    info_name = f"__iceduck_files_{uuid.uuid4().hex}"
    con.register(info_name, info)
    registered.append(info_name)
    state.preload_deleted(files)
    deleted_paths: list[str] = []
    deleted_pos: list[np.ndarray] = []
    for lf in chosen:
        positions = state.deleted(lf.path)
        if positions.cardinality:
            arr = positions.to_numpy()
            deleted_paths.append(state.local_path(lf.path))
            deleted_pos.append(arr)
    columns = [quote_ident(f.name) for f in schema.fields if f.type.name != "unknown"]
    select = [f"r.{c}" for c in columns]
    select.append(f"i.recorded AS {FILE_COLUMN}")
    select.append(f"r.{POS_COLUMN}")
    if lineage:
        select.append(
            f"CASE WHEN i.first_row_id IS NULL THEN NULL ELSE coalesce(r.{quote_ident(ROW_ID)}, "
            f"i.first_row_id + r.{POS_COLUMN}) END AS {quote_ident(ROW_ID)}"
        )
        select.append(
            f"CASE WHEN i.first_row_id IS NULL THEN NULL ELSE coalesce(r.{quote_ident(LAST_UPDATED_SEQUENCE_NUMBER)}, "
            f"i.data_seq) END AS {quote_ident(LAST_UPDATED_SEQUENCE_NUMBER)}"
        )
    sql = (
        f"SELECT {', '.join(select)} FROM ({read_sql([state.local_path(lf.path) for lf in chosen], schema, lineage=lineage)}) AS r "
        f"JOIN {info_name} AS i ON r.{FILE_COLUMN} = i.local"
    )
    if deleted_pos:
        lengths = [len(a) for a in deleted_pos]
        gone = pa.table(
            {
                "local": pa.array(np.repeat(np.array(deleted_paths, dtype=object), lengths), pa.string()),
                "pos": pa.array(np.concatenate(deleted_pos)),
            }
        )
        gone_name = f"__iceduck_gone_{uuid.uuid4().hex}"
        con.register(gone_name, gone)
        registered.append(gone_name)
        sql += f" ANTI JOIN {gone_name} AS g ON r.{FILE_COLUMN} = g.local AND r.{POS_COLUMN} = g.pos"
    return sql, registered


def unregister(con: Any, names: Iterable[str]) -> None:
    """Drop objects registered by `live_rows_sql`."""
    for name in names:
        with contextlib.suppress(Exception):
            con.unregister(name)
