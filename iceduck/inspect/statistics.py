"""Table statistics (Puffin statistics files) as values: the distinct counts of a snapshot's columns.

The statistics a snapshot has are those registered on it or, failing that, on its nearest
ancestor that has some (the newest statistics of its history, as planners use them): each
`apache-datasketches-theta-v1` blob of one field gives that column's distinct count, from the
blob's `ndv` property (what Java, Trino and iceduck write), or, when a writer left it out, from the
sketch itself (the Puffin file is read then).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iceduck.errors import IcebergError
from iceduck.puffin import read_blob, read_footer
from iceduck.puffin.theta import THETA_BLOB, estimate
from iceduck.spec.snapshots import Snapshot, StatisticsFile
from iceduck.table import Table


@dataclass(frozen=True, slots=True)
class DistinctCounts:
    """The distinct count of each field id and the snapshot whose statistics give them."""

    snapshot_id: int | None = None
    statistics_path: str | None = None
    counts: dict[int, int] = field(default_factory=dict)


def statistics_for(table: Table, snapshot: Snapshot | None) -> StatisticsFile | None:
    """The statistics file of `snapshot`, else of its nearest ancestor that has one."""
    if snapshot is None or not table.metadata.statistics:
        return None
    by_snapshot = {s.snapshot_id: s for s in table.metadata.statistics}
    for s in table.metadata.ancestors_of(snapshot.snapshot_id):
        if s.snapshot_id in by_snapshot:
            return by_snapshot[s.snapshot_id]
    return None


def distinct_counts(table: Table, snapshot: Snapshot | None) -> DistinctCounts:
    """The distinct counts the newest statistics of `snapshot` hold (empty when it has none)."""
    stats = statistics_for(table, snapshot)
    if stats is None:
        return DistinctCounts()
    counts: dict[int, int] = {}
    missing = []
    for b in stats.blob_metadata:
        if b.type != THETA_BLOB or len(b.fields) != 1:
            continue
        ndv = b.properties.get("ndv")
        if ndv is not None and ndv.isdigit():
            counts[b.fields[0]] = int(ndv)
        else:
            missing.append(b.fields[0])
    if missing:
        path = table.resolve(stats.statistics_path)
        try:
            raw = table.io.read(path)
        except (OSError, IcebergError) as e:
            raise IcebergError(f"{stats.statistics_path}: statistics file cannot be read: {e}") from None
        for blob in read_footer(raw, path=stats.statistics_path).blobs:
            if blob.type == THETA_BLOB and len(blob.fields) == 1 and blob.fields[0] in missing:
                counts[blob.fields[0]] = int(estimate(read_blob(raw, blob, path=stats.statistics_path)))
    return DistinctCounts(stats.snapshot_id, stats.statistics_path, counts)
