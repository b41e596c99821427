"""`Lake.sql`: the dispatcher. Statements about the lake's Iceberg tables run through the write API, the rest in DuckDB.

Each `Lake` owns one `Router` (made on its first `sql` call). It asks DuckDB's parser what each
statement is (`sql/classify.py`: `extract_statements`' statement types, iceduck's lexer only where
DuckDB's parser refuses lake-only syntax such as `DROP TABLE ns.t PURGE`), and hands it on:

* a text whose statements iceduck never runs itself (queries, EXPLAIN, SET, ...) goes to the
  front door's reads (`sql/read_plan.py`), which resolve and prune its lake references;
* BEGIN / COMMIT / ROLLBACK to `sql/transactions.py`; the lake's S3 and store secrets, ATTACH of
  Iceberg catalogs (the `front`, `sql/attach.py`), Iceberg views, COMMENT ON and COPY FROM
  DATABASE, Spark's procedures, PREPARE/EXECUTE and EXPLAIN of lake writes to their modules;
* a write whose target (`sql/parse.py`'s `target`) resolves to a lake table or namespace
  (`sql/lake_names.py`) to `sql/merge.py` / `sql/upsert.py` (joined writes, RETURNING, ON CONFLICT)
  or `sql/lake_writes.py` (CREATE/DROP/ALTER/INSERT/DELETE/UPDATE/TRUNCATE/ANALYZE);
* anything else to DuckDB, through the reads.

The catalog's tables are readable as `lake.<ns>.<table>` views (`sql/lake_views.py`); CREATE, DROP
and RENAME refresh them, and a statement mentioning `lake.` refreshes them first when the catalog
changed behind this connection's back.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable
from typing import Any, Protocol

import duckdb

from iceduck.duckdb.capture import forget_statements
from iceduck.duckdb.catalog_views import attach_catalog_views
from iceduck.errors import TableNotFoundError
from iceduck.io.storage import s3_registry, store_registry
from iceduck.sql import catalog_ddl, transactions
from iceduck.sql import parse as p
from iceduck.sql import views as iceberg_views
from iceduck.sql.classify import Classifier, Script, ScriptStatement, Type, split_script
from iceduck.sql.lake_names import LakeNames, LakeTable, SqlError
from iceduck.sql.lake_views import AttachViews, LakeViews, mentions
from iceduck.sql.lake_writes import LakeWrites
from iceduck.sql.logs import enable_logging, enables_iceberg_logging
from iceduck.sql.read_plan import ReadPlan
from iceduck.sql.secrets import handle_s3_secret, handle_store_secret
from iceduck.sql.time_travel import as_travelled, mentions_time_travel, rewrite_time_travel
from iceduck.sql.tokens import SqlSyntaxError, Token, tokenize, trim_statement
from iceduck.tables import Tables

LAKE_DATABASE = "lake"

NOT_MINE: Any = object()  # what a `Front` returns for a statement it leaves to the router
_UNKNOWN: Any = object()  # a statement's type not given: classified when needed


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
        self.database = database.lower()
        self.implicit = implicit
        self.front = front
        self.transaction: Any = None  # the open BEGIN ... COMMIT (sql/transactions.py)
        self.prepared_writes: dict[str, str] = {}  # PREPAREd lake writes by lowercase name (sql/prepared.py)
        # what each statement is, as DuckDB's parser says (kept per text)
        self.classify = Classifier(self.con)
        self.views = LakeViews(lake, attach_views, self.database)
        self.names = LakeNames(lake, self.views, self.database, implicit)
        self.reads = ReadPlan(
            self.con, self.names, self.views, self.classify, database=self.database, implicit=implicit, front=front
        )
        self.writes = LakeWrites(lake, self.names, self.views, self.reads, self.database)
        if attach_views is not None and self.views.namespaces():
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
        try:
            script = self.classify(query)  # each statement's kind, as DuckDB's parser says (sql/classify.py)
            if enables_iceberg_logging(tokens) and not script.is_script:
                enable_logging(self.con, query, tokens)  # CALL enable_logging('Iceberg'): see sql/logs.py
                return None
            return self._execute(query, tokens, script, params)
        except duckdb.Error as e:
            transactions.failed(self, e)
            if not travels:
                raise
            raise as_travelled(e, travels) from None
        except BaseException as e:
            transactions.failed(self, e)  # a statement inside BEGIN ... COMMIT failed (sql/transactions.py)
            raise

    def _execute(
        self, query: str, tokens: list[Token], script: Script, params: Any
    ) -> duckdb.DuckDBPyRelation | None:
        if not script.is_script:
            handled = self._prepared_write(query, tokens, script.type)
            if handled is not NOT_MINE:
                return handled
        if (
            not script.may_write
            and not script.has_transaction
            and not (self.front is not None and self.front.wants(tokens))
        ):
            if mentions(tokens, self.database):
                self.refresh_views(only_if_changed=True)
            if self.front is not None:
                self.front.before_read(tokens)
            if params is not None or not script.is_script:
                return self.reads.run(query, tokens, params, script.type)
            # A script (`PREPARE q AS ...; EXECUTE q(...)`, `SET ...; SELECT ...`) runs statement by
            # statement, so each is planned as it would be alone.
            return self._script(script.statements, None)
        if script.has(Type.CREATE, Type.DROP, Type.ALTER, None):
            forget_statements(self.con)  # a view a stored pruning was derived through may change
        if not script.is_script:
            return self.statement(query, params, tokens, script.type)
        if params is not None:
            raise SqlError("parameters need a script of one statement")
        return self._script(script.statements, params)

    def _script(self, statements: Iterable[ScriptStatement], params: Any) -> duckdb.DuckDBPyRelation | None:
        """Run the statements in order and return the last one's result. Each earlier query is run
        to its end (its rows dropped) before the next statement starts, as DuckDB runs every
        statement of a script: a query may call a function that changes something."""
        result = None
        for statement in statements:
            if result is not None:
                result.materialize()
            result = self.statement(statement.query, params, kind=statement.type)
        return result

    def statement(
        self, text: str, params: Any, tokens: list[Token] | None = None, kind: Any = _UNKNOWN
    ) -> duckdb.DuckDBPyRelation | None:
        """Run one statement of a script (the `front` sees it first); `tokens`, `kind` (DuckDB's
        statement type, None where its parser refuses the text): the text's, when known."""
        if tokens is None:
            text, tokens = trim_statement(text, tokenize(text))
        if kind is _UNKNOWN:
            kind = self.classify(text).type
        if transactions.handles(tokens):  # BEGIN / COMMIT / ROLLBACK: see sql/transactions.py
            transactions.run(self, tokens)
            return None
        transactions.refuse_inside(self, tokens)
        handled = self._prepared_write(text, tokens, kind)
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
                resolve=lambda parts: self.names.resolve_table(p.Name(parts)), refresh=self.refresh_views,
            )  # fmt: skip
            if handled is not NOT_MINE:
                return handled
        special = catalog_ddl.recognise(tokens, text)  # COMMENT ON, CREATE VIEW, COPY FROM DATABASE
        if special is not None:
            handled = catalog_ddl.run(
                special, con=self.con, lake=self.lake, database=self.database, not_mine=NOT_MINE,
                resolve=lambda parts: self.names.resolve_table(p.Name(parts)),
                statement=lambda query: self.statement(query, None),
            )  # fmt: skip
            if handled is not NOT_MINE:
                return handled
        if kind in (Type.CALL, None):  # Spark's procedures: sql/procedures.py
            from iceduck.sql import procedures

            call = procedures.recognise(tokens, text)
            if call is not None:
                return procedures.run(call, self.con, self.lake, self._procedure_table)
        head = p.target(tokens)
        table = self.names.resolve(head) if head is not None else None
        if head is None or table is None:
            if mentions(tokens, self.database):
                self.refresh_views(only_if_changed=True)
            transactions.before_duck(self, kind)  # inside BEGIN ... COMMIT: DuckDB's own transaction
            return self.reads.run(text, tokens, params, kind)
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
            return self.writes.run(statement, table, params)
        except duckdb.Error as e:
            raise _as_written(e, text) from None

    def _prepared_write(self, text: str, tokens: list[Token], kind: Type | None) -> Any:
        """PREPARE / EXECUTE / DEALLOCATE of a write into a lake table (sql/prepared.py), EXPLAIN of a
        DELETE / UPDATE / MERGE on one (sql/explain_write.py); else NOT_MINE. `kind`: DuckDB's
        statement type (DEALLOCATE is a DROP to it; DuckDB prepares no MERGE: None)."""
        if kind == Type.EXPLAIN:
            from iceduck.sql import explain_write

            inner = explain_write.explained(tokens)
            head = p.target(inner) if inner is not None else None
            table = self.names.resolve(head) if head is not None else None
            if inner is None or table is None or not table.exists:
                return NOT_MINE
            if mentions(inner, self.database):
                self.refresh_views(only_if_changed=True)
            body = text[inner[0].start :]
            return explain_write.explain(
                self.con, self.lake, table.identifier, body, tokenize(body), self.reads.settle().zone
            )
        if kind not in (Type.PREPARE, Type.EXECUTE, Type.DROP, None):  # None: PREPARE of a MERGE
            return NOT_MINE
        from iceduck.sql import prepared

        return prepared.handle(self, text, tokens, NOT_MINE)

    def _procedure_table(self, name: str) -> str:
        """The lake table a procedure's `table` argument names (`ns.t`, `lake.ns.t`): relative to this
        router's catalog, as Spark reads `cat.system.p(table => 'ns.t')`."""
        parts = tuple(name.split("."))
        table = self.names.resolve_table(p.Name(parts))
        if (table is None or not table.exists) and len(parts) == 2:
            table = self.names.resolve_table(p.Name((self.database, *parts)))
        if table is None or not table.exists:
            raise TableNotFoundError(f"table {name} does not exist in the lake")
        return table.identifier


    # -- resolving names ---------------------------------------------------------------------------

    def travelling_table(self, parts: tuple[str, ...]) -> str | None:
        """What `iceberg_scan` calls the table `parts` names, for `AT (...)`: `<database>.ns.t` of
        this router's catalog, or of a catalog the front attached (`cat.ns.t`); None for others."""
        table = self.names.resolve_table(p.Name(parts))
        # qualified by this router's database: an attached catalog's tables are `cat.ns.t`
        if table is not None and table.exists:
            return f"{self.database}.{table.identifier}"
        return self.front.travelling_table(parts) if self.front is not None else None


    # -- the lake views ----------------------------------------------------------------------------


    def refresh_views(self, *, only_if_changed: bool = False) -> None:
        """Make `<database>.<ns>.<table>` match the catalog (`sql/lake_views.py`)."""
        self.views.refresh(only_if_changed=only_if_changed)

    def used_namespace(self) -> tuple[str, ...]:
        """(`<database>`, schema) when `USE <database>.<schema>` made a namespace of this router's
        catalog the connection's default, else () (`sql/lake_names.py`)."""
        return self.names.used_namespace()

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
        self.writes.existing(t)
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
