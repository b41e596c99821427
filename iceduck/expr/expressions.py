"""Row filters as immutable values: references, literals and boolean predicates.

A predicate is built *unbound* (columns named by their path, values as plain Python objects such as
`datetime.date` or `Decimal`) and then bound to a schema (`iceduck.expr.binding.bind`), which resolves
names to field ids and converts values to the internal representation of the column's type
(docs/architecture.md). Leaf operations use the names of `iceduck.spec.transforms.Operation`, so a
bound leaf can be projected through a partition transform directly.

Semantics follow SQL as DuckDB evaluates it (three-valued logic: a row is selected only when the
predicate is TRUE; NULL compares as unknown). Floating-point NaN follows DuckDB too: NaN equals NaN
and sorts above every other value, so `x > 1` selects NaN rows. Evaluators that decide whether a file
*might* hold matching rows must stay conservative under these rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from iceduck.spec.transforms import Operation
from iceduck.spec.types import IcebergType

# Comparison operations taking one literal, and their negations / mirror images.
COMPARISONS = frozenset(
    {Operation.LT, Operation.LT_EQ, Operation.GT, Operation.GT_EQ, Operation.EQ, Operation.NOT_EQ}
)
UNARY = frozenset({Operation.IS_NULL, Operation.NOT_NULL, Operation.IS_NAN, Operation.NOT_NAN})
SETS = frozenset({Operation.IN, Operation.NOT_IN})
PREFIX = frozenset({Operation.STARTS_WITH, Operation.NOT_STARTS_WITH})

NEGATED: dict[Operation, Operation] = {
    Operation.LT: Operation.GT_EQ,
    Operation.LT_EQ: Operation.GT,
    Operation.GT: Operation.LT_EQ,
    Operation.GT_EQ: Operation.LT,
    Operation.EQ: Operation.NOT_EQ,
    Operation.NOT_EQ: Operation.EQ,
    Operation.IS_NULL: Operation.NOT_NULL,
    Operation.NOT_NULL: Operation.IS_NULL,
    Operation.IS_NAN: Operation.NOT_NAN,
    Operation.NOT_NAN: Operation.IS_NAN,
    Operation.IN: Operation.NOT_IN,
    Operation.NOT_IN: Operation.IN,
    Operation.STARTS_WITH: Operation.NOT_STARTS_WITH,
    Operation.NOT_STARTS_WITH: Operation.STARTS_WITH,
}

SQL_OPERATORS: dict[str, Operation] = {
    "=": Operation.EQ,
    "==": Operation.EQ,
    "!=": Operation.NOT_EQ,
    "<>": Operation.NOT_EQ,
    "<": Operation.LT,
    "<=": Operation.LT_EQ,
    ">": Operation.GT,
    ">=": Operation.GT_EQ,
}


# ---------------------------------------------------------------------------------------------
# Terms
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reference:
    """An unbound column: its path (`("address", "city")` for a struct field)."""

    path: tuple[str, ...]

    def __str__(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True, slots=True)
class BoundReference:
    """A column of a schema: field id, dotted name and type."""

    field_id: int
    name: str
    type: IcebergType

    def __str__(self) -> str:
        return self.name


Term = Reference | BoundReference


def ref(name: str | tuple[str, ...]) -> Reference:
    """A reference by dotted name (`"a.b"`) or by path tuple (for names holding dots)."""
    return Reference(tuple(name.split(".")) if isinstance(name, str) else tuple(name))


# ---------------------------------------------------------------------------------------------
# Predicates
# ---------------------------------------------------------------------------------------------


class Predicate:
    """Base class of every predicate."""

    __slots__ = ()

    def __and__(self, other: Predicate) -> Predicate:
        return and_(self, other)

    def __or__(self, other: Predicate) -> Predicate:
        return or_(self, other)

    def __invert__(self) -> Predicate:
        return not_(self)


@dataclass(frozen=True, slots=True)
class AlwaysTrue(Predicate):
    """Selects every row."""

    def __str__(self) -> str:
        return "true"


@dataclass(frozen=True, slots=True)
class AlwaysFalse(Predicate):
    """Selects no row."""

    def __str__(self) -> str:
        return "false"


TRUE = AlwaysTrue()
FALSE = AlwaysFalse()


@dataclass(frozen=True, slots=True)
class And(Predicate):
    left: Predicate
    right: Predicate

    def __str__(self) -> str:
        return f"({self.left} AND {self.right})"


@dataclass(frozen=True, slots=True)
class Or(Predicate):
    left: Predicate
    right: Predicate

    def __str__(self) -> str:
        return f"({self.left} OR {self.right})"


@dataclass(frozen=True, slots=True)
class Not(Predicate):
    child: Predicate

    def __str__(self) -> str:
        return f"(NOT {self.child})"


@dataclass(frozen=True, slots=True)
class Unary(Predicate):
    """`term IS NULL`, `IS NOT NULL`, `isnan(term)`, `NOT isnan(term)`."""

    op: Operation
    term: Term

    def __str__(self) -> str:
        return f"{self.op.value}({self.term})"


@dataclass(frozen=True, slots=True)
class Comparison(Predicate):
    """`term <op> value` for = != < <= > >= and starts_with / not_starts_with."""

    op: Operation
    term: Term
    value: Any

    def __str__(self) -> str:
        return f"{self.op.value}({self.term}, {self.value!r})"


@dataclass(frozen=True, slots=True)
class SetPredicate(Predicate):
    """`term IN (values)` or `term NOT IN (values)`; values never hold None."""

    op: Operation
    term: Term
    values: frozenset[Any]

    def __str__(self) -> str:
        shown = ", ".join(sorted(repr(v) for v in self.values))
        return f"{self.op.value}({self.term}, {{{shown}}})"


Leaf = Unary | Comparison | SetPredicate


# ---------------------------------------------------------------------------------------------
# Constructors (with the obvious simplifications)
# ---------------------------------------------------------------------------------------------


def and_(*predicates: Predicate) -> Predicate:
    """The conjunction; TRUE operands vanish, a FALSE operand makes it FALSE."""
    out: Predicate = TRUE
    for p in predicates:
        if isinstance(p, AlwaysFalse) or isinstance(out, AlwaysFalse):
            return FALSE
        if isinstance(p, AlwaysTrue):
            continue
        out = p if isinstance(out, AlwaysTrue) else And(out, p)
    return out


def or_(*predicates: Predicate) -> Predicate:
    """The disjunction; FALSE operands vanish, a TRUE operand makes it TRUE."""
    out: Predicate = FALSE
    for p in predicates:
        if isinstance(p, AlwaysTrue) or isinstance(out, AlwaysTrue):
            return TRUE
        if isinstance(p, AlwaysFalse):
            continue
        out = p if isinstance(out, AlwaysFalse) else Or(out, p)
    return out


def not_(p: Predicate) -> Predicate:
    """The negation; constants and double negations fold."""
    if isinstance(p, AlwaysTrue):
        return FALSE
    if isinstance(p, AlwaysFalse):
        return TRUE
    if isinstance(p, Not):
        return p.child
    return Not(p)


def _term(term: Term | str) -> Term:
    return ref(term) if isinstance(term, str) else term


def compare(op: Operation | str, term: Term | str, value: Any) -> Predicate:
    """`term <op> value`; op is an Operation or a SQL operator (`=`, `<>`, `<=`, ...)."""
    operation = SQL_OPERATORS[op] if isinstance(op, str) and op in SQL_OPERATORS else Operation(op)
    if operation in SETS:
        return in_(term, value) if operation == Operation.IN else not_in(term, value)
    if operation in UNARY:
        return Unary(operation, _term(term))
    if value is None:
        return FALSE  # a comparison with NULL is never TRUE
    return Comparison(operation, _term(term), value)


def equal(term: Term | str, value: Any) -> Predicate:
    return compare(Operation.EQ, term, value)


def not_equal(term: Term | str, value: Any) -> Predicate:
    return compare(Operation.NOT_EQ, term, value)


def less_than(term: Term | str, value: Any) -> Predicate:
    return compare(Operation.LT, term, value)


def less_than_or_equal(term: Term | str, value: Any) -> Predicate:
    return compare(Operation.LT_EQ, term, value)


def greater_than(term: Term | str, value: Any) -> Predicate:
    return compare(Operation.GT, term, value)


def greater_than_or_equal(term: Term | str, value: Any) -> Predicate:
    return compare(Operation.GT_EQ, term, value)


def between(term: Term | str, low: Any, high: Any) -> Predicate:
    return and_(greater_than_or_equal(term, low), less_than_or_equal(term, high))


def is_null(term: Term | str) -> Predicate:
    return Unary(Operation.IS_NULL, _term(term))


def not_null(term: Term | str) -> Predicate:
    return Unary(Operation.NOT_NULL, _term(term))


def in_(term: Term | str, values: Iterable[Any]) -> Predicate:
    """`term IN (values)`: NULL candidates never match, so they are dropped; an empty set is FALSE."""
    kept = frozenset(v for v in values if v is not None)
    if not kept:
        return FALSE
    return SetPredicate(Operation.IN, _term(term), kept)


def not_in(term: Term | str, values: Iterable[Any]) -> Predicate:
    """`term NOT IN (values)`. A NULL candidate makes SQL's NOT IN never TRUE: FALSE."""
    listed = list(values)
    if any(v is None for v in listed):
        return FALSE
    if not listed:
        return TRUE
    return SetPredicate(Operation.NOT_IN, _term(term), frozenset(listed))


def leaves(p: Predicate) -> list[Leaf]:
    """Every leaf predicate of `p`, depth first."""
    out: list[Leaf] = []
    stack = [p]
    while stack:
        node = stack.pop()
        if isinstance(node, And | Or):
            stack.extend((node.right, node.left))
        elif isinstance(node, Not):
            stack.append(node.child)
        elif isinstance(node, Unary | Comparison | SetPredicate):
            out.append(node)
    return out
