"""A query as DuckDB's own parser reads it (`json_serialize_sql`), changed as a tree, and back to SQL.

The front door reads a statement's table references from this tree, never from its tokens: every
`FROM`/`JOIN` item, subquery, CTE, set operation, PIVOT and table-function argument is where
DuckDB's grammar puts it, quoted names are plain strings (`s."a.c"` is the two parts `s`, `a.c`)
and a CTE is known by the node that defines it. A rewrite replaces nodes (a lake view by the twin
macro that prunes, a user's view by its query as a subquery) and `json_deserialize_sql` renders
the tree as SQL again.

DuckDB 2.0.1 serialises queries only ("Only SELECT statements can be serialized"): the query of
an `INSERT ... <query>` or `CREATE TABLE ... AS <query>` is serialised alone and the statement's
head is kept as written. Nodes made here are copies of nodes DuckDB made for a small text (the
deserialiser wants every field), so their shape is always the one this DuckDB writes.

Cost (measured on the shared machine): ~0.5 ms to serialise a short query and ~0.35 ms to render
it, so only statements that name something of the lake's are parsed (`Router._pruned` checks
their words first).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb

Node = dict[str, Any]

BASE_TABLE = "BASE_TABLE"
TABLE_FUNCTION = "TABLE_FUNCTION"
SUBQUERY = "SUBQUERY"


def parse_query(con: duckdb.DuckDBPyConnection, text: str) -> Node | None:
    """The query node of `text` (one SELECT statement: SELECT, WITH, FROM, VALUES, TABLE, set
    operations), or None for anything else and for text DuckDB's parser refuses."""
    try:
        rows = con.execute("SELECT json_serialize_sql(?)", [text]).fetchall()
    except duckdb.Error:
        return None
    if not rows or rows[0][0] is None:
        return None
    found = json.loads(rows[0][0])
    statements = found.get("statements") or []
    if found.get("error") or len(statements) != 1:
        return None
    node: Node = statements[0]["node"]
    return node


def render(con: duckdb.DuckDBPyConnection, node: Node) -> str:
    """The SQL of a query node (DuckDB's own rendering of its parse tree)."""
    tree = {"error": False, "statements": [{"node": node, "named_param_map": []}]}
    rows = con.execute("SELECT json_deserialize_sql(CAST(? AS JSON))", [json.dumps(tree)]).fetchall()
    return str(rows[0][0])


def copy_tree(node: Node) -> Node:
    """A deep copy of a tree (JSON values only: several times faster than `copy.deepcopy`)."""
    copied: Node = json.loads(json.dumps(node))
    return copied


@dataclass(frozen=True, slots=True)
class TableRef:
    """A table reference of the tree: a `BASE_TABLE` (a name) or `TABLE_FUNCTION` node, where it
    sits (`holder[key]`, so it can be replaced) and the lowercase names of the CTEs in scope there."""

    holder: Any  # the dict or list holding the node
    key: Any
    node: Node
    ctes: frozenset[str]

    @property
    def kind(self) -> str:
        return str(self.node["type"])

    @property
    def parts(self) -> tuple[str, ...]:
        """The name of a BASE_TABLE as written (`catalog`, `schema`, `table`; quotes removed)."""
        return tuple(str(x) for x in self.node["qualified_name"]["path"])

    @property
    def function(self) -> str:
        """The lowercase name of a TABLE_FUNCTION's function ("" when qualified by a schema)."""
        f = self.node.get("function") or {}
        if f.get("class") != "FUNCTION" or f.get("schema") or f.get("catalog"):
            return ""
        return str(f.get("function_name", "")).lower()

    @property
    def is_cte(self) -> bool:
        """Whether a BASE_TABLE names a CTE in scope (one part: CTEs shadow every other relation)."""
        parts = self.parts
        return len(parts) == 1 and parts[0].lower() in self.ctes

    def replace(self, node: Node) -> None:
        self.holder[self.key] = node


def table_refs(root: Node, ctes: frozenset[str] = frozenset()) -> Iterator[TableRef]:
    """Every BASE_TABLE and TABLE_FUNCTION reference under `root`, at any depth (subqueries in
    expressions, CTEs, set operations, joins, function arguments), in document order. A node with a
    `cte_map` puts its CTEs in scope for everything under it (its CTE bodies too: a recursive CTE
    names itself; a CTE naming a later one of the same WITH is refused by DuckDB anyway)."""
    stack: list[tuple[Any, Any, Any, frozenset[str]]] = [(None, None, root, ctes)]
    while stack:
        holder, key, value, scope = stack.pop()
        if isinstance(value, list):
            stack.extend((value, i, v, scope) for i, v in reversed(list(enumerate(value))) if isinstance(v, dict | list))
            continue
        if not isinstance(value, dict):
            continue
        cte_map = value.get("cte_map")
        if isinstance(cte_map, dict) and cte_map.get("map"):
            scope = scope | {str(entry["key"]).lower() for entry in cte_map["map"]}
        kind = value.get("type")
        if (kind == BASE_TABLE and "qualified_name" in value) or (kind == TABLE_FUNCTION and "function" in value):
            yield TableRef(holder, key, value, scope)
        stack.extend(
            (value, k, v, scope) for k, v in reversed(list(value.items())) if isinstance(v, dict | list)
        )


def nodes(root: Any) -> Iterator[Node]:
    """Every object of the tree under `root` (itself included), at any depth, in no promised order:
    the one walk the questions below ask their question of."""
    stack: list[Any] = [root]
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            stack.extend(v for v in value if isinstance(v, dict | list))
        elif isinstance(value, dict):
            yield value
            stack.extend(v for v in value.values() if isinstance(v, dict | list))


def qualified_names(root: Node) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(node type, name parts) of every name the tree looks up: tables, functions, types."""
    for value in nodes(root):
        qualified = value.get("qualified_name")
        if isinstance(qualified, dict) and qualified.get("path"):
            yield str(value.get("type")), tuple(str(x) for x in qualified["path"])


def has_class(root: Node, cls: str) -> bool:
    """Whether an expression of class `cls` (e.g. COLLATE) stands anywhere in the tree."""
    return any(value.get("class") == cls for value in nodes(root))


def describes(root: Node) -> bool:
    """Whether the query is `DESCRIBE` / `SUMMARIZE` of a query or name (its tree holds that query)."""
    ref = root.get("from_table")
    return isinstance(ref, dict) and ref.get("type") == "SHOW_REF" and ref.get("show_type") in ("DESCRIBE", "SUMMARY")


def has_filter(root: Node) -> bool:
    """Whether anything in the tree can push a predicate into a table reference: a WHERE, HAVING or
    QUALIFY clause, or a join (its ON / USING)."""
    return any(
        value.get("type") == "JOIN" or any(value.get(k) for k in ("where_clause", "having", "qualify"))
        for value in nodes(root)
    )


# -- nodes made here: copies of what DuckDB makes for a small text ---------------------------------

_TEMPLATES: dict[str, Node] = {}


def _template(con: duckdb.DuckDBPyConnection, text: str) -> Node:
    found = _TEMPLATES.get(text)
    if found is None:
        node = parse_query(con, text)
        if node is None:  # pragma: no cover - the texts below are fixed and parse
            raise ValueError(f"DuckDB did not parse {text!r}")
        _TEMPLATES[text] = found = node
    return copy_tree(found)


def constant(con: duckdb.DuckDBPyConnection, value: str) -> Node:
    """A string constant expression."""
    node: Node = _template(con, "SELECT 'x'")["select_list"][0]
    node["literal"]["text"] = value
    return node


def call_ref(con: duckdb.DuckDBPyConnection, name: str, arguments: list[Node], like: Node) -> Node:
    """A TABLE_FUNCTION reference calling `name(arguments...)` (each an expression node) with the
    alias, column aliases and sample of the reference `like`."""
    node: Node = _template(con, "SELECT * FROM f()")["from_table"]
    function = node["function"]
    function["function_name"] = name
    function["qualified_name"]["path"] = [name]
    function["arguments"] = [{"name": "", "expression": a} for a in arguments]
    _carry(node, like)
    return node


def with_first_argument(con: duckdb.DuckDBPyConnection, ref: Node, name: str, first: str) -> Node:
    """A copy of the TABLE_FUNCTION reference `ref` calling `name` with the string `first` put
    before its arguments."""
    node = copy_tree(ref)
    function = node["function"]
    function["function_name"] = name
    function["qualified_name"]["path"] = [name]
    function["arguments"] = [{"name": "", "expression": constant(con, first)}, *function["arguments"]]
    return node


def subquery_ref(con: duckdb.DuckDBPyConnection, query: Node, alias: str, columns: list[str], like: Node) -> Node:
    """A subquery reference `(query) AS alias(columns)` with the sample of the reference `like`."""
    node: Node = _template(con, "SELECT * FROM (SELECT 1) AS a")["from_table"]
    node["subquery"]["node"] = query
    node["alias"] = alias
    node["column_name_alias"] = list(columns)
    node["sample"] = like.get("sample")
    return node


def parsed_ref(con: duckdb.DuckDBPyConnection, text: str, like: Node) -> Node | None:
    """The table reference DuckDB parses from `text` (`query(...)`), with the alias, column aliases
    and sample of `like`; None when it does not parse as one."""
    node = parse_query(con, f"SELECT * FROM {text}")
    if node is None or node.get("type") != "SELECT_NODE":
        return None
    found: Node = node["from_table"]
    _carry(found, like)
    return found


def replace_with(con: duckdb.DuckDBPyConnection, ref: TableRef, name: str, like: Node) -> None:
    """Replace the reference `ref` by one to the table `name` (SQL text), under `like`'s alias."""
    node = parsed_ref(con, name, like)
    if node is None:
        raise ValueError(f"not a table name: {name}")
    ref.replace(node)


def render_ref(con: duckdb.DuckDBPyConnection, ref: Node) -> str:
    """`SELECT * FROM <ref>` as SQL (the reference alone, its alias dropped)."""
    node = copy_tree(_template(con, "SELECT * FROM x"))
    node["from_table"] = {**copy_tree(ref), "alias": ""}
    return render(con, node)


def _carry(node: Node, like: Node) -> None:
    node["alias"] = like.get("alias", "")
    node["column_name_alias"] = list(like.get("column_name_alias") or [])
    node["sample"] = like.get("sample")


def literal_arguments(ref: Node) -> bool:
    """Whether every argument of a TABLE_FUNCTION reference is a literal (`'t'`, `snapshot_id := 3`,
    `-1`, `true`, `NULL`): no parameter, expression, cast or typed literal."""
    arguments = (ref.get("function") or {}).get("arguments") or []
    return all((a.get("expression") or {}).get("class") == "CONSTANT" for a in arguments)


def with_prefix_ranges(con: duckdb.DuckDBPyConnection, root: Node) -> Node:
    """A copy of the tree with each `column LIKE 'prefix...'` as `(column LIKE 'prefix...' AND
    CAST(column AS VARCHAR) >= 'prefix' AND CAST(column AS VARCHAR) < 'prefiy')`: implied by the
    LIKE under byte-wise string order, so the same rows, but DuckDB offers comparisons to scans and
    never LIKE. Only for planning the capture: the cast keeps non-text columns out (a cast is never
    pushed; for text columns DuckDB drops it). Unchanged when the tree has a COLLATE."""
    if has_class(root, "COLLATE") or not _has_like(root):
        return root
    out = copy_tree(root)
    stack: list[tuple[Any, Any, Any]] = [(None, None, out)]
    while stack:
        holder, key, value = stack.pop()
        if isinstance(value, list):
            stack.extend((value, i, v) for i, v in enumerate(value) if isinstance(v, dict | list))
            continue
        if not isinstance(value, dict):
            continue
        ranged = _prefix_ranges(con, value)
        if ranged is not None and holder is not None:
            holder[key] = ranged
            continue
        stack.extend((value, k, v) for k, v in value.items() if isinstance(v, dict | list))
    return out


def _has_like(root: Node) -> bool:
    return any(value.get("function_name") == "~~" for value in nodes(root))


def _prefix_ranges(con: duckdb.DuckDBPyConnection, node: Node) -> Node | None:
    if node.get("class") != "FUNCTION" or node.get("function_name") != "~~" or not node.get("is_operator"):
        return None
    arguments = node.get("arguments") or []
    if len(arguments) != 2:
        return None
    column, pattern = arguments[0]["expression"], arguments[1]["expression"]
    if column.get("class") != "COLUMN_REF" or pattern.get("class") != "CONSTANT":
        return None
    if pattern["literal"].get("kind") != "STRING":
        return None
    text = str(pattern["literal"]["text"])
    # up to the first wildcard, or a backslash (an escape under some settings: not a literal then)
    cut = min((k for k in map(text.find, ("%", "_", "\\")) if k >= 0), default=len(text))
    prefix = text[:cut]
    if not prefix:
        return None
    following = _next_char(prefix[-1])
    shape = "SELECT (x ~~ 'p' AND CAST(x AS VARCHAR) >= 'p'" + (" AND CAST(x AS VARCHAR) < 'q')" if following else ")")
    ranged: Node = _template(con, shape)["select_list"][0]
    like, low, *high = ranged["children"]
    ranged["alias"], node["alias"] = node.get("alias", ""), ""
    ranged["children"][0] = node
    low["left"]["child"] = copy_tree(column)
    low["right"]["literal"]["text"] = prefix
    if following is not None:
        high[0]["left"]["child"] = copy_tree(column)
        high[0]["right"]["literal"]["text"] = prefix[:-1] + following
    del like
    return ranged


def _next_char(c: str) -> str | None:
    """The character right after `c` in code point order (which is UTF-8 byte order), None at the end."""
    n = ord(c) + 1
    if 0xD800 <= n <= 0xDFFF:
        n = 0xE000
    return chr(n) if n <= 0x10FFFF else None
