"""The lake statements iceduck runs itself: CREATE/DROP SCHEMA, CREATE/DROP/ALTER TABLE, INSERT,
DELETE, UPDATE, TRUNCATE and ANALYZE on a lake table, through the write API (`iceduck.tables`).

`LakeWrites.run` takes the statement as `sql/parse.py` reads it and the table `sql/lake_names.py`
resolved, and returns what DuckDB's statement would: a one-row `Count` for INSERT, DELETE, UPDATE,
TRUNCATE and CREATE TABLE AS, an empty `Count` for CREATE, an empty `Success` for DROP and ALTER.
Queries inside (the SELECT of an INSERT or CREATE TABLE AS) run through the front door's reads
(`sql/read_plan.py`) on the lake's connection; WHERE and SET expressions are DuckDB SQL over the
table's columns, evaluated by the writer with each `lake.ns.t` they read copied first.
"""

from __future__ import annotations

import contextlib
import uuid
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import duckdb

from iceduck.catalog.base import namespace_contents
from iceduck.duckdb.scan import SCAN
from iceduck.errors import AlreadyExistsError, NamespaceNotFoundError, TableNotFoundError
from iceduck.spec.values import from_json
from iceduck.sql import parse as p
from iceduck.sql import views as iceberg_views
from iceduck.sql.analyze import analyze_statement
from iceduck.sql.lake_names import LakeNames, LakeTable, SqlError, check_table_name, match
from iceduck.sql.lake_views import LakeViews, qualified
from iceduck.sql.parse_tree import parse_query, render, render_ref, replace_with
from iceduck.sql.read_plan import ReadPlan
from iceduck.sql.tokens import SqlSyntaxError, tokenize
from iceduck.sql.types import SqlTypeError, column_definitions, make_schema, relation_fields, type_from_sql
from iceduck.tables import TableHandle, Tables
from iceduck.vocabulary import duck_literal, quote_ident
from iceduck.write.types import duck_type

if TYPE_CHECKING:
    from iceduck.spec.types import NestedField, Schema

_FORMAT_VERSION_KEYS = ("format-version", "format_version")


class LakeWrites:
    """The statements about one catalog's tables that iceduck runs (see the module docstring)."""

    def __init__(
        self, lake: Tables, names: LakeNames, views: LakeViews, reads: ReadPlan, database: str
    ) -> None:
        self._lake = weakref.ref(lake)
        self.con = lake.con
        self.names = names
        self.views = views
        self.reads = reads
        self.database = database

    @property
    def lake(self) -> Tables:
        lake = self._lake()
        if lake is None:  # pragma: no cover - the lake owns the only path to its router
            raise SqlError("the lake of this connection is gone")
        return lake

    def run(self, s: p.Statement, t: LakeTable, params: Any) -> duckdb.DuckDBPyRelation:
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
        handle = self.existing(t)
        if isinstance(s, p.Analyze):
            return analyze_statement(self.lake, self.con, handle.identifier, s.columns)
        if isinstance(s, p.Insert):
            return self._count(self._insert(s, handle, params))
        if isinstance(s, p.Truncate):
            return self._count(handle.delete(None).deleted_rows)
        # DuckDB reads the WHERE in the session's TimeZone (a TIMESTAMPTZ literal is local time
        # there); the writer's cursor is in UTC, so the zone goes along with the text
        zone = self.reads.settle().zone
        texts = [s.where or "", *(expr for _, expr in getattr(s, "assignments", ()))]
        with self._lake_reads_as_tables(texts) as (where, *values):
            if isinstance(s, p.Delete):
                return self._count(handle.delete(where or None, zone=zone).deleted_rows)
            assignments = {column: value for (column, _), value in zip(s.assignments, values, strict=True)}
            return self._count(handle.update(assignments, where or None, zone=zone).updated_rows)

    def existing(self, t: LakeTable) -> TableHandle:
        if not t.namespace_exists:
            raise NamespaceNotFoundError(f"table {t.identifier}: namespace '{t.namespace}' does not exist")
        if not t.exists:
            raise TableNotFoundError(f"table {t.identifier} does not exist")
        # The catalog listed it for this statement; a table dropped since fails at its first load.
        return TableHandle(self.lake, t.identifier)

    @contextlib.contextmanager
    def _lake_reads_as_tables(self, texts: list[str]) -> Iterator[list[str]]:
        """`texts` (WHERE and SET expressions) with each `lake.ns.t` they read replaced by a copy of
        the table's current rows in DuckDB's default database, for as long as the block runs (and
        each `iceberg_scan(...)` call, which time travel becomes, by a copy of what it reads).

        The writer evaluates these expressions on a cursor of its own, and the lake views read
        through a source only the lake's connection has. Each copy is a table of the same name in a
        schema of its own, so `t.column` and aliases keep working.
        """
        schemas: dict[str, str] = {}  # namespace -> schema holding its copies
        copied: set[tuple[str, str]] = set()
        out = []
        try:
            for text in texts:
                out.append(self._rewrite_lake_reads(text, schemas, copied))
            yield out
        finally:
            for schema in schemas.values():
                with contextlib.suppress(duckdb.Error):
                    self.con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    def _rewrite_lake_reads(self, text: str, schemas: dict[str, str], copied: set[tuple[str, str]]) -> str:
        """`text` with each lake view and `iceberg_scan(...)` call it reads (found in DuckDB's parse
        tree of `SELECT (text)`: `sql/references.py`) read from a copy instead."""
        text = self.reads.resolved_expression(text)
        low = text.lower() if text else ""
        if not low or (self.database not in low and SCAN.name not in low):
            return text
        references = self.reads.references()
        tree = parse_query(self.con, f"SELECT ({text}\n)")
        if tree is None:
            return text
        lake = references.lake(tree)
        scans = references.scans(tree)
        if not lake and not scans:
            return text
        default = self._default_database()
        for found in lake:
            if found.schema not in schemas:
                schemas[found.schema] = quote_ident(f"__iceduck_lake_{uuid.uuid4().hex}")
                self.con.execute(f"CREATE SCHEMA {default}.{schemas[found.schema]}")
            copy = f"{default}.{schemas[found.schema]}.{quote_ident(found.name)}"
            if (found.schema, found.name) not in copied:
                source = qualified(found.database, found.schema, found.name)
                self.con.execute(f"CREATE TABLE {copy} AS SELECT * FROM {source}")
                copied.add((found.schema, found.name))
            replace_with(self.con, found.ref, copy, found.ref.node)
        for ref in scans:  # time travel (`AT (...)` became such a call) and iceberg_scan itself
            if "" not in schemas:
                schemas[""] = quote_ident(f"__iceduck_lake_{uuid.uuid4().hex}")
                self.con.execute(f"CREATE SCHEMA {default}.{schemas['']}")
            copy = f"{default}.{schemas['']}.{quote_ident(f'__iceduck_scan_{len(copied)}')}"
            copied.add(("", copy))
            self.con.execute(f"CREATE TABLE {copy} AS {render_ref(self.con, ref.node)}")
            replace_with(self.con, ref, copy, {**ref.node, "alias": ref.node.get("alias") or SCAN.name})
        rendered = render(self.con, tree)
        return rendered[len("SELECT ") :] if rendered.startswith("SELECT ") else text

    def _default_database(self) -> str:
        return quote_ident(str(self.con.execute("SELECT current_database()").fetchall()[0][0]))

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
        self.views.refresh()
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
        self.views.refresh()
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
                self.views.refresh()
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
            self.views.refresh()
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
            self.views.refresh()
        return self._count(rows)

    def _query(self, query: str, params: Any, what: str) -> duckdb.DuckDBPyRelation:
        try:
            tokens = tokenize(query)
        except SqlSyntaxError:
            tokens = []
        rel = self.reads.run(query, tokens, params)
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
            self.existing(t)
        self.lake.drop_table(t.identifier, purge=s.purge)
        self.views.refresh()
        return self._status("Success")

    def _alter(self, s: p.AlterTable, t: LakeTable) -> duckdb.DuckDBPyRelation:
        if not t.exists and s.if_exists:
            return self._status("Success")
        handle = self.existing(t)
        a = s.action
        if isinstance(a, p.RenameTable):
            self.lake.rename_table(t.identifier, self._rename_target(t, a.new_name))
            self.views.refresh()
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
        check_table_name(name, parts[-1])
        if len(parts) == 1:
            return f"{t.namespace}.{parts[0]}"
        if parts[0].lower() == self.database and len(parts) >= 3:
            parts = parts[1:]
        namespace = self.names.find_namespace(parts[:-1])
        if namespace is None:
            raise NamespaceNotFoundError(
                f"cannot rename {t.identifier} to {name}: namespace '{'.'.join(parts[:-1])}' does not exist"
            )
        return f"{namespace}.{parts[-1]}"


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


def _find_column(schema: Schema, name: str) -> str | None:
    """The column's name as the schema spells it (dotted names reach into structs), or None."""
    fields = schema.fields
    out: list[str] = []
    for part in name.split("."):
        found = match([f.name for f in fields], part)
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
    found = match([f.name for f in schema.fields], name)
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


__all__ = ["LakeWrites"]
