"""The embedded default: a DuckDB connection on a local warehouse folder with a SQLite catalog.

`connect(warehouse)` opens (creating if needed) the warehouse and its catalog
(`<warehouse>/catalog.db`, PyIceberg's `SqlCatalog` layout; `catalog="folder"` for a folder-only
catalog with `version-hint.text`), registers iceduck's SQL functions on a fresh DuckDB connection,
and offers the Python API for writing:

    lake = iceduck.connect("warehouse")
    lake.create_namespace("demo")
    t = lake.create_table("demo.services", schema, partition_by=["service_date"])
    t.append(arrow_table)                        # or a DuckDB relation, a RecordBatchReader
    t.delete("service_date = DATE '2026-10-02' AND delay_min = 4")
    t.update({"delay_min": "0"}, "service_id = 7")
    with t.update_schema() as u:
        u.add_column("platform", "int")

Every write is one commit and returns a `CommitResult`; errors change nothing.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from iceduck.catalog.attached import AttachedCatalogs
from iceduck.catalog.folder import FolderCatalog
from iceduck.catalog.sql import CATALOG_FILE_NAME, SqlCatalog, catalog_cache_folder
from iceduck.duckdb.binding import register
from iceduck.duckdb.damage import diagnosed, statement_started, translating
from iceduck.duckdb.pushdown import exact_filter, parse_filter
from iceduck.errors import ValidationError
from iceduck.expr import Predicate
from iceduck.io.fileio import FileIO
from iceduck.io.fsspec_store import register_filesystems
from iceduck.io.s3_duckdb import register_filesystem
from iceduck.io.storage import connection_io, is_remote, s3_registry, store_registry
from iceduck.spec.types import Schema
from iceduck.sql import transactions
from iceduck.sql.attach import Attachments
from iceduck.sql.router import Router
from iceduck.tables import SchemaUpdate, TableHandle, Tables

if TYPE_CHECKING:
    from iceduck.rest.client import RestCatalog
    from iceduck.transaction.commit import CommitResult
    from iceduck.transaction.row_level import Pruner

DEFAULT_WAREHOUSE = "warehouse"
# A DELETE/UPDATE whose WHERE is longer (a program's `id IN (...)` of 50,000 values, an OR chain of
# thousands of terms) plans every live file instead of pruning by it: DuckDB's reading of such a
# filter into a pruning predicate costs more than the statement itself (a 50,000-item IN list: ~5 s
# where DuckDB deletes from its own table in ~1.6 s), and the statement's read of the files still
# skips Parquet row groups by their statistics.
PRUNE_TEXT_LIMIT = 64 * 1024

__all__ = [
    "DEFAULT_WAREHOUSE",
    "CommitResult",
    "Lake",
    "SchemaUpdate",
    "TableHandle",
    "connect",
    "default_catalog_kind",
]


def __getattr__(name: str) -> Any:
    # `CommitResult` is the write stack's (PEP 562: a lake that only reads does not import it)
    if name == "CommitResult":
        from iceduck.transaction.commit import CommitResult

        return CommitResult
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Lake(Tables):
    """A DuckDB connection with iceduck registered, on a warehouse with a catalog."""

    def __init__(
        self,
        warehouse: str | Path,
        con: duckdb.DuckDBPyConnection,
        catalog: SqlCatalog | FolderCatalog | RestCatalog | None = None,
        io: FileIO | None = None,
        *,
        catalogs: AttachedCatalogs | None = None,
    ) -> None:
        """`catalogs`: what the connection's SQL functions resolve names through (`connect` registers
        them with it), where ATTACH ... (TYPE iceberg) adds catalogs."""
        cat = catalog if catalog is not None else SqlCatalog.open(str(warehouse))
        self.catalogs = catalogs if catalogs is not None else AttachedCatalogs(cat)
        remote = is_remote(str(warehouse))
        # `location`: where tables go (a local folder or s3://...); `warehouse`: the local folder
        # (for an object-store warehouse, the local folder holding its catalog).
        self.location = str(warehouse) if remote else str(Path(warehouse))
        self.warehouse = Path(cat_folder(cat)) if remote else Path(warehouse)
        super().__init__(con, cat, io)
        self._router: Router | None = None  # made on the first `sql` call

    def sql(self, query: str, params: Any = None) -> duckdb.DuckDBPyRelation | None:
        """Run SQL; returns a relation for queries (print it, or `.fetchall()`), None otherwise.

        Statements about the catalog's Iceberg tables (`CREATE TABLE ns.t`, `INSERT INTO ns.t`,
        `DELETE`, `UPDATE`, `ALTER TABLE`, `DROP TABLE`, `CREATE SCHEMA`, ...) run through the write
        API; every other statement runs in DuckDB unchanged (see `iceduck.sql.router`). DuckDB's
        Parquet decoding errors, which name no file, name the damaged file here and when the
        relation is fetched (`iceduck.duckdb.damage`).
        """
        if self._router is None:
            attachments = Attachments(
                self.con, self.catalogs, functools.partial(_attached_lake, self.con), self.io
            )
            self._router = Router(self, front=attachments)
        statement_started()
        return diagnosed(translating(self._router.execute)(query, params))

    def pruner(
        self, where: str | None, con: duckdb.DuckDBPyConnection, zone: str | None = None
    ) -> Pruner | None:
        """DuckDB's reading of `where` in time zone `zone` (None: `con`'s), as the scan's filters
        are read, so a DELETE/UPDATE plans (and opens files) like a read with that filter."""
        if where is None or len(where) > PRUNE_TEXT_LIMIT:
            return None
        if zone is None:
            row = con.execute("SELECT current_setting('TimeZone')").fetchall()
            timezone = str(row[0][0]) if row else None
        else:
            timezone = zone

        def prune(schema: Schema) -> Predicate | None:
            try:
                return parse_filter(where, schema, timezone=timezone)
            except (ValidationError, duckdb.Error):
                # Text DuckDB cannot bind without the caller's catalog (a subquery, a macro):
                # plan every file; the statement itself reports real errors in the text.
                return None

        return prune

    def exact(
        self, where: str | None, con: duckdb.DuckDBPyConnection, zone: str | None = None
    ) -> Pruner | None:
        """The predicate that is exactly `where` (DuckDB's reading, in time zone `zone`; None:
        `con`'s), for a DELETE to drop files whose metrics prove every row matches; None where
        there is none."""
        if where is None or len(where) > PRUNE_TEXT_LIMIT:
            return None
        rows = con.execute(
            "SELECT current_setting('TimeZone'), current_setting('default_collation')"
        ).fetchall()
        if not rows or str(rows[0][1] or "").lower() not in ("", "binary"):
            return None  # strings compare otherwise than their bounds are ordered (NOCASE, ...)
        timezone = zone if zone is not None else None if rows[0][0] is None else str(rows[0][0])
        return lambda schema: exact_filter(where, schema, timezone=timezone)

    def close(self) -> None:
        if self._router is not None:  # an open BEGIN ... : rolled back, as closing DuckDB rolls back its own
            transactions.close(self._router)
        self.con.close()

    def __enter__(self) -> Lake:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _attached_lake(con: duckdb.DuckDBPyConnection, catalog: RestCatalog) -> Lake:
    """The write API over a catalog attached with ATTACH ... (TYPE iceberg), on the lake's connection."""
    return Lake(Path.cwd(), con, catalog, catalog.io)


def cat_folder(catalog: Any) -> str:
    """The local folder of a catalog's SQLite file (or of a folder catalog; for the catalog on a
    bucket, the warehouse's local cache folder)."""
    database = getattr(catalog, "database", None)
    if database:
        return os.path.dirname(database)
    folder = str(getattr(catalog, "warehouse", "."))
    return catalog_cache_folder(folder) if is_remote(folder) else folder


def default_catalog_kind(warehouse: str) -> str:
    """The catalog `connect` opens for the object-store warehouse `warehouse` when none is named:
    this machine's SQLite catalog (`"sql"`), unless `iceduck migrate-catalog` moved it to the
    catalog on the bucket from here (its SQLite file renamed `catalog.db.migrated`, none in its
    place): then `"folder"`, the catalog on the bucket."""
    database = os.path.join(catalog_cache_folder(warehouse), CATALOG_FILE_NAME)
    if not os.path.exists(database) and os.path.exists(database + ".migrated"):
        return "folder"
    return "sql"


def connect(warehouse: str | Path = DEFAULT_WAREHOUSE, *, catalog: str | None = None, **options: Any) -> Lake:
    """Open the embedded default warehouse (created when missing), or a REST catalog, as a `Lake`.

    `catalog="sql"`: the SQLite catalog in `<warehouse>/catalog.db` (for an object-store warehouse,
    in this machine's cache folder); `"folder"`: tables are folders with `version-hint.text` under
    the warehouse (on `s3://`, `gs://`, `az://`..., the catalog on the bucket itself,
    `iceduck.catalog.bucket`: every process and machine opening it shares its tables). None (the
    default): `"sql"`, except for an object-store warehouse this machine moved to the bucket with
    `iceduck migrate-catalog` (`default_catalog_kind`). An `http://` or `https://` URL opens that
    Iceberg REST catalog instead, with the DuckDB iceberg extension's option names as keywords
    (`warehouse=`, `authorization_type=`, `token=`, `client_id=`, `client_secret=`,
    `oauth2_server_uri=`, `oauth2_scope=`, ...; see `iceduck.rest.client`).
    """
    if isinstance(warehouse, str) and warehouse.startswith(("http://", "https://")):
        # imported here: the HTTP client stack is startup time every embedded lake would pay
        from iceduck.rest.client import RestCatalog

        rest_io = connection_io()
        rest = RestCatalog.from_options(warehouse, io=rest_io, **options)
        rest_con = duckdb.connect()
        rest_catalogs = AttachedCatalogs(rest)
        register(rest_con, catalog=rest_catalogs, io=rest_io)
        register_filesystem(rest_con, s3_registry(rest_io))  # statements of a lake may name S3 paths
        register_filesystems(rest_con, store_registry(rest_io))  # ... and GCS / Azure paths
        return Lake(Path.cwd(), rest_con, rest, rest_io, catalogs=rest_catalogs)
    if options:
        raise ValidationError(f"options {', '.join(sorted(options))} are for REST catalogs (an http:// URL)")
    remote = is_remote(str(warehouse))  # s3://bucket/path: the SQLite catalog stays on this machine
    path: str | Path = str(warehouse) if remote else Path(warehouse)
    if not remote:
        Path(path).mkdir(parents=True, exist_ok=True)
    io = connection_io()  # this lake's S3 settings (CREATE SECRET, vended credentials) stay its own
    if catalog is None:
        catalog = default_catalog_kind(str(path)) if remote else "sql"
    if catalog == "sql":
        cat: SqlCatalog | FolderCatalog = SqlCatalog.open(str(path), io=io)
    elif catalog == "folder" and remote:
        # the catalog on the bucket itself: commits are conditional PUTs, shared by every machine
        from iceduck.catalog.bucket import BucketCatalog

        cat = BucketCatalog(str(path), io=io)
    elif catalog == "folder":
        cat = FolderCatalog(str(path))
    else:
        raise ValidationError(f"unknown catalog kind {catalog!r}: 'sql' or 'folder' (or None: the default)")
    con = duckdb.connect()
    catalogs = AttachedCatalogs(cat)
    register(con, catalog=catalogs, io=io)
    register_filesystem(con, s3_registry(io))  # a lake's own statements may name S3 paths
    register_filesystems(con, store_registry(io))  # ... and GCS / Azure paths
    return Lake(path, con, cat, io, catalogs=catalogs)
