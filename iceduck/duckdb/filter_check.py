"""What `iceberg_scan(..., filter := '...')` accepts: an expression over the table's columns and
constants, nothing that reads other data or has side effects.

The text ends up inside `WHERE (...)` of the scan's SQL (and of the private query that reads the
predicates for pruning), so it is checked on DuckDB's own parse of exactly that context
(`json_serialize_sql`): the statement must still be one plain `SELECT ... FROM t WHERE (<text>)`
(a text that closes the parenthesis and adds a UNION, an ORDER BY or a second statement changes
that shape), and every node of the expression must be a column, a constant, an operator
(comparison, AND/OR/NOT, IN, BETWEEN, IS NULL, LIKE, CASE, CAST, COLLATE, lambdas) or a call of a
built-in scalar function that is not volatile. Refused: subqueries (hence table functions such as
`read_csv`), `*`, window functions, aggregates, prepared parameters, user-defined and volatile or
side-effecting functions (`nextval`, `setseed`, `random`, `write_log`, `sleep_ms`, ...).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import duckdb

from iceduck.duckdb.builtins import builtins
from iceduck.errors import ValidationError

_TABLE = "__iceduck_filter_table"
_ALLOWED_CLASSES = frozenset(
    {
        "COLUMN_REF", "CONSTANT", "COMPARISON", "CONJUNCTION", "OPERATOR", "BETWEEN", "CAST", "CASE",
        "COLLATE", "FUNCTION", "LAMBDA", "LAMBDA_REF", "TYPE",
    }
)  # fmt: skip
_WHAT = {
    "SUBQUERY": "a subquery",
    "STAR": "*",
    "WINDOW": "a window function",
    "PARAMETER": "a prepared parameter",
    "POSITIONAL_REFERENCE": "a positional reference",
    "DEFAULT": "DEFAULT",
}
# Process-wide on purpose: a private connection that only parses filter texts (no user state).
_LOCK = threading.Lock()
_CON: duckdb.DuckDBPyConnection | None = None


def _connection() -> tuple[duckdb.DuckDBPyConnection, frozenset[str]]:
    global _CON
    if _CON is None:
        _CON = duckdb.connect()
    return _CON, builtins().filter_scalars


def check_filter(text: str) -> None:
    """`ValidationError` (one line, quoting the filter) unless `text` is an expression over columns
    and constants with built-in, non-volatile scalar functions only (see the module docstring)."""
    sql = f"SELECT 1 FROM {_TABLE} WHERE ({text})"
    with _LOCK:
        con, scalars = _connection()
        raw = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [sql]).fetchone()
    doc: dict[str, Any] = json.loads(raw[0]) if raw is not None else {"error": True}
    if doc.get("error"):
        message = str(doc.get("error_message") or "it does not parse").splitlines()[0]
        raise ValidationError(f"invalid filter {text!r}: {message}")
    statements: list[Any] = list(doc.get("statements") or [])
    where = _where_clause(statements)
    if where is None:
        raise ValidationError(
            f"invalid filter {text!r}: a filter is one expression (it cannot close the WHERE clause and add "
            "clauses or statements)"
        )
    for node in _nodes(where):
        cls = node.get("class")
        if cls not in _ALLOWED_CLASSES:
            found = _WHAT.get(str(cls), str(cls).lower().replace("_", " "))
            raise ValidationError(
                f"invalid filter {text!r}: {found} is not allowed; a filter uses the table's columns, "
                "constants and built-in scalar functions only"
            )
        if cls == "FUNCTION":
            name = str(node.get("function_name", "")).lower()
            qualified = node.get("schema") or node.get("catalog")
            if qualified or name not in scalars:
                raise ValidationError(
                    f"invalid filter {text!r}: function {name}() is not allowed; a filter calls built-in scalar "
                    "functions without side effects only (no table, aggregate, volatile or user functions)"
                )


def _where_clause(statements: list[Any]) -> dict[str, Any] | None:
    """The WHERE expression if the parse is exactly `SELECT 1 FROM <table> WHERE (...)`, else None."""
    if len(statements) != 1:
        return None
    node = statements[0].get("node") or {}
    plain = (
        node.get("type") == "SELECT_NODE"
        and not node.get("modifiers")
        and not (node.get("cte_map") or {}).get("map")
        and len(node.get("select_list") or []) == 1
        and (node.get("from_table") or {}).get("type") == "BASE_TABLE"
        and (node.get("from_table") or {}).get("table_name") == _TABLE
        and not (node.get("group_expressions") or [])
        and not (node.get("group_sets") or [])
        and node.get("having") is None
        and node.get("qualify") is None
        and node.get("sample") is None
    )
    where = node.get("where_clause")
    return where if plain and isinstance(where, dict) else None


def _nodes(value: Any) -> Iterator[dict[str, Any]]:
    """Every expression node below `value` (dicts with a `class`), depth first."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "class" in item:
                yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
