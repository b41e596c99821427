"""The front door's reads: a query's lake references resolved and rewritten to prune, then run in DuckDB.

`ReadPlan.run` is where every statement the router leaves to DuckDB goes (and the query of an
INSERT or CREATE TABLE AS into a lake table). A statement whose words name nothing of the lake's
(its database, a namespace, a view's name, `iceberg_scan`) runs as written, never parsed. Any
other statement of a kind with a query (DuckDB's statement type: `sql/classify.py`) is read from
DuckDB's parse tree (`sql/parse_tree.py`, `sql/references.py`): `ns.t` the lake has and DuckDB
binds to nothing is renamed to its view, user views reading lake tables are inlined, and the lake
references are rewritten to plan with what DuckDB pushes into each
(`duckdb.capture.capture_statement`). What a first reading learnt is kept per text (and parameter
values) while DuckDB's catalog version stays where this reader last left it; what a query calls
(from its tree) decides whether its rewrite may be kept: a varying function (DuckDB's catalog says
which) is never planned, a function not DuckDB's own (a Python UDF can be registered anew without
moving the catalog version) is planned each time.
"""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import duckdb

from iceduck.duckdb.builtins import varies
from iceduck.duckdb.capture import capture_marker, capture_slots, capture_statement, keep_statement, scan_call
from iceduck.duckdb.catalog_views import VIEW_SQL_UDF, view_pruned_macro
from iceduck.duckdb.hooks import (
    CaptureSlots,
    Signature,
    catalog_version,
    lazy_select,
    relation_for,
    relation_signature,
)
from iceduck.duckdb.scan import SCAN, describing
from iceduck.sql import parse as p
from iceduck.sql.classify import (
    QUERY_TYPES,
    Classifier,
    Type,
    built_in_names,
    called,
    calls_varying,
    only_built_in,
    query_part,
)
from iceduck.sql.discovery import INTERNAL_PREFIX, hide_internal, lists_relations, users_error
from iceduck.sql.lake_names import LakeNames
from iceduck.sql.lake_views import LakeViews, mentions
from iceduck.sql.names import Session, UserView, search_path, view_query
from iceduck.sql.parse_tree import (
    Node,
    call_ref,
    constant,
    copy_tree,
    describes,
    has_filter,
    literal_arguments,
    parse_query,
    parsed_ref,
    render,
    with_first_argument,
    with_prefix_ranges,
)
from iceduck.sql.references import References
from iceduck.sql.tokens import IDENT, WORD, SqlSyntaxError, Token, closing, split_arguments, tokenize

# Statements whose rewritten text the front door keeps per connection.
_PLANNED_STATEMENTS = 128
# what `ReadPlan._signatures` holds for a text seen once, and for one whose relation is always bound
_SEEN_ONCE: Signature = object()
_NOT_AGAIN: Signature = object()
_UNKNOWN: Any = object()  # a statement's type not given: classified here
# Words that make an EXECUTE argument read tables (DuckDB's EXECUTE takes constants only).
_QUERY_WORDS = frozenset({"SELECT", "FROM", "TABLE", "VALUES"})
_WORD_IN_TEXT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ReadPlan:
    """The reads of one catalog's router on its connection (see the module docstring)."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        names: LakeNames,
        views: LakeViews,
        classify: Classifier,
        *,
        database: str,
        implicit: bool,
        front: Any,
    ) -> None:
        self.con = con
        self.names = names
        self.views = views
        self.classify = classify
        self.database = database
        self.implicit = implicit
        self.front = front
        self._slots: CaptureSlots | None = None  # made on the first statement the front door plans
        # What the front door learnt, valid while DuckDB's catalog version stays where the front
        # door itself last left it (see `settle`).
        self._seen_version: int | None = None
        self._planned: OrderedDict[tuple[str, str], _Planned | None] = OrderedDict()
        # (query text, DuckDB's catalog version) -> the columns its relation's bind learnt, or that the
        # text came once (_SEEN_ONCE) or is always bound (_NOT_AGAIN) (see `_relation`)
        self._signatures: OrderedDict[tuple[str, int], Signature] = OrderedDict()
        self._session: Session | None = None
        # the statements' table references resolved in that session (`sql.references`)
        self._references: References | None = None
        self._words: tuple[int, frozenset[str]] | None = None  # see `_lake_words`
        self._built_in: frozenset[str] | None = None  # see `built_in`

    def references(self) -> References:
        """The table references of statements, resolved in this connection's session as it is now."""
        self.settle()
        assert self._references is not None
        return self._references

    def built_in(self) -> frozenset[str]:
        """DuckDB's own names and `iceberg_scan` (read on the first question: `builtins`)."""
        if self._built_in is None:
            self._built_in = built_in_names([SCAN.name])
        return self._built_in

    def calls_only_built_in(self, text: str) -> bool:
        """Whether every function the query `text` calls is DuckDB's own (from its parse tree)."""
        tree = parse_query(self.con, text)
        return tree is not None and only_built_in(called(tree, keywords=False), self.built_in())

    def run(
        self, text: str, tokens: list[Token], params: Any, kind: Any = _UNKNOWN
    ) -> duckdb.DuckDBPyRelation | None:
        """Run a statement in DuckDB; its `iceberg_scan(...)` calls and `lake.<ns>.<table>` references
        first rewritten to plan with what DuckDB pushes into each (`duckdb.capture.capture_statement`).
        `kind`: DuckDB's statement type of the text, when the caller knows it."""
        if kind is _UNKNOWN:
            try:
                kind = self.classify(text).type
            except duckdb.Error:
                kind = None  # DuckDB says what is wrong when the text runs
        if lists_relations(tokens):  # SHOW TABLES, information_schema: see sql/discovery.py
            text = hide_internal(self.con, text, query_part(text, tokens, kind, self.classify))
            tokens = tokenize(text)
        prepared = self._prepared(text, tokens, params) if kind == Type.EXECUTE else None
        if prepared is not None:  # EXECUTE q(...): the statement q holds, with the arguments' values
            statement, values, statement_kind = prepared
            pruned = self._pruned(statement, tokenize(statement), values, statement_kind)
            if pruned is not None:
                try:
                    return self.con.sql(pruned, params=values)
                except duckdb.Error:
                    pass
            return self.run_as_written(text, params)
        pruned = self._pruned(text, tokens, params, kind)
        query = kind == Type.SELECT
        again = functools.partial(self.calls_only_built_in, text) if query else None
        if pruned is not None:
            try:
                return self._relation(pruned, params, query, again)
            except duckdb.Error:
                pass  # the original text runs, so errors are DuckDB's about what the user wrote
        return self.run_as_written(text, params, query, again)

    def run_as_written(
        self, text: str, params: Any, query: bool = False, again: Callable[[], bool] | None = None
    ) -> duckdb.DuckDBPyRelation:
        """`text` run by DuckDB as written (`query`, `again`: see `_relation`); an error binding it
        names none of iceduck's objects."""
        try:
            return self._relation(text, params, query, again)
        except duckdb.Error as e:
            raise users_error(e) from None

    def _relation(
        self, text: str, params: Any, query: bool, again: Callable[[], bool] | None = None
    ) -> duckdb.DuckDBPyRelation:
        """`con.sql(text, params=params)`. For one query without parameters (`query`), the bind
        that only learns the relation's columns sees its scans' and catalog views' columns, not
        their read_parquet calls (`scan.describing`): those are bound when the relation is read
        (then with the latest commit, as every read binds the text again anyway). When `again()`
        says so (the statement calls only DuckDB's own functions: a Python UDF can be registered
        anew without moving the catalog version), the relation of a text made twice before while
        DuckDB's catalog version stands (no DDL, SET, ATTACH or write since) is made without that
        bind. `again` is asked only when a text comes the second time: answering it the first time
        reads DuckDB's own function names (~40 ms, once per process), which the first statement of
        every shell and script, `select 1` too, would pay for nothing."""
        if query and params is None:
            # The text bound then; the relation asks its columns again at the first question about
            # them (`hooks.relation_for`), and its reads bind the latest commit as always. ~1.5 ms
            # less per repeated statement; what went wrong since (a file gone) is raised by the read.
            key = (text, catalog_version(self.con))
            known = self._signatures.get(key)
            if known is not None and known is not _SEEN_ONCE and known is not _NOT_AGAIN:
                self._signatures.move_to_end(key)
                return relation_for(self.con, text, known)
            relation = lazy_select(self.con, text, functools.partial(describing, self.con))
            if relation is not None:
                if known is None:
                    self._remember_signature(key, _SEEN_ONCE)
                elif known is _SEEN_ONCE:
                    signature = relation_signature(relation) if again is not None and again() else None
                    self._remember_signature(key, _NOT_AGAIN if signature is None else signature)
                return relation
        return self.con.sql(text, params=params)

    def _remember_signature(self, key: tuple[str, int], value: Signature) -> None:
        self._signatures[key] = value
        self._signatures.move_to_end(key)
        while len(self._signatures) > _PLANNED_STATEMENTS:
            self._signatures.popitem(last=False)

    def _pruned(self, text: str, tokens: list[Token], params: Any, kind: Type | None) -> str | None:
        """The statement as DuckDB should run it, or None to run it as written: its names resolved
        as the lake's writes resolve them (`ns.t` of the catalog that DuckDB binds to nothing reads
        `lake.ns.t`), rewritten to prune with what DuckDB pushes into each of its references.
        Repeated statements (same text and parameter values, nothing changed in DuckDB's catalog or
        settings since) reuse what their first reading learnt. `kind`: DuckDB's statement type."""
        if kind not in QUERY_TYPES or not tokens:
            return None
        # The cheap check: only a statement with a word naming something of the lake's (its
        # database, a namespace, a view's name, iceberg_scan) is parsed.
        version = catalog_version(self.con)
        words = self._lake_words()
        if not any(t.kind in (WORD, IDENT) and t.text.lower() in words for t in tokens):
            return None
        session = self.settle()
        key = (text, _params_key(params))
        if key in self._planned:
            found = self._planned[key]
            self._planned.move_to_end(key)
            if found is None:
                return None
            if found.token is None or keep_statement(self.con, found.token):  # else dropped: planned again
                return found.text
        read = self._read(text, tokens, params, session, kind)
        planned, keep = read if read is not None else (None, True)
        if keep:
            self._planned[key] = planned
            while len(self._planned) > _PLANNED_STATEMENTS:
                self._planned.popitem(last=False)
        if self._seen_version is not None:  # (None: the lake views changed while reading)
            self._seen_version = catalog_version(self.con)  # the EXPLAIN (and slots) moved it
            if self._words is not None and self._words[0] == version:
                self._words = (self._seen_version, self._words[1])  # no view changed meanwhile
        return None if planned is None else planned.text

    def _read(
        self, text: str, tokens: list[Token], params: Any, session: Session, kind: Type | None
    ) -> tuple[_Planned | None, bool] | None:
        """The statement read from DuckDB's parse tree of its query (`sql.references`): names
        resolved, the user's views reading lake tables inlined and, unless it is a statement about
        a query (EXPLAIN, PREPARE, DESCRIBE) or calls a varying function, its lake references
        rewritten to prune (`_plan`) (the planned statement or None when nothing changes, and
        whether it may be kept for the text's next run); None when its query cannot be read."""
        parts = query_part(text, tokens, kind, self.classify)
        if parts is None:
            return None
        head, query = parts
        tree = parse_query(self.con, query)
        if tree is None:
            return None
        # A value that may differ when a relation re-runs its text must not decide what is read
        # (asked only now: a statement about no lake table never reads DuckDB's function catalog).
        names = set(called(tree))
        naming = kind in (Type.EXPLAIN, Type.PREPARE) or describes(tree)
        plan = not naming and not calls_varying(names)
        # A Python UDF DuckDB folded into a captured constant can be registered anew without moving
        # the catalog version: statements calling one (or reading a view that does) are planned
        # each time they run.
        keep = only_built_in(set(called(tree, keywords=False)), self.built_in())
        references = self._references
        assert references is not None
        renamed = self.implicit and references.rename_implicit(tree, self._implicit_table)
        resolved = _Planned(head + render(self.con, tree), None) if renamed else None
        if not plan or session.volatile_views:
            # (a predicate DuckDB derives through a join with a volatile view may go stale)
            return resolved, keep
        inlined = tree
        if session.user_views and references.names_reading_views(tree):
            inlined = copy_tree(tree)
            if not references.inline(inlined):
                inlined = tree
        if inlined is tree and not has_filter(tree):
            return resolved, keep  # nothing in the statement can push a predicate into a reference
        same_as = None if inlined is tree else (head + query if resolved is None else resolved.text)
        # the text of the tree when it is the statement's own (nothing renamed or inlined)
        written = head + query if inlined is tree and resolved is None else None
        planned = self._plan(head, inlined, params, session, same_as, written)
        return (planned if planned is not None else resolved), keep

    def resolved_expression(self, text: str) -> str:
        """An expression of a write (its WHERE, a SET value) with each `ns.t` of the lake that
        DuckDB binds to nothing named `lake.ns.t`, as a query reads it (`_read`). Parsed only when
        one of its words names something of the lake's (a 20,000-term WHERE is not)."""
        if not text or not self.implicit:
            return text
        low = text.lower()
        words = self._lake_words() - {SCAN.name, self.database}
        if not any(word in low for word in words):
            return text
        try:
            tokens = tokenize(text)
        except SqlSyntaxError:
            return text
        if not any(t.kind in (WORD, IDENT) and t.text.lower() in words for t in tokens):
            return text
        self.settle()
        tree = parse_query(self.con, f"SELECT ({text}\n)")
        references = self._references
        if tree is None or references is None or not references.rename_implicit(tree, self._implicit_table):
            return text
        rendered = render(self.con, tree)
        return rendered[len("SELECT ") :] if rendered.startswith("SELECT ") else text

    def _implicit_table(self, parts: tuple[str, ...]) -> tuple[str, str, str] | None:
        """(database, namespace, table) of the lake view `ns.t` names when DuckDB binds it to
        nothing, as INSERT/UPDATE/DELETE resolve it (`_resolve_table`), or None."""
        table = self.names.resolve_table(p.Name(parts))
        if table is None or not table.exists or "." in table.name:
            return None
        before = catalog_version(self.con)
        self.views.refresh(only_if_changed=True)
        if catalog_version(self.con) != before:
            self._seen_version = None  # the session's lake views are read again next time
        rows = self.con.execute(
            "SELECT count(*) FROM duckdb_views() WHERE database_name = ? AND schema_name = ? AND view_name = ?",
            [self.database, table.namespace, table.name],
        ).fetchall()
        return (self.database, table.namespace, table.name) if rows[0][0] else None

    def _prepared(self, text: str, tokens: list[Token], params: Any) -> tuple[str, Any, Type] | None:
        """For `EXECUTE name [(arguments)]`: the query DuckDB holds under that name (its text from
        `duckdb_prepared_statements()`, read at each EXECUTE, so a statement prepared again on the
        raw connection is the one run) and the arguments' values as parameters, where running the
        text with them is exactly what EXECUTE runs, and the held statement's type (a query or an
        INSERT); else None (EXECUTE then runs as written).

        Exact because DuckDB binds such a statement anew at each EXECUTE (it holds no result types
        for it: names resolve as they do now, parameters take their types from where they stand)
        and each value reaches DuckDB as the same type and value (its `typeof` and text are
        compared: an INTERVAL of months, a HUGEINT or a TIMESTAMP_NS would not)."""
        end = len(tokens) - (1 if tokens and tokens[-1].is_op(";") else 0)
        if params is not None or end < 2 or not tokens[1].is_name:
            return None
        arguments: list[tuple[str | None, str]] = []  # (name or None, expression text)
        if end > 2:
            if not tokens[2].is_op("(") or closing(tokens, 2) != end - 1:
                return None
            split = split_arguments(text, tokens[3 : end - 1], ":=", "=>")
            if split is None or len({name is None for name, _ in split}) > 1:
                return None
            arguments = split
        inside = tokens[2:end]
        if any(t.kind == WORD and (t.text.upper() in _QUERY_WORDS or varies(t.text)) for t in inside):
            return None  # evaluated once here, but EXECUTE evaluates them itself
        rows = self.con.execute(
            "SELECT statement, result_types FROM duckdb_prepared_statements() WHERE lower(name) = lower(?)",
            [tokens[1].text],
        ).fetchall()
        if len(rows) != 1 or rows[0][0] is None:
            return None
        statement, result_types = str(rows[0][0]), rows[0][1]
        try:
            found = tokenize(statement)
            held = self.classify(statement)
        except (SqlSyntaxError, duckdb.Error):
            return None
        kind = held.type
        if held.is_script or kind not in (Type.SELECT, Type.INSERT):
            return None
        # An INSERT's only stored result type is its row count, fixed by the kind of statement (it
        # is bound anew like a query: a table made after PREPARE shadows a name for it too).
        if result_types is not None and not (list(result_types) == ["BIGINT"] and kind == Type.INSERT):
            return None
        if mentions(found, self.database):
            self.views.refresh(only_if_changed=True)
        if self.front is not None:
            self.front.before_read(found)
        if not arguments:
            return statement, None, kind
        values = self._argument_values([expression for _, expression in arguments])
        if values is None:
            return None
        if arguments[0][0] is None:
            return statement, values, kind
        return statement, {name: value for (name, _), value in zip(arguments, values, strict=True)}, kind

    def _argument_values(self, expressions: list[str]) -> list[Any] | None:
        """The values of constant expressions, or None when one of them would not reach DuckDB as a
        parameter with the same type and text."""
        columns = ", ".join(f"({e}) AS v{i}" for i, e in enumerate(expressions))
        probes = ", ".join(f"v{i}, typeof(v{i}), CAST(v{i} AS VARCHAR)" for i in range(len(expressions)))
        try:
            row = self.con.execute(f"SELECT {probes} FROM (SELECT {columns})").fetchall()[0]
            values = [row[3 * i] for i in range(len(expressions))]
            again = self.con.execute(
                "SELECT "
                + ", ".join(f"typeof(${i + 1}), CAST(${i + 1} AS VARCHAR)" for i in range(len(values))),
                values,
            ).fetchall()[0]
        except (duckdb.Error, IndexError):
            return None
        wanted = tuple(v for i in range(len(values)) for v in row[3 * i + 1 : 3 * i + 3])
        return values if tuple(again) == wanted else None

    def _plan(
        self, head: str, tree: Node, params: Any, session: Session, same_as: str | None, written: str | None
    ) -> _Planned | None:
        """The statement (`head`, the text before its query, and the query's tree, names resolved
        and views inlined) rewritten to plan with what DuckDB pushes into its references, or None.
        `same_as`: the statement as it binds without its views inlined, which the planned one must
        describe like (`capture_statement`); `written`: the statement's text when the tree is
        exactly its own (then planned as written when nothing in it changes for planning)."""
        references = self._references
        assert references is not None
        lake = references.lake(tree)
        scans = references.scans(tree)
        if not scans and not lake:
            return None
        if self._slots is None:
            self._slots = capture_slots(self.con)
        # Each iceberg_scan call is planned through the twin macro with a marker as its token, so
        # the arguments DuckDB evaluated for it are known afterwards (`scan_call`).
        capturing = copy_tree(tree) if scans else tree
        for i, ref in enumerate(references.scans(capturing) if scans else ()):
            ref.replace(self._twin(ref.node, capture_marker(i)))
        if session.binary_collation:
            capturing = with_prefix_ranges(self.con, capturing)
        captured = capture_statement(
            self.con,
            self._slots,
            written if capturing is tree and written is not None else head + render(self.con, capturing),
            params,
            zone=session.zone,
            same_as=same_as,
            query_at=len(head),
        )
        if captured is None:
            return None
        token = captured[0]
        for found in lake:
            ref = found.ref
            like = ref.node if ref.node.get("alias") else {**ref.node, "alias": ref.parts[-1]}
            arguments = [constant(self.con, f"{found.schema}.{found.name}"), constant(self.con, token)]
            ref.replace(call_ref(self.con, view_pruned_macro(found.database), arguments, like))
        for i, ref in enumerate(scans):
            # arguments written as literals only: nothing in them can differ when the text binds again
            direct = scan_call(self.con, token, capture_marker(i)) if literal_arguments(ref.node) else None
            like = ref.node if ref.node.get("alias") else {**ref.node, "alias": SCAN.name}
            node = None if direct is None else parsed_ref(self.con, direct, like)
            ref.replace(self._twin(ref.node, token) if node is None else node)
        return _Planned(head + render(self.con, tree), token)

    def _twin(self, node: Node, token: str) -> Node:
        """The `iceberg_scan(...)` reference `node` as a call of its twin macro with `token` first."""
        assert SCAN.pruned is not None
        twin = with_first_argument(self.con, node, SCAN.pruned, token)
        twin["alias"] = twin.get("alias") or SCAN.name
        return twin

    def settle(self) -> Session:
        """What the front door knows of this connection's DuckDB session, read again (and every
        planned statement forgotten) when anything ran since the front door last looked that may
        change how a statement binds or plans: DDL, SET, ATTACH, writes (DuckDB's catalog version)."""
        version = catalog_version(self.con)
        if self._session is not None and self._references is not None and version == self._seen_version:
            return self._session
        self._planned.clear()
        lake_views: dict[tuple[str, ...], tuple[str, str, str]] = {}
        user_views: dict[tuple[str, str, str], UserView] = {}
        volatile = False
        for database, schema, name, temporary, sql in self.con.execute(
            "SELECT database_name, schema_name, view_name, temporary, sql FROM duckdb_views() WHERE NOT internal"
        ).fetchall():
            key = (str(database).lower(), str(schema).lower(), str(name).lower())
            if VIEW_SQL_UDF in str(sql):
                lake_views[key] = (database, schema, name)
                continue
            if str(name).startswith(INTERNAL_PREFIX):
                continue  # iceduck's own sources
            if not volatile and any(varies(word) for word in _WORD_IN_TEXT.findall(str(sql))):
                volatile = True
            query = view_query(str(sql))
            if query is not None:
                user_views[key] = UserView(str(database), str(schema), str(name), bool(temporary), query)
        ((collation, zone, path, schemas, current_db),) = self.con.execute(
            "SELECT current_setting('default_collation'), current_setting('TimeZone'), "
            "current_setting('search_path'), current_schemas(true), current_database()"
        ).fetchall()
        # strings compare byte-wise in this session: the ranges a LIKE prefix implies hold
        binary = str(collation or "").lower() in ("", "binary")
        database = str(current_db).lower()
        databases = frozenset(self.views.duck_databases())
        self._session = Session(
            lake_views,
            volatile,
            binary,
            None if zone is None else str(zone),
            user_views,
            database,
            search_path(
                str(path or ""),
                database,
                [str(x).lower() for x in schemas or ()],
                databases,
                self.names.duck_has_schema,
            ),
        )
        self._references = References(self.con, self._session, databases)
        self._seen_version = catalog_version(self.con)
        return self._session

    def _lake_words(self) -> frozenset[str]:
        """Lowercase words a statement about the lake names: `iceberg_scan`, the lake's database,
        its namespaces (the schemas of its views) and the names of DuckDB's views other than
        iceduck's sources (the lake views and the user's), read again when DuckDB's catalog version
        moved (no view's SQL: the cheap first look every read statement gets)."""
        version = catalog_version(self.con)
        if self._words is None or self._words[0] != version:
            words = {SCAN.name, self.database}
            for database, schema, name in self.con.execute(
                "SELECT database_name, schema_name, view_name FROM duckdb_views() WHERE NOT internal"
            ).fetchall():
                if not str(name).startswith(INTERNAL_PREFIX):
                    words.add(str(name).lower())
                    if str(database).lower() == self.database:
                        words.add(str(schema).lower())
            self._words = (version, frozenset(words))
        return self._words[1]


def _params_key(params: Any) -> str:
    """Parameter values as a key: each value's type and repr (1, 1.0 and True differ)."""
    if params is None:
        return ""
    if isinstance(params, dict):
        items: Iterable[Any] = sorted(params.items(), key=lambda kv: str(kv[0]))
    elif isinstance(params, list | tuple):
        items = params
    else:
        return f"{type(params).__qualname__}:{params!r}"
    return repr([(type(v).__qualname__, repr(v)) for v in items])


@dataclass(frozen=True, slots=True)
class _Planned:
    """What the front door made of a statement: its rewritten text and the token its pruning is
    kept under (None: only its names were resolved, nothing is pruned)."""

    text: str
    token: str | None


__all__ = ["ReadPlan"]
