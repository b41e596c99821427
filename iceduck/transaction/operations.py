"""Table operations behind the Python API: create, append, delete, update, overwrite, evolve.

Each function takes a `TableCommitter` (catalog + table name) and, where rows are read or written,
a DuckDB connection of its own (a cursor; see `iceduck.write.parquet.prepare_connection`). Each
commits at most once and returns a `CommitResult`; errors leave the table unchanged and the files
they wrote removed.

Data for `append` / `overwrite`: a `pyarrow.Table`, `RecordBatch`, `RecordBatchReader`, a DuckDB
relation (of any connection: its rows stream in as Arrow), or a pandas DataFrame. Columns match the
table's by name (exactly, else case-insensitively), or by position with `by_name=False`; missing
columns get their `write-default` (else null; a required column without one is an error); types
must fit without loss (`iceduck.write.types.compatible`, plus numeric and string-to-uuid casts that
SQL would make implicitly).

Deletes and updates: `write.delete.mode` / `write.update.mode` = `merge-on-read` (default for v2+:
deletion vectors on v3, position delete files on v2) or `copy-on-write` (rewrite the files that hold
matching rows). The predicate is DuckDB SQL over the table's column names.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from iceduck.catalog.base import split_table_name
from iceduck.catalog.locations import ALLOW_NESTED_PROPERTY, check_location_free
from iceduck.errors import AlreadyExistsError, NamespaceNotFoundError, ValidationError
from iceduck.expr import Predicate
from iceduck.io.fileio import FileIO
from iceduck.io.storage import default_io
from iceduck.read.live import TableState, live_state
from iceduck.scan.strict import wholly_matching
from iceduck.spec.partitioning import PartitionField
from iceduck.spec.sorting import SortField
from iceduck.spec.table_metadata import TableMetadata
from iceduck.spec.types import (
    STRING,
    UNKNOWN,
    UUID,
    V3_ONLY_TYPES,
    DecimalType,
    IcebergType,
    NestedField,
    PrimitiveType,
    Schema,
)
from iceduck.spec.updates import AssertCreate, TableUpdate, apply_updates
from iceduck.spec.values import from_json
from iceduck.table import Table
from iceduck.transaction.changes import (
    KIND_APPEND,
    KIND_DELETE,
    KIND_REWRITE,
    KIND_UPDATE,
    MetadataChange,
    RowDeletes,
    RowsMovedError,
    SnapshotChange,
    check_rewritable,
    write_target,
)
from iceduck.transaction.commit import CommitRecord, CommitResult, RetryPolicy, TableCommitter, crash_point
from iceduck.transaction.metadata import (
    create_table_updates,
    format_version_updates,
    property_updates,
    schema_updates,
    sort_order_updates,
    spec_updates,
)
from iceduck.transaction.schema_update import SchemaChanges, to_iceberg_type
from iceduck.transaction.terms import partition_fields, partition_spec, sort_order
from iceduck.vocabulary import duck_literal, quote_ident
from iceduck.write.matching import FILE_COLUMN, POS_COLUMN, live_rows_sql, matching_positions, unregister
from iceduck.write.parquet import (
    needs_connection,
    prepare_connection,
    remove_files,
    uses_bucket,
    write_data_files,
)
from iceduck.write.types import (
    LAST_UPDATED_SEQUENCE_NUMBER,
    ROW_ID,
    WriteTypeError,
    arrow_schema_of_relation,
    assign_fresh_ids,
    check_writable,
    compatible,
    duck_type,
    iceberg_type_from_arrow,
    schema_from_arrow,
)

MERGE_ON_READ = "merge-on-read"
COPY_ON_WRITE = "copy-on-write"


# -- schemas from user input ------------------------------------------------------------------------


def to_schema(schema: Any, con: Any = None) -> Schema:
    """An Iceberg schema (fresh ids unless an iceduck Schema is given) from a `pyarrow.Schema`, an
    iceduck `Schema`, or `(name, DuckDB or Iceberg type)` pairs / a mapping of them."""
    if isinstance(schema, Schema):
        ids = [f.id for f, _ in schema.walk()]
        if len(ids) != len(set(ids)):
            raise ValidationError("schema has duplicate field ids")
        return schema
    if isinstance(schema, pa.Schema):
        return schema_from_arrow(schema)
    pairs = list(schema.items()) if isinstance(schema, Mapping) else list(schema)
    if not pairs:
        raise ValidationError("a table needs at least one column")
    fields = [NestedField(0, name, to_iceberg_type(t, con, name)) for name, t in pairs]
    names = [n for n, _ in pairs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"duplicate column names: {', '.join(dupes)}")
    fresh, _ = assign_fresh_ids(fields)
    return Schema(fresh)


def create_table(
    catalog: Any,
    identifier: str,
    schema: Any,
    *,
    partition_by: Sequence[str | PartitionField] | None = None,
    sort_by: Sequence[str | SortField] | None = None,
    properties: Mapping[str, str] | None = None,
    format_version: int = 3,
    location: str | None = None,
    con: Any = None,
    io: FileIO | None = None,
) -> CommitResult:
    """Create a table; `AlreadyExistsError` if the name is taken. The catalog writes the first
    metadata file from the create updates (`assert-create`); the result has its location."""
    namespace, name = split_table_name(identifier)
    io = io or default_io()
    iceberg_schema = to_schema(schema, con)
    if format_version not in (1, 2, 3):
        raise ValidationError(f"format_version must be 1, 2 or 3, not {format_version}")
    if format_version < 3:
        for f, path in iceberg_schema.walk():
            if f.type.name in V3_ONLY_TYPES:
                raise ValidationError(f"column {path} has type {f.type}, which needs format version 3")
    props = {str(k): str(v) for k, v in (properties or {}).items()}
    if "format-version" in props:
        raise ValidationError("set the format version with format_version=..., not as a property")
    spec = partition_spec(iceberg_schema, partition_by)
    order = sort_order(iceberg_schema, sort_by)
    if not catalog.namespace_exists(namespace):
        raise NamespaceNotFoundError(
            f"cannot create table {identifier}: namespace '{namespace}' does not exist"
        )
    if catalog.table_exists(namespace, name) if hasattr(catalog, "table_exists") else False:
        raise AlreadyExistsError(f"table {identifier} exists already")
    table_location = (location or catalog.default_table_location(namespace, name)).rstrip("/")
    if props.get(ALLOW_NESTED_PROPERTY, "").lower() != "true":
        check_location_free(catalog, identifier, table_location, io)
    updates = create_table_updates(
        location=table_location, schema=iceberg_schema, spec=spec, sort_order=order, properties=props,
        format_version=format_version,
    )  # fmt: skip
    apply_updates(None, updates)  # refuse invalid metadata before the catalog sees it
    requirements = [AssertCreate()]
    committed = catalog.commit_table(namespace, name, requirements, updates)
    record = CommitRecord(
        identifier, None, committed.metadata_location, committed.metadata.last_updated_ms,
        tuple(requirements), tuple(updates),
    )  # fmt: skip
    return CommitResult(
        identifier, "create", None, None, committed.metadata_location, attempts=1, commit=record
    )


# -- input data -----------------------------------------------------------------------------------


def _as_arrow(data: Any) -> tuple[pa.Schema, Any]:
    """(Arrow schema, object DuckDB can scan) for the supported inputs."""
    if isinstance(data, pa.Table | pa.RecordBatchReader):
        return data.schema, data
    if isinstance(data, pa.RecordBatch):
        return data.schema, pa.Table.from_batches([data])
    if _is_relation(data):
        # a DuckDB relation, possibly of another connection: stream its rows as Arrow
        reader = data.to_arrow_reader(1_000_000)
        return _fix_relation_schema(data, reader.schema), reader
    if hasattr(data, "to_arrow") and not isinstance(data, pa.Array):  # polars
        table = data.to_arrow()
        return table.schema, table
    try:
        import pandas as pd

        if isinstance(data, pd.DataFrame):
            table = pa.Table.from_pandas(data, preserve_index=False)
            return table.schema, table
    except ImportError:
        pass
    raise ValidationError(
        f"cannot append {type(data).__name__}: give a pyarrow Table/RecordBatch/RecordBatchReader, a DuckDB "
        "relation or a pandas DataFrame"
    )


def _fix_relation_schema(rel: Any, schema: pa.Schema) -> pa.Schema:
    return arrow_schema_of_relation(rel.types, schema)  # the one DuckDB -> Iceberg type mapping


def _implicitly_castable(source: IcebergType, target: IcebergType) -> bool:
    """Casts SQL makes implicitly on INSERT that cannot surprise: numbers to wider numbers, strings to uuid."""
    numeric = ("int", "long", "float", "double")
    s, t = source.name, target.name
    if s in ("int", "long") and isinstance(target, DecimalType):
        digits = 10 if s == "int" else 19
        return target.precision - target.scale >= digits
    if (s in numeric or isinstance(source, DecimalType)) and t in ("float", "double"):
        return True
    if isinstance(source, DecimalType) and isinstance(target, DecimalType):
        return (
            source.scale <= target.scale
            and source.precision - source.scale <= target.precision - target.scale
        )
    return source == STRING and target == UUID


def source_select(
    schema: Schema, source_name: str, arrow_schema: pa.Schema, *, by_name: bool, table: str
) -> str:
    """SQL selecting the table's columns (cast, defaults filled in) from a registered Arrow source."""
    input_fields = list(arrow_schema)
    mapping: dict[int, pa.Field] = {}
    targets = [f for f in schema.fields]
    if by_name:
        exact = {f.name: f for f in input_fields}
        lower: dict[str, list[pa.Field]] = {}
        for f in input_fields:
            lower.setdefault(f.name.lower(), []).append(f)
        used: set[str] = set()
        for t in targets:
            found = exact.get(t.name)
            if found is None:
                candidates = lower.get(t.name.lower(), [])
                found = candidates[0] if len(candidates) == 1 else None
            if found is not None:
                mapping[t.id] = found
                used.add(found.name)
        extra = [f.name for f in input_fields if f.name not in used]
        if extra:
            raise ValidationError(
                f"cannot write to {table}: column(s) {', '.join(extra)} are not in the table "
                f"(table columns: {', '.join(f.name for f in targets)})"
            )
    else:
        if len(input_fields) != len(targets):
            raise ValidationError(
                f"cannot write to {table}: {len(input_fields)} column(s) given, the table has {len(targets)} "
                f"({', '.join(f.name for f in targets)})"
            )
        mapping = {t.id: f for t, f in zip(targets, input_fields, strict=True)}
    problems = []
    select = []
    for t in targets:
        if t.type.name == "unknown":
            continue
        target_type = duck_type(t.type, t.name)
        src = mapping.get(t.id)
        if src is None:
            if t.has_write_default and t.write_default is not None:
                select.append(f"{_default_literal(t)} AS {quote_ident(t.name)}")
            elif t.required:
                problems.append(f"required column {t.name} is missing (and has no write-default)")
            else:
                select.append(f"CAST(NULL AS {target_type}) AS {quote_ident(t.name)}")
            continue
        try:
            source_type = iceberg_type_from_arrow(src.type, src.name)
        except WriteTypeError as e:
            problems.append(str(e))
            continue
        why = compatible(source_type, t.type)
        if why and not _implicitly_castable(source_type, t.type):
            problems.append(f"column {t.name}: {why} (given as {src.name}: {src.type})")
            continue
        if t.required and src.nullable and source_type == UNKNOWN:
            problems.append(f"required column {t.name} is given as all nulls")
            continue
        select.append(f"CAST({quote_ident(src.name)} AS {target_type}) AS {quote_ident(t.name)}")
    if problems:
        raise ValidationError(f"cannot write to {table}: " + "; ".join(problems))
    return f"SELECT {', '.join(select)} FROM {quote_ident(source_name)}"


def _default_literal(f: NestedField) -> str:
    if isinstance(f.type, PrimitiveType | DecimalType):
        return duck_literal(f.type, from_json(f.type, f.write_default))
    if f.write_default == {}:
        # a struct defaulting to {}: each field takes its own write-default
        children = []
        for c in f.type.fields:  # type: ignore[union-attr]
            value = c.write_default if c.has_write_default else None
            child = (
                duck_literal(c.type, from_json(c.type, value))
                if value is not None and isinstance(c.type, PrimitiveType | DecimalType)
                else f"CAST(NULL AS {duck_type(c.type, c.name)})"
            )
            children.append(f"{quote_ident(c.name)} := {child}")
        return f"CAST(struct_pack({', '.join(children)}) AS {duck_type(f.type, f.name)})"
    return f"CAST(NULL AS {duck_type(f.type, f.name)})"


# -- appends --------------------------------------------------------------------------------------


def _write_input(con: Any, table: Table, data: Any, *, by_name: bool) -> list[Any]:
    prepare_connection(con, table.io)
    target = write_target(table)
    check_writable(target.schema)
    who = table.name or table.metadata_location
    if _is_relation(data) and not needs_connection(target) and not uses_bucket(target):
        # A DuckDB relation is written by its own connection: its rows never leave DuckDB.
        arrow_schema = _fix_relation_schema(data, data.limit(0).to_arrow_table().schema)
        name = "__iceduck_input"
        select = source_select(target.schema, name, arrow_schema, by_name=by_name, table=who)
        files = write_data_files(con, select, target, run=lambda sql: data.query(name, sql).fetchall())
    else:
        arrow_schema, scannable = _as_arrow(data)
        name = f"__iceduck_input_{uuid.uuid4().hex}"
        select = source_select(target.schema, name, arrow_schema, by_name=by_name, table=who)
        con.register(name, scannable)
        try:
            files = write_data_files(con, select, target)
        finally:
            unregister(con, [name])
    crash_point("data-written")
    return files


def _is_relation(data: Any) -> bool:
    return hasattr(data, "to_arrow_reader") and hasattr(data, "query") and hasattr(data, "types")


def append(committer: TableCommitter, con: Any, data: Any, *, by_name: bool = True) -> CommitResult:
    """Append rows; one commit (none when there are no rows)."""
    base = committer.load()
    files = _write_input(con, base, data, by_name=by_name)
    if not files:
        return _no_change(committer, base, "append", "no rows to append")
    change = SnapshotChange(kind=KIND_APPEND, operation="append", added_data_files=files)
    return committer.commit(change, base)


def _no_change(committer: TableCommitter, table: Table, operation: str, note: str) -> CommitResult:
    snap = table.metadata.current_snapshot()
    return CommitResult(
        committer.identifier,
        operation,
        snap.snapshot_id if snap is not None else None,
        snap.sequence_number if snap is not None else None,
        table.metadata_location,
        attempts=0,
        notes=(note,),
    )


# -- deletes, updates, overwrites ----------------------------------------------------------------


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
) -> list[Any]:
    """Write the live rows of `files` that satisfy `keep_where` (SQL over the row columns and
    `__iceduck_file`/`__iceduck_pos`), with optional column projections, keeping row lineage."""
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
        return write_data_files(con, select, write_target(table), lineage=lineage)
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


def _pruned(base: Table, prune: Pruner | None) -> Predicate | None:
    return None if prune is None else prune(base.metadata.schema)


def delete(
    committer: TableCommitter, con: Any, where: str | None, *, prune: Pruner | None = None,
    exact: Pruner | None = None, zone: str | None = None,
) -> CommitResult:  # fmt: skip
    """Delete the rows matching `where` (every row when None); one commit (none if nothing matches).

    With `prune`, only the data files planning keeps for the filter are read (like a scan). With
    `exact` (the predicate that is exactly `where`, when there is one), a file whose partition or
    metrics prove every row matches (`iceduck.scan.strict`) is dropped whole, unread, in either mode.
    When a concurrent commit moved rows it deletes into new files (`RowsMovedError`: an UPDATE
    committed first), the delete is planned again on the table as it is then, as the commit retries are.
    `zone` (delete, update, overwrite): the session's TimeZone, which `where` is read in."""
    replans = 0
    while True:
        base = committer.load()
        if base.metadata.format_version < 2 and _mode(base, "write.delete.mode") == MERGE_ON_READ:
            raise ValidationError(f"{committer.identifier}: format v1 has no row-level deletes")
        state = live_state(base, predicate=_pruned(base, prune))
        prepare_connection(con, base.io)
        dropped = _wholly_matching(state, base.metadata.schema, exact)
        read = [p for p in state.files if p not in dropped]
        positions = (
            matching_positions(con, state, base.metadata.schema, where, read, zone=zone) if read else {}
        )
        if not positions and not dropped:
            return _no_change(committer, base, "delete", "no rows matched")
        change = _delete_change(
            committer, con, base, state, positions, where, kind=KIND_DELETE, dropped=dropped
        )
        try:
            return committer.commit(change, base)
        except RowsMovedError:
            replans += 1
            if replans > RetryPolicy.of(base.metadata).retries:
                raise


def _wholly_matching(state: TableState, schema: Schema, exact: Pruner | None) -> frozenset[str]:
    return wholly_matching(state, schema, exact)  # the one rule: iceduck.scan.strict


def _delete_change(
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
    state = live_state(base, predicate=_pruned(base, prune))
    check_rewritable(state, "update rows")
    prepare_connection(con, base.io)
    positions = matching_positions(con, state, schema, where, zone=zone)
    if not positions:
        return _no_change(committer, base, "overwrite", "no rows matched")
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


def overwrite(
    committer: TableCommitter, con: Any, data: Any, where: str | None = None, *, by_name: bool = True,
    prune: Pruner | None = None, zone: str | None = None,
) -> CommitResult:  # fmt: skip
    """Replace the rows matching `where` (every row when None) with `data`; one commit."""
    base = committer.load()
    files = _write_input(con, base, data, by_name=by_name)
    state = live_state(base, predicate=_pruned(base, prune) if where is not None else None)
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
            change = _delete_change(
                committer, con, base, state, positions, where, kind=KIND_DELETE, added=files,
                operation="overwrite" if files else "auto",
            )  # fmt: skip
    except _NothingToDo:
        return _no_change(committer, base, "overwrite", "nothing to overwrite")
    except BaseException:
        remove_files([d.file_path for d in files], base.io)
        raise
    return committer.commit(change, base)


class _NothingToDo(Exception):
    pass


# -- metadata-only changes ------------------------------------------------------------------------


def update_schema(committer: TableCommitter, changes: SchemaChanges) -> CommitResult:
    """Commit schema changes (one new schema)."""
    base = committer.load()
    md = base.metadata
    changes.apply(md)  # refuse invalid changes before committing anything

    def update(current: TableMetadata) -> list[TableUpdate]:
        return schema_updates(changes.apply(current))

    change = MetadataChange("update-schema", update, planned_schema_id=md.current_schema_id)
    return committer.commit(change, base)


def update_spec(committer: TableCommitter, terms: Sequence[str | PartitionField]) -> CommitResult:
    """Make a partition spec of `terms` the table's default (existing data keeps its spec)."""
    base = committer.load()
    md = base.metadata
    # refuse bad terms before committing anything
    apply_updates(md, spec_updates(md, partition_fields(md.schema, terms)))

    def update(current: TableMetadata) -> list[TableUpdate]:
        return spec_updates(current, partition_fields(current.schema, terms))

    change = MetadataChange(
        "update-spec", update, planned_schema_id=md.current_schema_id, planned_spec_id=md.default_spec_id
    )
    return committer.commit(change, base)


def set_sort_order(committer: TableCommitter, terms: Sequence[str | SortField]) -> CommitResult:
    """Make a sort order of `terms` the table's default (empty: unsorted)."""
    base = committer.load()
    sort_order(base.metadata.schema, terms)  # refuse bad terms before committing anything

    def update(current: TableMetadata) -> list[TableUpdate]:
        return sort_order_updates(sort_order(current.schema, terms))

    return committer.commit(
        MetadataChange("set-sort-order", update, planned_schema_id=base.metadata.current_schema_id), base
    )


_RESERVED = frozenset({"format-version"})


def set_properties(committer: TableCommitter, updates: Mapping[str, Any]) -> CommitResult:
    """Set table properties (values become strings)."""
    props = {str(k): str(v) for k, v in updates.items()}
    reserved = sorted(_RESERVED & props.keys())
    if reserved:
        raise ValidationError(
            f"{committer.identifier}: {', '.join(reserved)} is not a table property; use upgrade_format_version"
        )
    base = committer.load()
    return committer.commit(MetadataChange("set-properties", lambda md: property_updates(props)), base)


def unset_properties(committer: TableCommitter, keys: Iterable[str]) -> CommitResult:
    """Remove table properties (absent ones are ignored)."""
    removals = [str(k) for k in keys]
    base = committer.load()
    return committer.commit(
        MetadataChange("unset-properties", lambda md: property_updates({}, removals)), base
    )


def upgrade_format_version(committer: TableCommitter, version: int) -> CommitResult:
    """Upgrade the table's format version (one-way)."""
    base = committer.load()
    format_version_updates(base.metadata, version)  # refuse a downgrade before committing anything
    return committer.commit(
        MetadataChange("upgrade-format-version", lambda md: format_version_updates(md, version)), base
    )
