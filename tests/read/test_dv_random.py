"""Random deletion vectors, one or several DELETEs each (so vectors are merged across snapshots),
read back through every way a scan applies them: the live-row bits (`hooks.NativeSource`, the
default: handed over as Arrow, or built by DuckDB itself in a process without pyarrow), `delete_mode :=
'positional'` (a mask per file) and `'anti'` (a join with the positions).

Truth comes from DuckDB's own `range()` filtered by the same predicates, never from the table."""

from __future__ import annotations

import tempfile
from pathlib import Path
from unittest import mock

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import iceduck
from iceduck.duckdb.binding import register

# A DELETE predicate: scattered (a hash bucket) or a run of consecutive ids.
scattered = st.builds(
    lambda seed, k, r: f"(hash(id + {seed}) % {k}) < {r}",
    st.integers(0, 1000),
    st.sampled_from([2, 3, 10, 100, 1000]),
    st.integers(1, 2),
)
runs = st.integers(0, 140_000).flatmap(lambda a: st.integers(a, a + 70_000).map(lambda b: f"id BETWEEN {a} AND {b}"))


@settings(max_examples=10, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.sampled_from([1, 9, 4096, 65_535, 65_537, 140_000]),
    deletes=st.lists(st.one_of(scattered, runs), min_size=1, max_size=3),
    window=st.tuples(st.integers(0, 140_000), st.integers(0, 20_000)),
)
def test_random_deletion_vectors_read_the_same_every_way(rows: int, deletes: list[str], window: tuple[int, int]) -> None:
    lo, width = window
    with tempfile.TemporaryDirectory() as tmp, iceduck.connect(str(Path(tmp) / "wh")) as lake:
        lake.sql("CREATE SCHEMA s")
        lake.sql("CREATE TABLE s.t (id BIGINT, v DOUBLE) WITH ('format-version' = '3')")
        lake.sql(f"INSERT INTO s.t SELECT i, i / 4 FROM range({rows}) r(i)")
        for predicate in deletes:
            lake.sql(f"DELETE FROM s.t WHERE {predicate}")
        location = str(lake.table("s.t").metadata_location)
        truth_con = duckdb.connect()
        kept = " AND ".join(f"NOT ({p})" for p in deletes)
        truth = truth_con.execute(
            f"SELECT count(*), sum(id), sum(v) FILTER (WHERE id BETWEEN {lo} AND {lo + width}) "
            f"FROM (SELECT i AS id, i / 4 AS v FROM range({rows}) r(i)) WHERE {kept}"
        ).fetchall()
        truth_con.close()
        if 0 < truth[0][0] < rows:  # some rows deleted: by deletion vectors (Puffin), as v3 writes them
            assert list(Path(tmp).rglob("*.puffin"))
        for native in (True, False):
            with mock.patch("iceduck.duckdb.scan.bits_without_pyarrow", return_value=native):
                con = duckdb.connect()
                register(con)
            for mode in ("bitmap", "positional", "anti"):
                scan = f"iceberg_scan('{location}', delete_mode := '{mode}')"
                got = con.execute(
                    f"SELECT count(*), sum(id), sum(v) FILTER (WHERE id BETWEEN {lo} AND {lo + width}) FROM {scan}"
                ).fetchall()
                assert got == truth, (native, mode, deletes)
                # a selective scan, its filter pushed into the Parquet reader below the deletes
                selective = con.execute(
                    f"SELECT count(*) FROM {scan} WHERE id BETWEEN {lo} AND {lo + width}"
                ).fetchall()
                (want,) = duckdb.sql(
                    f"SELECT count(*) FROM range({rows}) r(id) WHERE {kept} AND id BETWEEN {lo} AND {lo + width}"
                ).fetchall()
                assert selective == [want], (native, mode, deletes)
            con.close()
