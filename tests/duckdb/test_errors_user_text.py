"""What a user reads when a table function call goes wrong (issue 12, items 2 and 3).

Every message is one line that names the function and the problem; none carries DuckDB's wrapper
around Python exceptions, an internal object name or traceback text; a wrong argument type gets
DuckDB's own conversion message.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

import iceduck
from iceduck.duckdb.functions import clean_message
from iceduck.lake import Lake
from tests.cli.test_cli import PROMPT, Terminal, run
from tests.inspect.test_inspect_deletes import build_v3

INTERNAL = ("__iceduck", "exporting a stream", "Python exception", "Traceback", "UDF")


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    folder = tmp_path_factory.mktemp("errors") / "warehouse"
    lk = iceduck.connect(folder)
    lk.sql("CREATE SCHEMA demo")
    lk.sql("CREATE TABLE demo.t (id BIGINT, d DATE)")
    lk.sql("INSERT INTO demo.t VALUES (1, DATE '2026-01-01'), (2, DATE '2026-01-02')")
    yield lk
    lk.close()


def _error(lake: Lake, sql: str) -> str:
    with pytest.raises(duckdb.Error) as failure:
        lake.con.sql(sql).fetchall()
    text = str(failure.value)
    first = text.split("\n\nLINE ")[0]  # DuckDB may point at the call on a second line
    assert "\n" not in first, text
    for internal in INTERNAL:
        assert internal not in first, text
    return first


def test_missing_table_is_one_line_naming_the_function(lake: Lake) -> None:
    got = _error(lake, "SELECT * FROM iceberg_files('demo.nosuch')")
    assert got.startswith("Invalid Input Error: iceberg_files: demo.nosuch: no Iceberg table found; ")
    got = _error(lake, "SELECT * FROM iceberg_scan('demo.nosuch')")
    assert got.startswith("Invalid Input Error: iceberg_scan: demo.nosuch: no Iceberg table found; ")
    # also when the query reads no column, or columns the failed call would have had
    got = _error(lake, "SELECT count(*) FROM iceberg_snapshots('demo.nosuch')")
    assert got.startswith("Invalid Input Error: iceberg_snapshots: demo.nosuch: no Iceberg table found")
    got = _error(lake, "SELECT station FROM iceberg_scan('demo.nosuch')")
    assert got.startswith("Invalid Input Error: iceberg_scan: demo.nosuch: no Iceberg table found")


def test_wrong_argument_types_get_duckdbs_conversion_errors(lake: Lake) -> None:
    assert _error(lake, "SELECT * FROM iceberg_files('demo.t', as_of := 'garbage')") == (
        'Conversion Error: invalid timestamp field format: "garbage", expected format is '
        "(YYYY-MM-DD HH:MM[:SS[.US]][±HH[:MM[:SS]]| ZONE])"
    )
    assert _error(lake, "SELECT * FROM iceberg_files('demo.t', snapshot_id := 'abc')") == (
        "Conversion Error: Could not convert string 'abc' to INT64"
    )
    assert _error(lake, "SELECT * FROM iceberg_scan('demo.t', snapshot_id := 'abc')") == (
        "Conversion Error: Could not convert string 'abc' to INT64"
    )
    got = _error(lake, "SELECT * FROM iceberg_expire_snapshots('demo.t', older_than := 'last week')")
    assert got.startswith('Conversion Error: invalid timestamp field format: "last week"')


def test_null_table_and_fractional_snapshot_ids_are_refused(lake: Lake) -> None:
    assert _error(lake, "SELECT * FROM iceberg_files(NULL)") == (
        "Invalid Input Error: iceberg_files: the table argument is required (got NULL)"
    )
    assert _error(lake, "SELECT * FROM iceberg_scan(NULL)") == (
        "Invalid Input Error: iceberg_scan: the table argument is required (got NULL)"
    )
    ((snapshot_id,),) = lake.con.sql("SELECT snapshot_id FROM iceberg_snapshots('demo.t')").fetchall()
    assert _error(lake, "SELECT count(*) FROM iceberg_files('demo.t', snapshot_id := 1.5)") == (
        "Invalid Input Error: iceberg_files: snapshot_id must be a whole number, got 1.5"
    )
    assert _error(lake, "SELECT count(*) FROM iceberg_scan('demo.t', snapshot_id := 1.5)") == (
        "Invalid Input Error: iceberg_scan: snapshot_id must be a whole number, got 1.5"
    )
    # a whole number written as a decimal is still that snapshot
    rows = lake.con.sql(f"SELECT count(*) FROM iceberg_scan('demo.t', snapshot_id := {snapshot_id}.0)")
    assert rows.fetchall() == [(2,)]
    got = _error(lake, "SELECT * FROM iceberg_files('demo.t', snapshot_id := 12)")
    assert got == "Invalid Input Error: iceberg_files: demo.t: no snapshot with id 12"


def test_per_row_arguments_are_refused_by_duckdb(lake: Lake) -> None:
    with pytest.raises(duckdb.Error, match="does not support lateral join column parameters"):
        lake.con.sql("SELECT * FROM (VALUES ('demo.t')) v(p), LATERAL iceberg_files(v.p)").fetchall()


def test_table_references_as_identifiers(lake: Lake) -> None:
    quoted = lake.con.sql("SELECT snapshot_id FROM iceberg_snapshots('demo.t')").fetchall()
    assert lake.con.sql("SELECT snapshot_id FROM iceberg_snapshots(demo.t)").fetchall() == quoted
    assert lake.con.sql("SELECT snapshot_id FROM iceberg_snapshots(lake.demo.t)").fetchall() == quoted
    assert lake.con.sql("SELECT count(*) FROM iceberg_scan(lake.demo.t)").fetchall() == [(2,)]


def test_clean_message_drops_duckdbs_wrapper() -> None:
    wrapped = (
        "Invalid Input Error: exporting a stream from the object registered as '__iceduck_iceberg_files' "
        "failed: CorruptFileError: /w/x.puffin: bad CRC\nTraceback (most recent call last):\n  File ..."
    )
    assert clean_message(wrapped) == "Invalid Input Error: iceberg_files: /w/x.puffin: bad CRC"
    udf = "Invalid Input Error: Python exception occurred while executing the UDF: ValidationError: t: bad"
    assert clean_message(udf) == "Invalid Input Error: t: bad"


def test_shell_prints_the_clean_line(lake: Lake, tmp_path: Path) -> None:
    import io

    from iceduck.shell import Shell

    out, err = io.StringIO(), io.StringIO()
    shell = Shell(lake, out, err)
    shell.run_text("SELECT * FROM iceberg_files('demo.nosuch');")
    assert err.getvalue().startswith(
        "Error: Invalid Input Error: iceberg_files: demo.nosuch: no Iceberg table"
    )
    assert err.getvalue().count("\n") == 1 or "LINE" in err.getvalue()


def _corrupt_dv(folder: Path) -> tuple[str, int, str]:
    """A v3 table whose snapshot 2 has a deletion vector with a flipped byte: (metadata file,
    snapshot id, the one line a read of it must give)."""
    v3 = build_v3(folder)
    puffin = v3.builder.commits[1].puffin_path
    assert puffin is not None
    data = bytearray(Path(puffin).read_bytes())
    start, length = 4, int.from_bytes(data[4:8], "big") + 8  # blob 0, as iceberg_dv_check reads it
    data[start + 20] ^= 0xFF
    Path(puffin).write_bytes(bytes(data))
    computed = zlib.crc32(bytes(data[start + 4 : start + length - 4]))
    stored = int.from_bytes(data[start + length - 4 : start + length], "big")
    why = f"{puffin}: Invalid CRC for deletion vector {puffin}: 0x{computed:08x}, expected 0x{stored:08x}"
    return v3.builder.metadata_path, v3.snapshot_ids()[1], why


def _fetch(run: Any, sql: str) -> Any:
    return run(sql).fetchall()


def test_a_failure_while_rows_are_read_is_one_line_on_every_path(tmp_path: Path) -> None:
    """Deleted positions and a function's rows are read while the statement runs, long after it
    was bound (a relation may be fetched later): the error is still DuckDB's one line, the same on
    a plain connection, a relation read later, `Lake.sql`, `iceduck -c` and the interactive shell."""
    meta, sid, why = _corrupt_dv(tmp_path / "v3")
    scan = f"SELECT count(*) FROM iceberg_scan('{meta}', snapshot_id := {sid})"
    expected = {
        scan: f"Invalid Input Error: {why}",
        f"SELECT * FROM iceberg_scan('{meta}', snapshot_id := {sid}, delete_mode := 'anti')": (
            f"Invalid Input Error: {why}"
        ),
        f"SELECT * FROM iceberg_dv_positions('{meta}', snapshot_id := {sid})": (
            f"Invalid Input Error: iceberg_dv_positions: {why}"
        ),
        f"SELECT * FROM iceberg_position_deletes('{meta}', snapshot_id := {sid})": (
            f"Invalid Input Error: iceberg_position_deletes: {why}"
        ),
        # a filter of the caller's must not drop the failure row (its columns are NULL) before it fails
        f"SELECT * FROM iceberg_dv_positions('{meta}', snapshot_id := {sid}) WHERE pos > 0": (
            f"Invalid Input Error: iceberg_dv_positions: {why}"
        ),
        f"SELECT count(*) FROM iceberg_position_deletes('{meta}', snapshot_id := {sid}) WHERE pos IS NOT NULL": (
            f"Invalid Input Error: iceberg_position_deletes: {why}"
        ),
        f"SELECT * FROM iceberg_scan('{meta}', snapshot_id := {sid}, delete_mode := 'positional') WHERE id >= 0": (
            f"Invalid Input Error: {why}"
        ),
    }
    con = duckdb.connect()
    iceduck.register(con)
    lake = iceduck.connect(tmp_path / "wh")
    try:
        for sql, message in expected.items():
            later = con.sql(sql)  # bound now, read below
            for read in (
                functools.partial(_fetch, con.execute, sql),
                later.fetchall,
                functools.partial(_fetch, lake.sql, sql),
            ):
                with pytest.raises(duckdb.Error) as failure:
                    read()
                assert str(failure.value) == message, sql
    finally:
        con.close()
        lake.close()
    result = run(tmp_path, "-c", scan)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"Error: {expected[scan]}\n")
    terminal = Terminal(tmp_path)
    try:
        terminal.expect(PROMPT)
        terminal.send(scan + ";\r")
        line = terminal.expect(r"Error: [^\n]*\n")
        assert line.group(0).rstrip() == f"Error: {expected[scan]}"
        terminal.send(".quit\r")
        assert terminal.close() == 0
    finally:
        if terminal.proc.poll() is None:
            terminal.proc.kill()
