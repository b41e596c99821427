"""The filters DuckDB pushes into a scan, as `iceduck.expr` predicates (for pruning).

`hooks.py` mirrors DuckDB's private predicate nodes as `FilterNode`s; this module gives them their
meaning: AND/OR, comparisons of a column with a constant, NOT, IS [NOT] NULL and IN lists of
constants. Anything else translates to None, and the scan declines that filter (DuckDB then applies
it itself), so a translated predicate is always implied by the query's filter.
"""

from __future__ import annotations

from typing import Any

import iceduck.expr as ex
from iceduck.duckdb.hooks import Binary, Column, Constant, FilterNode, InList, Unary
from iceduck.expr.expressions import SQL_OPERATORS


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
