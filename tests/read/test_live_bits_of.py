"""The live-row bit string a scan filters with (`read.deletes.live_bits_of`: deletion vectors ->
DuckDB BIT order, bit-reversed and inverted in 64-bit words) against an independent reading: the
rows DuckDB's own `get_bit` keeps equal the rows a Python set of deleted positions leaves, for
positions drawn as scattered points, runs (run containers), dense blocks (bitset containers),
several DVs of one file, and row counts off a multiple of 8 and of 64."""

from __future__ import annotations

import duckdb
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from iceduck.puffin import write_deletion_vectors
from iceduck.puffin.puffin import read_deletion_vector
from iceduck.puffin.roaring64 import Roaring64
from iceduck.read.deletes import live_bits_of


@st.composite
def files(draw: st.DrawFn) -> tuple[int, list[set[int]]]:
    """(rows, the deleted positions of each of 0-3 DVs of one data file)."""
    rows = draw(st.one_of(st.integers(0, 200), st.integers(60_000, 200_000)))
    vectors = []
    for _ in range(draw(st.integers(0, 3))):
        if rows == 0:
            vectors.append(set())
            continue
        deleted = set(draw(st.lists(st.integers(0, rows - 1), max_size=50)))
        for start, length in draw(st.lists(st.tuples(st.integers(0, rows - 1), st.integers(1, 70_000)), max_size=2)):
            deleted |= set(range(start, min(start + length, rows)))
        if draw(st.booleans()):  # a dense scattered block: a bitset container
            seed = draw(st.integers(0, 2**32 - 1))
            mask = np.random.default_rng(seed).random(min(rows, 65_536)) < 0.4
            deleted |= set(np.nonzero(mask)[0].tolist())
        vectors.append(deleted)
    return rows, vectors


def _kept_by_duckdb(bits: bytes, rows: int) -> list[int]:
    con = duckdb.connect()
    if rows == 0:
        return []
    found = con.execute(
        "SELECT list(r ORDER BY r) FROM range(?) t(r) WHERE get_bit(?::BLOB::BIT, r::INTEGER) = 1",
        [rows, bits],
    ).fetchall()[0][0]
    return found or []


@settings(max_examples=60, deadline=None)
@given(files())
def test_duckdb_keeps_exactly_the_rows_no_dv_deletes(case: tuple[int, list[set[int]]]) -> None:
    rows, vectors = case
    # through the Puffin bytes a writer produces and the reader checks, as a scan reads them
    puffin, blobs = write_deletion_vectors(
        [(f"file:///d/f{i}.parquet", Roaring64.from_positions(sorted(v))) for i, v in enumerate(vectors)]
    )
    bitmaps = [read_deletion_vector(puffin, b.offset, b.length) for b in blobs]
    bits = live_bits_of(bitmaps, rows)
    deleted = set().union(*vectors)
    assert len(bits) == (rows + 7) // 8
    assert _kept_by_duckdb(bits, rows) == [r for r in range(rows) if r not in deleted]
    if rows % 8:  # the padding past the last row is clear
        assert bits[-1] & ((1 << (8 - rows % 8)) - 1) == 0
