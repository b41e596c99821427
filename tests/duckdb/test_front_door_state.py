"""What the front door stores while planning statements lives per connection (`duckdb.capture`).

Two lakes in one process: each one's statement prunings are its own (a token of one means nothing
on the other, and forgetting one's, as a view change does, leaves the other's); a connection
dropped takes its state along.
"""

from __future__ import annotations

import gc
from pathlib import Path

from iceduck.duckdb import capture
from iceduck.lake import connect


def _lake_with_table(path: Path):  # type: ignore[no-untyped-def]
    lake = connect(path)
    lake.sql("CREATE SCHEMA ns; CREATE TABLE ns.t (x INT)")
    lake.sql("INSERT INTO ns.t VALUES (1), (2)")
    lake.sql("INSERT INTO ns.t VALUES (3)")
    return lake


def test_each_connection_keeps_its_own_statement_prunings(tmp_path: Path) -> None:
    a, b = _lake_with_table(tmp_path / "a"), _lake_with_table(tmp_path / "b")
    try:
        found = capture.capture_statement(a.con, capture.capture_slots(a.con), "FROM lake.ns.t WHERE x = 3")
        assert found is not None
        token, keys = found
        assert keys == {capture.view_key("lake", "ns.t")}
        assert capture.keep_statement(a.con, token)
        assert not capture.keep_statement(b.con, token)  # the other lake never planned it
        capture.forget_statements(b.con)  # e.g. a view replaced on b
        assert capture.keep_statement(a.con, token)
        capture.forget_statements(a.con)
        assert not capture.keep_statement(a.con, token)
        # the front door still prunes on both after that
        for lake in (a, b):
            assert lake.sql("SELECT x FROM lake.ns.t WHERE x = 3").fetchall() == [(3,)]
    finally:
        a.close()
        b.close()


def test_a_dropped_connection_takes_its_prunings_along(tmp_path: Path) -> None:
    lake = _lake_with_table(tmp_path / "a")
    assert capture.capture_statement(lake.con, capture.capture_slots(lake.con), "FROM lake.ns.t WHERE x = 1")
    before = len(capture._DOORS)
    lake.close()
    del lake
    gc.collect()
    assert len(capture._DOORS) < before
