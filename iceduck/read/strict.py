"""The files whose every row matches a DELETE's predicate: dropped whole, unread.

One rule, used by DELETE (`iceduck.transaction.row_level`) and by `EXPLAIN DELETE`
(`iceduck.sql.explain_write`), as Java's `ManifestFilterManager` decides it: a live data file
holds only matching rows when its partition satisfies the predicate's strict projection onto the
file's partition spec (`expr.visitors.project_strict`), or when its column metrics prove it
(`expr.visitors.StrictMetricsEvaluator`).

The predicate must be *exactly* the WHERE (`Lake.exact`: DuckDB's reading of it, not a pruning
superset), and bound as planning binds it: a leaf binding cannot hold exactly (a value with no
counterpart in the column's type becomes TRUE or FALSE there) gives up the proof for every file.
"""

from __future__ import annotations

from collections.abc import Callable

from iceduck.errors import ValidationError
from iceduck.expr import AlwaysFalse, AlwaysTrue, Predicate
from iceduck.expr.binding import bind, rewrite_not
from iceduck.expr.visitors import PartitionEvaluator, StrictMetricsEvaluator, project_strict
from iceduck.read.live import TableState
from iceduck.spec.types import Schema

Exact = Callable[[Schema], Predicate | None]


BY_PARTITION = "its partition proves every row matches"
BY_METRICS = "its column metrics prove every row matches"


def wholly_matching(state: TableState, schema: Schema, exact: Exact | None) -> frozenset[str]:
    """The recorded paths of the live data files of `state` whose every row matches the exact
    predicate (none without one): by the file's partition (strict projection) or its metrics."""
    return frozenset(wholly_matching_reasons(state, schema, exact))


def wholly_matching_reasons(state: TableState, schema: Schema, exact: Exact | None) -> dict[str, str]:
    """`wholly_matching` with the proof of each file (`BY_PARTITION` or `BY_METRICS`)."""
    predicate = None if exact is None else exact(schema)
    if predicate is None or not state.files:
        return {}
    try:
        bound = bind(predicate, schema)
    except ValidationError:
        return {}
    if _leaves(bound) != _leaves(rewrite_not(predicate)) or _constants(bound):
        return {}
    metrics = StrictMetricsEvaluator(bound, schema)
    partitions: dict[int, PartitionEvaluator | None] = {}
    md = state.table.metadata

    def by_partition(spec_id: int) -> PartitionEvaluator | None:
        if spec_id not in partitions:
            spec = md.spec_by_id(spec_id)
            evaluator = None
            if spec is not None and spec.fields:
                try:
                    projected = project_strict(bound, spec, schema)
                except ValidationError:  # a spec the current schema cannot type: no proof
                    projected = AlwaysFalse()
                if not isinstance(projected, AlwaysFalse):
                    evaluator = PartitionEvaluator(projected, spec)
            partitions[spec_id] = evaluator
        return partitions[spec_id]

    out: dict[str, str] = {}
    for path, lf in state.files.items():
        d = lf.file
        if d.record_count <= 0:
            continue
        evaluator = by_partition(d.spec_id)
        if evaluator is not None and evaluator.matches(d.partition):
            out[path] = BY_PARTITION
        elif metrics.all_match(d):
            out[path] = BY_METRICS
    return out


def _leaves(p: Predicate) -> int:
    children = [getattr(p, name) for name in ("left", "right", "child") if hasattr(p, name)]
    return sum(_leaves(c) for c in children) if children else 1


def _constants(p: Predicate) -> bool:
    """Whether a TRUE or FALSE stands in the predicate (where binding gave up a leaf's exactness)."""
    if isinstance(p, AlwaysTrue | AlwaysFalse):
        return True
    children = [getattr(p, name) for name in ("left", "right", "child") if hasattr(p, name)]
    return any(_constants(c) for c in children)
