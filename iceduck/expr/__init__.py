"""Row filters: expressions, binding to a schema, and evaluators used to prune a scan.

```python
from iceduck.expr import bind, equal, greater_than, is_null
p = greater_than("id", 10) & ~is_null("name")
bound = bind(p, table.metadata.schema)        # names -> field ids, values -> internal form
```
"""

from __future__ import annotations

from iceduck.expr.binding import bind, bind_term, is_exact, rewrite_not, to_internal
from iceduck.expr.expressions import (
    FALSE,
    TRUE,
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundReference,
    Comparison,
    Not,
    Or,
    Predicate,
    Reference,
    SetPredicate,
    Unary,
    and_,
    between,
    compare,
    equal,
    greater_than,
    greater_than_or_equal,
    in_,
    is_null,
    leaves,
    less_than,
    less_than_or_equal,
    not_,
    not_equal,
    not_in,
    not_null,
    or_,
    ref,
)
from iceduck.expr.visitors import (
    MetricsEvaluator,
    PartitionEvaluator,
    SummaryEvaluator,
    evaluate,
    evaluate3,
    project,
)

__all__ = [
    "FALSE",
    "TRUE",
    "AlwaysFalse",
    "AlwaysTrue",
    "And",
    "BoundReference",
    "Comparison",
    "MetricsEvaluator",
    "Not",
    "Or",
    "PartitionEvaluator",
    "Predicate",
    "Reference",
    "SetPredicate",
    "SummaryEvaluator",
    "Unary",
    "and_",
    "between",
    "bind",
    "bind_term",
    "compare",
    "equal",
    "evaluate",
    "evaluate3",
    "greater_than",
    "greater_than_or_equal",
    "in_",
    "is_exact",
    "is_null",
    "leaves",
    "less_than",
    "less_than_or_equal",
    "not_",
    "not_equal",
    "not_in",
    "not_null",
    "or_",
    "project",
    "ref",
    "rewrite_not",
    "to_internal",
]
