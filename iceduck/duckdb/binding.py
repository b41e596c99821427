"""`register(con)`: every iceduck SQL function on a DuckDB connection.

Each table function takes the table first: a `*.metadata.json` path, a table folder, or a name
`ns.table` in the connection's catalog. Functions that read a snapshot also take
`snapshot_id :=`, `as_of :=` (a timestamp) and `ref :=` (a branch or tag); a table folder takes
`version :=` to pick a metadata version.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import duckdb

from iceduck._lazy import LazyModule
from iceduck.duckdb.context import SNAPSHOT_PARAMS, TABLE, VERSION, Context
from iceduck.duckdb.extension import (
    catalog_functions,
    extension_functions,
    install_scalar_functions,
    read_avro_function,
)
from iceduck.duckdb.functions import (
    Args,
    Param,
    TableFunction,
    install,
    owe_s3_filesystem,
    owe_store_filesystems,
)
from iceduck.duckdb.maintenance import maintenance_functions
from iceduck.duckdb.scan_functions import scan_functions
from iceduck.errors import TableNotFoundError, ValidationError
from iceduck.io.fileio import FileIO, local_path
from iceduck.io.fsspec_store import has_any_backend
from iceduck.io.s3_clients import has_s3fs
from iceduck.io.s3_duckdb import exact_column_ranges
from iceduck.io.storage import s3_registry, store_registry
from iceduck.spec.snapshots import Snapshot
from iceduck.table import Table

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = LazyModule("pyarrow")


# The inspection modules build Arrow tables (their schemas are pyarrow objects made at import):
# they load when one of their functions first binds, not when a connection registers them.
def _md() -> ModuleType:
    from iceduck.inspect import metadata

    return metadata


def _files() -> ModuleType:
    from iceduck.inspect import files

    return files


def _partition_stats() -> ModuleType:
    from iceduck.maintenance import partition_stats

    return partition_stats


def _deletes() -> ModuleType:
    from iceduck.inspect import deletes

    return deletes

SnapshotRunner = Callable[[Table, Snapshot | None, Args, list[str] | None], "pa.Table | pa.RecordBatchReader"]


def _metadata_fn(ctx: Context, name: str, attribute: str, rows: str, doc: str) -> TableFunction:
    """A function over the metadata file: its schema is `inspect.metadata.<attribute>`, its rows
    `inspect.metadata.<rows>(table)`."""
    # Metadata files are immutable: a table read from one is computed once per file.
    return TableFunction(
        name,
        (TABLE, VERSION),
        lambda: getattr(_md(), attribute),
        lambda a, _c: ctx.table(a).derived(name, getattr(_md(), rows)),
        doc,
        check=ctx.check_table,
    )


def _snapshot_params(extra: tuple[Param, ...] = ()) -> tuple[Param, ...]:
    """The parameters of a function over one snapshot of a table: the table, the snapshot choice,
    the function's own, the metadata version."""
    return (TABLE, *SNAPSHOT_PARAMS, *extra, VERSION)


def _is_puffin(arg: str) -> bool:
    # the DV functions also read one Puffin file (or a bare legacy DV) by path
    return arg.endswith(".puffin") or arg.endswith(".bin")


def _snapshot_fn(
    ctx: Context,
    name: str,
    schema: Callable[[], pa.Schema],
    fn: SnapshotRunner,
    doc: str,
    extra: tuple[Param, ...] = (),
    rows_estimate: int = 1000,
) -> TableFunction:
    def run(args: Args, columns: list[str] | None) -> pa.Table | pa.RecordBatchReader:
        return fn(*ctx.table_at(args), args, columns)

    return TableFunction(name, _snapshot_params(extra), schema, run, doc, rows_estimate, check=ctx.check_snapshot)


def all_functions(ctx: Context | None = None) -> list[TableFunction]:
    """Every table function iceduck provides, in documentation order."""
    ctx = ctx or Context()
    return [
        TableFunction(
            "iceberg_snapshots",
            (TABLE, VERSION),
            lambda: _md().SNAPSHOTS,
            # Cached per metadata file and set of columns read (filling only those).
            lambda a, c: ctx.table(a).derived(
                ("iceberg_snapshots", tuple(c) if c else None), lambda t: _md().snapshots(t, c or None)
            ),
            "Every snapshot of the table",
            check=ctx.check_table,
        ),
        _metadata_fn(ctx, "iceberg_history", "HISTORY", "history", "When each snapshot became current"),
        _metadata_fn(ctx, "iceberg_refs", "REFS", "refs", "Branches and tags"),
        _metadata_fn(
            ctx, "iceberg_metadata_log", "METADATA_LOG", "metadata_log", "Metadata files, oldest first"
        ),
        _metadata_fn(ctx, "iceberg_schemas", "SCHEMAS", "schemas", "One row per field of every schema"),
        _metadata_fn(
            ctx,
            "iceberg_partition_specs",
            "PARTITION_SPECS",
            "partition_specs",
            "One row per partition field",
        ),
        _metadata_fn(ctx, "iceberg_properties", "PROPERTIES", "properties", "Table properties"),
        _snapshot_fn(
            ctx,
            "iceberg_manifests",
            lambda: _files().MANIFESTS,
            lambda t, s, a, _c: _files().manifests(t, s, all_snapshots=bool(a.get("all") or a.get("all_snapshots"))),
            "Manifests of a snapshot (all := true: of every snapshot)",
            (Param("all", "BOOLEAN", "false"), Param("all_snapshots", "BOOLEAN", "false")),
        ),
        _snapshot_fn(
            ctx,
            "iceberg_entries",
            lambda: _files().ENTRIES,
            lambda t, s, a, c: _files().entries(t, s, columns=c),
            "Every manifest entry of a snapshot, with status and sequence numbers",
            rows_estimate=10_000,
        ),
        _snapshot_fn(
            ctx,
            "iceberg_files",
            lambda: _files().FILES,
            lambda t, s, a, c: _files().files(t, s, content=a.get("content"), columns=c),
            "Live data and delete files of a snapshot (content := 'data' | 'delete' | 'all')",
            (Param("content", default="'all'"),),
            rows_estimate=10_000,
        ),
        _snapshot_fn(
            ctx,
            "iceberg_partitions",
            lambda: _files().PARTITIONS,
            lambda t, s, a, c: _files().partitions(t, s),
            "Per-partition counts",
        ),
        _snapshot_fn(
            ctx,
            "iceberg_partition_statistics",
            lambda: _partition_stats().PARTITION_STATISTICS,
            lambda t, s, a, c: _partition_stats().partition_statistics_rows(t, s),
            "A snapshot's partition statistics: its registered partition statistics file's rows "
            "(statistics_file names it), else computed from its manifests",
        ),
        *extension_functions(ctx),
        *catalog_functions(ctx),
        *_delete_functions(ctx),
        *scan_functions(ctx),
        *maintenance_functions(ctx),
        read_avro_function(),
    ]


def _delete_functions(ctx: Context) -> list[TableFunction]:
    def table_or_puffin(args: Args) -> tuple[Table | str, Snapshot | None]:
        arg = str(args["tbl"])
        if _is_puffin(arg):
            return arg, None
        return ctx.table_at(args)

    def check(args: Args) -> None:
        arg = str(args["tbl"])
        if _is_puffin(arg):
            if not ctx.io.exists(arg):
                raise TableNotFoundError(f"{arg}: no such Puffin file")
            return
        ctx.check_snapshot(args)

    return [
        TableFunction(
            "iceberg_puffin_blobs",
            _snapshot_params(),
            lambda: _deletes().PUFFIN_BLOBS,
            lambda a, _c: _deletes().puffin_blobs(*table_or_puffin(a)),
            "Every blob of every Puffin file a snapshot references (or of one Puffin file)",
            check=check,
        ),
        TableFunction(
            "iceberg_dv_positions",
            _snapshot_params(),
            lambda: _deletes().DV_POSITIONS,
            lambda a, _c: _deletes().dv_positions(*table_or_puffin(a)),
            "One row per position deleted by a deletion vector",
            rows_estimate=1_000_000,
            check=check,
        ),
        _snapshot_fn(
            ctx,
            "iceberg_position_deletes",
            lambda: _deletes().POSITION_DELETES,
            lambda t, s, a, c: _deletes().position_deletes(t, s),
            "Positions deleted by v2 position-delete files and deletion vectors",
            rows_estimate=1_000_000,
        ),
        _snapshot_fn(
            ctx,
            "iceberg_dv_check",
            lambda: _deletes().DV_CHECK,
            lambda t, s, a, c: _deletes().dv_check(t, s),
            "One row per deletion vector: cardinalities from manifest, blob and bitmap, CRC, ok",
        ),
        _snapshot_fn(
            ctx,
            "iceberg_delete_check",
            lambda: _deletes().DELETE_CHECK,
            lambda t, s, a, c: _deletes().delete_check(t, s),
            "Per position-delete file and DV: referenced paths matching a live data file exactly, only "
            "after normalisation, or not at all",
        ),
    ]


def register(
    con: duckdb.DuckDBPyConnection, *, catalog: Any = None, io: FileIO | None = None
) -> duckdb.DuckDBPyConnection:
    """Add iceduck's table functions (iceberg_snapshots, iceberg_files, ...) to the connection.

    `catalog` resolves table names like `ns.table`: an iceduck catalog (`SqlCatalog`,
    `FolderCatalog`), a warehouse folder or SQLite catalog file (a path), or a PyIceberg
    `SqlCatalog` on SQLite (its file is opened as iceduck's `SqlCatalog`, same layout). Without it,
    tables are found by path. `io`: the connection's FileIO (`iceduck.io.storage.connection_io()`,
    with S3 settings of its own); the process's shared one when None.
    """
    ctx = Context(as_catalog(catalog), io)
    for fn in all_functions(ctx):
        install(con, fn)
    install_scalar_functions(con)  # iceberg_bucket, iceberg_truncate
    # s3:// data files are read through the connection's S3 settings, with a filesystem registered
    # when iceduck first hands the connection SQL naming an S3 path (fsspec loads only then)
    if has_s3fs() and not con.filesystem_is_registered("s3"):
        owe_s3_filesystem(con, s3_registry(ctx.io))
        exact_column_ranges(con)
    # gs:// and az:// data files likewise, when gcsfs / adlfs is installed
    if has_any_backend() and not con.filesystem_is_registered("gs") and not con.filesystem_is_registered("az"):
        owe_store_filesystems(con, store_registry(ctx.io))
    return con


def as_catalog(catalog: Any) -> Any:
    """An iceduck catalog for what `register(catalog=...)` accepts; a clear error for anything else."""
    if catalog is None:
        return None
    # Loaded only when a catalog is given: a connection reading tables by path needs neither the
    # SQLite catalog (sqlite3) nor the commit machinery both catalogs carry (issue 11: memory).
    from iceduck.catalog.folder import FolderCatalog
    from iceduck.catalog.sql import CATALOG_FILE_NAME, SqlCatalog

    if isinstance(catalog, SqlCatalog | FolderCatalog):
        return catalog
    if isinstance(catalog, str | os.PathLike):
        path = os.path.abspath(local_path(os.fspath(catalog)))
        if os.path.isfile(path):
            return SqlCatalog(path)
        if os.path.isfile(os.path.join(path, CATALOG_FILE_NAME)):
            return SqlCatalog.open(path)
        if os.path.isdir(path):
            return FolderCatalog(path)
        raise ValidationError(f"iceduck.register: catalog {path}: no such warehouse folder or catalog file")
    if type(catalog).__module__.startswith("pyiceberg"):
        uri = str(getattr(catalog, "properties", {}).get("uri", ""))
        if type(catalog).__name__ == "SqlCatalog" and uri.startswith("sqlite:///"):
            warehouse = str(catalog.properties.get("warehouse") or "") or None
            return SqlCatalog(
                uri[len("sqlite:///") :], name=catalog.name, warehouse=warehouse and local_path(warehouse)
            )
        raise ValidationError(
            f"iceduck.register: cannot use PyIceberg's {type(catalog).__name__} ({uri or 'no uri'}); "
            "pass iceduck's SqlCatalog/FolderCatalog or a warehouse path (a PyIceberg SqlCatalog on SQLite works)"
        )
    if all(hasattr(catalog, attr) for attr in ("name", "load_table", "list_tables", "list_namespaces")):
        return catalog  # another implementation of iceduck's catalog interface
    raise ValidationError(
        f"iceduck.register: catalog must be an iceduck catalog or a warehouse path, not {type(catalog).__name__}"
    )
