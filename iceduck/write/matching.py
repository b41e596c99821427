"""Which rows of a table a predicate touches: live data files, their deletes, matching positions, live rows.

The one place writers ask "which live positions of which files match this predicate" and "give me
the live rows of these files with their positions and lineage". Until a shared scan planner exists
this module plans by itself: every live data file of the snapshot is a candidate (no pruning yet),
and deletes are deletion vectors and position delete files. Equality deletes are reported so that
callers can refuse rewrites (a rewritten row would escape an equality delete); deleting rows that an
equality delete already removed is harmless.

Rows are read natively by DuckDB: `read_parquet([...], filename := true, file_row_number := true,
schema := MAP {field_id: {name, type, default_value}})` maps columns by field id (renames, columns
added later with their `initial-default`), and the predicate is plain SQL over the current column
names. Deleted positions are subtracted in NumPy (matching) or anti-joined (live rows).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from iceduck.errors import CorruptFileError, FileNotFoundInTableError, InvalidMetadataError, ValidationError
from iceduck.io.fileio import local_path
from iceduck.puffin.puffin import read_deletion_vector
from iceduck.puffin.ranged import LocalFileReader
from iceduck.puffin.roaring64 import Roaring64
from iceduck.spec.manifest import (
    CONTENT_DATA,
    CONTENT_EQUALITY_DELETES,
    MANIFEST_CONTENT_DATA,
    STATUS_DELETED,
    ManifestEntry,
)
from iceduck.spec.snapshots import Snapshot
from iceduck.spec.types import NestedField, Schema, child_fields, is_primitive
from iceduck.spec.values import from_json
from iceduck.table import Table
from iceduck.write.deletes import is_dv
from iceduck.write.duck_values import duck_text
from iceduck.write.types import (
    DELETE_FILE_PATH_FIELD_ID,
    DELETE_POS_FIELD_ID,
    LAST_UPDATED_SEQUENCE_NUMBER,
    LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID,
    ROW_ID,
    ROW_ID_FIELD_ID,
    duck_type,
    quote_ident,
    quote_literal,
)

FILE_COLUMN = "__iceduck_file"
POS_COLUMN = "__iceduck_pos"


@dataclass(slots=True)
class LiveFile:
    """A live data file with the deletes that apply to it."""

    entry: ManifestEntry
    local_path: str
    dv: ManifestEntry | None = None
    position_deletes: list[ManifestEntry] = field(default_factory=list)
    equality_deletes: list[ManifestEntry] = field(default_factory=list)

    @property
    def path(self) -> str:
        """The path as the metadata records it."""
        return self.entry.data_file.file_path

    @property
    def record_count(self) -> int:
        return self.entry.data_file.record_count


@dataclass(slots=True)
class TableState:
    """The live data files of a snapshot and their deletes (the writer's view of one snapshot)."""

    table: Table
    snapshot: Snapshot | None
    files: dict[str, LiveFile]
    delete_entries: list[ManifestEntry]
    _deleted: dict[str, Roaring64] = field(default_factory=dict)

    @property
    def has_equality_deletes(self) -> bool:
        return any(e.data_file.content == CONTENT_EQUALITY_DELETES for e in self.delete_entries)

    def deleted(self, path: str) -> Roaring64:
        """Positions of data file `path` deleted by its DV and applicable position delete files."""
        if path not in self._deleted:
            self._load_deleted([path])
        return self._deleted[path]

    def preload_deleted(self, paths: Iterable[str]) -> None:
        """Read the deletes of many files at once (one pass over each position delete file)."""
        self._load_deleted([p for p in paths if p not in self._deleted])

    def _load_deleted(self, paths: list[str]) -> None:
        if not paths:
            return
        parts: dict[str, list[Roaring64]] = {p: [] for p in paths}
        by_pos_file: dict[str, list[str]] = {}
        for p in paths:
            lf = self.files[p]
            if lf.dv is not None:
                parts[p].append(read_dv(self.table, lf.dv))
            for e in lf.position_deletes:
                by_pos_file.setdefault(e.data_file.file_path, []).append(p)
        for delete_path, targets in by_pos_file.items():
            for target, positions in read_position_deletes(self.table, delete_path, targets).items():
                parts[target].append(Roaring64.from_positions(positions))
        for p, found in parts.items():
            self._deleted[p] = found[0].union(*found[1:]) if found else Roaring64.empty()


def read_dv(table: Table, entry: ManifestEntry) -> Roaring64:
    """The positions of a deletion vector entry, verified against its manifest metadata."""
    d = entry.data_file
    if d.content_offset is None or d.content_size_in_bytes is None:
        raise InvalidMetadataError(
            f"{d.file_path}: deletion vector entry has no content_offset/content_size_in_bytes"
        )
    actual = table.resolve(d.file_path)
    try:
        return read_deletion_vector(
            LocalFileReader(local_path(actual)), d.content_offset, d.content_size_in_bytes, path=actual,
            record_count=d.record_count,
        )  # fmt: skip
    except FileNotFoundError:
        raise FileNotFoundInTableError(f"{actual}: deletion vector file not found") from None


def read_position_deletes(table: Table, delete_path: str, targets: Sequence[str]) -> dict[str, np.ndarray]:
    """Positions a Parquet position delete file deletes in each of the data files `targets`."""
    actual = local_path(table.resolve(delete_path))
    try:
        pf = pq.ParquetFile(actual)
    except FileNotFoundError:
        raise FileNotFoundInTableError(f"{actual}: position delete file not found") from None
    except (OSError, pa.ArrowException) as e:
        raise CorruptFileError(actual, f"cannot read position delete file: {e}") from e
    by_id: dict[int, str] = {}
    for f in pf.schema_arrow:
        raw = (f.metadata or {}).get(b"PARQUET:field_id")
        if raw is not None:
            by_id[int(raw)] = f.name
    path_col = by_id.get(DELETE_FILE_PATH_FIELD_ID, "file_path")
    pos_col = by_id.get(DELETE_POS_FIELD_ID, "pos")
    data = pf.read(columns=[path_col, pos_col])
    out: dict[str, np.ndarray] = {}
    paths = data.column(0)
    for target in set(targets):
        mask = pc.equal(paths, target)
        out[target] = pc.filter(data.column(1), mask).to_numpy().astype(np.int64)
    return out


def plan(table: Table, snapshot: Snapshot | None = None) -> TableState:
    """The live data files of `snapshot` (default: current) with the deletes that apply to each.

    DVs apply to the file they reference; position delete files to the files they name with a data
    sequence number not above theirs (when they name one file, only to it); equality deletes to
    files of the same spec and partition with a lower data sequence number (unpartitioned deletes
    to all).
    """
    snap = snapshot if snapshot is not None else table.metadata.current_snapshot()
    files: dict[str, LiveFile] = {}
    deletes: list[ManifestEntry] = []
    for mf in table.manifests(snap):
        for e in table.manifest(mf).entries:
            if e.status == STATUS_DELETED:
                continue
            if mf.content == MANIFEST_CONTENT_DATA and e.data_file.content == CONTENT_DATA:
                files[e.data_file.file_path] = LiveFile(e, local_path(table.resolve(e.data_file.file_path)))
            else:
                deletes.append(e)
    for e in deletes:
        d = e.data_file
        if is_dv(d):
            target = files.get(d.referenced_data_file or "")
            if target is not None:
                target.dv = e
        elif d.content == CONTENT_EQUALITY_DELETES:
            for lf in files.values():
                data_seq = lf.entry.sequence_number or 0
                if data_seq < (e.sequence_number or 0) and (
                    not d.partition
                    or (
                        lf.entry.data_file.spec_id == d.spec_id
                        and lf.entry.data_file.partition == d.partition
                    )
                ):
                    lf.equality_deletes.append(e)
        else:
            candidates = (
                [files[d.referenced_data_file]]
                if d.referenced_data_file is not None and d.referenced_data_file in files
                else ([] if d.referenced_data_file is not None else list(files.values()))
            )
            for lf in candidates:
                if (lf.entry.sequence_number or 0) <= (e.sequence_number or 0):
                    lf.position_deletes.append(e)
    # A DV replaces every position delete file for its data file (spec "Deletion Vectors").
    for lf in files.values():
        if lf.dv is not None:
            lf.position_deletes = []
    return TableState(table, snap, files, deletes)


def _column_definition(f: NestedField) -> str:
    """One entry of the `schema` map: name, DuckDB type, initial default as text, and the nested
    fields by their own ids (so renamed and added nested fields resolve too)."""
    default = "NULL"
    if f.has_initial_default and f.initial_default is not None and is_primitive(f.type):
        try:
            default = quote_literal(duck_text(f.type, from_json(f.type, f.initial_default)))
        except ValidationError:
            default = "NULL"
    out = f"{{name: {quote_literal(f.name)}, type: {quote_literal(duck_type(f.type, f.name))}, default_value: {default}"
    children = [c for c in child_fields(f.type) if c.type.name != "unknown"]
    if children:
        out += ", children: MAP {" + ", ".join(f"{c.id}: {_column_definition(c)}" for c in children) + "}"
    return out + "}"


def read_parquet_schema_sql(schema: Schema, *, lineage: bool = False) -> str:
    """The `schema := MAP {...}` argument mapping the schema's columns (nested ones too) by field id."""
    items = [f"{f.id}: {_column_definition(f)}" for f in schema.fields if f.type.name != "unknown"]
    if lineage:
        for fid, name in (
            (ROW_ID_FIELD_ID, ROW_ID),
            (LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID, LAST_UPDATED_SEQUENCE_NUMBER),
        ):
            items.append(f"{fid}: {{name: {quote_literal(name)}, type: 'BIGINT', default_value: NULL}}")
    return "MAP {" + ", ".join(items) + "}"


def read_sql(files: Sequence[LiveFile], schema: Schema, *, lineage: bool = False) -> str:
    """SQL reading `files` with the schema's columns, plus `__iceduck_file` (local path) and
    `__iceduck_pos` (row position), and the stored lineage columns when `lineage`."""
    paths = "[" + ", ".join(quote_literal(f.local_path) for f in files) + "]"
    return (
        f"SELECT * RENAME (filename AS {FILE_COLUMN}, file_row_number AS {POS_COLUMN}) FROM read_parquet({paths}, "
        f"filename := true, file_row_number := true, schema := {read_parquet_schema_sql(schema, lineage=lineage)})"
    )


def matching_positions(
    con: Any, state: TableState, schema: Schema, predicate: str | None, files: Iterable[str] | None = None
) -> dict[str, np.ndarray]:
    """Sorted live positions matching `predicate` (SQL over column names; None matches every row)
    in each candidate file (default: every live data file); files without matches are left out."""
    candidates = [state.files[p] for p in files] if files is not None else list(state.files.values())
    if not candidates:
        return {}
    out: dict[str, np.ndarray] = {}
    if predicate is None:
        for lf in candidates:
            out[lf.path] = np.arange(lf.record_count, dtype=np.int64)
    else:
        by_local = {lf.local_path: lf.path for lf in candidates}
        sql = (
            f"SELECT {FILE_COLUMN}, {POS_COLUMN} FROM ({read_sql(candidates, schema)}) AS __iceduck_rows "
            f"WHERE ({predicate})"
        )
        try:
            result = con.sql(sql).to_arrow_table()
        except Exception as e:
            raise ValidationError(
                f"cannot evaluate predicate {predicate!r} on {state.table.name}: {e}"
            ) from None
        if result.num_rows:
            names = result.column(0).combine_chunks().dictionary_encode()
            positions = result.column(1).to_numpy().astype(np.int64)
            codes = names.indices.to_numpy()
            order = np.lexsort((positions, codes))
            codes, positions = codes[order], positions[order]
            bounds = np.flatnonzero(np.diff(codes)) + 1
            for chunk_codes, chunk in zip(np.split(codes, bounds), np.split(positions, bounds), strict=True):
                out[by_local[names.dictionary[int(chunk_codes[0])].as_py()]] = chunk
    state.preload_deleted(out)
    live: dict[str, np.ndarray] = {}
    for path, positions in out.items():
        deleted = state.deleted(path)
        if deleted.cardinality:
            positions = positions[~np.isin(positions, deleted.to_numpy(), assume_unique=True)]
        if len(positions):
            live[path] = positions
    return live


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
            "local": [lf.local_path for lf in chosen],
            "recorded": [lf.path for lf in chosen],
            "first_row_id": pa.array([lf.entry.data_file.first_row_id for lf in chosen], pa.int64()),
            "data_seq": pa.array([lf.entry.sequence_number for lf in chosen], pa.int64()),
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
            deleted_paths.append(lf.local_path)
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
        f"SELECT {', '.join(select)} FROM ({read_sql(chosen, schema, lineage=lineage)}) AS r "
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


def files_with_deletes(state: TableState, paths: Iterable[str]) -> Mapping[str, Roaring64]:
    """The deleted positions of each of `paths`."""
    state.preload_deleted(paths)
    return {p: state.deleted(p) for p in paths}
