"""The SQL shell behind the `iceduck` command: statements, dot-commands, output modes.

`Shell` holds the logic and writes to the streams it is given, so tests drive it with strings;
`interactive` is the thin prompt_toolkit loop over it (prompt, history, completion, Ctrl-C).
Input is fed a line at a time: SQL collects until it ends with `;` (outside strings and comments),
a line starting with `.` is a dot-command when no SQL is pending, and whatever is pending when the
input ends runs as it is, as the DuckDB CLI does for `-c` and piped input.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import io
import json
import os
import re
import shlex
import shutil
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import duckdb

from iceduck.duckdb.functions import clean_message, clear_cancel, current_progress, request_cancel
from iceduck.sql import split_script
from iceduck.sql.tokens import SqlSyntaxError, tokenize

if TYPE_CHECKING:
    from iceduck.lake import Lake

T = TypeVar("T")

MODES = ("box", "csv", "json", "jsonlines", "line", "list", "markdown", "table")
_MODE_ALIASES = {"duckbox": "box", "ndjson": "jsonlines"}
# DuckDB types whose values are JSON numbers or booleans (everything else is a JSON string)
_JSON_NUMBERS = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|U\w*INT|FLOAT|DOUBLE|DECIMAL.*)$")
# Seconds a statement runs before the shell shows that it is still running (on a terminal)
PROGRESS_AFTER = 2.0
DEFAULT_MAX_ROWS = 40
HISTORY_FILE = "~/.iceduck_history"
PROMPT = "D "
CONTINUATION = "‣ "

# Statements that report a status ("Count", "Success") rather than rows print nothing, except that
# INSERT, UPDATE and DELETE print their count of changed rows. A SELECT always prints.
_STATUS_COLUMNS = ((["Count"], ["BIGINT"]), (["Success"], ["BOOLEAN"]))
_COUNTED = (duckdb.StatementType.INSERT, duckdb.StatementType.UPDATE, duckdb.StatementType.DELETE)

HELP = """\
.databases               List the attached databases (lake: the warehouse's Iceberg catalog)
.describe TABLE          A table's schema, partitioning, sort order, properties, snapshot, files, health
.exit ?CODE?             Exit the shell (with return code CODE)
.functions               List iceduck's functions
.help                    Show this message
.maxrows N               Rows to show in box mode (default 40; the first and last rows are shown)
.maxwidth N              Width of box output (default: the terminal's)
.mode MODE               Output mode: box (default), csv, json, jsonlines, line, list, markdown, table
.once FILE               Write the next result to FILE
.output ?FILE?           Write results to FILE (no FILE: back to the screen)
.quit                    Exit the shell
.read FILE               Run the SQL and dot-commands in FILE
.schema ?PATTERN?        CREATE statements of tables and views (PATTERN as in LIKE)
.show                    The shell's settings
.tables ?PATTERN?        List tables and views (all databases; PATTERN as in LIKE)
.timer on|off            Print the run time of each statement
.tree TABLE              A table's tree of files: metadata.json, snapshots, manifests, data and deletes

SQL runs when a line ends with ';'. Ctrl-C cancels the input or the running query, Ctrl-D exits.
"""


class ShellError(Exception):
    """A dot-command's misuse or a file the shell cannot read; printed as `Error: <message>`."""


class Interrupted(Exception):
    """The user pressed Ctrl-C while a statement ran."""

    def __init__(self) -> None:
        super().__init__("Interrupted")


def is_complete(sql: str) -> bool:
    """True when `sql` ends with `;` outside strings, quoted names and comments (ready to run).

    The lexer is `iceduck.sql.tokens`', the one the router splits scripts with, so the shell and
    the statement splitter agree on where strings, names and (nested) comments end."""
    try:
        tokens = tokenize(sql)
    except SqlSyntaxError:  # an open string, quoted name or comment: more input is coming
        return False
    return bool(tokens) and tokens[-1].is_op(";")


def input_complete(text: str) -> bool:
    """Whether interactive input is ready to run: blank, a dot-command, or SQL ending with `;`."""
    stripped = text.strip()
    return not stripped or stripped.startswith(".") or is_complete(text)


def _is_status(rel: duckdb.DuckDBPyRelation, kind: object) -> bool:
    if kind == duckdb.StatementType.SELECT:
        return False
    shape = (list(rel.columns), [str(t) for t in rel.types])
    if kind in _COUNTED and shape == _STATUS_COLUMNS[0]:
        return False
    return shape in _STATUS_COLUMNS


def render(
    rel: duckdb.DuckDBPyRelation, mode: str = "box", *, max_rows: int = DEFAULT_MAX_ROWS, max_width: int = 120
) -> str:
    """The relation's rows as text in an output mode (box is DuckDB's own rendering), no final newline."""
    if mode == "box":
        # DuckDB's box renderer is reachable with options only through show(), which prints.
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rel.show(max_rows=max_rows, max_width=max_width)
        return buf.getvalue().rstrip("\n")
    names = list(rel.columns)
    types = [str(t) for t in rel.types]
    # Cast by position (names may repeat) so values read as DuckDB writes them: true, 2024-01-01 10:00:00+00
    texts = rel.select(", ".join(f"CAST(#{i + 1} AS VARCHAR)" for i in range(len(names))))
    rows: list[tuple[str | None, ...]] = texts.fetchall()
    if mode in ("json", "jsonlines"):
        objects = [
            "{"
            + ",".join(
                f"{json.dumps(n)}:{_json_value(v, t)}" for n, v, t in zip(names, row, types, strict=True)
            )
            + "}"
            for row in rows
        ]
        if mode == "jsonlines":
            return "\n".join(objects)
        return "[" + ",\n".join(objects) + "]" if objects else "[]"
    if mode == "list":
        return "\n".join(["|".join(names), *("|".join(_cell(v) for v in row) for row in rows)])
    if mode == "table":
        cells = [[_cell(v) for v in row] for row in rows]
        widths = [max([len(name), *(len(r[i]) for r in cells)]) for i, name in enumerate(names)]
        rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
        lines = [
            "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"
            for values in [names, *cells]
        ]
        return "\n".join([rule, lines[0], rule, *lines[1:], rule])
    if mode == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(names)
        writer.writerows([["" if v is None else v for v in row] for row in rows])
        return out.getvalue().rstrip("\n")
    if mode == "line":
        width = max(len(name) for name in names)
        records = (
            "\n".join(f"{name:>{width}} = {_cell(v)}" for name, v in zip(names, row, strict=True))
            for row in rows
        )
        return "\n\n".join(records)
    if mode == "markdown":
        cells = [[_cell(v).replace("|", "\\|") for v in row] for row in rows]
        widths = [max([len(name), *(len(r[i]) for r in cells)]) for i, name in enumerate(names)]
        lines = ["| " + " | ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)) + " |"]
        lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in cells]
        return "\n".join(lines)
    raise ShellError(f"unknown output mode {mode!r} (choose from {', '.join(MODES)})")


def _cell(value: str | None) -> str:
    return "NULL" if value is None else value


def _json_value(value: str | None, sql_type: str) -> str:
    if value is None:
        return "null"
    if sql_type == "BOOLEAN":
        return value
    if _JSON_NUMBERS.match(sql_type) and value not in ("nan", "inf", "-inf"):
        return value
    return json.dumps(value)


def _in_columns(names: list[str], width: int) -> str:
    """Names laid out down then across in as many columns as fit in `width`, like `ls`."""
    if not names:
        return ""
    col = max(len(name) for name in names) + 2
    per_line = max(1, width // col)
    lines = -(-len(names) // per_line)
    out = []
    for r in range(lines):
        row = [names[c * lines + r] for c in range(per_line) if c * lines + r < len(names)]
        out.append("".join(name.ljust(col) for name in row).rstrip())
    return "\n".join(out)


class Shell:
    """Runs SQL and dot-commands on a `Lake`, writing results to `out` and errors to `err`.

    With `bail`, the first error stops the shell (`stopped`), as `-c` and `-f` want; otherwise it
    counts in `errors` and input goes on. `.quit`/`.exit` also stop it, with `exit_code`.
    """

    def __init__(
        self,
        lake: Lake,
        out: TextIO | None = None,
        err: TextIO | None = None,
        *,
        mode: str = "box",
        max_rows: int = DEFAULT_MAX_ROWS,
        max_width: int | None = None,
        bail: bool = False,
    ) -> None:
        self.lake = lake
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.mode = self._check_mode(mode)
        self.max_rows = max_rows
        self.max_width = max_width
        self.bail = bail
        self.timer = False
        self.errors = 0
        self.stopped = False
        self.exit_code = 0
        self._pending: list[str] = []
        self._screen = self.out  # where results go without .output / .once
        self._output_path: str | None = None
        self._once = False

    # -- input -----------------------------------------------------------------------------------

    @property
    def pending(self) -> str:
        """SQL typed so far that does not end with `;` yet."""
        return "".join(self._pending)

    def run_line(self, line: str) -> None:
        """Feed one line: a dot-command runs now, SQL runs once it ends with `;`."""
        if self.stopped:
            return
        line = line.rstrip("\r\n")
        if not self._pending:
            stripped = line.strip()
            if not stripped:
                return
            if stripped.startswith("."):
                self.run_command(stripped)
                return
        self._pending.append(line + "\n")
        text = self.pending
        if is_complete(text):
            self._pending.clear()
            self.run_sql(text)

    def finish(self) -> None:
        """End of input: run whatever SQL is pending, complete or not."""
        text, self._pending = self.pending, []
        if text.strip() and not self.stopped:
            self.run_sql(text)

    def cancel(self) -> None:
        """Drop pending SQL (Ctrl-C)."""
        self._pending.clear()

    def run_text(self, text: str) -> bool:
        """Run every line of `text`, then what is pending; True when none of it failed."""
        return self.run_lines(text.splitlines())

    def run_file(self, path: str) -> bool:
        """Run a SQL file (as `.read`); True when none of it failed."""
        try:
            lines = _read_sql(path)
        except ShellError as e:
            return self._error(e)
        return self.run_lines(lines)

    def run_lines(self, lines: Iterable[str]) -> bool:
        """`run_text` over lines as they come (a file or a pipe read lazily)."""
        before = self.errors
        saved, self._pending = self._pending, []  # .read inside pending input keeps the two apart
        try:
            for line in lines:
                self.run_line(line)
                if self.stopped:
                    break
            self.finish()
        finally:
            self._pending = saved
        return self.errors == before

    # -- SQL -------------------------------------------------------------------------------------

    def run_sql(self, text: str) -> bool:
        """Run each statement in `text` through `lake.sql`, printing results; stop at the first error."""
        try:
            # iceduck's splitter: like DuckDB's, but also keeps lake-only syntax (DROP TABLE ... PURGE)
            statements = split_script(self.lake.con, text)
        except Exception as e:
            return self._error(e)
        for statement in statements:
            clear_cancel()
            started, cpu = time.perf_counter(), os.times()
            try:
                shown = self._interruptible(functools.partial(self._execute, statement))
            except Exception as e:
                return self._error(e)
            if shown is not None:
                self._write(shown)
            if self.timer:
                self._write(self._timing(started, cpu))
        return True

    def _execute(self, statement: Any) -> str | None:  # a duckdb Statement (no public type to name)
        text = statement.query.strip()
        rel = self.lake.sql(text)
        if rel is None or _is_status(rel, statement.type):
            return None
        return render(rel, self.mode, max_rows=self.max_rows, max_width=self._width())

    def _interruptible(self, work: Callable[[], T]) -> T:
        """Run `work` on a thread so Ctrl-C (KeyboardInterrupt here) can interrupt DuckDB mid-query."""
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def target() -> None:
            try:
                outcome["value"] = work()
            except BaseException as e:
                outcome["error"] = e
            finally:
                done.set()

        # Not a daemon: should the process exit while DuckDB still runs, it waits rather than
        # tearing the thread down inside DuckDB's C++ code (which aborts the process).
        thread = threading.Thread(target=target, name="iceduck-statement")
        interrupted = False
        started = time.perf_counter()
        thread.start()
        # Wait on an Event, not Thread.join: a KeyboardInterrupt inside join() can leave the
        # thread marked as finished while it still runs (CPython 3.11).
        # Ctrl-C may land anywhere in this loop (drawing the progress line too): wherever it does,
        # the statement is cancelled and waited for, never left running to commit on its own.
        while not done.is_set():
            try:
                done.wait(0.5)
                if interrupted:  # a Ctrl-C that lands before DuckDB starts executing is lost: repeat it
                    self.lake.con.interrupt()
                self._show_progress(started)
            except KeyboardInterrupt:
                interrupted = True
                request_cancel()  # Python work inside a function (a maintenance run) stops too
                self.lake.con.interrupt()
        while True:
            try:
                self._clear_progress()
                thread.join()
                break
            except KeyboardInterrupt:
                interrupted = True
        if "error" in outcome:
            raise outcome["error"]
        if interrupted:  # the statement finished before the interrupt landed: still stop here
            raise Interrupted()
        value: T = outcome["value"]
        return value

    def _show_progress(self, started: float) -> None:
        """On a terminal, a line under a statement running longer than PROGRESS_AFTER seconds."""
        elapsed = time.perf_counter() - started
        if elapsed < PROGRESS_AFTER or not getattr(self.err, "isatty", lambda: False)():
            return
        text = f"running {elapsed:.0f} s"
        progress = current_progress()
        if progress is not None:
            done, total, what = progress
            text += f", {what} {100 * done // max(total, 1)}%"
        self.err.write(f"\r\x1b[2K{text} (Ctrl-C cancels)")
        self.err.flush()
        self._progress_shown = True

    def _clear_progress(self) -> None:
        if getattr(self, "_progress_shown", False):
            self.err.write("\r\x1b[2K")
            self.err.flush()
            self._progress_shown = False

    def _timing(self, started: float, cpu: os.times_result) -> str:
        now = os.times()
        real = time.perf_counter() - started
        return (
            f"Run Time (s): real {real:.3f} user {now.user - cpu.user:.6f} sys {now.system - cpu.system:.6f}"
        )

    def _width(self) -> int:
        return self.max_width or shutil.get_terminal_size((120, 40)).columns

    # -- dot-commands ----------------------------------------------------------------------------

    def run_command(self, line: str) -> bool:
        """Run one dot-command line such as `.mode csv`."""
        try:
            words = shlex.split(line)
        except ValueError as e:
            return self._error(ShellError(f"{line}: {e}"))
        name, args = words[0][1:], words[1:]
        handler = self._commands().get(name)
        if handler is None:
            return self._error(ShellError(f'unknown command "{words[0]}". Enter ".help" for help'))
        try:
            handler(args)
        except Exception as e:
            return self._error(e)
        return True

    def _commands(self) -> dict[str, Callable[[list[str]], None]]:
        return {
            "help": self._help,
            "quit": self._quit,
            "exit": self._quit,
            "tables": self._tables,
            "functions": self._functions,
            "timer": self._set_timer,
            "maxrows": self._set_max_rows,
            "maxwidth": self._set_max_width,
            "mode": self._set_mode,
            "read": self._read,
            "schema": self._schema,
            "databases": self._databases,
            "output": self._output,
            "once": self._once_to,
            "show": self._show,
            "describe": self._describe,
            "tree": self._tree,
        }

    def _help(self, args: list[str]) -> None:
        self._write(HELP.rstrip("\n"))

    def _quit(self, args: list[str]) -> None:
        if len(args) > 1 or (args and not args[0].lstrip("-").isdigit()):
            raise ShellError("usage: .exit ?CODE?")
        self.exit_code = int(args[0]) if args else 0
        self.stopped = True

    def _tables(self, args: list[str]) -> None:
        if len(args) > 1:
            raise ShellError("usage: .tables ?PATTERN?")
        where = "WHERE name NOT LIKE '\\_\\_iceduck\\_%' ESCAPE '\\'"
        params: list[str] = []
        if args:
            where += " AND name LIKE ?"
            params.append(args[0])
        rel = self.lake.sql(
            "SELECT database, schema, name, current_database() = database, current_schema() = schema "
            f"FROM (SHOW ALL TABLES) {where}",
            params or None,
        )
        names = []
        for database, schema, name, this_db, this_schema in rel.fetchall() if rel is not None else []:
            # Qualify only as much as a query needs to reach the table from the current schema.
            if database == "temp" or (this_db and this_schema):
                names.append(name)
            elif this_db:
                names.append(f"{schema}.{name}")
            else:
                names.append(f"{database}.{schema}.{name}")
        if names:
            self._write(_in_columns(sorted(names), self._width()))

    def _functions(self, args: list[str]) -> None:
        from iceduck.duckdb.binding import all_functions
        from iceduck.duckdb.extension import SCALAR_MACROS

        rows: list[tuple[str, str]] = []
        for fn in all_functions():
            params = ", ".join(p.name if p.default is None else f"{p.name} := {p.default}" for p in fn.params)
            first = fn.doc.strip().splitlines()
            rows.append((f"{fn.name}({params})", first[0] if first else ""))
        for _name, macro, doc in SCALAR_MACROS:  # iceberg_bucket(num_buckets, value), ...
            rows.append((macro.split(" AS ", 1)[0].split(" MACRO ", 1)[1], doc))
        if not rows:
            self._write("(no table functions registered)")
            return
        # Signature, then its description indented below; both wrapped between words at the width.
        width = max(40, self._width() - 1)
        lines: list[str] = []
        for sig, doc in rows:
            lines += textwrap.wrap(
                sig, width, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False
            )
            lines += textwrap.wrap(
                doc, width, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False
            )
        self._write("\n".join(lines))

    def _set_timer(self, args: list[str]) -> None:
        if len(args) != 1 or args[0].lower() not in ("on", "off"):
            raise ShellError("usage: .timer on|off")
        self.timer = args[0].lower() == "on"

    def _set_max_rows(self, args: list[str]) -> None:
        self.max_rows = _positive(args, ".maxrows N")

    def _set_max_width(self, args: list[str]) -> None:
        self.max_width = _positive(args, ".maxwidth N")

    def _set_mode(self, args: list[str]) -> None:
        if not args:
            self._write(f"current output mode: {self.mode}")
            return
        if len(args) != 1:
            raise ShellError("usage: .mode MODE")
        self.mode = self._check_mode(args[0])

    def _read(self, args: list[str]) -> None:
        if len(args) != 1:
            raise ShellError("usage: .read FILE")
        self.run_lines(_read_sql(args[0]))

    def _schema(self, args: list[str]) -> None:
        if len(args) > 1:
            raise ShellError("usage: .schema ?PATTERN?")
        pattern = args[0] if args else "%"
        con = self.lake.con
        statements = [
            sql
            for (sql,) in con.execute(
                "SELECT sql FROM (SELECT table_name AS name, sql, database_name FROM duckdb_tables() "
                "UNION ALL SELECT view_name, sql, database_name FROM duckdb_views() WHERE NOT internal) "
                "WHERE name NOT LIKE '\\_\\_iceduck\\_%' ESCAPE '\\' AND database_name <> 'lake' "
                "AND name LIKE ? ORDER BY name",
                [pattern],
            ).fetchall()
            if sql
        ]
        for ns in _namespaces(self.lake):
            for name in self.lake.list_tables(ns):
                if _like(pattern, name):
                    statements.append(_lake_table_sql(self.lake, f"{ns}.{name}"))
        if statements:
            self._write("\n".join(s if s.rstrip().endswith(";") else s.rstrip() + ";" for s in statements))

    def _databases(self, args: list[str]) -> None:
        if args:
            raise ShellError("usage: .databases")
        rows = self.lake.con.execute(
            "SELECT database_name, path FROM duckdb_databases() WHERE NOT internal ORDER BY database_oid"
        ).fetchall()
        warehouse = self.lake.warehouse.resolve()
        lines = []
        for name, path in rows:
            if name == "lake":
                lines.append(f"lake: {warehouse} (Iceberg catalog)")
            else:
                lines.append(f"{name}: {path or '(in memory)'}")
        self._write("\n".join(lines))

    def _output(self, args: list[str]) -> None:
        if len(args) > 1:
            raise ShellError("usage: .output ?FILE?")
        self._redirect(args[0] if args else None, once=False)

    def _once_to(self, args: list[str]) -> None:
        if len(args) != 1:
            raise ShellError("usage: .once FILE")
        self._redirect(args[0], once=True)

    def _redirect(self, path: str | None, *, once: bool) -> None:
        if self.out is not self._screen:
            self.out.close()
            self.out = self._screen
        self._output_path, self._once = None, False
        if path is None or path == "stdout":
            return
        try:
            self.out = open(os.path.expanduser(path), "w", encoding="utf-8")  # noqa: SIM115 (kept open across commands)
        except OSError as e:
            raise ShellError(f'cannot write "{path}": {e.strerror or e}') from None
        self._output_path, self._once = path, once

    def _show(self, args: list[str]) -> None:
        if args:
            raise ShellError("usage: .show")
        settings = (
            ("mode", self.mode),
            ("timer", "on" if self.timer else "off"),
            ("maxrows", str(self.max_rows)),
            ("maxwidth", str(self.max_width) if self.max_width else f"{self._width()} (the terminal's)"),
            ("output", self._output_path or "stdout"),
            ("warehouse", str(self.lake.warehouse.resolve())),
        )
        width = max(len(k) for k, _ in settings)
        self._write("\n".join(f"{k:>{width}}: {v}" for k, v in settings))

    def _describe(self, args: list[str]) -> None:
        if len(args) != 1:
            raise ShellError("usage: .describe TABLE")
        from iceduck.describe import describe

        self._write("\n".join(describe(self.lake, args[0])))

    def _tree(self, args: list[str]) -> None:
        if len(args) != 1:
            raise ShellError("usage: .tree TABLE")
        from iceduck.describe import table_tree

        self._write("\n".join(table_tree(self.lake, args[0])))

    @staticmethod
    def _check_mode(mode: str) -> str:
        mode = _MODE_ALIASES.get(mode.lower(), mode.lower())
        if mode not in MODES:
            raise ShellError(f"unknown output mode {mode!r} (choose from {', '.join(MODES)})")
        return mode

    # -- output ----------------------------------------------------------------------------------

    def _write(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()
        if self._once:
            self._redirect(None, once=False)

    def _error(self, e: BaseException) -> bool:
        self.errors += 1
        if self.bail:
            self.stopped = True
            self.exit_code = 1
        message = clean_message(str(e)) or type(e).__name__
        self.err.write(f"Error: {message}\n")
        self.err.flush()
        return False


def _namespaces(lake: Lake) -> list[str]:
    pending, out = list(lake.list_namespaces()), []
    while pending:
        ns = pending.pop(0)
        out.append(ns)
        pending.extend(lake.list_namespaces(ns))
    return out


def _like(pattern: str, text: str) -> bool:
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, text, flags=re.IGNORECASE | re.DOTALL) is not None


def _lake_table_sql(lake: Lake, identifier: str) -> str:
    """A lake table as the CREATE TABLE statement that would make it (columns, partitioning)."""
    columns = lake.con.execute(f"DESCRIBE lake.{identifier}").fetchall()
    body = ", ".join(f"{_quote(name)} {sql_type}" for name, sql_type, *_ in columns)
    spec = lake.table(identifier).spec
    partitioned = ""
    if spec.fields:
        partitioned = " PARTITIONED BY (" + ", ".join(_term(lake, identifier, f) for f in spec.fields) + ")"
    return f"CREATE TABLE {identifier} ({body}){partitioned};"


def _term(lake: Lake, identifier: str, field: Any) -> str:
    schema = lake.table(identifier).schema
    sources = ", ".join(schema.column_name(i) or str(i) for i in field.source_ids)
    transform = str(field.transform)
    if transform == "identity":
        return sources
    if "[" in transform:  # bucket[16] -> bucket(16, x)
        name, arg = transform.rstrip("]").split("[", 1)
        return f"{name}({arg}, {sources})"
    return f"{transform}({sources})"


def _quote(name: str) -> str:
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else '"' + name.replace('"', '""') + '"'


def _positive(args: list[str], usage: str) -> int:
    if len(args) != 1 or not args[0].isdigit() or int(args[0]) < 1:
        raise ShellError(f"usage: {usage} (a whole number above 0)")
    return int(args[0])


def _read_sql(path: str) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ShellError(f'cannot read "{path}": {reason}') from None


def banner(lake: Lake) -> str:
    """What the interactive shell prints first."""
    from iceduck._version import __version__

    return (
        f"iceduck {__version__} (DuckDB v{duckdb.__version__}) on warehouse {lake.warehouse.resolve()}\n"
        'Enter ".help" for usage hints.'
    )


def interactive(shell: Shell, history_file: str = HISTORY_FILE) -> None:
    """The prompt loop: multi-line editing, history, completion; returns on `.quit` or Ctrl-D."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

    bindings = KeyBindings()

    @bindings.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.complete_state:  # Enter picks the highlighted completion
            buffer.complete_state = None
        elif input_complete(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    session: PromptSession[str] = PromptSession(
        multiline=True,
        key_bindings=bindings,
        history=FileHistory(os.path.expanduser(history_file)),
        prompt_continuation=lambda width, line, soft_wrap: "" if soft_wrap else CONTINUATION,
        completer=_completer(shell),
        complete_while_typing=False,
        lexer=_lexer(),
        include_default_pygments_style=True,
    )
    shell.out.write(banner(shell.lake) + "\n")
    while not shell.stopped:
        try:
            text = session.prompt(PROMPT)
        except KeyboardInterrupt:  # Ctrl-C at the prompt drops what was typed
            shell.cancel()
            continue
        except EOFError:
            break
        try:
            shell.run_text(text)
        except KeyboardInterrupt:  # landed between statements rather than inside one
            shell.cancel()


def _lexer() -> Any:
    try:
        from prompt_toolkit.lexers import PygmentsLexer
        from pygments.lexers.sql import SqlLexer
    except ImportError:  # highlighting is a nicety; pygments is not a dependency
        return None
    return PygmentsLexer(SqlLexer)


def _completer(shell: Shell) -> Any:
    from prompt_toolkit.completion import Completer, Completion
    from prompt_toolkit.document import Document

    from iceduck.completion import catalog_names, complete

    commands = sorted("." + name for name in shell._commands())

    class ShellCompleter(Completer):
        def get_completions(self, document: Document, complete_event: Any) -> Iterator[Completion]:
            before = document.text_before_cursor
            if before.startswith(".") and " " not in before:
                for command in commands:
                    if command.startswith(before):
                        yield Completion(command, start_position=-len(before))
                return
            # Read the catalog at each Tab, so new tables complete; only DuckDB's catalog functions
            # run, so the connection may be used directly.
            try:
                names = catalog_names(shell.lake.con)
            except Exception:
                return
            word, found = complete(before, names)
            for name in found:
                yield Completion(name, start_position=-len(word))

    return ShellCompleter()
