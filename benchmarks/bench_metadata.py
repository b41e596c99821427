"""Metadata-only cases on a table of many tiny files (issue "foundation").

Each case runs twice: warm (iceduck's caches of parsed metadata files, manifest lists and
manifests kept between runs, as in a session that queries a table repeatedly; these files are
immutable) and cold (caches emptied before every run, as for a first query).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from benchmarks import Case, Context, benchmark
from tests.support.peer import sql_string

if TYPE_CHECKING:
    import duckdb


def _case(
    ctx: Context, iceduck_sql: str, peer_sql: str, *, cold: bool, ordered: bool, extra: dict[str, object]
) -> Case:
    def iceduck_side(con: duckdb.DuckDBPyConnection) -> object:
        if cold:
            from iceduck.table import clear_caches

            clear_caches()
        return con.execute(iceduck_sql).fetchall()

    return Case(peer_sql=peer_sql, iceduck=iceduck_side, compare=True, ordered=ordered, extra=extra)


def _files(cold: bool) -> Callable[[Context], Case]:
    def setup(ctx: Context) -> Case:
        table = ctx.dataset("files")
        metadata = sql_string(table.metadata_location)
        return _case(
            ctx,
            f"SELECT count(*), sum(record_count) FROM iceberg_files({metadata})",
            f"SELECT count(*), sum(record_count) FROM iceberg_metadata({metadata})",
            cold=cold,
            ordered=False,
            extra={"data files": table.info["data_files"], "manifests": table.info["manifests"]},
        )

    setup.__doc__ = "count and sum(record_count) over every data file: 100 manifests of 100 files" + (
        ", caches emptied before every run" if cold else ""
    )
    return setup


def _snapshots(cold: bool) -> Callable[[Context], Case]:
    def setup(ctx: Context) -> Case:
        table = ctx.dataset("files")
        metadata = sql_string(table.metadata_location)
        sql = (
            f"SELECT sequence_number, snapshot_id FROM iceberg_snapshots({metadata}) ORDER BY sequence_number"
        )
        return _case(ctx, sql, sql, cold=cold, ordered=True, extra={"snapshots": table.info["snapshots"]})

    setup.__doc__ = "list the 100 snapshots of the 10k-file table" + (
        ", caches emptied before every run" if cold else ""
    )
    return setup


benchmark("metadata_files_10k")(_files(cold=False))
benchmark("metadata_files_10k_cold")(_files(cold=True))
benchmark("snapshots_10k")(_snapshots(cold=False))
benchmark("snapshots_10k_cold")(_snapshots(cold=True))


# -- scale curve: generated metadata of 1k, 10k and 100k files (benchmarks/README.md plots it) ----------

CURVE = (("1k", "gen1k"), ("10k", "gen10k"), ("100k", "gen100k"))


def _curve_files(kind: str) -> Callable[[Context], Case]:
    def setup(ctx: Context) -> Case:
        table = ctx.dataset(kind)
        metadata = sql_string(table.metadata_location)
        return _case(
            ctx,
            f"SELECT count(*), sum(record_count) FROM iceberg_files({metadata})",
            f"SELECT count(*), sum(record_count) FROM iceberg_metadata({metadata})",
            cold=True,
            ordered=False,
            extra={"data files": table.info["data_files"], "manifests": table.info["manifests"]},
        )

    setup.__doc__ = f"count and sum(record_count) over every file of the generated {kind} table, caches emptied"
    return setup


def _curve_plan(kind: str) -> Callable[[Context], Case]:
    def setup(ctx: Context) -> Case:
        from benchmarks.datasets import GEN_PART

        table = ctx.dataset(kind)
        metadata = sql_string(table.metadata_location)

        def iceduck_side(con: duckdb.DuckDBPyConnection) -> object:
            from iceduck.duckdb.scan import clear_scan_caches

            clear_scan_caches()
            return con.execute(
                f"SELECT count(*), sum(id) FROM iceberg_scan({metadata}, filter := 'part = {GEN_PART}')"
            ).fetchall()

        return Case(
            peer_sql=f"SELECT count(*), sum(id) FROM iceberg_scan({metadata}) WHERE part = {GEN_PART}",
            iceduck=iceduck_side,
            compare=True,
            extra={"data files": table.info["data_files"], "files read": table.info["manifests"]},
        )

    setup.__doc__ = f"one partition of the generated {kind} table (one file per manifest), caches emptied"
    return setup


for _label, _kind in CURVE:
    benchmark(f"curve_files_{_label}_cold")(_curve_files(_kind))
    benchmark(f"curve_plan_{_label}_cold")(_curve_plan(_kind))


@benchmark("snapshots_10000_cold")
def snapshots_10000_cold(ctx: Context) -> Case:
    """list the 10,000 snapshots of the generated 100k-file table, caches emptied"""
    table = ctx.dataset("gen100k")
    metadata = sql_string(table.metadata_location)
    sql = f"SELECT sequence_number, snapshot_id FROM iceberg_snapshots({metadata}) ORDER BY sequence_number"
    return _case(
        ctx, sql, sql, cold=True, ordered=True,
        extra={"snapshots": table.info["snapshots"], "metadata.json bytes": table.info["metadata_bytes"]},
    )  # fmt: skip
