"""The filters DuckDB pushes into a scan, as `iceduck.expr` predicates (for pruning).

`hooks.py` mirrors DuckDB's private predicate nodes as `FilterNode`s; this module gives them their
meaning: AND/OR, comparisons of a column with a constant, NOT, IS [NOT] NULL and IN lists of
constants. Anything else translates to None, and the scan declines that filter (DuckDB then applies
it itself), so a translated predicate is always implied by the query's filter.

`parse_filter` / `exact_filter` read a filter's text this way (bound by DuckDB against a scan's
columns, `capture_schema`); `only_columns` keeps what is about the table's own columns.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING, Any

import duckdb

import iceduck.expr as ex
from iceduck._lazy import LazyModule
from iceduck.duckdb import hooks
from iceduck.duckdb.hooks import Binary, Column, Constant, FilterNode, InList, Unary
from iceduck.errors import ValidationError
from iceduck.expr import TRUE, Predicate, and_
from iceduck.expr.binding import rewrite_not
from iceduck.expr.expressions import PREFIX, SQL_OPERATORS, Comparison, Reference, SetPredicate
from iceduck.expr.expressions import Unary as UnaryPredicate
from iceduck.expr.visitors import map_leaves
from iceduck.read.sql import ReadOptions, output_columns
from iceduck.read.types import arrow_type
from iceduck.spec.transforms import Operation
from iceduck.spec.types import UUID, Schema

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = LazyModule("pyarrow")


def predicate_from_filter(node: FilterNode) -> ex.Predicate | None:
    """The unbound predicate of a pushed filter, or None when it is not one iceduck prunes with."""
    if isinstance(node, Binary):
        if node.op in ("AND", "OR"):
            left, right = predicate_from_filter(node.left), predicate_from_filter(node.right)
            if left is None or right is None:
                return None
            return ex.and_(left, right) if node.op == "AND" else ex.or_(left, right)
        if node.op in SQL_OPERATORS and isinstance(node.left, Column) and isinstance(node.right, Constant):
            return ex.compare(node.op, ex.Reference(node.left.parts), node.right.value)
        return None
    if isinstance(node, Unary):
        if node.op == "NOT":
            child = predicate_from_filter(node.operand)
            return None if child is None else ex.not_(child)
        if isinstance(node.operand, Column):
            if node.op == "IS NULL":
                return ex.is_null(ex.Reference(node.operand.parts))
            if node.op == "IS NOT NULL":
                return ex.not_null(ex.Reference(node.operand.parts))
        return None
    if isinstance(node, InList) and isinstance(node.operand, Column):
        if not all(isinstance(v, Constant) for v in node.values):
            return None
        values: list[Any] = [v.value for v in node.values if isinstance(v, Constant)]
        return ex.in_(ex.Reference(node.operand.parts), values)
    return None


def capture_schema(schema: Schema, options: ReadOptions) -> pa.Schema:
    """The Arrow schema of a scan's output, for binding filter text the way DuckDB will.

    UUID columns are offered as VARCHAR: DuckDB pushes no filter at all into an Arrow UUID column,
    while `uuid = '<text>'` binds to the same comparison on text; `only_columns` keeps only what
    means the same on either type."""
    fields = [pa.field(f.name, pa.string() if f.type == UUID else arrow_type(f.type)) for f in schema.fields]
    extra = {
        "_file": pa.string(),
        "_pos": pa.int64(),
        "_row_id": pa.int64(),
        "_last_updated_sequence_number": pa.int64(),
    }
    names = {n for n, _ in output_columns(schema, options)}
    fields += [pa.field(n, t) for n, t in extra.items() if n in names]
    return pa.schema(fields)


@dataclasses.dataclass(frozen=True, slots=True)
class Columns:
    """A table's own top-level column names, and which of them are UUIDs (captured as text)."""

    names: frozenset[str]
    uuids: frozenset[str]


def columns_of(schema: Schema) -> Columns:
    return Columns(
        frozenset(f.name for f in schema.fields), frozenset(f.name for f in schema.fields if f.type == UUID)
    )


def only_columns(p: Predicate, top: Columns) -> Predicate:
    """`p` with leaves on other columns than the table's own (metadata columns) made TRUE, and
    leaves on UUID columns kept only where text and UUID semantics agree; NOTs are pushed down
    first, so the result is still implied by `p`."""

    def keep(leaf: UnaryPredicate | Comparison | SetPredicate) -> Predicate:
        term = leaf.term
        if not isinstance(term, Reference):
            return leaf
        if term.path[0] not in top.names:
            return TRUE
        if term.path[0] in top.uuids and not _same_as_uuid(leaf):
            return TRUE
        return leaf

    return map_leaves(rewrite_not(p), keep)


def _same_as_uuid(leaf: UnaryPredicate | Comparison | SetPredicate) -> bool:
    """Whether a leaf DuckDB bound on a UUID column offered as text holds as a UUID predicate.

    The text may have been a UUID literal (`uuid = '1571EFFB-...'`, cast to UUID) or a comparison
    of the column's text (`uuid::VARCHAR < '...'`): equality and IN imply UUID equality either way
    (the column's text is canonical); order and inequality agree only for canonical literals
    (lowercase, hyphenated), whose text order is the UUIDs' byte order."""
    if isinstance(leaf, UnaryPredicate):
        return True
    values = [leaf.value] if isinstance(leaf, Comparison) else list(leaf.values)
    try:
        parsed = [uuid.UUID(v) for v in values if isinstance(v, str)]
    except ValueError:
        return False
    if len(parsed) != len(values):
        return False
    if leaf.op in (Operation.EQ, Operation.IN):
        return True
    if leaf.op in PREFIX:
        return False
    return all(str(u) == v for u, v in zip(parsed, values, strict=True))


def parse_filter(
    text: str, schema: Schema, *, timezone: str | None = None, options: ReadOptions | None = None
) -> Predicate:
    """The pruning predicate (unbound) DuckDB derives from a SQL filter on a table's columns.

    Only conjuncts DuckDB would push into a scan survive; leaves on metadata columns become TRUE
    (after NOTs are pushed down, so the result is still implied by the filter).
    """
    options = options or ReadOptions()
    try:
        captured = hooks.capture_filter(
            capture_schema(schema, options), text, predicate_from_filter, timezone=timezone
        )
    except duckdb.Error as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        columns = ", ".join(f.name for f in schema.fields)
        raise ValidationError(f"invalid filter {text!r}: {first} (columns: {columns})") from None
    return only_columns(and_(*captured), columns_of(schema)) if captured else TRUE


def exact_filter(text: str, schema: Schema, *, timezone: str | None = None) -> Predicate | None:
    """The predicate (unbound) that is exactly the SQL filter on the table's columns: a row matches
    the filter if and only if it matches the predicate; None when DuckDB keeps some part of the
    filter to itself or a part is about other than the table's own columns (see `parse_filter`)."""
    try:
        captured = hooks.capture_exact_filter(
            capture_schema(schema, ReadOptions()), text, predicate_from_filter, timezone=timezone
        )
    except duckdb.Error:
        return None
    if not captured:
        return None
    whole = rewrite_not(and_(*captured))
    return whole if only_columns(whole, columns_of(schema)) == whole else None
