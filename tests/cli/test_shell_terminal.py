"""The interactive shell on a pseudo-terminal (prompt_toolkit running for real): the DuckDB-CLI
commands and output modes, and long SQL work showing that it runs and stopping on Ctrl-C
(issue 12, items 6 and 7), asserted on the exact text the terminal shows."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import iceduck
from tests.cli.test_cli import PROMPT, Terminal

ROWS = "SELECT 1 AS a, 'x' AS b, true AS c UNION ALL SELECT 2, NULL, false ORDER BY a;"


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    with iceduck.connect(tmp_path / "wh") as lake:
        lake.sql("CREATE SCHEMA demo")
        lake.sql("CREATE TABLE demo.t (id BIGINT, d DATE) PARTITIONED BY (day(d))")
    term = Terminal(tmp_path)
    try:
        term.expect(PROMPT)
        yield term
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
            term.proc.wait()


def _answer(terminal: Terminal, line: str, expected: str) -> None:
    """Type `line`; the terminal then shows exactly `expected` and the next prompt."""
    terminal.send(line + "\r")
    terminal.expect(re.escape(line) + r"\n")  # the echo of what was typed
    shown = terminal.expect(r"(?s)(.*?)(?m:^D )")
    assert shown.group(1) == expected, line


def test_output_modes_and_commands_on_a_terminal(terminal: Terminal, tmp_path: Path) -> None:
    _answer(terminal, ".mode json", "")
    _answer(terminal, ROWS, '[{"a":1,"b":"x","c":true},\n{"a":2,"b":null,"c":false}]\n')
    _answer(terminal, ".mode jsonlines", "")
    _answer(terminal, ROWS, '{"a":1,"b":"x","c":true}\n{"a":2,"b":null,"c":false}\n')
    _answer(terminal, ".mode list", "")
    _answer(terminal, ROWS, "a|b|c\n1|x|true\n2|NULL|false\n")
    _answer(terminal, ".mode table", "")
    table = "+---+------+-------+\n| a | b    | c     |\n+---+------+-------+\n"
    table += "| 1 | x    | true  |\n| 2 | NULL | false |\n+---+------+-------+\n"
    _answer(terminal, ROWS, table)
    _answer(terminal, ".mode csv", "")
    _answer(terminal, "INSERT INTO demo.t VALUES (1, DATE '2026-01-01');", "Count\n1\n")
    _answer(terminal, ".schema", "CREATE TABLE demo.t (id BIGINT, d DATE) PARTITIONED BY (day(d));\n")
    warehouse = (tmp_path / "wh").resolve()
    _answer(terminal, ".databases", f"memory: (in memory)\nlake: {warehouse} (Iceberg catalog)\n")
    once, many = tmp_path / "once.csv", tmp_path / "many.csv"
    _answer(terminal, f".once {once}", "")
    _answer(terminal, "SELECT 1 AS one;", "")
    _answer(terminal, "SELECT 2 AS two;", "two\n2\n")
    _answer(terminal, f".output {many}", "")
    _answer(terminal, "SELECT 3 AS three;", "")
    _answer(terminal, ".output", "")
    assert once.read_text() == "one\n1\n" and many.read_text() == "three\n3\n"
    show = _show(terminal)
    assert show[:2] == ["     mode: csv", "    timer: off"]
    assert show[-2:] == ["   output: stdout", f"warehouse: {warehouse}"]
    terminal.send(".quit\r")
    assert terminal.close() == 0


def _show(terminal: Terminal) -> list[str]:
    terminal.send(".show\r")
    terminal.expect(r"\.show\n")
    return terminal.expect(r"(?s)(.*?)(?m:^D )").group(1).splitlines()


def test_long_sql_work_shows_that_it_runs_and_ctrl_c_creates_nothing(
    terminal: Terminal, tmp_path: Path
) -> None:
    """A CREATE TABLE ... AS that runs long: a line under it says how long it runs and that Ctrl-C
    cancels; Ctrl-C then leaves no table behind."""
    terminal.send(
        "CREATE TABLE demo.big AS SELECT count(*) FILTER (WHERE hash(a) % 7 = 0) AS s FROM range(100000000000) t(a);\r"
    )
    terminal.expect(r"running \d+ s \(Ctrl-C cancels\)", timeout=60)
    terminal.send("\x03")
    terminal.expect(r"Error: INTERRUPT Error: Interrupted!", timeout=60)
    terminal.expect(PROMPT)
    _answer(terminal, ".mode csv", "")
    _answer(terminal, "SELECT count(*) AS n FROM (SHOW ALL TABLES) WHERE name = 'big';", "n\n0\n")
    terminal.send(".quit\r")
    assert terminal.close() == 0
    with iceduck.connect(tmp_path / "wh") as lake:
        assert lake.list_tables("demo") == ("t",)
