"""The `iceduck` command: -c, -f, piped input, errors, dot-commands, and the interactive shell in a
pseudo-terminal. Expected output is written out by hand in DuckDB's box format."""

from __future__ import annotations

import argparse
import fcntl
import io
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

import iceduck
from iceduck import cli
from iceduck.duckdb.binding import all_functions
from iceduck.shell import Shell, input_complete, is_complete

ICEDUCK = [sys.executable, "-c", "import sys; from iceduck.cli import main; sys.exit(main())"]


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ICEDUCK_WAREHOUSE"}
    env.update(HOME=str(home), COLUMNS="100", LINES="40", **extra)
    return env


def run(tmp_path: Path, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """The command in a subprocess, cwd and HOME in tmp_path, warehouse in tmp_path/wh unless given."""
    if "--warehouse" not in args and "ICEDUCK_WAREHOUSE" not in env:
        args = ("--warehouse", str(tmp_path / "wh"), "--create", *args)
    return subprocess.run(
        [*ICEDUCK, *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path, **env),
        timeout=120,
    )


ANSWER_BOX = """\
┌────────┬─────────┐
│ answer │  name   │
│ int32  │ varchar │
├────────┼─────────┤
│     42 │ duck    │
└────────┴─────────┘
"""


# -- -c, -f, stdin -------------------------------------------------------------------------------


def test_version(tmp_path: Path) -> None:
    result = run(tmp_path, "--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"iceduck {iceduck.__version__} (DuckDB v{duckdb.__version__})"


def test_c_prints_the_duckdb_box(tmp_path: Path) -> None:
    result = run(tmp_path, "-c", "select 42 as answer, 'duck' as name")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == ANSWER_BOX


def test_statements_that_change_rows_print_their_count(tmp_path: Path) -> None:
    sql = "create table t(a int); insert into t values (1), (2); update t set a = 5 where a = 2; select sum(a) s from t"
    result = run(tmp_path, "--mode", "csv", "-c", sql)
    assert (result.returncode, result.stderr) == (0, "")
    # CREATE prints nothing; INSERT and UPDATE their count of rows, as DuckDB's relation gives it
    assert result.stdout == "Count\n2\nCount\n1\ns\n6\n"


def test_insert_returning_prints_its_rows(tmp_path: Path) -> None:
    result = run(
        tmp_path, "--mode", "csv", "-c", "create table t(a int); insert into t values (7) returning a"
    )
    assert result.stdout == "a\n7\n"


def test_a_slow_statement_prints_only_its_rows(tmp_path: Path) -> None:
    # DuckDB prints its progress bar to stdout once a statement runs past progress_bar_time (2 s by
    # default; 0 here), into the rows: a command's CSV piped to a file would hold it.
    sql = "SET progress_bar_time = 0; SELECT count(*) AS n FROM range(20000000) t(i) WHERE i % 7 = 0"
    result = run(tmp_path, "--mode", "csv", "-c", sql)
    assert (result.returncode, result.stdout) == (0, f"n\n{len(range(0, 20000000, 7))}\n")


def test_c_repeats_and_runs_dot_commands(tmp_path: Path) -> None:
    result = run(tmp_path, "-c", ".mode csv", "-c", "select 1 as x", "-c", "select 'b' as y")
    assert (result.returncode, result.stdout) == (0, "x\n1\ny\nb\n")


def test_shell_subcommand_is_the_default(tmp_path: Path) -> None:
    result = run(tmp_path, "shell", "--mode", "csv", "-c", "select 3 as z")
    assert (result.returncode, result.stdout) == (0, "z\n3\n")


def test_f_splits_statements_correctly(tmp_path: Path) -> None:
    script = tmp_path / "script.sql"
    script.write_text(
        "-- a comment; with a semicolon\n"
        "create table notes(id int, body varchar);\n"
        "insert into notes values (1, 'a;b'), (2, 'it''s; fine');\n"
        "/* block; comment */ insert into notes\n"
        "  values (3, $$dollar;quoted$$);\n"
        "select id,\n"
        "       body   -- trailing; comment\n"
        "from notes order by id; select count(*) as n from notes;\n"
    )
    result = run(tmp_path, "--mode", "csv", "-f", str(script))
    assert (result.returncode, result.stderr) == (0, "")
    # the two INSERTs print their counts
    assert result.stdout == "Count\n2\nCount\n1\nid,body\n1,a;b\n2,it's; fine\n3,dollar;quoted\nn\n3\n"


def test_stdin_is_read_like_a_script(tmp_path: Path) -> None:
    piped = "select\n  42 as answer,\n  'duck' as name;\n\n.mode csv\nselect 'x;y' as s;\nselect 9 as last"
    result = run(tmp_path, stdin=piped)
    assert (result.returncode, result.stderr) == (0, "")
    # the final statement has no ';': the end of the input runs it
    assert result.stdout == ANSWER_BOX + "s\nx;y\nlast\n9\n"


def test_warehouse_option_environment_and_default(tmp_path: Path) -> None:
    # a warehouse folder that is not there is refused (a typo must not become a new, empty warehouse)
    missing = run(tmp_path, "--warehouse", str(tmp_path / "given"), "-c", "select 1")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == (
        f"Error: no warehouse at {tmp_path / 'given'} (check the path; --create makes a new warehouse there)\n"
    )
    assert not (tmp_path / "given").exists()
    assert run(tmp_path, "--warehouse", str(tmp_path / "given"), "--create", "-c", "select 1").returncode == 0
    assert (tmp_path / "given").is_dir()
    assert run(tmp_path, "--warehouse", str(tmp_path / "given"), "-c", "select 1").returncode == 0
    refused = run(tmp_path, "-c", "select 1", ICEDUCK_WAREHOUSE=str(tmp_path / "from_env"))
    assert refused.returncode == 1 and not (tmp_path / "from_env").exists()
    assert (
        run(tmp_path, "--create", "-c", "select 1", ICEDUCK_WAREHOUSE=str(tmp_path / "from_env")).returncode
        == 0
    )
    assert (tmp_path / "from_env").is_dir()
    env = _env(tmp_path)
    subprocess.run([*ICEDUCK, "-c", "select 1"], cwd=tmp_path, env=env, capture_output=True, check=True)
    assert (tmp_path / "warehouse").is_dir()


# -- errors --------------------------------------------------------------------------------------


def test_c_error_exits_1_with_message_and_no_traceback(tmp_path: Path) -> None:
    result = run(tmp_path, "--mode", "csv", "-c", "select 1 as a; select * from missing_table; select 3 as c")
    assert result.returncode == 1
    assert result.stdout == "a\n1\n"  # stops at the error
    assert result.stderr.startswith("Error: Catalog Error: Table with name missing_table does not exist")
    assert "Traceback" not in result.stderr


def test_parse_error(tmp_path: Path) -> None:
    result = run(tmp_path, "-c", "selec 1")
    assert result.returncode == 1
    assert result.stderr.startswith('Error: Parser Error: syntax error at or near "selec"')
    assert result.stdout == "" and "Traceback" not in result.stderr


def test_a_trailing_comment_after_the_semicolon(tmp_path: Path) -> None:
    # DuckDB's CLI prints the result; the box mode renders through relation.show(), which wraps the text
    script = tmp_path / "c.sql"
    script.write_text("SELECT 42 AS answer; -- the answer\nSELECT 'duck' AS name; /* last */")
    box = "┌────────┐\n│ answer │\n│ int32  │\n├────────┤\n│     42 │\n└────────┘\n"
    for result in [
        run(tmp_path, "-c", "SELECT 42 AS answer; -- the answer"),
        run(tmp_path, stdin="SELECT 42 AS answer; -- the answer\n"),
        run(tmp_path, "-f", str(script)),
    ]:
        assert (result.returncode, result.stderr) == (0, "")
        assert result.stdout.startswith(box)


def test_f_error_exits_1(tmp_path: Path) -> None:
    script = tmp_path / "bad.sql"
    script.write_text("select 1 as a;\nselect nope;\nselect 2 as b;\n")
    result = run(tmp_path, "--mode", "csv", "-f", str(script))
    assert (result.returncode, result.stdout) == (1, "a\n1\n")
    assert result.stderr.startswith('Error: Binder Error: Referenced column "nope"')
    assert "Traceback" not in result.stderr


def test_f_missing_file(tmp_path: Path) -> None:
    result = run(tmp_path, "-f", str(tmp_path / "absent.sql"))
    assert result.returncode == 1
    assert result.stderr == f'Error: cannot read "{tmp_path / "absent.sql"}": No such file or directory\n'


def test_piped_input_goes_on_after_an_error_and_exits_1(tmp_path: Path) -> None:
    result = run(tmp_path, "--mode", "csv", stdin="select nope;\n.nosuch\nselect 2 as b;\n")
    assert result.returncode == 1
    assert result.stdout == "b\n2\n"
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Error: Binder Error")
    assert 'Error: unknown command ".nosuch". Enter ".help" for help' in lines
    assert "Traceback" not in result.stderr


def test_exit_code_from_dot_exit(tmp_path: Path) -> None:
    result = run(tmp_path, stdin=".exit 3\nselect 1;\n")
    assert (result.returncode, result.stdout) == (3, "")


# -- dot-commands --------------------------------------------------------------------------------


def test_dot_commands(tmp_path: Path) -> None:
    (tmp_path / "more.sql").write_text("select 'from file' as src;\n")
    piped = "\n".join(
        [
            "create table trips(id int);",
            "create view recent as select * from trips;",
            "attach ':memory:' as lake;",
            "create schema lake.ns;",
            "create table lake.ns.events(x int);",
            ".tables",
            ".tables tr%",
            ".mode markdown",
            "select 1 as a, 'x|y' as b;",
            ".mode line",
            "select 1 as a, null as longer;",
            ".mode csv",
            f".read {tmp_path / 'more.sql'}",
            ".timer on",
            "select 1 as t;",
            ".timer off",
            ".mode box",
            ".maxrows 4",
            "select * from range(10) r(i);",
            ".functions",
            ".help",
            ".quit",
            "select 'not reached';",
        ]
    )
    result = run(tmp_path, stdin=piped)
    assert (result.returncode, result.stderr) == (0, "")
    out = result.stdout
    assert out.startswith("lake.ns.events  recent          trips\ntrips\n")
    assert "| a | b    |\n|---|------|\n| 1 | x\\|y |\n" in out
    assert "     a = 1\nlonger = NULL\n" in out
    assert "src\nfrom file\n" in out
    assert re.search(r"t\n1\nRun Time \(s\): real \d+\.\d{3} user \d+\.\d+ sys \d+\.\d+\n", out)
    shown = re.search(r"│ +i +│\n(.*?)└", out, re.S)
    assert shown is not None
    values = [line.strip("│ ") for line in shown.group(1).splitlines()[2:]]
    assert values == ["0", "1", "·", "·", "·", "8", "9"]
    assert "(4 shown)" in out
    for fn in all_functions():
        assert fn.name + "(" in out
    assert "iceberg_bucket(num_buckets, value)" in out and "iceberg_truncate(width, value)" in out
    assert ".timer on|off" in out and ".read FILE" in out
    assert "not reached" not in out


def test_bad_dot_command_arguments(tmp_path: Path) -> None:
    result = run(tmp_path, stdin=".mode html\n.timer maybe\n.maxrows -1\n.read\n")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "Error: unknown output mode 'html' (choose from box, csv, json, jsonlines, line, list, markdown, table)",
        "Error: usage: .timer on|off",
        "Error: usage: .maxrows N (a whole number above 0)",
        "Error: usage: .read FILE",
    ]


# -- the Shell class in-process ------------------------------------------------------------------


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[tuple[Shell, io.StringIO, io.StringIO]]:
    out, err = io.StringIO(), io.StringIO()
    with iceduck.connect(tmp_path / "wh") as lake:
        yield Shell(lake, out, err, max_width=100), out, err


@pytest.mark.parametrize(
    ("sql", "complete"),
    [
        ("select 1;", True),
        ("select 1", False),
        ("select 1; -- done", True),
        ("select 1; /* done */", True),
        ("select ';'", False),
        ("select ';", False),
        ("select 'it''s';", True),
        ("select 'it''s;", False),
        ('select 1 as "a;"', False),
        ('select 1 as "a;";', True),
        ("select 1 -- ;", False),
        ("select 1 /* ; */", False),
        ("select 1 /* /* ; */ ; */ ;", True),
        ("select 1 /* unterminated ;", False),
        ("select $$a;$$", False),
        ("select $$a;$$;", True),
        ("select $tag$a;$ $tag$;", True),
        ("select $tag$a;", False),
        ("select E'a\\';'", False),
        ("select E'a\\';';", True),
        ("select e'\\\\';", True),
        ("prepare p as select $1;", True),
        ("", False),
    ],
)
def test_is_complete(sql: str, complete: bool) -> None:
    assert is_complete(sql) is complete


def test_input_complete() -> None:
    assert input_complete("")
    assert input_complete("   ")
    assert input_complete(".tables")
    assert input_complete("select 1;\n")
    assert not input_complete("select 1\n")


def test_shell_multi_line_and_pending(shell: tuple[Shell, io.StringIO, io.StringIO]) -> None:
    sh, out, err = shell
    sh.run_line(".mode csv")
    sh.run_line("select")
    assert sh.pending == "select\n"
    sh.run_line("  'a;b' as s")
    assert out.getvalue() == ""
    sh.run_line(";")
    assert sh.pending == ""
    assert out.getvalue() == "s\na;b\n"
    sh.run_line("select 2 as")
    sh.cancel()
    sh.run_line(".tables")  # a dot-command once the pending input is dropped
    assert err.getvalue() == ""


def test_shell_dot_line_inside_pending_sql_is_sql(shell: tuple[Shell, io.StringIO, io.StringIO]) -> None:
    sh, out, _err = shell
    sh.run_line(".mode csv")
    sh.run_text("select 1 +\n.5 as x;")
    assert out.getvalue() == "x\n1.5\n"


def test_shell_errors_go_on_unless_bail(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    with iceduck.connect(tmp_path / "wh") as lake:
        sh = Shell(lake, out, err, mode="csv")
        assert not sh.run_text("select nope; select 1 as a;")  # one chunk: stops at the error
        assert sh.run_text("select 2 as b;")
        assert (sh.errors, sh.stopped, out.getvalue()) == (1, False, "b\n2\n")
        bailing = Shell(lake, out, err, mode="csv", bail=True)
        assert not bailing.run_text("select nope;\nselect 3 as c;")
        assert (bailing.stopped, bailing.exit_code) == (True, 1)
        assert "c\n3" not in out.getvalue()


def test_shell_csv_values_read_as_duckdb_writes_them(shell: tuple[Shell, io.StringIO, io.StringIO]) -> None:
    sh, out, err = shell
    sh.run_line(".mode csv")
    sh.run_text(
        "select true as b, null as n, date '2024-02-29' as d, 1.50::decimal(5,2) as dec, 'a,\"b' as q, "
        "[1, 2] as l, 1 as a, 2 as a;"
    )
    assert err.getvalue() == ""
    assert out.getvalue() == 'b,n,d,dec,q,l,a,a\ntrue,,2024-02-29,1.50,"a,""b","[1, 2]",1,2\n'


# -- the subcommand registry ---------------------------------------------------------------------


def test_registered_subcommand_gets_its_arguments(tmp_path: Path) -> None:
    seen: list[argparse.Namespace] = []

    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("table")
        parser.add_argument("--plan", action="store_true")

    def run_it(args: argparse.Namespace) -> int:
        seen.append(args)
        return 7

    cli.register_command(cli.Command("probe", "a test command", configure, run_it))
    try:
        assert cli.main(["--warehouse", str(tmp_path / "a"), "probe", "db.t", "--plan"]) == 7
        assert cli.main(["probe", "db.u", "--warehouse", str(tmp_path / "b")]) == 7
    finally:
        del cli._COMMANDS["probe"]
    assert (seen[0].table, seen[0].plan, seen[0].warehouse) == ("db.t", True, str(tmp_path / "a"))
    assert (seen[1].table, seen[1].plan, seen[1].warehouse) == ("db.u", False, str(tmp_path / "b"))
    assert "probe" not in cli.commands()


def test_unknown_subcommand_is_a_usage_error(tmp_path: Path) -> None:
    result = run(tmp_path, "nosuch")
    assert result.returncode == 2
    assert "invalid choice: 'nosuch'" in result.stderr


def test_entry_point_script(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "iceduck"
    if not script.exists():
        pytest.skip("the iceduck script is not installed next to this Python")
    result = subprocess.run(
        [
            str(script),
            "--warehouse",
            str(tmp_path / "wh"),
            "--create",
            "-c",
            "select 42 as answer, 'duck' as name",
        ],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (0, ANSWER_BOX)


# -- the interactive shell in a pseudo-terminal --------------------------------------------------

PROMPT = r"(?m)^D "
_CURSOR_RIGHT = re.compile(r"\x1b\[(\d*)C")
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]|[\r\x08]")


class Terminal:
    """The command on a pseudo-terminal, so prompt_toolkit runs for real and ^C sends SIGINT."""

    def __init__(self, tmp_path: Path) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))

        def controlling_terminal() -> None:  # in the child: a session whose terminal is the pty
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            # as a terminal's shell starts it: a suite run in the background (`cmd &` in a script)
            # ignores SIGINT, and exec would hand that on, so ^C would never reach the shell
            signal.signal(signal.SIGINT, signal.SIG_DFL)

        env = _env(tmp_path, TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1")
        env.pop("COLUMNS")
        env.pop("LINES")
        self.proc = subprocess.Popen(
            [*ICEDUCK, "--warehouse", str(tmp_path / "wh"), "--create"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=tmp_path,
            env=env,
            preexec_fn=controlling_terminal,
        )
        os.close(slave)
        self.fd = master
        self.raw = b""
        self.seen = 0  # expect() searches the screen text after this offset

    @property
    def text(self) -> str:
        """What was written, escapes dropped, except that moving the cursor right counts as spaces."""
        written = self.raw.decode("utf-8", "replace")
        written = _CURSOR_RIGHT.sub(lambda m: " " * int(m.group(1) or 1), written)
        return _ESCAPES.sub("", written)

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # the child closed the terminal
            return False
        self.raw += chunk
        return bool(chunk)

    def expect(self, pattern: str, timeout: float = 20) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            m = re.compile(pattern).search(self.text, self.seen)
            if m:
                self.seen = m.end()
                return m
            if time.monotonic() > deadline or not self._read(0.1):
                raise AssertionError(f"{pattern!r} not seen; the terminal shows:\n{self.text[self.seen :]}")

    def wait_for_cooked_mode(self, timeout: float = 20) -> None:
        """Wait until the terminal turns ^C into SIGINT again (prompt_toolkit reads keys raw)."""
        deadline = time.monotonic() + timeout
        while not termios.tcgetattr(self.fd)[3] & termios.ISIG:
            if time.monotonic() > deadline:
                raise AssertionError("the terminal stayed in raw mode")
            self._read(0.05)

    def send(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def close(self, timeout: float = 20) -> int:
        """Wait for the command to exit (reading on, so it never blocks writing) and return its code."""
        deadline = time.monotonic() + timeout
        try:
            while self.proc.poll() is None and time.monotonic() < deadline:
                self._read(0.1)
            return self.proc.wait(timeout=1)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            os.close(self.fd)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path)
    try:
        yield term
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
            term.proc.wait()


def test_interactive_multi_line_history_and_quit(terminal: Terminal, tmp_path: Path) -> None:
    terminal.expect(r'Enter "\.help" for usage hints\.')
    terminal.expect(PROMPT)
    terminal.send("select\r")
    terminal.expect("‣ ")  # the statement goes on: no ';' yet
    terminal.send("  42 as answer,\r")
    terminal.expect("‣ ")
    terminal.send("  'duck' as name;\r")
    terminal.expect(re.escape(ANSWER_BOX))
    terminal.send(".tables\r")
    terminal.expect(PROMPT)
    terminal.send(".quit\r")
    assert terminal.close() == 0
    history = (tmp_path / ".iceduck_history").read_text()
    assert "+select\n+  42 as answer,\n+  'duck' as name;\n" in history
    assert "+.tables\n" in history


def test_interactive_ctrl_c_cancels_input_and_ctrl_d_exits(terminal: Terminal) -> None:
    terminal.expect(PROMPT)
    terminal.send("select 'dropped' as gone")
    terminal.expect("gone")
    terminal.send("\x03")  # Ctrl-C: the input goes, the shell stays
    terminal.send("select 'kept' as k;\r")
    terminal.expect(r"│ +k +│")
    terminal.expect(r"│ kept +│")  # not an error about "gone select": the first input was dropped
    terminal.expect(PROMPT)  # control keys are keys only once the prompt has the terminal in raw mode
    terminal.send("\x04")  # Ctrl-D on an empty line
    assert terminal.close() == 0


def test_interactive_ctrl_c_interrupts_a_running_query(terminal: Terminal) -> None:
    terminal.expect(PROMPT)
    terminal.send("select sum(hash(a)) from range(100000000000) t(a);\r")
    terminal.wait_for_cooked_mode()  # the prompt gave the terminal back: the query runs, ^C is SIGINT
    terminal.expect(r"running \d+ s")  # the statement is executing (on a loaded machine that can take a while)
    started = time.monotonic()
    terminal.send("\x03")
    terminal.expect(r"Error: INTERRUPT Error: Interrupted!")
    assert time.monotonic() - started < 10
    terminal.expect(PROMPT)
    terminal.send("select 7 as still_alive;\r")  # the connection is still usable
    terminal.expect(r"│ +7 │")
    terminal.send(".exit\r")
    assert terminal.close() == 0


def test_lake_only_syntax_runs_in_the_shell(tmp_path: Path) -> None:
    # DuckDB's parser refuses DROP TABLE ... PURGE; the shell must still hand it to the lake.
    from iceduck.lake import connect
    from iceduck.shell import Shell

    out, err = io.StringIO(), io.StringIO()
    with connect(tmp_path / "wh") as lake:
        shell = Shell(lake, out=out, err=err)
        ok = shell.run_text("CREATE SCHEMA demo; CREATE TABLE demo.t (a INTEGER); DROP TABLE demo.t PURGE;")
        assert ok, err.getvalue()
        assert lake.list_tables("demo") == ()
