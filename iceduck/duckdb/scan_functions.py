"""The reading table functions a connection gets: `iceberg_scan`, `iceberg_scan_plan`, `iceberg_changes`.

`scan_functions(ctx)` lists them for `all_functions`; registering them on a connection also
registers the UDFs their macros call, the keyed delete sources, and the front door's twin macro.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import duckdb

from iceduck._lazy import LazyModule
from iceduck.duckdb.capture import SCAN_ARGS_UDF, call_sql, capture_sql, front_door, scan_args_udf
from iceduck.duckdb.changes import CHANGES, changes_schema, changes_sql_for
from iceduck.duckdb.context import (
    SNAPSHOT_PARAMS,
    TABLE,
    VERSION,
    Context,
)
from iceduck.duckdb.functions import (
    Args,
    TableFunction,
    create_sql_udf,
    no_columns,
)
from iceduck.duckdb.scan import FILTER, SCAN, TIMEZONE, install_delete_sources, is_describing
from iceduck.duckdb.scan_plan import plan_run, scan_plan_schema, with_session_zone
from iceduck.errors import IcebergError

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = LazyModule("pyarrow")


def _setup(ctx: Context) -> Any:
    def setup(con: duckdb.DuckDBPyConnection) -> None:
        install_delete_sources(con, ctx.io)
        con_id = id(con)
        door = front_door(con)

        def scan(a: dict[str, Any]) -> str:
            captured = capture_sql(ctx, door, a)
            if captured is not None:
                return captured
            return call_sql(ctx, door, a, is_describing(con_id))

        def changes(a: dict[str, Any]) -> str:
            return changes_sql_for(
                ctx.table(a), from_snapshot=a["from_snapshot"], to_snapshot=a["to_snapshot"]
            )

        SCAN.install_udf(con, scan)
        create_sql_udf(
            con, SCAN_ARGS_UDF, scan_args_udf(ctx, con_id, door), ["VARCHAR", "VARCHAR", "BOOLEAN", "VARCHAR"]
        )
        CHANGES.install_udf(con, changes)
        con.execute(SCAN.pruned_macro_sql())

    return setup


def _unused(args: Args, columns: list[str] | None) -> pa.Table:  # rows come from the macro's query
    raise IcebergError("internal: this function is a macro over query()")


def scan_functions(ctx: Context) -> list[TableFunction]:
    """iceberg_scan, iceberg_scan_plan and iceberg_changes for `all_functions`."""
    setup = _setup(ctx)
    return [
        TableFunction(
            SCAN.name,
            SCAN.params,
            no_columns,
            _unused,
            "The table's rows: columns by field id, every kind of delete applied, files pruned by `filter`; "
            "`metadata_columns` adds `_file`, `_pos`, `row_lineage` adds `_row_id`, `_last_updated_sequence_number`",
            setup=setup,
            macro=SCAN.macro_sql(),
        ),
        with_session_zone(
            TableFunction(
                "iceberg_scan_plan",
                (TABLE, *SNAPSHOT_PARAMS, FILTER, VERSION, TIMEZONE),
                scan_plan_schema,
                plan_run(ctx),
                "One row per data file: kept (with the delete files it needs) or skipped, at which level and why",
                rows_estimate=10_000,
            )
        ),
        TableFunction(
            CHANGES.name,
            CHANGES.params,
            changes_schema,
            _unused,
            "Rows inserted, deleted and updated by each snapshot after `from_snapshot` up to `to_snapshot` "
            "(change_type 'insert', 'delete', 'update_before', 'update_after'; updates paired by `_row_id` on v3), "
            "then the table's columns and `_row_id`",
            macro=CHANGES.macro_sql(),
        ),
    ]
