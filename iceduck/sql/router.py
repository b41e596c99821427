"""`Lake.sql`: statements about the lake's Iceberg tables run through the write API, the rest in DuckDB.

Each `Lake` owns one `Router` (made on its first `sql` call), which works on the lake's write API
(`iceduck.tables`).

A script is split into statements (`extract_statements`, or iceduck's tokenizer where DuckDB's
parser refuses the text, e.g. `DROP TABLE ns.t PURGE`). Each statement whose head names a table
(`INSERT INTO x`, `ALTER TABLE x`, ...) is resolved, just before it runs, against the catalog:

* `lake.ns.t` is a lake table (unless a DuckDB database the user attached is called `lake`);
* `ns.t` is a lake table when `ns` is a namespace of the catalog and DuckDB has no `ns.t` of its own;
* anything else, and every other statement, goes to DuckDB exactly as written.

`CREATE SCHEMA x` creates a namespace of the catalog (unless DuckDB's default database has a schema
`x`); `DROP SCHEMA x` drops one when the catalog has it.

Queries inside lake statements (the SELECT of an INSERT or CREATE TABLE AS) run in DuckDB on the
lake's connection, so they can read `lake.ns.t` views and any DuckDB table; their rows stream to the
writer as a relation. WHERE and SET expressions are DuckDB SQL over the table's columns. Statements
return what DuckDB's would: a one-row `Count` for INSERT, DELETE, UPDATE, TRUNCATE and CREATE TABLE
AS, an empty `Count` for CREATE, an empty `Success` for DROP and ALTER.

The catalog's tables are readable as `lake.<ns>.<table>` views (`iceduck.duckdb.catalog_views.
attach_catalog_views`); CREATE, DROP and RENAME refresh them, and a statement mentioning `lake.`
refreshes them first when the catalog changed behind this connection's back.
"""

from __future__ import annotations

import contextlib
import functools
import re
import uuid
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import duckdb

from iceduck.catalog.base import change_token, namespace_contents
from iceduck.duckdb.builtins import builtins, varies
from iceduck.duckdb.capture import (
    capture_marker,
    capture_slots,
    capture_statement,
    forget_statements,
    keep_statement,
    scan_call,
)
from iceduck.duckdb.catalog_views import VIEW_SQL_UDF, attach_catalog_views, view_pruned_macro
from iceduck.duckdb.hooks import (
    CaptureSlots,
    Signature,
    catalog_version,
    lazy_select,
    relation_for,
    relation_signature,
)
from iceduck.duckdb.scan import SCAN, describing
from iceduck.errors import AlreadyExistsError, NamespaceNotFoundError, TableNotFoundError, ValidationError
from iceduck.io.storage import s3_registry, store_registry
from iceduck.spec.values import from_json
from iceduck.sql import catalog_ddl, transactions
from iceduck.sql import parse as p
from iceduck.sql import views as iceberg_views
from iceduck.sql.analyze import analyze_statement
from iceduck.sql.discovery import INTERNAL_PREFIX, hide_internal, lists_relations, users_error
from iceduck.sql.logs import enable_logging, enables_iceberg_logging
from iceduck.sql.names import Session, UserView, search_path, view_query
from iceduck.sql.parse_tree import (
    Node,
    call_ref,
    constant,
    copy_tree,
    literal_arguments,
    parse_query,
    parsed_ref,
    render,
    with_first_argument,
    with_prefix_ranges,
)
from iceduck.sql.references import References
from iceduck.sql.secrets import handle_s3_secret, handle_store_secret
from iceduck.sql.time_travel import as_travelled, mentions_time_travel, rewrite_time_travel
from iceduck.sql.tokens import (
    IDENT,
    OP,
    WORD,
    SqlSyntaxError,
    Token,
    closing,
    split_arguments,
    split_statements,
    tokenize,
    trim_statement,
)
from iceduck.sql.types import SqlTypeError, column_definitions, make_schema, relation_fields, type_from_sql
from iceduck.tables import TableHandle, Tables
from iceduck.vocabulary import duck_literal, quote_ident
from iceduck.write.types import duck_type

if TYPE_CHECKING:
    from iceduck.spec.types import NestedField, Schema

LAKE_DATABASE = "lake"
_HEADS = frozenset(
    {"CREATE", "DROP", "INSERT", "DELETE", "UPDATE", "ALTER", "TRUNCATE", "MERGE", "COPY", "WITH", "ANALYZE"}
    | {"COMMENT", "CALL"}  # sql/catalog_ddl.py
)
_FORMAT_VERSION_KEYS = ("format-version", "format_version")

AttachViews = Callable[[duckdb.DuckDBPyConnection, Any, str], list[str]]
NOT_MINE: Any = object()  # what a `Front` returns for a statement it leaves to the router


class Front(Protocol):
    """What sees a lake's statements before its router (see `iceduck.sql.attach`)."""

    def wants(self, tokens: list[Token]) -> bool:
        """Whether a script that writes nothing still needs running statement by statement."""
        ...

    def before_read(self, tokens: list[Token]) -> None:
        """Called before a script that writes nothing runs in DuckDB (to refresh views it reads)."""
        ...

    def statement(self, tokens: list[Token], text: str, params: Any) -> Any:
        """Run the statement and return its result, or return `NOT_MINE`."""
        ...

    def travelling_table(self, parts: tuple[str, ...]) -> str | None:
        """The `iceberg_scan` name of a table of the front's (for `AT (...)`), or None."""
        ...


class SqlError(ValidationError):
    """A statement about a lake table that cannot run as written; nothing was changed."""


@dataclass(frozen=True, slots=True)
class LakeTable:
    """A name resolved to the lake: the namespace and table as the catalog spells them."""

    namespace: str
    name: str
    namespace_exists: bool
    exists: bool

    @property
    def identifier(self) -> str:
        return f"{self.namespace}.{self.name}"


class Router:
    """Routes the statements of one lake's connection; keeps track of the `lake` views it created."""

    def __init__(
        self,
        lake: Tables,
        attach_views: AttachViews | None = attach_catalog_views,
        *,
        database: str = LAKE_DATABASE,
        implicit: bool = True,
        front: Front | None = None,
    ) -> None:
        """`database`: the DuckDB database name of the catalog's views (`lake`, or the name of an
        attached catalog); `implicit`: whether `ns.t` without it also names the catalog's tables
        (only the lake's own catalog); `front`: sees every statement first (ATTACH, DETACH and
        the statements about attached catalogs, `iceduck.sql.attach`)."""
        # A weak reference: the lake owns its router, and a lake dropped by its user is freed at once
        # (no reference cycle waiting for the garbage collector with a DuckDB connection open).
        self._lake = weakref.ref(lake)
        self.con = lake.con
        self.attach_views = attach_views
        self.database = database.lower()
        self.implicit = implicit
        self.front = front
        self._views_owned = False
        self._view_tables: frozenset[tuple[str, ...]] | None = None
        self._catalog_token: Hashable | None = None  # the catalog's change token when last listed
        self._slots: CaptureSlots | None = None  # made on the first statement the front door plans
        # What the front door learnt, valid while DuckDB's catalog version stays where the front
        # door itself last left it (see `_settle`).
        self._seen_version: int | None = None
        self._planned: OrderedDict[tuple[str, str], _Planned | None] = OrderedDict()
        # (query text, DuckDB's catalog version) -> the columns its relation's bind learnt, or that the
        # text came once (_SEEN_ONCE) or is always bound (_NOT_AGAIN) (see `_relation`)
        self._signatures: OrderedDict[tuple[str, int], Signature] = OrderedDict()
        self._session: Session | None = None
        # the statements' table references resolved in that session (`sql.references`)
        self._references: References | None = None
        self._names: tuple[int, frozenset[str]] | None = None  # see `_lake_words`
        self._databases: tuple[int, frozenset[str]] | None = None
        if self.attach_views is not None and self._namespaces():
            self.refresh_views()

    @property
    def lake(self) -> Tables:
        lake = self._lake()
        if lake is None:  # pragma: no cover - the lake owns the only path to its router
            raise SqlError("the lake of this connection is gone")
        return lake

    # -- entry point -------------------------------------------------------------------------------

    def execute(self, query: str, params: Any = None) -> duckdb.DuckDBPyRelation | None:
        try:
            tokens = tokenize(query)
        except SqlSyntaxError:
            return self.con.sql(query, params=params)  # DuckDB reports what is wrong with the text
        query, tokens = trim_statement(query, tokens)
        travels: list[tuple[str, str]] = []
        if mentions_time_travel(tokens):  # lake.ns.t AT (VERSION => ...): see sql/time_travel.py
            query, travels = rewrite_time_travel(query, tokens, self.travelling_table)
            tokens = tokenize(query)
        if lists_relations(tokens):  # SHOW TABLES, information_schema: see sql/discovery.py
            query = hide_internal(query, tokens)
            tokens = tokenize(query)
        if enables_iceberg_logging(tokens) and not _is_script(tokens):
            enable_logging(self.con, query, tokens)  # CALL enable_logging('Iceberg'): see sql/logs.py
            return None
        try:
            return self._execute(query, tokens, params)
        except duckdb.Error as e:
            transactions.failed(self, e)
            if not travels:
                raise
            raise as_travelled(e, travels) from None
        except BaseException as e:
            transactions.failed(self, e)  # a statement inside BEGIN ... COMMIT failed (sql/transactions.py)
            raise

    def _execute(self, query: str, tokens: list[Token], params: Any) -> duckdb.DuckDBPyRelation | None:
        if not _is_script(tokens):
            handled = self._prepared_write(query, tokens)
            if handled is not NOT_MINE:
                return handled
        if (
            not _may_write(tokens)
            and not transactions.starts(tokens)
            and not (self.front is not None and self.front.wants(tokens))
        ):
            if mentions(tokens, self.database):
                self.refresh_views(only_if_changed=True)
            if self.front is not None:
                self.front.before_read(tokens)
            if params is not None or not _is_script(tokens):
                return self._duck(query, tokens, params)
            # A script (`PREPARE q AS ...; EXECUTE q(...)`, `SET ...; SELECT ...`) runs statement by
            # statement, so each is planned as it would be alone.
            return self._script(split_script(self.con, query), None)
        if any(t.is_word("CREATE", "DROP", "ALTER") for t in tokens):
            forget_statements(self.con)  # a view a stored pruning was derived through may change
        if not _is_script(tokens):  # one statement: DuckDB's parser is not asked to split it
            return self.statement(query, params, tokens)
        statements = split_script(self.con, query)
        if params is not None and len(statements) > 1:
            raise SqlError("parameters need a script of one statement")
        return self._script(statements, params)

    def _script(self, statements: list[ScriptStatement], params: Any) -> duckdb.DuckDBPyRelation | None:
        """Run the statements in order and return the last one's result. Each earlier query is run
        to its end (its rows dropped) before the next statement starts, as DuckDB runs every
        statement of a script: a query may call a function that changes something."""
        result = None
        for statement in statements:
            if result is not None:
                result.materialize()
            result = self.statement(statement.query, params)
        return result

    def statement(
        self, text: str, params: Any, tokens: list[Token] | None = None
    ) -> duckdb.DuckDBPyRelation | None:
        """Run one statement of a script (the `front` sees it first); `tokens`: the text's, when known."""
        if tokens is None:
            text, tokens = trim_statement(text, tokenize(text))
        if transactions.handles(tokens):  # BEGIN / COMMIT / ROLLBACK: see sql/transactions.py
            transactions.run(self, tokens)
            return None
        transactions.refuse_inside(self, tokens)
        handled = self._prepared_write(text, tokens)
        if handled is not NOT_MINE:
            return handled
        # DuckDB 2.0.1 cannot make S3 secrets without httpfs; the secret is this lake's alone
        if handle_s3_secret(tokens, s3_registry(self.lake.io)):
            return None
        if handle_store_secret(tokens, store_registry(self.lake.io)):
            return None
        if self.front is not None:
            handled = self.front.statement(tokens, text, params)
            if handled is not NOT_MINE:
                return handled
        view = iceberg_views.recognise(tokens, text)  # CREATE/DROP/ALTER VIEW: see sql/views.py
        if view is not None:
            handled = iceberg_views.run(
                view, con=self.con, catalog=self.lake.catalog, database=self.database, not_mine=NOT_MINE,
                resolve=lambda parts: self._resolve_table(p.Name(parts)), refresh=self.refresh_views,
            )  # fmt: skip
            if handled is not NOT_MINE:
                return handled
        special = catalog_ddl.recognise(tokens, text)  # COMMENT ON, CREATE VIEW, COPY FROM DATABASE
        if special is not None:
            handled = catalog_ddl.run(
                special, con=self.con, lake=self.lake, database=self.database, not_mine=NOT_MINE,
                resolve=lambda parts: self._resolve_table(p.Name(parts)),
                statement=lambda query: self.statement(query, None),
            )  # fmt: skip
            if handled is not NOT_MINE:
                return handled
        if tokens and tokens[0].is_word("CALL"):  # Spark's procedures: sql/procedures.py
            from iceduck.sql import procedures

            call = procedures.recognise(tokens, text)
            if call is not None:
                return procedures.run(call, self.con, self.lake, self._procedure_table)
        head = p.target(tokens)
        table = self._resolve(head) if head is not None else None
        if head is None or table is None:
            if mentions(tokens, self.database):
                self.refresh_views(only_if_changed=True)
            transactions.before_duck(self, tokens)  # inside BEGIN ... COMMIT: DuckDB's own transaction
            return self._duck(text, tokens, params)
        if head.kind == p.KIND_UNSUPPORTED:
            raise SqlError(f"{table.identifier}: {p.unsupported_reason(tokens)}")
        if head.kind in (p.KIND_MERGE, p.KIND_UPDATE, p.KIND_DELETE):
            from iceduck.sql import merge  # the write stack, loaded by writes only

            if head.kind == p.KIND_MERGE or merge.wants(tokens):
                return self._joined(merge, table, text, tokens, params)
        if head.kind == p.KIND_INSERT:
            from iceduck.sql import upsert  # RETURNING, ON CONFLICT, OR REPLACE: sql/upsert.py

            if upsert.wants(tokens):
                return self._joined(upsert, table, text, tokens, params)
        statement = p.parse(text, tokens)
        uses_params = isinstance(statement, p.Insert) or (
            isinstance(statement, p.CreateTable) and statement.query is not None
        )
        if params is not None and not uses_params:
            raise SqlError(
                f"{table.identifier}: parameters are only supported in the query of INSERT and CREATE TABLE AS"
            )
        if not isinstance(statement, p.CreateSchema | p.DropSchema):
            self._check_autocommit(table.identifier)
        try:
            return self._run(statement, table, params)
        except duckdb.Error as e:
            raise _as_written(e, text) from None

    def _prepared_write(self, text: str, tokens: list[Token]) -> Any:
        """PREPARE / EXECUTE / DEALLOCATE of a write into a lake table (sql/prepared.py), EXPLAIN of a
        DELETE / UPDATE / MERGE on one (sql/explain_write.py); else NOT_MINE."""
        if tokens and tokens[0].is_word("EXPLAIN"):
            from iceduck.sql import explain_write

            inner = explain_write.explained(tokens)
            head = p.target(inner) if inner is not None else None
            table = self._resolve(head) if head is not None else None
            if inner is None or table is None or not table.exists:
                return NOT_MINE
            if mentions(inner, self.database):
                self.refresh_views(only_if_changed=True)
            body = text[inner[0].start :]
            return explain_write.explain(self.con, self.lake, table.identifier, body, tokenize(body))
        if not tokens or not tokens[0].is_word("PREPARE", "EXECUTE", "DEALLOCATE"):
            return NOT_MINE
        from iceduck.sql import prepared

        return prepared.handle(self, text, tokens, NOT_MINE)

    def _procedure_table(self, name: str) -> str:
        """The lake table a procedure's `table` argument names (`ns.t`, `lake.ns.t`): relative to this
        router's catalog, as Spark reads `cat.system.p(table => 'ns.t')`."""
        parts = tuple(name.split("."))
        table = self._resolve_table(p.Name(parts))
        if (table is None or not table.exists) and len(parts) == 2:
            table = self._resolve_table(p.Name((self.database, *parts)))
        if table is None or not table.exists:
            raise TableNotFoundError(f"table {name} does not exist in the lake")
        return table.identifier

    def _run_as_written(
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

    # -- resolving names ---------------------------------------------------------------------------

    def travelling_table(self, parts: tuple[str, ...]) -> str | None:
        """What `iceberg_scan` calls the table `parts` names, for `AT (...)`: `<database>.ns.t` of
        this router's catalog, or of a catalog the front attached (`cat.ns.t`); None for others."""
        table = self._resolve_table(p.Name(parts))
        # qualified by this router's database: an attached catalog's tables are `cat.ns.t`
        if table is not None and table.exists:
            return f"{self.database}.{table.identifier}"
        return self.front.travelling_table(parts) if self.front is not None else None

    def _resolve(self, head: p.Target) -> LakeTable | None:
        if head.kind in (p.KIND_CREATE_SCHEMA, p.KIND_DROP_SCHEMA):
            return self._resolve_namespace(head.name, create=head.kind == p.KIND_CREATE_SCHEMA)
        table = self._resolve_table(head.name)
        if table is not None:
            _check_table_name(head.name, table.name)
        return table

    def _in_lake(self, parts: tuple[str, ...], size: int) -> tuple[bool, tuple[str, ...]] | None:
        """Whether a name of an object named by `size` parts (ns.t: 2, ns: 1) may be in the lake:
        (explicit: given as `<database>.<...>`, the parts without the database), or None when it
        belongs to DuckDB (no implicit names here, a lake database DuckDB owns, another database)."""
        explicit = len(parts) > size and parts[0].lower() == self.database
        if not explicit and not self.implicit:
            return None
        if explicit:
            return None if self._lake_database() == "foreign" else (True, parts[1:])
        if len(parts) > size and parts[0].lower() in self._duck_databases():
            return None
        return False, parts

    def _resolve_table(self, name: p.Name) -> LakeTable | None:
        parts = name.parts
        if len(parts) == 1:  # after `USE lake.ns`: the table of the namespace in use
            parts = self.used_namespace() + parts
        if len(parts) < 2:
            return None
        found_in = self._in_lake(parts, 2)
        if found_in is None:
            return None
        explicit, ns_parts = found_in[0], found_in[1][:-1]
        if not explicit and self._duck_has_relation(parts):
            return None
        if self._exact_table(ns_parts, parts[-1]):
            return LakeTable(".".join(ns_parts), parts[-1], namespace_exists=True, exists=True)
        namespace = self._find_namespace(ns_parts)
        if namespace is None:
            if explicit:
                return LakeTable(".".join(ns_parts), parts[-1], namespace_exists=False, exists=False)
            return None
        found = _match(self.lake.catalog.list_tables(namespace), parts[-1])
        return LakeTable(namespace, found or parts[-1], namespace_exists=True, exists=found is not None)

    def used_namespace(self) -> tuple[str, ...]:
        """(`<database>`, schema) when `USE <database>.<schema>` made a namespace of this router's
        catalog the connection's default (so a bare table name means its table), else ()."""
        database, schema = self.con.execute("SELECT current_database(), current_schema()").fetchall()[0]
        if str(database).lower() != self.database or str(schema) == "main":
            return ()
        return (self.database, str(schema))

    def _exact_table(self, ns_parts: tuple[str, ...], name: str) -> bool:
        """Whether the lake has the table spelled exactly so. `_match` prefers an exact spelling, so
        a yes is what listing would find, at one request on REST (`HEAD`) instead of listing the
        namespaces and the tables (two); a no still lists, for a spelling in another case."""
        if not ns_parts or any("." in part for part in ns_parts):
            return False
        try:
            return self.lake.catalog.table_exists(".".join(ns_parts), name)
        except ValidationError:
            return False  # a name this catalog cannot hold: listing answers (it finds nothing)

    def _resolve_namespace(self, name: p.Name, *, create: bool) -> LakeTable | None:
        parts = name.parts
        found_in = self._in_lake(parts, 1)
        if found_in is None:
            return None
        explicit, ns_parts = found_in
        found = self._find_namespace(ns_parts)
        if found is None and not explicit:
            if not create:
                return None
            if len(parts) == 1 and self._duck_has_schema(parts[0]):
                return None  # DuckDB's own schema: DuckDB answers (exists already / IF NOT EXISTS)
            if len(parts) > 1 and self._find_namespace(parts[:-1]) is None:
                return None
        if any("." in part for part in ns_parts):
            raise SqlError(f"namespace {name}: names inside a namespace cannot contain '.'")
        namespace = found or ".".join(ns_parts)
        return LakeTable(namespace, "", namespace_exists=found is not None, exists=found is not None)

    def _namespaces(self, parent: str | None = None) -> tuple[str, ...]:
        return tuple(self.lake.catalog.list_namespaces(parent))

    def _find_namespace(self, parts: tuple[str, ...]) -> str | None:
        if not parts or any("." in part for part in parts):
            return None
        current: str | None = None
        for part in parts:
            children = self._namespaces(current)
            leaves = {c.rsplit(".", 1)[-1]: c for c in children}
            found = _match(leaves, part)
            if found is None:
                return None
            current = leaves[found]
        return current

    def _duck_databases(self) -> set[str]:
        """DuckDB's databases (lowercase), read again when DuckDB's catalog version moved (ATTACH
        and DETACH move it)."""
        version = catalog_version(self.con)
        if self._databases is None or self._databases[0] != version:
            rows = self.con.execute("SELECT database_name FROM duckdb_databases()").fetchall()
            self._databases = (version, frozenset(str(r[0]).lower() for r in rows))
        return set(self._databases[1])

    def _duck_has_schema(self, schema: str) -> bool:
        rows = self.con.execute(
            "SELECT count(*) FROM duckdb_schemas() WHERE database_name = current_database() "
            "AND lower(schema_name) = lower(?)",
            [schema],
        ).fetchall()
        return bool(rows and rows[0][0])

    def _duck_has_relation(self, parts: tuple[str, ...]) -> bool:
        """Whether DuckDB has a table or view of its own under this name (not a lake view)."""
        if len(parts) == 2:
            where = (
                "((lower(schema_name) = lower(?) AND database_name = current_database()) "
                "OR (lower(database_name) = lower(?) AND schema_name = 'main')) AND lower(name) = lower(?)"
            )
            args = [parts[0], parts[0], parts[1]]
        elif len(parts) == 3:
            where = (
                "lower(database_name) = lower(?) AND lower(schema_name) = lower(?) AND lower(name) = lower(?)"
            )
            args = list(parts)
        else:
            return False
        rows = self.con.execute(
            "SELECT count(*) FROM (SELECT database_name, schema_name, table_name AS name FROM duckdb_tables() "
            "UNION ALL SELECT database_name, schema_name, view_name FROM duckdb_views() WHERE NOT internal) "
            f"WHERE database_name <> ? AND {where}",
            [self.database if self._views_owned else "", *args],
        ).fetchall()
        return bool(rows and rows[0][0])

    # -- the front door: a statement's WHERE prunes the files its scans read ------------------------

    def _duck(self, text: str, tokens: list[Token], params: Any) -> duckdb.DuckDBPyRelation | None:
        """Run a statement in DuckDB; its `iceberg_scan(...)` calls and `lake.<ns>.<table>` references
        first rewritten to plan with what DuckDB pushes into each (`duckdb.capture.capture_statement`)."""
        prepared = self._prepared(text, tokens, params)
        if prepared is not None:  # EXECUTE q(...): the statement q holds, with the arguments' values
            statement, values = prepared
            pruned = self._pruned(statement, tokenize(statement), values)
            if pruned is not None:
                try:
                    return self.con.sql(pruned, params=values)
                except duckdb.Error:
                    pass
            return self._run_as_written(text, params)
        pruned = self._pruned(text, tokens, params)
        query = _one_query(tokens)
        again = functools.partial(_only_built_in_calls, tokens) if query else None
        if pruned is not None:
            try:
                return self._relation(pruned, params, query, again)
            except duckdb.Error:
                pass  # the original text runs, so errors are DuckDB's about what the user wrote
        return self._run_as_written(text, params, query, again)

    def _pruned(self, text: str, tokens: list[Token], params: Any) -> str | None:
        """The statement as DuckDB should run it, or None to run it as written: its names resolved
        as the lake's writes resolve them (`ns.t` of the catalog that DuckDB binds to nothing reads
        `lake.ns.t`), rewritten to prune with what DuckDB pushes into each of its references.
        Repeated statements (same text and parameter values, nothing changed in DuckDB's catalog or
        settings since) reuse what their first reading learnt."""
        naming = bool(tokens) and tokens[0].is_word(*_NAMING_HEADS)
        if not tokens or not (naming or tokens[0].is_word(*_READ_HEADS) or tokens[0].is_op("(") or _is_ctas(tokens)):
            return None
        ends = [i for i, t in enumerate(tokens) if t.is_op(";")]
        if ends and ends[0] != len(tokens) - 1:
            return None  # a script: only single statements are planned twice
        # The cheap check: only a statement with a word naming something of the lake's (its
        # database, a namespace, a view's name, iceberg_scan) is parsed.
        version = catalog_version(self.con)
        words = self._lake_words()
        if not any(t.kind in (WORD, IDENT) and t.text.lower() in words for t in tokens):
            return None
        session = self._settle()
        key = (text, _params_key(params))
        if key in self._planned:
            found = self._planned[key]
            self._planned.move_to_end(key)
            if found is None:
                return None
            if found.token is None or keep_statement(self.con, found.token):  # else dropped: planned again
                return found.text
        # A value that may differ when a relation re-runs its text must not decide what is read
        # (asked only now: a statement about no lake table never reads DuckDB's function catalog).
        planned = self._read(text, tokens, params, session, plan=not naming and not _calls_varying(tokens))
        # A Python UDF DuckDB folded into a captured constant can be registered anew without moving
        # the catalog version: statements calling one (or reading a view that does) are planned
        # each time they run.
        if _only_built_in_calls(tokens):
            self._planned[key] = planned
            while len(self._planned) > _PLANNED_STATEMENTS:
                self._planned.popitem(last=False)
        if self._seen_version is not None:  # (None: the lake views changed while reading)
            self._seen_version = catalog_version(self.con)  # the EXPLAIN (and slots) moved it
            if self._names is not None and self._names[0] == version:
                self._names = (self._seen_version, self._names[1])  # no view changed meanwhile
        return None if planned is None else planned.text

    def _read(self, text: str, tokens: list[Token], params: Any, session: Session, *, plan: bool) -> _Planned | None:
        """The statement read from DuckDB's parse tree of its query (`sql.references`): names
        resolved, the user's views reading lake tables inlined and, when `plan`, its lake
        references rewritten to prune (`_plan`); None when nothing changes."""
        parts = _query_parts(text, tokens)
        if parts is None:
            return None
        head, query = parts
        tree = parse_query(self.con, query)
        if tree is None:
            return None
        references = self._references
        assert references is not None
        renamed = self.implicit and references.rename_implicit(tree, self._implicit_table)
        resolved = _Planned(head + render(self.con, tree), None) if renamed else None
        if not plan or session.volatile_views:
            # (a predicate DuckDB derives through a join with a volatile view may go stale)
            return resolved
        inlined = tree
        if session.user_views and references.names_reading_views(tree):
            inlined = copy_tree(tree)
            if not references.inline(inlined):
                inlined = tree
        if inlined is tree and not any(t.is_word(*_FILTERING) for t in tokens):
            return resolved  # nothing in the statement can push a predicate into a reference
        same_as = None if inlined is tree else (head + query if resolved is None else resolved.text)
        # the text of the tree when it is the statement's own (nothing renamed or inlined)
        written = head + query if inlined is tree and resolved is None else None
        planned = self._plan(head, inlined, params, session, same_as, written)
        return planned if planned is not None else resolved

    def _resolved_expression(self, text: str) -> str:
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
        self._settle()
        tree = parse_query(self.con, f"SELECT ({text}\n)")
        references = self._references
        if tree is None or references is None or not references.rename_implicit(tree, self._implicit_table):
            return text
        rendered = render(self.con, tree)
        return rendered[len("SELECT ") :] if rendered.startswith("SELECT ") else text

    def _implicit_table(self, parts: tuple[str, ...]) -> tuple[str, str, str] | None:
        """(database, namespace, table) of the lake view `ns.t` names when DuckDB binds it to
        nothing, as INSERT/UPDATE/DELETE resolve it (`_resolve_table`), or None."""
        table = self._resolve_table(p.Name(parts))
        if table is None or not table.exists or "." in table.name:
            return None
        before = catalog_version(self.con)
        self.refresh_views(only_if_changed=True)
        if catalog_version(self.con) != before:
            self._seen_version = None  # the session's lake views are read again next time
        rows = self.con.execute(
            "SELECT count(*) FROM duckdb_views() WHERE database_name = ? AND schema_name = ? AND view_name = ?",
            [self.database, table.namespace, table.name],
        ).fetchall()
        return (self.database, table.namespace, table.name) if rows[0][0] else None

    def _prepared(self, text: str, tokens: list[Token], params: Any) -> tuple[str, Any] | None:
        """For `EXECUTE name [(arguments)]`: the query DuckDB holds under that name (its text from
        `duckdb_prepared_statements()`, read at each EXECUTE, so a statement prepared again on the
        raw connection is the one run) and the arguments' values as parameters, where running the
        text with them is exactly what EXECUTE runs; else None (EXECUTE then runs as written).

        Exact because DuckDB binds such a statement anew at each EXECUTE (it holds no result types
        for it: names resolve as they do now, parameters take their types from where they stand)
        and each value reaches DuckDB as the same type and value (its `typeof` and text are
        compared: an INTERVAL of months, a HUGEINT or a TIMESTAMP_NS would not)."""
        end = len(tokens) - (1 if tokens and tokens[-1].is_op(";") else 0)
        if params is not None or end < 2 or not tokens[0].is_word("EXECUTE") or not tokens[1].is_name:
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
        if any(t.kind == WORD and t.text.upper() in _QUERY_WORDS for t in inside) or _calls_varying(inside):
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
        except SqlSyntaxError:
            return None
        if not found or not found[0].is_word(*_READ_HEADS):
            return None
        # An INSERT's only stored result type is its row count, fixed by the kind of statement (it
        # is bound anew like a query: a table made after PREPARE shadows a name for it too).
        if result_types is not None and not (list(result_types) == ["BIGINT"] and self._inserts(statement)):
            return None
        if mentions(found, self.database):
            self.refresh_views(only_if_changed=True)
        if self.front is not None:
            self.front.before_read(found)
        if not arguments:
            return statement, None
        values = self._argument_values([expression for _, expression in arguments])
        if values is None:
            return None
        if arguments[0][0] is None:
            return statement, values
        return statement, {name: value for (name, _), value in zip(arguments, values, strict=True)}

    def _inserts(self, statement: str) -> bool:
        """Whether DuckDB parses `statement` as one INSERT (also one headed by a WITH clause)."""
        try:
            parsed = self.con.extract_statements(statement)
        except duckdb.Error:
            return False
        return len(parsed) == 1 and parsed[0].type == duckdb.StatementType.INSERT

    def _argument_values(self, expressions: list[str]) -> list[Any] | None:
        """The values of constant expressions, or None when one of them would not reach DuckDB as a
        parameter with the same type and text."""
        columns = ", ".join(f"({e}) AS v{i}" for i, e in enumerate(expressions))
        probes = ", ".join(f"v{i}, typeof(v{i}), CAST(v{i} AS VARCHAR)" for i in range(len(expressions)))
        try:
            row = self.con.execute(f"SELECT {probes} FROM (SELECT {columns})").fetchall()[0]
            values = [row[3 * i] for i in range(len(expressions))]
            again = self.con.execute(
                "SELECT " + ", ".join(f"typeof(${i + 1}), CAST(${i + 1} AS VARCHAR)" for i in range(len(values))),
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

    def _settle(self) -> Session:
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
        databases = frozenset(self._duck_databases())
        self._session = Session(
            lake_views,
            volatile,
            binary,
            None if zone is None else str(zone),
            user_views,
            database,
            search_path(
                str(path or ""), database, [str(x).lower() for x in schemas or ()], databases, self._duck_has_schema
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
        if self._names is None or self._names[0] != version:
            words = {SCAN.name, self.database}
            for database, schema, name in self.con.execute(
                "SELECT database_name, schema_name, view_name FROM duckdb_views() WHERE NOT internal"
            ).fetchall():
                if not str(name).startswith(INTERNAL_PREFIX):
                    words.add(str(name).lower())
                    if str(database).lower() == self.database:
                        words.add(str(schema).lower())
            self._names = (version, frozenset(words))
        return self._names[1]

    # -- the lake views ----------------------------------------------------------------------------

    def _lake_database(self) -> str:
        """'absent', 'ours' (views of this catalog) or 'foreign' (a database the user attached as `lake`)."""
        if self.database not in self._duck_databases():
            return "absent"
        if self._views_owned:
            return "ours"
        rows = self.con.execute(
            "SELECT count(*) FROM duckdb_views() WHERE database_name = ? AND sql LIKE '%\\_\\_iceduck\\_view\\_%' ESCAPE '\\'",
            [self.database],
        ).fetchall()
        return "ours" if rows and rows[0][0] else "foreign"

    def _catalog_tables(self) -> tuple[frozenset[str], frozenset[tuple[str, ...]]]:
        namespaces: list[str] = []
        pending = list(self._namespaces())
        while pending:
            ns = pending.pop(0)
            namespaces.append(ns)
            pending.extend(self._namespaces(ns))
        tables = frozenset((ns, t) for ns in namespaces for t in self.lake.catalog.list_tables(ns))
        return frozenset(namespaces), tables | iceberg_views.listing(self.lake.catalog)

    def refresh_views(self, *, only_if_changed: bool = False) -> None:
        """Make `lake.<ns>.<table>` match the catalog: views for every table, none for dropped ones."""
        if self.attach_views is None:
            return
        state = self._lake_database()
        if state == "foreign":
            return
        try:
            token = change_token(self.lake.catalog)  # read before listing: a change after it lists again
            if only_if_changed and state == "ours" and token is not None and token == self._catalog_token:
                return  # nothing committed to the catalog since it was last listed
            namespaces, tables = self._catalog_tables()
            if only_if_changed and state == "ours" and tables == self._view_tables:
                self._catalog_token = token
                return
            created = set(self.attach_views(self.con, self.lake.catalog, self.database))
            created |= set(iceberg_views.attach(self.con, self.lake.catalog, self.database))
            self._views_owned = True
            self._view_tables = tables
            self._catalog_token = token
            for schema, view in self.con.execute(
                "SELECT schema_name, view_name FROM duckdb_views() WHERE database_name = ? AND NOT internal",
                [self.database],
            ).fetchall():
                if f"{self.database}.{schema}.{view}" not in created:
                    self.con.execute(f"DROP VIEW IF EXISTS {_qualified(self.database, schema, view)}")
            for (schema,) in self.con.execute(
                "SELECT schema_name FROM duckdb_schemas() WHERE database_name = ? AND NOT internal",
                [self.database],
            ).fetchall():
                if schema not in namespaces and schema != "main":
                    self.con.execute(f"DROP SCHEMA IF EXISTS {_qualified(self.database, schema)} CASCADE")
        except Exception as e:  # the commit stands; only reading it through the views is affected
            warnings.warn(f"could not refresh the {self.database}.* views: {e}", RuntimeWarning, stacklevel=2)

    # -- running lake statements -------------------------------------------------------------------

    def _check_autocommit(self, identifier: str) -> None:
        if transactions.check_write(self.lake, identifier):
            return  # inside BEGIN ... COMMIT: the write stages (sql/transactions.py)
        try:
            self.con.execute("BEGIN TRANSACTION")
        except duckdb.TransactionException:
            raise SqlError(
                f"{identifier}: Iceberg tables commit each statement on its own; run it outside "
                "BEGIN ... COMMIT (the DuckDB transaction is still open)"
            ) from None
        self.con.execute("ROLLBACK")

    def _joined(
        self, merge: Any, t: LakeTable, text: str, tokens: list[Token], params: Any
    ) -> duckdb.DuckDBPyRelation:
        """MERGE INTO, UPDATE ... FROM, DELETE ... USING (and RETURNING): `iceduck.sql.merge`; INSERT
        with RETURNING / ON CONFLICT / OR REPLACE: `iceduck.sql.upsert` (which takes parameters)."""
        takes_params = merge.__name__.endswith("upsert")
        if params is not None and not takes_params:
            raise SqlError(
                f"{t.identifier}: parameters are not supported in this statement on Iceberg tables"
            )
        self._existing(t)
        self._check_autocommit(t.identifier)
        if mentions(tokens, self.database):
            self.refresh_views(only_if_changed=True)
        try:
            args = (params,) if takes_params else ()
            result: duckdb.DuckDBPyRelation = merge.run(
                self.con, self.lake, t.identifier, text, tokens, *args
            )
        except duckdb.Error as e:
            raise _as_written(e, text) from None
        return result

    def _run(self, s: p.Statement, t: LakeTable, params: Any) -> duckdb.DuckDBPyRelation:
        if isinstance(s, p.CreateSchema):
            return self._create_schema(s, t)
        if isinstance(s, p.DropSchema):
            return self._drop_schema(s, t)
        if isinstance(s, p.CreateTable):
            return self._create_table(s, t, params)
        if isinstance(s, p.DropTable):
            return self._drop_table(s, t)
        if isinstance(s, p.AlterTable):
            return self._alter(s, t)
        handle = self._existing(t)
        if isinstance(s, p.Analyze):
            return analyze_statement(self.lake, self.con, handle.identifier, s.columns)
        if isinstance(s, p.Insert):
            return self._count(self._insert(s, handle, params))
        if isinstance(s, p.Truncate):
            return self._count(handle.delete(None).deleted_rows)
        texts = [s.where or "", *(expr for _, expr in getattr(s, "assignments", ()))]
        with self._lake_reads_as_tables(texts) as (where, *values):
            if isinstance(s, p.Delete):
                return self._count(handle.delete(where or None).deleted_rows)
            assignments = {column: value for (column, _), value in zip(s.assignments, values, strict=True)}
            return self._count(handle.update(assignments, where or None).updated_rows)

    @contextlib.contextmanager
    def _lake_reads_as_tables(self, texts: list[str]) -> Iterator[list[str]]:
        """`texts` (WHERE and SET expressions) with each `lake.ns.t` they read replaced by a copy of
        the table's current rows in DuckDB's default database, for as long as the block runs.

        The writer evaluates these expressions on a cursor of its own, and the lake views read
        through a source only the lake's connection has. Each copy is a table of the same name in a
        schema of its own, so `t.column` and aliases keep working.
        """
        schemas: dict[str, str] = {}  # namespace -> schema holding its copies
        copied: set[str] = set()
        out = []
        try:
            for text in texts:
                out.append(self._rewrite_lake_reads(text, schemas, copied))
            yield out
        finally:
            for schema in schemas.values():
                with contextlib.suppress(duckdb.Error):
                    self.con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    def _rewrite_lake_reads(self, text: str, schemas: dict[str, str], copied: set[str]) -> str:
        text = self._resolved_expression(text)
        if not text or self.database not in text.lower():
            return text
        tokens = tokenize(text)
        pieces: list[str] = []
        done = 0
        i = 0
        while i < len(tokens):
            j = i
            parts: list[str] = []
            if tokens[i].is_name and tokens[i].text.lower() == self.database:
                parts.append(tokens[i].text)
                while j + 2 < len(tokens) and tokens[j + 1].is_op(".") and tokens[j + 2].is_name:
                    parts.append(tokens[j + 2].text)
                    j += 2
            table = self._resolve_table(p.Name(tuple(parts))) if len(parts) >= 3 else None
            if table is None or not table.exists:
                i += 1
                continue
            if table.namespace not in schemas:
                schemas[table.namespace] = quote_ident(f"__iceduck_lake_{uuid.uuid4().hex}")
                self.con.execute(f"CREATE SCHEMA {self._default_database()}.{schemas[table.namespace]}")
            copy = f"{self._default_database()}.{schemas[table.namespace]}.{quote_ident(table.name)}"
            if table.identifier not in copied:
                source = _qualified(self.database, *table.namespace.split("."), table.name)
                self.con.execute(f"CREATE TABLE {copy} AS SELECT * FROM {source}")
                copied.add(table.identifier)
            pieces += [text[done : tokens[i].start], copy]
            done = tokens[j].end
            i = j + 1
        return "".join(pieces) + text[done:]

    def _default_database(self) -> str:
        return quote_ident(str(self.con.execute("SELECT current_database()").fetchall()[0][0]))

    def _existing(self, t: LakeTable) -> TableHandle:
        if not t.namespace_exists:
            raise NamespaceNotFoundError(f"table {t.identifier}: namespace '{t.namespace}' does not exist")
        if not t.exists:
            raise TableNotFoundError(f"table {t.identifier} does not exist")
        # The catalog listed it for this statement; a table dropped since fails at its first load.
        return TableHandle(self.lake, t.identifier)

    def _count(self, n: int) -> duckdb.DuckDBPyRelation:
        return self.con.sql(f'SELECT CAST({int(n)} AS BIGINT) AS "Count"')

    def _status(self, column: str = "Count") -> duckdb.DuckDBPyRelation:
        kind = "BIGINT" if column == "Count" else "BOOLEAN"
        return self.con.sql(f'SELECT CAST(NULL AS {kind}) AS "{column}" WHERE false')

    def _create_schema(self, s: p.CreateSchema, t: LakeTable) -> duckdb.DuckDBPyRelation:
        if t.exists:
            if s.if_not_exists:
                return self._status()
            raise AlreadyExistsError(f"namespace '{t.namespace}' exists already")
        self.lake.create_namespace(t.namespace)
        self.refresh_views()
        return self._status()

    def _drop_schema(self, s: p.DropSchema, t: LakeTable) -> duckdb.DuckDBPyRelation:
        if not t.exists:
            if s.if_exists:
                return self._status("Success")
            raise NamespaceNotFoundError(f"namespace '{t.namespace}' does not exist")
        tables = self.lake.list_tables(t.namespace)
        views = iceberg_views.views_in(self.lake.catalog, t.namespace)
        if (tables or views) and not s.cascade:
            raise SqlError(
                f"namespace '{t.namespace}' holds {namespace_contents(tables, views)}; drop them first or use "
                "DROP SCHEMA ... CASCADE"
            )
        iceberg_views.drop_all(self.lake.catalog, t.namespace, views)
        for name in tables:
            self.lake.drop_table(f"{t.namespace}.{name}")
        self.lake.drop_namespace(t.namespace)
        self.refresh_views()
        return self._status("Success")

    def _create_table(self, s: p.CreateTable, t: LakeTable, params: Any) -> duckdb.DuckDBPyRelation:
        if not t.namespace_exists:
            raise NamespaceNotFoundError(
                f"cannot create table {t.identifier}: namespace '{t.namespace}' does not exist"
            )
        if t.exists and s.or_replace:
            from iceduck.sql.replace_table import replace_statement  # sql/replace_table.py

            options = _table_options(t.identifier, s.options, default_version=None)
            what = f"CREATE OR REPLACE TABLE {t.identifier} AS"
            rel = self._query(s.query, params, what) if s.query is not None else None
            try:
                rows = replace_statement(self.con, self.lake, s, t.identifier, rel, options)
            finally:
                self.refresh_views()
            return self._status() if rel is None else self._count(rows)
        if t.exists:
            if s.if_not_exists:
                return self._status()
            raise AlreadyExistsError(f"table {t.identifier} exists already")
        format_version, properties, location = _table_options(t.identifier, s.options)
        kwargs: dict[str, Any] = dict(
            partition_by=list(s.partition_by) or None, sort_by=list(s.sort_by) or None,
            properties=properties, format_version=format_version, location=location,
        )  # fmt: skip
        if s.columns is not None:
            defs = column_definitions(self.con, s.columns)
            if format_version < 3 and any(d.has_default for d in defs):
                raise SqlTypeError(f"table {t.identifier}: column defaults need format version 3")
            schema = make_schema([d.field() for d in defs], [d.name for d in defs if d.primary_key])
            self.lake.create_table(t.identifier, schema, **kwargs)
            self.refresh_views()
            return self._status()
        assert s.query is not None
        rel = self._query(s.query, params, f"CREATE TABLE {t.identifier} AS")
        schema = make_schema(relation_fields(rel))
        handle = self.lake.create_table(t.identifier, schema, **kwargs)
        rows = 0
        try:
            if s.with_data:
                rows = handle.append(rel, by_name=True).added_rows
        except BaseException:
            with contextlib.suppress(Exception):
                self.lake.drop_table(t.identifier, purge=True)
            raise
        finally:
            self.refresh_views()
        return self._count(rows)

    def _query(self, query: str, params: Any, what: str) -> duckdb.DuckDBPyRelation:
        try:
            tokens = tokenize(query)
        except SqlSyntaxError:
            tokens = []
        rel = self._duck(query, tokens, params)
        if rel is None:
            raise SqlError(f"{what}: expected a query returning rows, not {query.strip()[:60]!r}")
        return rel

    def _insert(self, s: p.Insert, handle: TableHandle, params: Any) -> int:
        ident = handle.identifier
        table = handle.load()
        handle = handle.pinned(table)  # the append starts from this state: one load per INSERT
        schema = table.metadata.schema
        query = s.query
        if query is None:  # DEFAULT VALUES: one row, every column from its write-default (else NULL)
            query = "VALUES (" + ", ".join("DEFAULT" for _ in schema.fields) + ")"
        rows = None if s.by_name else p.values_rows(query)
        if rows is not None:
            width = len(rows[0])
            if any(len(row) != width for row in rows):
                raise SqlError(f"INSERT INTO {ident}: VALUES lists must all have the same length")
            targets = _targets(s, schema, width, ident)
            # DuckDB types an INSERT's VALUES by the target columns ('12.50' and 1 in one DECIMAL column)
            query = "VALUES " + ", ".join(
                "(" + ", ".join(_value_sql(item, f) for item, f in zip(row, targets, strict=True)) + ")"
                for row in rows
            )
        rel = self._query(query, params, f"INSERT INTO {ident}")
        given = list(rel.columns)
        targets = (
            [_field(schema, name, ident) for name in given]
            if s.by_name
            else _targets(s, schema, len(given), ident)
        )
        names = [f.name for f in targets]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SqlError(f"INSERT INTO {ident}: column {', '.join(dupes)} given more than once")
        # Cast to the columns' types as DuckDB's INSERT does ('2026-10-01' into a DATE column)
        projection = ", ".join(
            f"CAST(#{i + 1} AS {duck_type(f.type, f.name)}) AS {quote_ident(f.name)}"
            for i, f in enumerate(targets)
        )
        return handle.append(rel.project(projection), by_name=True).added_rows

    def _drop_table(self, s: p.DropTable, t: LakeTable) -> duckdb.DuckDBPyRelation:
        if not t.exists:
            if s.if_exists:
                return self._status("Success")
            self._existing(t)
        self.lake.drop_table(t.identifier, purge=s.purge)
        self.refresh_views()
        return self._status("Success")

    def _alter(self, s: p.AlterTable, t: LakeTable) -> duckdb.DuckDBPyRelation:
        if not t.exists and s.if_exists:
            return self._status("Success")
        handle = self._existing(t)
        a = s.action
        if isinstance(a, p.RenameTable):
            self.lake.rename_table(t.identifier, self._rename_target(t, a.new_name))
            self.refresh_views()
        elif isinstance(a, p.SetPartitioning):
            handle.update_spec(list(a.terms))
        elif isinstance(a, p.SetSortOrder):
            handle.set_sort_order(list(a.terms))
        elif isinstance(a, p.SetProperties):
            version, properties, location = _table_options(t.identifier, a.options, default_version=None)
            if location is not None:
                raise SqlError(f"table {t.identifier}: the location cannot be changed")
            if properties:
                handle.set_properties(properties)
            if version is not None and version != handle.format_version:
                handle.upgrade_format_version(version)
        elif isinstance(a, p.ResetProperties):
            handle.unset_properties(list(a.keys))
        else:
            self._alter_schema(handle, a)
        return self._status("Success")

    def _alter_schema(self, handle: TableHandle, a: p.AlterAction) -> None:
        ident = handle.identifier
        schema = handle.schema
        with handle.update_schema() as u:
            if isinstance(a, p.AddColumn):
                defs = column_definitions(self.con, a.definition)
                if len(defs) != 1:
                    raise SqlError(
                        f"ALTER TABLE {ident} ADD COLUMN: expected one column, not {a.definition!r}"
                    )
                d = defs[0]
                if d.primary_key:
                    raise SqlError(f"ALTER TABLE {ident} ADD COLUMN {d.name}: PRIMARY KEY cannot be added")
                if _find_column(schema, d.name) is not None:
                    if a.if_not_exists:
                        return
                    raise AlreadyExistsError(f"table {ident}: column {d.name} exists already")
                default = d.default if d.has_default else None
                u.add_column(
                    d.name, d.type, initial_default=default, write_default=default, required=d.required
                )
            elif isinstance(a, p.DropColumn):
                column = _find_column(schema, a.column)
                if column is None:
                    if a.if_exists:
                        return
                    raise SqlError(f"table {ident}: no column {a.column} ({_columns(schema)})")
                u.drop_column(column)
            elif isinstance(a, p.RenameColumn):
                u.rename_column(_require_column(schema, a.column, ident), a.new_name)
            elif isinstance(a, p.SetDefault | p.SetIdentifierFields):
                from iceduck.sql.schema_ddl import alter_key_or_default  # sql/schema_ddl.py

                alter_key_or_default(self.con, u, schema, a, ident)
            elif isinstance(a, p.AlterColumnType):
                column = _require_column(schema, a.column, ident)
                new_type = type_from_sql(self.con, a.type, column)
                current = schema.find_field(_field_id(schema, column))
                if current is None or current.type != new_type:
                    u.widen_column(column, new_type)

    def _rename_target(self, t: LakeTable, name: p.Name) -> str:
        parts = name.parts
        _check_table_name(name, parts[-1])
        if len(parts) == 1:
            return f"{t.namespace}.{parts[0]}"
        if parts[0].lower() == self.database and len(parts) >= 3:
            parts = parts[1:]
        namespace = self._find_namespace(parts[:-1])
        if namespace is None:
            raise NamespaceNotFoundError(
                f"cannot rename {t.identifier} to {name}: namespace '{'.'.join(parts[:-1])}' does not exist"
            )
        return f"{namespace}.{parts[-1]}"


# -- scripts --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScriptStatement:
    """One statement of a script: its text and DuckDB's statement type (None where DuckDB's parser
    refuses a statement only iceduck understands, such as `DROP TABLE ns.t PURGE`)."""

    query: str
    type: duckdb.StatementType | None


def split_script(con: duckdb.DuckDBPyConnection, text: str) -> list[ScriptStatement]:
    """The statements of `text`, as `con.extract_statements` gives them; where DuckDB's parser refuses
    the script only because of statements that may be about lake tables (`DROP TABLE ... PURGE`,
    `ALTER TABLE ... RENAME TO ns.t2`), those come back with type None. Any other syntax error is
    DuckDB's, raised before anything runs."""
    try:
        return [ScriptStatement(s.query, s.type) for s in con.extract_statements(text)]
    except duckdb.Error as error:
        original = error
    try:
        pieces = split_statements(text)
    except SqlSyntaxError:
        raise original from None
    out = []
    for piece in pieces:
        try:
            out += [ScriptStatement(s.query, s.type) for s in con.extract_statements(piece)]
        except duckdb.Error:
            toks = tokenize(piece)
            if p.target(toks) is None and not _spark_call(toks, piece):
                raise original from None
            out.append(ScriptStatement(piece, None))
    return out


def _spark_call(tokens: list[Token], text: str) -> bool:
    """Whether the statement is a CALL of a procedure iceduck runs (Spark's `table => 'ns.t'`
    arguments are not DuckDB syntax: `table` is a reserved word to its parser)."""
    if not tokens or not tokens[0].is_word("CALL"):
        return False
    from iceduck.sql import procedures

    return procedures.recognise(tokens, text) is not None


# Statement heads the front door plans (reads, and INSERT ... SELECT into DuckDB tables).
_READ_HEADS = ("SELECT", "WITH", "FROM", "TABLE", "VALUES", "INSERT")
_QUERY_HEADS = ("SELECT", "WITH", "FROM", "TABLE", "VALUES")
# Heads of statements about a query (or a table) whose names the front door resolves without
# planning them: `EXPLAIN [ANALYZE] <statement>`, `PREPARE q AS <statement>` (EXECUTE plans it),
# `DESCRIBE` / `SUMMARIZE <query or name>`.
_NAMING_HEADS = ("EXPLAIN", "PREPARE", "DESCRIBE", "SUMMARIZE")


def _is_script(tokens: list[Token]) -> bool:
    """Whether the tokens hold more than one statement (a `;` before the last token)."""
    return any(t.is_op(";") for t in tokens[:-1])


def _one_query(tokens: list[Token]) -> bool:
    """Whether the tokens are one statement that reads like a query (DuckDB decides: a WITH may
    head an INSERT, which `hooks.lazy_select` leaves to `con.sql`)."""
    if not tokens or not (tokens[0].is_word(*_QUERY_HEADS) or tokens[0].is_op("(")):
        return False
    ends = [i for i, t in enumerate(tokens) if t.is_op(";")]
    return not ends or ends == [len(tokens) - 1]


def _calls_varying(tokens: list[Token]) -> bool:
    """Whether a word of the statement names a function (or SQL value keyword) whose value may differ
    when the text runs again: DuckDB's catalog says which (`iceduck.duckdb.builtins`)."""
    return any(t.kind == WORD and varies(t.text) for t in tokens)


# Words that make an EXECUTE argument read tables (DuckDB's EXECUTE takes constants only).
_QUERY_WORDS = frozenset({"SELECT", "FROM", "TABLE", "VALUES"})


# Statements whose rewritten text the front door keeps per connection.
_PLANNED_STATEMENTS = 128
# Words without which no predicate can be pushed into a table reference of a statement.
_FILTERING = ("WHERE", "ON", "USING", "JOIN", "HAVING", "QUALIFY")


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


_BUILT_IN: frozenset[str] | None = None

# what `Router._signatures` holds for a text seen once, and for one whose relation is always bound
_SEEN_ONCE: Signature = object()
_NOT_AGAIN: Signature = object()


def _built_in_names() -> frozenset[str]:
    """Lowercase names that may stand before `(` in a statement and are DuckDB's own: functions,
    keywords and types of a fresh connection (no UDF, macro or extension a user added), and
    `iceberg_scan` (the front door rewrites it)."""
    global _BUILT_IN
    if _BUILT_IN is None:
        _BUILT_IN = builtins().names | {SCAN.name}
    return _BUILT_IN


def _only_built_in_calls(tokens: list[Token]) -> bool:
    """Whether every name called in the statement (`name(`) is one of DuckDB's own (`AS name(`
    is an alias with its columns, or a type)."""
    names = _built_in_names()
    return all(
        t.text.lower() in names
        for before, t, after in zip([None, *tokens], tokens, tokens[1:], strict=False)
        if (t.kind == WORD or t.kind == IDENT)
        and after.is_op("(")
        and not (before is not None and before.is_word("AS"))
    )


def _is_ctas(tokens: list[Token]) -> bool:
    """Whether the statement is CREATE [OR REPLACE] [TEMP] TABLE [IF NOT EXISTS] x AS <query>
    (it runs at once, so its rewritten text is never re-run later)."""
    return _ctas_query(tokens) is not None


def _ctas_query(tokens: list[Token]) -> int | None:
    """The index of the first token of a CREATE TABLE ... AS statement's query, or None when the
    statement is not one."""
    i, n = 0, len(tokens)
    for words in (("CREATE",), ("OR",), ("REPLACE",), ("TEMP", "TEMPORARY"), ("TABLE",)):
        if i < n and tokens[i].is_word(*words):
            i += 1
        elif words[0] in ("CREATE", "TABLE"):
            return None
    if (
        i + 2 < n
        and tokens[i].is_word("IF")
        and tokens[i + 1].is_word("NOT")
        and tokens[i + 2].is_word("EXISTS")
    ):
        i += 3
    if i >= n or not tokens[i].is_name:
        return None
    _, j = _name_at(tokens, i)
    return j + 1 if j + 1 < n and tokens[j].is_word("AS") else None


def _query_parts(text: str, tokens: list[Token]) -> tuple[str, str] | None:
    """(head, query) of a statement whose query DuckDB can serialise alone: ("", text) for a query,
    (`INSERT INTO x [(columns)] [BY NAME] `, its query) and (`CREATE TABLE x AS `, its query), with
    nothing after the query (no RETURNING, ON CONFLICT or WITH [NO] DATA); the CTEs heading an
    INSERT (`WITH c AS (...) INSERT INTO x SELECT ...`) go with its query, which they belong to;
    else None."""
    if tokens and tokens[0].is_word(*_NAMING_HEADS):
        i = 1
        if tokens[0].is_word("EXPLAIN") and len(tokens) > 1 and tokens[1].is_word("ANALYZE"):
            i = 2
        elif tokens[0].is_word("PREPARE"):
            if not (len(tokens) > 3 and tokens[1].is_name and tokens[2].is_word("AS")):
                return None
            i = 3
        if i >= len(tokens):
            return None
        rest = text[tokens[i].start :]
        if tokens[0].is_word("DESCRIBE", "SUMMARIZE") and tokens[i].is_name and not tokens[i].is_word(*_QUERY_HEADS):
            # `DESCRIBE name` is `DESCRIBE SELECT * FROM name` (the same rows)
            end = i + 1
            while end + 1 < len(tokens) and tokens[end].is_op(".") and tokens[end + 1].is_name:
                end += 2
            if end != len(tokens) - (1 if tokens[-1].is_op(";") else 0):
                return None
            return text[: tokens[i].start], f"SELECT * FROM {rest}"
        inner = _query_parts(rest, _tokens_of(rest))
        return None if inner is None else (text[: tokens[i].start] + inner[0], inner[1])
    if tokens and tokens[0].is_word("WITH"):
        after = _ctes_end(tokens)
        if after is None or not tokens[after].is_word("INSERT"):
            return "", text
        rest = text[tokens[after].start :]
        inner = _query_parts(rest, _tokens_of(rest))
        if inner is None or not inner[1].strip() or tokenize(inner[1])[0].is_word("WITH"):
            return None
        return inner[0], text[: tokens[after].start] + inner[1]
    if not tokens or not tokens[0].is_word("INSERT", "CREATE"):
        return "", text
    if tokens[0].is_word("CREATE"):
        at = _ctas_query(tokens)
        end = len(tokens) - (1 if tokens[-1].is_op(";") else 0)
        if at is None or at >= end or (end - at > 1 and tokens[end - 1].is_word("DATA")):
            return None
        return text[: tokens[at].start], text[tokens[at].start :]
    try:
        statement = p.parse(text, tokens)  # refuses RETURNING, ON CONFLICT, OR REPLACE, an alias
    except SqlSyntaxError:
        return None
    if not isinstance(statement, p.Insert) or statement.query is None:
        return None
    at = text.rfind(statement.query)
    return None if at < 0 else (text[:at], text[at:])


def _tokens_of(text: str) -> list[Token]:
    return trim_statement(text, tokenize(text))[1]


def _ctes_end(tokens: list[Token]) -> int | None:
    """The index of the first token after the CTE list of a statement starting with WITH (`WITH
    [RECURSIVE] name [(columns)] AS [NOT] [MATERIALIZED] (...), ...`), None when not read so."""
    n = len(tokens)
    j = 2 if n > 1 and tokens[1].is_word("RECURSIVE") else 1
    while True:
        if j >= n or not tokens[j].is_name:
            return None
        j += 1
        if j < n and tokens[j].is_op("("):
            close = closing(tokens, j)
            if close is None:
                return None
            j = close + 1
        if not (j < n and tokens[j].is_word("AS")):
            return None
        j += 1
        if j < n and tokens[j].is_word("NOT"):
            j += 1
        if j < n and tokens[j].is_word("MATERIALIZED"):
            j += 1
        if not (j < n and tokens[j].is_op("(")):
            return None
        close = closing(tokens, j)
        if close is None:
            return None
        j = close + 1
        if j < n and tokens[j].is_op(","):
            j += 1
            continue
        return j if j < n else None


@dataclass(frozen=True, slots=True)
class _Planned:
    """What the front door made of a statement: its rewritten text and the token its pruning is
    kept under (None: only its names were resolved, nothing is pruned)."""

    text: str
    token: str | None


_WORD_IN_TEXT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _name_at(tokens: list[Token], i: int) -> tuple[list[str], int]:
    """The dotted name starting at token `i`, and the index of the token after it."""
    parts = [tokens[i].text]
    j = i + 1
    while j + 1 < len(tokens) and tokens[j].is_op(".") and tokens[j + 1].is_name:
        parts.append(tokens[j + 1].text)
        j += 2
    return parts, j


# -- helpers --------------------------------------------------------------------------------------


_CONTEXT = re.compile(r"\n+LINE \d+: (?P<line>.*)\n(?P<caret> *\^+ *)$", re.S)


def _as_written(e: duckdb.Error, text: str) -> duckdb.Error:
    """DuckDB's error about SQL iceduck wrote for a statement (a writer's conversion, say), without
    the excerpt of that SQL DuckDB appends (`LINE 1: ...CAST(((epoch_us(...`): the user's statement
    is not that text. An excerpt of the user's own text is kept."""
    message = str(e)
    m = _CONTEXT.search(message)
    if m is None or m.group("line").strip().strip(".").strip() in text:
        return e
    return type(e)(message[: m.start()].rstrip())


def _may_write(tokens: list[Token]) -> bool:
    """Whether any statement of the script starts with a word that can write a table."""
    at_start, depth = True, 0
    for t in tokens:
        if at_start and depth == 0 and t.kind == WORD and t.text.upper() in _HEADS:
            return True
        at_start = False
        if t.kind == OP and t.text in "([{":
            depth += 1
        elif t.kind == OP and t.text in ")]}":
            depth -= 1
        elif t.is_op(";") and depth == 0:
            at_start = True
    return False


def mentions(tokens: list[Token], database: str) -> bool:
    """Whether the tokens name something inside `database` (`database.x`)."""
    return any(
        t.is_name and t.text.lower() == database and tokens[i + 1].is_op(".")
        for i, t in enumerate(tokens[:-1])
    )


def _match(names: Iterable[str], wanted: str) -> str | None:
    """`wanted` among `names`: exactly, else the only case-insensitive match (DuckDB's rule)."""
    names = list(names)
    if wanted in names:
        return wanted
    folded = [n for n in names if n.lower() == wanted.lower()]
    return folded[0] if len(folded) == 1 else None


def _qualified(*parts: str) -> str:
    return ".".join(quote_ident(part) for part in parts)


def _table_options(
    identifier: str, options: tuple[tuple[str, str], ...], default_version: int | None = 3
) -> tuple[Any, dict[str, str], str | None]:
    version: int | None = default_version
    location: str | None = None
    properties: dict[str, str] = {}
    for key, value in options:
        if key.lower() in _FORMAT_VERSION_KEYS:
            if value not in ("1", "2", "3"):
                raise SqlError(f"table {identifier}: format-version must be 1, 2 or 3, not {value!r}")
            version = int(value)
        elif key.lower() == "location":
            location = value
        else:
            properties[key] = value
    return version, properties, location


def _check_table_name(name: p.Name, table: str) -> None:
    """A quoted table name holding a '.' (`s."a.c"`) is one name to DuckDB; the lake's catalogs key
    tables by `namespace.table`, where it would read as table `c` in namespace `s.a`: refused."""
    if "." in table:
        raise SqlError(f"table {name}: a lake table's name cannot contain '.'")


def _find_column(schema: Schema, name: str) -> str | None:
    """The column's name as the schema spells it (dotted names reach into structs), or None."""
    fields = schema.fields
    out: list[str] = []
    for part in name.split("."):
        found = _match([f.name for f in fields], part)
        if found is None:
            return None
        out.append(found)
        field = next(f for f in fields if f.name == found)
        fields = getattr(field.type, "fields", ())
    return ".".join(out)


def _require_column(schema: Schema, name: str, identifier: str) -> str:
    column = _find_column(schema, name)
    if column is None:
        raise SqlError(f"table {identifier}: no column {name} ({_columns(schema)})")
    return column


def _field(schema: Schema, name: str, identifier: str) -> NestedField:
    found = _match([f.name for f in schema.fields], name)
    if found is None:
        raise SqlError(f"INSERT INTO {identifier}: no column {name} in the table ({_columns(schema)})")
    return next(f for f in schema.fields if f.name == found)


def _targets(s: p.Insert, schema: Schema, given: int, identifier: str) -> list[NestedField]:
    """The table columns an INSERT's `given` values go to, by position."""
    if s.columns is not None:
        if len(s.columns) != given:
            raise SqlError(
                f"INSERT INTO {identifier}: {len(s.columns)} column(s) named ({', '.join(s.columns)}) but "
                f"the query gives {given}"
            )
        return [_field(schema, name, identifier) for name in s.columns]
    fields = list(schema.fields)
    if given != len(fields):
        raise SqlError(
            f"INSERT INTO {identifier}: the table has {len(fields)} columns ({', '.join(f.name for f in fields)}) "
            f"but {given} values were supplied"
        )
    return fields


def _value_sql(item: str, f: NestedField) -> str:
    if item.strip().upper() == "DEFAULT":
        value = from_json(f.type, f.write_default) if f.has_write_default else None
        return duck_literal(f.type, value)
    return f"CAST(({item}) AS {duck_type(f.type, f.name)})"


def _field_id(schema: Schema, dotted: str) -> int:
    fields = schema.fields
    fid = -1
    for part in dotted.split("."):
        field = next(f for f in fields if f.name == part)
        fid = field.id
        fields = getattr(field.type, "fields", ())
    return fid


def _columns(schema: Schema) -> str:
    return "columns: " + ", ".join(f.name for f in schema.fields)


__all__ = [
    "LAKE_DATABASE",
    "NOT_MINE",
    "Front",
    "LakeTable",
    "Router",
    "ScriptStatement",
    "SqlError",
    "mentions",
    "split_script",
]
