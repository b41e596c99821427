"""iceberg_scan on tables with deletes and row lineage, time travel, empty tables, changes, views.

Independent truth: the TableBuilder's own bookkeeping (which positions it deleted), the reference peer
(DuckDB 1.5.5 + iceberg extension: rows, `_row_id`, `_last_updated_sequence_number`) and PyIceberg 0.12.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import iceduck
from iceduck.duckdb.catalog_views import attach_catalog_views
from iceduck.duckdb.scan import plan_for
from tests.support.peer import Peer, sql_string
from tests.support.tablebuilder import TableBuilder
from tests.support.write_helpers import new_lake, pyiceberg_rows


@pytest.fixture
def con() -> Any:
    c = duckdb.connect()
    iceduck.register(c)
    yield c
    c.close()


def _ids(con: duckdb.DuckDBPyConnection, table: str, **kw: Any) -> list[int]:
    args = "".join(f", {k} := {v}" for k, v in kw.items())
    return sorted(
        r[0] for r in con.execute(f"SELECT id FROM iceberg_scan({sql_string(table)}{args})").fetchall()
    )


def _dv_table(folder: Path) -> TableBuilder:
    """Three commits: data, DVs on two files, then more data and a DV merged into an existing one."""
    b = TableBuilder(folder, format_version=3)
    f0 = b.add_data_file(1000)
    f1 = b.add_data_file(500)
    b.commit()
    b.commit(dvs={f0: [0, 5, 999], f1: range(100, 200)})
    b.add_data_file(300)
    b.commit(dvs={f0: [6, 7]})
    return b


@pytest.mark.parametrize("positional", [True, False])
def test_deletion_vectors_remove_exactly_the_deleted_rows(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, positional: bool
) -> None:
    b = _dv_table(tmp_path / "t")
    # positional mask without a filter; anti join on (file_index, file_row_number) with one
    flt = ", filter := 'id >= 0'" if not positional else ""
    got = sorted(
        r[0] for r in con.execute(f"SELECT id FROM iceberg_scan('{b.metadata_path}'{flt})").fetchall()
    )
    assert got == b.live_ids()
    for c in b.commits:  # every snapshot, as it was
        assert _ids(con, b.metadata_path, snapshot_id=c.snapshot_id) == b.live_ids(c.snapshot_id)


def test_position_deletes_with_other_path_spellings_and_older_ones_hidden_by_a_dv(
    table_builder: Callable[..., TableBuilder], con: duckdb.DuckDBPyConnection
) -> None:
    b = table_builder(format_version=2)
    f0 = b.add_data_file(100)
    f1 = b.add_data_file(100)
    b.commit()
    # the delete file spells the data file path as a file: URI: it must still match
    b.commit(position_deletes={f"file://{f0}": [1, 2, 3], f1: [50]})
    got = _ids(con, b.metadata_path)
    assert got == [i for i in range(200) if i not in (1, 2, 3, 150)]
    # a dangling delete (a file not in the table) changes nothing
    b.commit(position_deletes={"/nowhere/else.parquet": [0, 1]})
    assert _ids(con, b.metadata_path) == got


def test_a_dv_replaces_older_position_deletes_of_its_file(
    table_builder: Callable[..., TableBuilder], con: duckdb.DuckDBPyConnection
) -> None:
    b = table_builder(format_version=3)
    f0 = b.add_data_file(50)
    b.commit()
    b.commit(position_deletes={f0: [1, 2]})
    # the DV carries every earlier delete of the file plus its own (the builder merges them, as the
    # spec requires): the planner applies the DV alone, never the older position-delete file
    b.commit(dvs={f0: [3]})
    plan = plan_for(_ctx().table({"tbl": b.metadata_path}))
    (task,) = plan.tasks
    assert [d.kind for d in task.deletes] == ["deletion-vector"]
    assert _ids(con, b.metadata_path) == b.live_ids() == [i for i in range(50) if i not in (1, 2, 3)]


@st.composite
def _dv_shapes(draw: st.DrawFn) -> tuple[int, list[int]]:
    """(rows of a data file, positions its DV deletes): scattered, runs across containers, every
    row, the last row, a bitset-dense container; row counts at byte and container edges."""
    rows = draw(st.sampled_from([1, 7, 8, 9, 4097, 2**16, 2**16 + 1, 3 * 2**16 + 5]))
    kind = draw(st.sampled_from(["scattered", "runs", "every", "last", "dense"]))
    row = st.integers(min_value=0, max_value=rows - 1)
    if kind == "every":
        return rows, list(range(rows))
    if kind == "last":
        return rows, [rows - 1]
    positions = set(draw(st.lists(row, max_size=50)))
    if kind == "runs":
        for start, length in draw(st.lists(st.tuples(row, st.integers(1, 2**17)), min_size=1, max_size=4)):
            positions |= set(range(start, min(rows, start + length)))
    elif kind == "dense":
        positions |= set(range(draw(row), rows, draw(st.integers(min_value=1, max_value=5))))
    return rows, sorted(positions)


@settings(max_examples=25, deadline=None)
@given(shape=_dv_shapes())
def test_deletion_vectors_of_any_shape_remove_exactly_their_rows(shape: tuple[int, list[int]]) -> None:
    """Every delete mode against the builder's own bookkeeping, for DVs the writer run-length
    encodes (run, array and bitset containers) and files whose rows end mid-byte."""
    rows, positions = shape
    with tempfile.TemporaryDirectory() as folder:
        b = TableBuilder(Path(folder) / "t", format_version=3)
        f0 = b.add_data_file(rows)
        b.add_data_file(3)
        b.commit()
        b.commit(dvs={f0: positions})
        con = duckdb.connect()
        iceduck.register(con)
        try:
            for mode in ("bitmap", "positional", "anti"):
                assert _ids(con, b.metadata_path, delete_mode=f"'{mode}'") == b.live_ids(), mode
        finally:
            con.close()


def _ctx() -> Any:
    from iceduck.duckdb.binding import Context

    return Context()


def test_metadata_columns_and_row_lineage(tmp_path: Path, con: duckdb.DuckDBPyConnection) -> None:
    b = _dv_table(tmp_path / "t")
    rows = con.execute(
        f"SELECT id, _file, _pos, _row_id, _last_updated_sequence_number FROM iceberg_scan('{b.metadata_path}', "
        "metadata_columns := true, row_lineage := true) ORDER BY id"
    ).fetchall()
    files = {d.path: d for d in b.data_files.values()}
    for id_, file, pos, row_id, seq in rows:
        d = files[file]
        assert id_ == d.first_id + pos
        # the builder numbers ids from 0 in file order and first_row_ids follow the same order
        assert row_id == id_
        assert seq == (1 if d.first_id < 1500 else 3)


@pytest.mark.peer
def test_builder_tables_equal_the_peer_with_lineage(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, peer: Peer
) -> None:
    b = _dv_table(tmp_path / "t")
    query = (
        "SELECT id, data, _row_id, _last_updated_sequence_number FROM iceberg_scan({t}{extra}) ORDER BY id"
    )
    ours = con.execute(query.format(t=sql_string(b.metadata_path), extra=", row_lineage := true")).fetchall()
    theirs = peer.query(query.format(t=sql_string(b.metadata_path), extra=""))
    assert ours == [tuple(r) for r in theirs]
    assert [r[0] for r in ours] == b.live_ids()


@pytest.mark.peer
def test_lake_tables_with_updates_equal_the_peer(warehouse: str, peer: Peer) -> None:
    lake = new_lake(warehouse)
    t = lake.create_table(
        "ns.s",
        [("id", "BIGINT"), ("day", "DATE"), ("name", "VARCHAR"), ("n", "INTEGER")],
        partition_by=["day", "bucket(4, id)"],
    )
    src = "SELECT i AS id, DATE '2026-10-01' + (i % 3)::INTEGER AS day, 'n' || i AS name, (i % 7)::INTEGER AS n FROM range({a}, {b}) t(i)"
    t.append(lake.sql(src.format(a=0, b=400)))
    t.append(lake.sql(src.format(a=400, b=600)))
    t.delete("n = 3")
    t.update({"name": "'changed'"}, "id % 11 = 0")
    with t.update_schema() as u:
        u.add_column("extra", "int", initial_default=5)
        u.rename_column("name", "label")
    t.delete("id BETWEEN 100 AND 120")
    cols = "id, day, label, n, extra, _row_id, _last_updated_sequence_number"
    loc = sql_string(t.metadata_location)
    ours = lake.con.execute(
        f"SELECT {cols} FROM iceberg_scan({loc}, row_lineage := true) ORDER BY id"
    ).fetchall()
    theirs = peer.query(f"SELECT {cols} FROM iceberg_scan({loc}) ORDER BY id")
    assert ours == [tuple(r) for r in theirs]
    assert len(ours) == len(pyiceberg_rows(t.metadata_location))
    # with a filter that prunes partitions and files the rows are the same subset
    flt = "day = DATE '2026-10-02' AND id < 300"
    pruned = lake.con.execute(
        f"SELECT {cols} FROM iceberg_scan({loc}, row_lineage := true, filter := {sql_string(flt)}) ORDER BY id"
    ).fetchall()
    assert pruned == [r for r in ours if str(r[1]) == "2026-10-02" and r[0] < 300]
    lake.close()


def test_pyiceberg_v1_and_v2_tables_with_evolution(tmp_path: Path, con: duckdb.DuckDBPyConnection) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import IntegerType, LongType, NestedField, StringType, TimestampType

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=(tmp_path / "wh").as_uri())
    catalog.create_namespace("ns")
    for version in ("1", "2"):
        schema = Schema(
            NestedField(1, "id", IntegerType(), required=False),
            NestedField(2, "kind", StringType(), required=False),
            NestedField(3, "ts", TimestampType(), required=False),
        )
        # (PyIceberg 0.12 writes other transforms only with pyiceberg-core, which is not installed)
        spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "kind"))
        table = catalog.create_table(
            f"ns.t{version}", schema, partition_spec=spec, properties={"format-version": version}
        )
        import datetime as dt

        base = dt.datetime(2026, 1, 1)
        rows = pa.table(
            {
                "id": pa.array(range(60), pa.int32()),
                "kind": [f"k{i % 3}" for i in range(60)],
                "ts": [base + dt.timedelta(hours=7 * i) for i in range(60)],
            }
        )
        table.append(rows)
        with table.update_schema() as u:  # promote int -> long, rename, add
            u.update_column("id", LongType())
            u.rename_column("kind", "category")
            u.add_column("note", StringType())
        table = catalog.load_table(f"ns.t{version}")
        more = pa.table(
            {
                "id": pa.array(range(60, 80), pa.int64()),
                "category": ["k9"] * 20,
                "ts": [base + dt.timedelta(days=30 + i) for i in range(20)],
                "note": ["x"] * 20,
            }
        )
        table.append(more)
        loc = table.metadata_location.removeprefix("file://")
        ours = con.execute(f"SELECT id, category, ts, note FROM iceberg_scan('{loc}') ORDER BY id").fetchall()
        theirs = [
            tuple(r.values()) for r in pyiceberg_rows(loc, ("id", "category", "ts", "note"), sort_by="id")
        ]
        assert ours == theirs
        assert con.execute(f"DESCRIBE SELECT id FROM iceberg_scan('{loc}')").fetchall()[0][1] == "BIGINT"
        # the first snapshot reads with its own schema: kind as INTEGER id and the old name
        first = table.metadata.snapshots[0].snapshot_id
        old = con.execute(f"SELECT * FROM iceberg_scan('{loc}', snapshot_id := {first}) LIMIT 0").description
        assert [d[0] for d in old] == ["id", "kind", "ts"]
        # pruning by partition and by column bounds
        got = con.execute(
            f"SELECT count(*) FROM iceberg_scan('{loc}', filter := 'category = ''k1'' AND ts < TIMESTAMP ''2026-01-05''')"
        ).fetchone()
        assert got == (sum(1 for i in range(60) if i % 3 == 1 and 7 * i < 4 * 24),)


def test_empty_tables_have_columns_and_no_rows(warehouse: str, con: duckdb.DuckDBPyConnection) -> None:
    lake = new_lake(warehouse)
    t = lake.create_table("ns.e", [("id", "BIGINT"), ("s", "VARCHAR"), ("d", "DECIMAL(10,2)")])
    rel = con.sql(f"SELECT * FROM iceberg_scan('{t.metadata_location}', row_lineage := true)")
    assert rel.columns == ["id", "s", "d", "_row_id", "_last_updated_sequence_number"]
    assert [str(x) for x in rel.types][:3] == ["BIGINT", "VARCHAR", "DECIMAL(10,2)"]
    assert rel.fetchall() == []
    t.append(lake.sql("SELECT 1 AS id, 'a' AS s, 1.5 AS d"))
    t.delete("id = 1")  # a snapshot whose only file is entirely deleted
    assert con.execute(f"SELECT count(*) FROM iceberg_scan('{t.metadata_location}')").fetchone() == (0,)
    lake.close()


def test_time_travel_by_id_time_branch_and_tag(tmp_path: Path, con: duckdb.DuckDBPyConnection) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=(tmp_path / "wh").as_uri())
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1, 2]}))
    first = table.current_snapshot()
    assert first is not None
    time.sleep(0.01)
    table.append(pa.table({"id": [3]}))
    table.manage_snapshots().create_tag(first.snapshot_id, "v1").create_branch(
        first.snapshot_id, "dev"
    ).commit()
    loc = catalog.load_table("ns.t").metadata_location.removeprefix("file://")
    assert _ids(con, loc) == [1, 2, 3]
    assert _ids(con, loc, snapshot_id=first.snapshot_id) == [1, 2]
    assert _ids(con, loc, ref="'v1'") == [1, 2]
    assert _ids(con, loc, ref="'dev'") == [1, 2]
    when = f"epoch_ms({first.timestamp_ms})::TIMESTAMPTZ"
    assert _ids(con, loc, as_of=when) == [1, 2]


def test_changes_between_snapshots_pair_updates_by_row_id(
    warehouse: str, con: duckdb.DuckDBPyConnection
) -> None:
    lake = new_lake(warehouse)
    t = lake.create_table("ns.c", [("id", "BIGINT"), ("v", "VARCHAR")])
    t.append(lake.sql("SELECT i AS id, 'a' AS v FROM range(10) t(i)"))
    start = t.current_snapshot()
    assert start is not None
    t.delete("id = 3")
    t.update({"v": "'b'"}, "id = 5")
    t.append(lake.sql("SELECT 42 AS id, 'n' AS v"))
    loc = sql_string(t.metadata_location)
    rows = con.execute(
        f"SELECT change_type, id, v, snapshot_id FROM iceberg_changes({loc}, from_snapshot := {start.snapshot_id}) "
        "ORDER BY snapshot_id, change_type"
    ).fetchall()
    kinds = sorted((r[0], r[1], r[2]) for r in rows)
    assert kinds == [
        ("delete", 3, "a"),
        ("insert", 42, "n"),
        ("update_after", 5, "b"),
        ("update_before", 5, "a"),
    ]
    snaps = [s.snapshot_id for s in t.load().metadata.snapshots]
    by_kind = {r[0]: r[3] for r in rows}
    i = snaps.index(start.snapshot_id)
    assert (by_kind["delete"], by_kind["update_after"], by_kind["insert"]) == tuple(snaps[i + 1 : i + 4])
    # from the beginning: every row ever inserted shows up as an insert of the first snapshot
    first = con.execute(
        f"SELECT count(*) FROM iceberg_changes({loc}) WHERE change_type = 'insert'"
    ).fetchone()
    assert first is not None and first[0] == 11
    lake.close()


def test_catalog_views_read_the_latest_commit_with_pushdown(warehouse: str) -> None:
    lake = new_lake(warehouse)
    t = lake.create_table("ns.v", [("id", "BIGINT"), ("d", "DATE")], partition_by=["d"])
    t.append(lake.sql("SELECT i AS id, DATE '2026-01-01' + (i % 4)::INTEGER AS d FROM range(100) t(i)"))
    con = lake.con
    views = attach_catalog_views(con, lake.catalog)
    assert views == ["lake.ns.v"]
    assert con.execute("SELECT count(*) FROM lake.ns.v WHERE d = DATE '2026-01-02'").fetchall()[0] == (25,)
    t.append(lake.sql("SELECT 1000 AS id, DATE '2026-01-02' AS d"))
    t.delete("id = 1")
    assert con.execute("SELECT count(*), sum(id) FROM lake.ns.v WHERE d = DATE '2026-01-02'").fetchall()[
        0
    ] == (
        25,
        sum(i for i in range(100) if i % 4 == 1 and i != 1) + 1000,
    )
    assert con.execute("SELECT count(*) FROM lake.ns.v").fetchall()[0] == (100,)
    plan = con.execute(
        f"SELECT count(*) FILTER (WHERE kept) FROM iceberg_scan_plan('{t.metadata_location}', filter := 'd = DATE ''2026-01-02''')"
    ).fetchall()[0]
    assert plan == (2,)
    lake.close()


@pytest.mark.parametrize("mode", ["bitmap", "positional", "anti"])
def test_deletes_line_up_with_rows_across_row_groups(
    tmp_path: Path, con: duckdb.DuckDBPyConnection, mode: str
) -> None:
    """A file of many row groups with a DV, read with 2 threads and a filter that skips row groups:
    every delete mode must pair each row with its own position (a positional join only works
    because no filter or row-group skipping reaches the Parquet side below it)."""
    b = TableBuilder(tmp_path / "t", format_version=3)
    path = b.add_data_file(200_000)
    # rewrite the file with small row groups (same rows, same field ids)
    pq.write_table(pq.read_table(path), path, row_group_size=7_000)
    b.data_files[path] = b.data_files[path]
    b.commit()
    deleted = set(range(0, 200_000, 3)) | set(range(150_000, 160_000))
    b.commit(dvs={path: sorted(deleted)})
    con.execute("SET threads = 2")
    where = "id BETWEEN 100000 AND 170000"
    expected_ids = [i for i in range(100_000, 170_001) if i not in deleted]
    for flt in ("", f", filter := '{where}'"):
        sql = (
            f"SELECT count(*), sum(id) FROM iceberg_scan('{b.metadata_path}', delete_mode := '{mode}'{flt}) "
            f"WHERE {where}"
        )
        assert con.execute(sql).fetchall() == [(len(expected_ids), sum(expected_ids))]
        text = con.execute("EXPLAIN " + sql).fetchall()[0][1].upper()
        assert ("POSITIONAL" in text) == (mode == "positional")


def test_interrupt_stops_a_scan_and_the_connection_stays_usable(
    tmp_path: Path, con: duckdb.DuckDBPyConnection
) -> None:
    b = TableBuilder(tmp_path / "t", format_version=3)
    f = b.add_data_file(300_000)
    b.commit(dvs={f: range(0, 300_000, 2)})
    slow = (
        f"SELECT count(*) FROM iceberg_scan('{b.metadata_path}') a, range(100000) r WHERE a.id + r.range < 0"
    )
    timer = threading.Timer(0.5, con.interrupt)
    timer.start()
    started = time.perf_counter()
    with pytest.raises(duckdb.Error, match=r"(?i)interrupt"):
        con.execute(slow).fetchall()
    assert time.perf_counter() - started < 5
    timer.cancel()
    assert con.execute(f"SELECT count(*) FROM iceberg_scan('{b.metadata_path}')").fetchone() == (150_000,)


def test_bare_deletion_vectors_are_refused_unless_allowed(
    conformance: Path, con: duckdb.DuckDBPyConnection
) -> None:
    table = (
        conformance
        / "duckdb-iceberg/data/persistent/legacy_bare_deletion_vector/warehouse/default/legacy_bare_deletion_vector"
    )
    with pytest.raises(duckdb.Error, match="bare deletion-vector"):
        con.execute(f"SELECT * FROM iceberg_scan('{table}')").fetchall()
    rows = con.execute(
        f"SELECT id, source FROM iceberg_scan('{table}', allow_bare_deletion_vectors := true) ORDER BY id"
    ).fetchall()
    assert rows == [(1, "legacy"), (3, "legacy")]


def test_changes_on_v2_tables_are_deletes_and_inserts(warehouse: str, con: duckdb.DuckDBPyConnection) -> None:
    lake = new_lake(warehouse)
    t = lake.create_table("ns.c2", [("id", "BIGINT"), ("v", "VARCHAR")], format_version=2)
    t.append(lake.sql("SELECT i AS id, 'a' AS v FROM range(5) t(i)"))
    start = t.current_snapshot()
    assert start is not None
    t.delete("id = 1")
    t.update({"v": "'b'"}, "id = 2")
    rows = con.execute(
        f"SELECT change_type, id, v, _row_id FROM iceberg_changes('{t.metadata_location}', "
        f"from_snapshot := {start.snapshot_id})"
    ).fetchall()
    assert sorted(rows) == [("delete", 1, "a", None), ("delete", 2, "a", None), ("insert", 2, "b", None)]
    lake.close()


def test_creating_the_views_plans_no_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB binds a view when it is created only to learn its columns: creating the views of a
    catalog must not plan its tables (a 4,000-file table took ~0.8 s), yet every view must have
    exactly the columns and types its scan returns, and read the table's rows afterwards."""
    import iceduck.duckdb.scan as scan_module

    lake = new_lake(tmp_path)
    t = lake.create_table(
        "ns.w", [("id", "BIGINT"), ("d", "DATE"), ("tags", "VARCHAR[]"), ("m", "MAP(VARCHAR, INTEGER)")],
        partition_by=["d"],
    )  # fmt: skip
    t.append(lake.sql("SELECT 1 AS id, DATE '2026-01-01' AS d, ['a'] AS tags, MAP {'k': 1} AS m"))
    with t.update_schema() as u:
        u.add_column("added", "DOUBLE")
    t.append(lake.sql("SELECT 2 AS id, DATE '2026-01-02' AS d, [] AS tags, MAP {} AS m, 0.5 AS added"))
    con = lake.con

    planned: list[object] = []
    real_plan_for = scan_module.plan_for

    def counted(*args: Any, **kwargs: Any) -> Any:
        planned.append(args[0])
        return real_plan_for(*args, **kwargs)

    monkeypatch.setattr(scan_module, "plan_for", counted)
    assert attach_catalog_views(con, lake.catalog) == ["lake.ns.w"]
    assert planned == []
    con.execute("SELECT count(*) FROM lake.ns.w").fetchall()
    assert len(planned) == 1  # reading it plans it
    monkeypatch.undo()
    described = con.execute("DESCRIBE lake.ns.w").fetchall()
    scanned = con.execute(f"DESCRIBE FROM iceberg_scan({sql_string(t.metadata_location)})").fetchall()
    assert [r[:2] for r in described] == [r[:2] for r in scanned]
    assert con.execute("SELECT id, d, tags, m, added FROM lake.ns.w ORDER BY id").fetchall() == con.execute(
        f"SELECT id, d, tags, m, added FROM iceberg_scan({sql_string(t.metadata_location)}) ORDER BY id"
    ).fetchall()
    lake.close()
