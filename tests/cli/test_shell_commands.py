"""The shell's DuckDB-CLI commands and output modes, `describe`/`tree`, and the command line's own
errors (issue 12, items 6-8), asserted on the exact text a user sees."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

import iceduck
from iceduck.lake import Lake
from iceduck.shell import Shell

ICEDUCK = [sys.executable, "-c", "import sys; from iceduck.cli import main; sys.exit(main())"]


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[Lake]:
    lk = iceduck.connect(tmp_path / "wh")
    lk.sql("CREATE SCHEMA demo")
    lk.sql("CREATE TABLE demo.t (id BIGINT, name VARCHAR, d DATE) PARTITIONED BY (day(d))")
    lk.sql("INSERT INTO demo.t VALUES (1, 'a', DATE '2026-01-01'), (2, NULL, DATE '2026-01-02')")
    yield lk
    lk.close()


def _run(lake: Lake, text: str, width: int = 100) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(lake, out, err, max_width=width)
    shell.run_text(text)
    return out.getvalue(), err.getvalue()


ROWS = "SELECT 1 AS a, 'x' AS b, true AS c UNION ALL SELECT 2, NULL, false ORDER BY a;"


def test_output_modes(lake: Lake) -> None:
    assert _run(lake, ".mode json\n" + ROWS) == (
        '[{"a":1,"b":"x","c":true},\n{"a":2,"b":null,"c":false}]\n',
        "",
    )
    assert _run(lake, ".mode jsonlines\n" + ROWS) == (
        '{"a":1,"b":"x","c":true}\n{"a":2,"b":null,"c":false}\n',
        "",
    )
    assert _run(lake, ".mode list\n" + ROWS) == ("a|b|c\n1|x|true\n2|NULL|false\n", "")
    table = "+---+------+-------+\n| a | b    | c     |\n+---+------+-------+\n"
    table += "| 1 | x    | true  |\n| 2 | NULL | false |\n+---+------+-------+\n"
    assert _run(lake, ".mode table\n" + ROWS) == (table, "")
    # line mode: a blank line between records
    assert _run(lake, ".mode line\n" + ROWS) == ("a = 1\nb = x\nc = true\n\na = 2\nb = NULL\nc = false\n", "")


def test_dml_prints_its_count(lake: Lake) -> None:
    out, err = _run(
        lake,
        ".mode csv\nINSERT INTO demo.t VALUES (3, 'c', DATE '2026-01-03');\nDELETE FROM demo.t WHERE id < 3;",
    )
    assert (out, err) == ("Count\n1\nCount\n2\n", "")


def test_schema_databases_show_output_once(lake: Lake, tmp_path: Path) -> None:
    out, err = _run(lake, "CREATE TABLE local (x INTEGER);\n.schema")
    assert err == ""
    assert out == (
        'CREATE TABLE "local"(x INTEGER);\n'
        "CREATE TABLE demo.t (id BIGINT, name VARCHAR, d DATE) PARTITIONED BY (day(d));\n"
    ) or out == (
        "CREATE TABLE local(x INTEGER);\n"
        "CREATE TABLE demo.t (id BIGINT, name VARCHAR, d DATE) PARTITIONED BY (day(d));\n"
    )
    assert "__iceduck" not in out
    out, _ = _run(lake, ".databases")
    assert out == f"memory: (in memory)\nlake: {lake.warehouse.resolve()} (Iceberg catalog)\n"
    target = tmp_path / "out.csv"
    out, err = _run(lake, f".mode csv\n.once {target}\nSELECT 1 AS one;\nSELECT 2 AS two;")
    assert (out, err) == ("two\n2\n", "")
    assert target.read_text() == "one\n1\n"
    many = tmp_path / "many.txt"
    out, err = _run(
        lake, f".mode csv\n.output {many}\nSELECT 1 AS one;\nSELECT 2 AS two;\n.output\nSELECT 3 AS three;"
    )
    assert (out, err) == ("three\n3\n", "")
    assert many.read_text() == "one\n1\ntwo\n2\n"
    out, _ = _run(lake, ".mode csv\n.show")
    assert out.splitlines()[:4] == ["     mode: csv", "    timer: off", "  maxrows: 40", " maxwidth: 100"]
    assert out.splitlines()[4:] == ["   output: stdout", f"warehouse: {lake.warehouse.resolve()}"]


def test_functions_wrap_between_words(lake: Lake) -> None:
    out, _ = _run(lake, ".functions", width=60)
    lines = out.splitlines()
    assert all(len(line) <= 59 for line in lines)
    # wrapped at spaces: the continuation lines hold the rest of the signature, words whole
    start = lines.index("iceberg_scan(tbl, snapshot_id := NULL, as_of := NULL, ref")
    assert lines[start + 1].startswith("    := NULL, filter := NULL,")
    assert "    Every snapshot of the table" in lines


def test_describe_and_tree(lake: Lake) -> None:
    out, err = _run(lake, ".describe demo.t")
    assert err == ""
    lines = out.splitlines()
    assert lines[0].startswith("demo.t  (Iceberg format v3, uuid ")
    assert "partitioned by (spec 0): d_day = day(d)" in lines
    assert "sorted by: nothing (unsorted)" in lines
    assert "files: 2 data files" in " ".join(lines) and "2 records" in out
    assert any(line.startswith("health: ") for line in lines)
    out, err = _run(lake, ".tree demo.t")
    assert err == "" and out.startswith("demo.t  (table folder ")
    assert "metadata.json  metadata/" in out


def test_describe_counts_a_shared_puffin_file_once(lake: Lake) -> None:
    # one DELETE over two data files: two deletion vectors written into one Puffin file
    lake.sql(
        "INSERT INTO demo.t VALUES (3, 'c', DATE '2026-01-01'), (5, 'e', DATE '2026-01-01'), "
        "(4, 'd', DATE '2026-01-02'), (6, 'f', DATE '2026-01-02')"
    )
    lake.sql("DELETE FROM demo.t WHERE id IN (3, 4)")
    puffins = lake.con.execute(
        "SELECT count(DISTINCT file_path), count(*), any_value(file_size_in_bytes) "
        "FROM iceberg_files('demo.t') WHERE content = 'POSITION_DELETES'"
    ).fetchall()
    [(paths, vectors, size)] = puffins
    assert (paths, vectors) == (1, 2)
    out, err = _run(lake, ".describe demo.t")
    assert err == ""
    [line] = [line for line in out.splitlines() if "position-delete" in line]
    assert line.startswith("files: 1 position-delete file (2 deletion vectors), ")
    assert f"{size} B" in line or size >= 1024  # the size is the one file's, not twice it
    assert line.endswith(", 2 records")


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ICEDUCK, "--warehouse", str(tmp_path / "wh"), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_commands_fail_in_one_line_and_help_is_readable(lake: Lake, tmp_path: Path) -> None:
    result = _cli(tmp_path, "health", "demo.nosuch")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("Error: demo.nosuch: no Iceberg table found; ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    result = _cli(tmp_path, "describe", "demo.nosuch")
    assert result.returncode == 1 and result.stderr.startswith("Error: demo.nosuch: no Iceberg table found")
    result = _cli(tmp_path, "health", "--help")
    assert result.stdout.startswith("usage: iceduck health [-h] [--warehouse PATH]")
    result = _cli(tmp_path, "describe", "demo.t")
    assert result.returncode == 0 and result.stdout.startswith("demo.t  (Iceberg format v3")
    result = _cli(tmp_path, "tree", "demo.t")
    assert result.returncode == 0 and result.stdout.startswith("demo.t  (table folder ")


def test_demo_leaves_a_users_own_table_alone(tmp_path: Path) -> None:
    with iceduck.connect(tmp_path / "wh") as lk:
        lk.sql("CREATE SCHEMA demo")
        lk.sql("CREATE TABLE demo.services (x INTEGER)")
        lk.sql("INSERT INTO demo.services VALUES (42)")
    result = _cli(tmp_path, "demo")
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: demo.services exists in {(tmp_path / 'wh').resolve()} and was not made by `iceduck demo`: "
        "leaving it alone (use another --warehouse for the demo)\n"
    )
    with iceduck.connect(tmp_path / "wh") as lk:
        rows = lk.sql("SELECT * FROM lake.demo.services")
        assert rows is not None and rows.fetchall() == [(42,)]
    # the demo's own table is rebuilt on a second run
    other = tmp_path / "other"
    assert (
        subprocess.run(
            [*ICEDUCK, "--warehouse", str(other), "demo"], capture_output=True, cwd=tmp_path, timeout=120
        ).returncode
        == 0
    )
    again = subprocess.run(
        [*ICEDUCK, "--warehouse", str(other), "demo"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert again.returncode == 0 and "demo.services existed: dropped it" in again.stdout


def test_register_takes_a_path_or_a_pyiceberg_catalog(lake: Lake, tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog as PyIcebergSqlCatalog

    con = duckdb.connect()
    iceduck.register(con, catalog=str(tmp_path / "wh"))
    assert con.sql("SELECT count(*) FROM iceberg_scan('demo.t')").fetchall() == [(2,)]
    con.close()
    py = PyIcebergSqlCatalog(
        "iceduck", uri=f"sqlite:///{tmp_path / 'wh' / 'catalog.db'}", warehouse=f"file://{tmp_path / 'wh'}"
    )
    con = duckdb.connect()
    iceduck.register(con, catalog=py)
    assert con.sql("SELECT count(*) FROM iceberg_files('demo.t')").fetchall() == [(2,)]
    con.close()
    with pytest.raises(iceduck.errors.ValidationError, match="no such warehouse folder or catalog file"):
        iceduck.register(duckdb.connect(), catalog=str(tmp_path / "typo"))
    with pytest.raises(iceduck.errors.ValidationError, match="not dict"):
        iceduck.register(duckdb.connect(), catalog={})


def test_show_tables_lists_the_users_tables_not_iceduck_internals(lake: Lake) -> None:
    out, err = _run(lake, "CREATE TABLE mine (x INTEGER);\n.mode csv\nSHOW TABLES;")
    assert (out, err) == ("name\nlake.demo.t\nmine\n", "")
    out, err = _run(lake, ".mode csv\nSHOW ALL TABLES;")
    assert err == "" and "__iceduck" not in out
    assert "lake,demo,t," in out


def test_functions_carry_their_description(lake: Lake) -> None:
    rows = lake.con.sql(
        "SELECT function_name, comment FROM duckdb_functions() WHERE function_name IN ('iceberg_files', 'iceberg_metadata')"
    ).fetchall()
    assert (
        dict(rows)["iceberg_files"]
        == "Live data and delete files of a snapshot (content := 'data' | 'delete' | 'all')"
    )
    assert dict(rows)["iceberg_metadata"].startswith("The DuckDB iceberg extension's iceberg_metadata")


def test_a_table_folder_read_as_a_file_suggests_nothing_internal(lake: Lake) -> None:
    folder = lake.table("demo.t").location
    _, err = _run(lake, f"SELECT * FROM '{folder}';")
    assert err.startswith("Error: Catalog Error: Table with name ")
    assert "__iceduck" not in err
