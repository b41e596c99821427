"""Every table of a catalog as a view `<database>.<ns>.<table>` (`attach_catalog_views`).

Each view is `query()` over the SQL a UDF plans when DuckDB binds it: the table's latest commit,
read by native `read_parquet` like `iceberg_scan`; through the front door (`capture`) the
statement's WHERE prunes it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import duckdb

from iceduck.catalog.base import change_token
from iceduck.duckdb.capture import front_door, view_key
from iceduck.duckdb.functions import create_sql_udf
from iceduck.duckdb.scan import (
    SESSION_LOGGING,
    SESSION_ZONE,
    TOKEN_ARGUMENT,
    ThreadFlag,
    install_delete_sources,
    is_describing,
    scan_sql_for,
    sql_or_error,
)
from iceduck.io.storage import default_io
from iceduck.read.sql import (
    ReadOptions,
    empty_sql,
    output_columns,
)
from iceduck.scan import scan_schema
from iceduck.table import Table
from iceduck.vocabulary import quote_ident, quote_str

VIEW_SQL_UDF = "__iceduck_view_sql"

VIEW_PRUNED_MACRO = "__iceduck_view_pruned"


def _safe_name(database: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in database.lower())


def view_sql_udf(database: str) -> str:
    """The UDF the `<database>.<ns>.<table>` views read their SQL from."""
    return f"{VIEW_SQL_UDF}_{_safe_name(database)}"


def view_pruned_macro(database: str) -> str:
    """The table macro the front door rewrites a `<database>.<ns>.<table>` reference to:
    `(identifier, token)`."""
    return f"{VIEW_PRUNED_MACRO}_{_safe_name(database)}"


# Which connection the calling thread is creating catalog views on: DuckDB binds a view when it
# creates it, on this thread, only to learn its columns. Thread state, so process-wide by nature.
_creating_views = ThreadFlag()


def _install_view_functions(
    con: duckdb.DuckDBPyConnection, catalog: Any, database: str, declaring: set[str]
) -> None:
    """The UDF and twin macro the views of `database` read through. `declaring`: identifiers whose
    views are being declared for a table that cannot be planned now (see `_create_views`)."""
    io = getattr(catalog, "io", None)  # the catalog's own S3 settings
    con_id = id(con)
    door = front_door(con)
    # identifier -> (the catalog's change token when it was loaded, the table): a view bound again
    # while nothing was committed to the catalog reads the same table without asking the catalog
    loaded: dict[str, tuple[Hashable, Table]] = {}

    def load(identifier: str) -> Table:
        token = change_token(catalog)  # before loading: a commit after it is seen next time
        found = loaded.get(identifier)
        if token is not None and found is not None and found[0] == token:
            return found[1]
        table = Table.load(identifier, catalog=catalog, io=io)
        if token is not None:
            loaded[identifier] = (token, table)
        return table

    def view_sql(identifier: str | None, zone: str | None, logging: bool | None, token: str | None) -> str:
        if str(identifier) in declaring:
            # Declaring the view of a table that cannot be planned now (a missing or unreadable
            # file): DuckDB binds a view when it is created, so it gets a placeholder; every later
            # read binds again and fails with the table's own one-line error.
            return "SELECT 1 AS __unreadable LIMIT 0"

        def make() -> str:
            table = load(str(identifier))
            if _creating_views(con_id):
                # DuckDB binds a view when it is created only to learn its columns: no planning, no
                # read_parquet call (a 4,000-file table's took ~0.9 s, mostly its footers' field ids)
                schema = scan_schema(table, table.metadata.current_snapshot())
                return empty_sql(output_columns(schema, ReadOptions()))
            key = view_key(database, str(identifier))
            if door.capturing is not None:
                schema = scan_schema(table, table.metadata.current_snapshot())
                captured = door.capture_slot(key, schema, ReadOptions())
                if captured is not None:
                    return captured
            return scan_sql_for(
                table,
                timezone=zone,
                extra=door.pruning(token, key, zone),
                log=logging is True,
                describe=is_describing(con_id),
            )

        return sql_or_error(f"{database}.{identifier}", make)

    udf = view_sql_udf(database)
    create_sql_udf(con, udf, view_sql, ["VARCHAR", "VARCHAR", "BOOLEAN", "VARCHAR"])
    con.execute(
        f"CREATE OR REPLACE TEMP MACRO {view_pruned_macro(database)}(__identifier, {quote_ident(TOKEN_ARGUMENT)}) "
        f"AS TABLE FROM query({udf}(__identifier, {SESSION_ZONE}, {SESSION_LOGGING}, {quote_ident(TOKEN_ARGUMENT)}))"
    )


def attach_catalog_views(con: duckdb.DuckDBPyConnection, catalog: Any, database: str = "lake") -> list[str]:
    """Expose every table of `catalog` as the view `<database>.<namespace>.<table>` on `con`.

    Each view is `query()` over the SQL a UDF plans when DuckDB binds it: the table's latest commit,
    read by native `read_parquet` like `iceberg_scan`. Identity-partition values prune files before
    they are opened on any connection; through `Lake.sql` (the front door) the statement's WHERE
    prunes manifests, partitions and files. Returns the views created. Views are readable on `con`
    itself (not on its cursors); call again after tables are created or dropped.
    """
    install_delete_sources(con, getattr(catalog, "io", None) or default_io())
    declaring: set[str] = set()
    _install_view_functions(con, catalog, database, declaring)
    con.execute(f"ATTACH IF NOT EXISTS ':memory:' AS {quote_ident(database)}")
    created: list[str] = []
    udf = view_sql_udf(database)
    with _creating_views.on(con):
        _create_views(con, catalog, database, udf, created, declaring)
    return created


def _create_views(
    con: duckdb.DuckDBPyConnection,
    catalog: Any,
    database: str,
    udf: str,
    created: list[str],
    declaring: set[str],
) -> None:
    pending = list(catalog.list_namespaces())
    while pending:
        ns = pending.pop(0)
        pending.extend(catalog.list_namespaces(ns))
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(database)}.{quote_ident(ns)}")
        for name in catalog.list_tables(ns):
            identifier = f"{ns}.{name}"
            create = (
                f"CREATE OR REPLACE VIEW {quote_ident(database)}.{quote_ident(ns)}.{quote_ident(name)} AS "
                f"FROM query({udf}({quote_str(identifier)}, {SESSION_ZONE}, {SESSION_LOGGING}, NULL))"
            )
            try:
                con.execute(create)
            except duckdb.Error:
                # One table that cannot be read must neither hide the others nor read as "does
                # not exist": its view is declared, and reading it reports why.
                declaring.add(identifier)
                try:
                    con.execute(create)
                finally:
                    declaring.discard(identifier)
            created.append(f"{database}.{ns}.{name}")
