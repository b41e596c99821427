"""ANALYZE: distinct-count statistics of a snapshot's columns, as every Iceberg engine reads them.

For each chosen column (default: every primitive top-level column) a theta sketch of its distinct
non-null values among the snapshot's live rows (deletes applied), each value fed as its Iceberg
single-value bytes (`puffin.theta`), goes into one Puffin statistics file
(`<location>/metadata/<snapshot id>-<uuid>.stats`, blob type `apache-datasketches-theta-v1`, the
column's field id, the snapshot's id and sequence number, `ndv` in the blob properties), registered
on the snapshot with the `set-statistics` update (replacing any file it had). Spark's
`compute_table_stats` and Trino's `ANALYZE` write the same; their planners read `ndv`.

Incremental: when the table's newest statistics belong to an ancestor of the snapshot and every
commit since only appended files (operation `append`), the sketches of the files added since are
merged (theta union) into that file's sketches for the columns it covers; nothing else is read. A
union of sketches is the sketch of the union of the values, so the result is the sketch a full scan
gives, within the same error. Anything else (a delete, an overwrite, a rewrite) scans everything.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from iceduck._version import __version__
from iceduck.errors import CommitConflictError, ValidationError
from iceduck.maintenance.partition_stats import partition_stats_bytes
from iceduck.puffin import PuffinWriter, read_blob, read_footer
from iceduck.puffin.puffin import PROPERTY_CREATED_BY
from iceduck.puffin.theta import THETA_BLOB, ndv_property, sketch_from_hashes, union, value_hash
from iceduck.read.live import TableState, live_state
from iceduck.spec.snapshots import BlobMetadata, PartitionStatisticsFile, Snapshot, StatisticsFile
from iceduck.spec.types import NestedField
from iceduck.spec.updates import SetPartitionStatistics, SetStatistics, requirements_for
from iceduck.spec.values import to_bytes
from iceduck.table import Table
from iceduck.transaction import Attempt, Change
from iceduck.vocabulary import quote_ident
from iceduck.write.matching import live_rows_sql, unregister
from iceduck.write.parquet import prepare_connection

_FIXED_WIDTH = {  # Iceberg type -> (the Arrow type DuckDB's value casts to, numpy dtype of its bytes)
    "int": (pa.int32(), "<i4"),
    "date": (pa.int32(), "<i4"),
    "long": (pa.int64(), "<i8"),
    "time": (pa.int64(), "<i8"),
    "timestamp": (pa.int64(), "<i8"),
    "timestamptz": (pa.int64(), "<i8"),
    "timestamp_ns": (pa.int64(), "<i8"),
    "timestamptz_ns": (pa.int64(), "<i8"),
    "float": (pa.float32(), "<f4"),
    "double": (pa.float64(), "<f8"),
}
_BY_VALUE = ("boolean", "string", "uuid", "fixed", "binary", "decimal")


def sketchable(f: NestedField) -> bool:
    """Whether ANALYZE sketches a column: a top-level primitive of a type with single-value bytes."""
    return bool(getattr(f.type, "is_primitive", False)) and (
        f.type.name in _FIXED_WIDTH or f.type.name in _BY_VALUE
    )


@dataclass(frozen=True, slots=True)
class AnalyzePlan:
    """What ANALYZE would compute: the snapshot, the columns (field id, name), the files to read
    and, when incremental, the statistics file whose sketches the new files' merge into."""

    plan_id: str
    snapshot_id: int
    sequence_number: int
    columns: tuple[tuple[int, str], ...]
    files: tuple[str, ...]
    base: StatisticsFile | None = None
    reused: tuple[int, ...] = ()  # field ids whose sketches `base` holds

    @property
    def empty(self) -> bool:
        return not self.columns

    @property
    def parameters(self) -> dict[str, Any]:
        return {
            "columns": [n for _, n in self.columns],
            "snapshot_id": self.snapshot_id,
            "incremental": self.base is not None,
        }

    def candidates(self) -> list[str]:
        return list(self.files)


@dataclass(slots=True)
class AnalyzeResult:
    """The statistics file written and each column's distinct-count estimate."""

    statistics: StatisticsFile | None = None
    partition_statistics: PartitionStatisticsFile | None = None
    ndv: dict[str, int] = field(default_factory=dict)
    incremental: bool = False
    metadata_location: str | None = None


def _columns(table: Table, names: Sequence[str] | None) -> tuple[tuple[int, str], ...]:
    schema = table.metadata.schema
    who = table.name or table.metadata_location
    if not names:
        return tuple((f.id, f.name) for f in schema.fields if sketchable(f))
    out = []
    for name in names:
        f = next((c for c in schema.fields if c.name == name), None)
        if f is None:
            f = next((c for c in schema.fields if c.name.lower() == name.lower()), None)
        if f is None:
            raise ValidationError(f"{who}: ANALYZE: no column {name!r}")
        if not sketchable(f):
            raise ValidationError(
                f"{who}: ANALYZE: column {f.name} has type {f.type}, which has no distinct-count sketch"
            )
        if (f.id, f.name) not in out:
            out.append((f.id, f.name))
    return tuple(out)


def _incremental_base(
    table: Table, snap: Snapshot, columns: Sequence[tuple[int, str]]
) -> StatisticsFile | None:
    """The statistics file a run on `snap` may extend: the newest on an ancestor reached from
    `snap` through appends only, holding a theta sketch of at least one chosen column."""
    md = table.metadata
    by_snapshot = {s.snapshot_id: s for s in md.statistics}
    wanted = {fid for fid, _ in columns}
    for s in md.ancestors_of(snap.snapshot_id):
        stats = by_snapshot.get(s.snapshot_id)
        if stats is not None and s.snapshot_id != snap.snapshot_id:
            held = {b.fields[0] for b in stats.blob_metadata if b.type == THETA_BLOB and len(b.fields) == 1}
            return stats if held & wanted else None
        if s.operation != "append":
            return None
    return None


def plan_analyze(
    table: Table, columns: Sequence[str] | None = None, *, incremental: bool = True
) -> AnalyzePlan:
    """Plan ANALYZE of the current snapshot's `columns` (default: every sketchable column)."""
    md = table.metadata
    who = table.name or table.metadata_location
    snap = md.current_snapshot()
    if snap is None:
        raise ValidationError(f"{who}: ANALYZE needs a snapshot; the table has none")
    chosen = _columns(table, columns)
    base = _incremental_base(table, snap, chosen) if incremental else None
    state = live_state(table, snap)
    files = sorted(state.files)
    reused: tuple[int, ...] = ()
    if base is not None:
        seq = md.snapshot_by_id(base.snapshot_id)
        assert seq is not None
        files = sorted(p for p, lf in state.files.items() if lf.data_sequence_number > seq.sequence_number)
        held = {b.fields[0] for b in base.blob_metadata if b.type == THETA_BLOB and len(b.fields) == 1}
        reused = tuple(fid for fid, _ in chosen if fid in held)
    digest = hashlib.sha256(
        repr(
            (table.metadata_location, snap.snapshot_id, chosen, files, base and base.statistics_path)
        ).encode()
    ).hexdigest()[:16]
    return AnalyzePlan(digest, snap.snapshot_id, snap.sequence_number, chosen, tuple(files), base, reused)


def _value_bytes(type_name: str, t: Any, column: pa.ChunkedArray) -> list[bytes]:
    """Each (distinct, non-null) value of `column` as its Iceberg single-value bytes."""
    if type_name in _FIXED_WIDTH:
        arrow, dtype = _FIXED_WIDTH[type_name]
        values = column.cast(arrow).to_numpy().astype(dtype)
        raw = values.tobytes()
        width = np.dtype(dtype).itemsize
        return [raw[i : i + width] for i in range(0, len(raw), width)]
    if type_name == "uuid":
        import uuid as uuid_mod

        return [uuid_mod.UUID(str(v)).bytes for v in column.to_pylist()]
    return [to_bytes(t, v) for v in column.to_pylist()]


def _sketches(
    con: duckdb.DuckDBPyConnection, table: Table, state: TableState, plan: AnalyzePlan
) -> dict[int, bytes]:
    """The theta sketch of each planned column over the live rows of the plan's files."""
    schema = table.metadata.schema
    out: dict[int, bytes] = {}
    if not plan.files:
        return {fid: sketch_from_hashes(()) for fid, _ in plan.columns}
    sql, registered = live_rows_sql(con, state, schema, list(plan.files), lineage=False)
    try:
        for fid, name in plan.columns:
            f = schema.find_field(fid)
            assert f is not None
            col = quote_ident(name)
            distinct = con.sql(f"SELECT DISTINCT {col} FROM ({sql}) WHERE {col} IS NOT NULL").arrow()
            column = distinct.column(0) if isinstance(distinct, pa.Table) else distinct.read_all().column(0)
            values = _value_bytes(f.type.name, f.type, column)
            out[fid] = sketch_from_hashes(value_hash(v) for v in values)
    finally:
        unregister(con, registered)
    return out


class SetStatisticsChange(Change):
    """Register a statistics file (and a partition statistics file) on their snapshot (the snapshot
    must still be in the table)."""

    operation = "set-statistics"

    def __init__(
        self, statistics: StatisticsFile, partition_statistics: PartitionStatisticsFile | None = None
    ) -> None:
        self.statistics = statistics
        self.partition_statistics = partition_statistics

    def apply(self, current: Table, attempt: int) -> Attempt:
        md = current.metadata
        if md.snapshot_by_id(self.statistics.snapshot_id) is None:
            raise CommitConflictError(
                f"{current.name or current.metadata_location}: snapshot {self.statistics.snapshot_id} was "
                "removed before its statistics were committed"
            )
        updates: list[Any] = [SetStatistics(self.statistics)]
        if self.partition_statistics is not None:
            updates.append(SetPartitionStatistics(self.partition_statistics))
        return Attempt(updates, requirements_for(md, updates))


def execute_analyze(
    load: Callable[[], Table],
    commit: Callable[[Change, Table], Any],
    plan: AnalyzePlan,
    *,
    created_by: str | None = None,
) -> AnalyzeResult:
    """Compute the planned sketches, write the Puffin file and register it on the snapshot."""
    table = load()
    md = table.metadata
    snap = md.snapshot_by_id(plan.snapshot_id)
    who = table.name or table.metadata_location
    if snap is None:
        raise ValidationError(f"{who}: ANALYZE: snapshot {plan.snapshot_id} is no longer in the table")
    state = live_state(table, snap)
    con = duckdb.connect()
    try:
        prepare_connection(con, table.io)
        sketches = _sketches(con, table, state, plan)
    finally:
        con.close()
    if plan.base is not None and plan.reused:
        base_path = plan.base.statistics_path
        raw = table.io.read(base_path)
        for blob in read_footer(raw, path=base_path).blobs:
            if blob.type == THETA_BLOB and len(blob.fields) == 1 and blob.fields[0] in plan.reused:
                old = read_blob(raw, blob, path=base_path)
                sketches[blob.fields[0]] = union([old, sketches[blob.fields[0]]])
    writer = PuffinWriter(properties={PROPERTY_CREATED_BY: created_by or f"iceduck version {__version__}"})
    result = AnalyzeResult(incremental=plan.base is not None)
    for fid, name in plan.columns:
        ndv = ndv_property(sketches[fid])
        writer.add_blob(
            THETA_BLOB, sketches[fid], fields=[fid], snapshot_id=snap.snapshot_id,
            sequence_number=snap.sequence_number, properties={"ndv": ndv},
        )  # fmt: skip
        result.ndv[name] = int(ndv)
    # the snapshot's earlier sketches of other columns stay (set-statistics replaces the whole file)
    chosen = {fid for fid, _ in plan.columns}
    earlier = next((x for x in md.statistics if x.snapshot_id == snap.snapshot_id), None)
    if earlier is not None:
        raw = table.io.read(earlier.statistics_path)
        for blob in read_footer(raw, path=earlier.statistics_path).blobs:
            if (
                blob.type == THETA_BLOB
                and blob.snapshot_id == snap.snapshot_id
                and not set(blob.fields) & chosen
            ):
                writer.add_blob(
                    blob.type, read_blob(raw, blob, path=earlier.statistics_path), fields=blob.fields,
                    snapshot_id=blob.snapshot_id, sequence_number=blob.sequence_number,
                    properties=dict(blob.properties),
                )  # fmt: skip
    data = writer.finish()
    path = f"{md.location.rstrip('/')}/metadata/{snap.snapshot_id}-{uuid.uuid4()}.stats"
    table.io.write_new(path, data)
    stats = StatisticsFile(
        snap.snapshot_id, path, len(data), writer.footer_size, None,
        tuple(
            BlobMetadata(b.type, b.snapshot_id, b.sequence_number, tuple(b.fields), dict(b.properties))
            for b in writer.blobs
        ),
    )  # fmt: skip
    written = [path]
    partition_stats = None
    if any(not spec.is_unpartitioned for spec in md.partition_specs):
        pdata = partition_stats_bytes(table, snap)
        ppath = (
            f"{md.location.rstrip('/')}/metadata/partition-stats-{snap.snapshot_id}-{uuid.uuid4()}.parquet"
        )
        table.io.write_new(ppath, pdata)
        written.append(ppath)
        partition_stats = PartitionStatisticsFile(snap.snapshot_id, ppath, len(pdata))
    try:
        committed = commit(SetStatisticsChange(stats, partition_stats), table)
    except BaseException:
        for p in written:
            table.io.delete(p)
        raise
    result.statistics = stats
    result.partition_statistics = partition_stats
    result.metadata_location = getattr(committed, "metadata_location", None)
    return result
