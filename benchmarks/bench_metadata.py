"""Metadata-only cases on a table of many tiny files (issue "foundation")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from benchmarks import Case, Context, benchmark
from iceduck.testing.peer import sql_string

if TYPE_CHECKING:
    import duckdb


@benchmark("metadata_files_10k")
def metadata_files_10k(ctx: Context) -> Case:
    """count and sum(record_count) over every data file entry: 100 manifests of 100 files."""
    table = ctx.dataset("files")
    metadata = sql_string(table.metadata_location)

    def iceduck_side(con: duckdb.DuckDBPyConnection) -> object:
        return con.execute(f"SELECT count(*), sum(record_count) FROM iceberg_files({metadata})").fetchall()

    return Case(
        peer_sql=f"SELECT count(*), sum(record_count) FROM iceberg_metadata({metadata})",
        iceduck=iceduck_side,
        compare=True,
        extra={"data files": table.info["data_files"], "manifests": table.info["manifests"]},
    )


@benchmark("snapshots_10k")
def snapshots_10k(ctx: Context) -> Case:
    """List the snapshots (100 appends) of the 10k-file table."""
    table = ctx.dataset("files")
    metadata = sql_string(table.metadata_location)
    sql = f"SELECT sequence_number, snapshot_id FROM iceberg_snapshots({metadata}) ORDER BY sequence_number"

    def iceduck_side(con: duckdb.DuckDBPyConnection) -> object:
        return con.execute(sql).fetchall()

    return Case(
        peer_sql=sql,
        iceduck=iceduck_side,
        compare=True,
        ordered=True,
        extra={"snapshots": table.info["snapshots"]},
    )


@benchmark("metadata_files_10k_cold")
def metadata_files_10k_cold(ctx: Context) -> Case:
    """As metadata_files_10k, with iceduck's metadata caches emptied before every run."""
    table = ctx.dataset("files")
    metadata = sql_string(table.metadata_location)

    def iceduck_side(con: duckdb.DuckDBPyConnection) -> object:
        from iceduck.table import clear_caches

        clear_caches()
        return con.execute(f"SELECT count(*), sum(record_count) FROM iceberg_files({metadata})").fetchall()

    return Case(
        peer_sql=f"SELECT count(*), sum(record_count) FROM iceberg_metadata({metadata})",
        iceduck=iceduck_side,
        compare=True,
        extra={"data files": table.info["data_files"], "manifests": table.info["manifests"]},
    )


@benchmark("snapshots_10k_cold")
def snapshots_10k_cold(ctx: Context) -> Case:
    """As snapshots_10k, with iceduck's metadata caches emptied before every run."""
    table = ctx.dataset("files")
    metadata = sql_string(table.metadata_location)
    sql = f"SELECT sequence_number, snapshot_id FROM iceberg_snapshots({metadata}) ORDER BY sequence_number"

    def iceduck_side(con: duckdb.DuckDBPyConnection) -> object:
        from iceduck.table import clear_caches

        clear_caches()
        return con.execute(sql).fetchall()

    return Case(
        peer_sql=sql,
        iceduck=iceduck_side,
        compare=True,
        ordered=True,
        extra={"snapshots": table.info["snapshots"]},
    )
