"""The `iceduck` command: a SQL shell on the warehouse by default, and subcommands.

    iceduck                          interactive shell (Ctrl-D or .quit to leave)
    iceduck -c "SELECT 42"           run SQL (or a dot-command) and exit
    iceduck -f script.sql            run a file and exit
    echo "SELECT 42;" | iceduck      run piped input
    iceduck --warehouse PATH ...     the warehouse (default ./warehouse, or $ICEDUCK_WAREHOUSE)

Subcommands live in their own modules. A module builds a `Command` and calls `register_command`
when imported, and `COMMAND_MODULES` maps each command name to its module, so a run imports only
the module of the command it runs (`--help` imports them all to list them):

    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("table")

    def run(args: argparse.Namespace) -> int:
        ...  # args.warehouse is set for every command
        return 0

    register_command(Command("health", "Report on a table's health", configure, run))
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from iceduck._version import __version__
from iceduck.catalog.sql import CATALOG_FILE_NAME, catalog_cache_folder
from iceduck.duckdb.functions import clean_message
from iceduck.errors import IcebergError
from iceduck.io.storage import is_remote
from iceduck.lake import DEFAULT_WAREHOUSE, connect

if TYPE_CHECKING:
    from iceduck.lake import Lake

WAREHOUSE_ENV = "ICEDUCK_WAREHOUSE"

# command name -> the module that registers it when imported. Importing a module is what a command
# costs at startup (the maintenance stack alone is ~0.2 s), so only the one that runs is imported.
COMMAND_MODULES: dict[str, str] = {
    "demo": "iceduck.demo",
    "describe": "iceduck.describe_cli",
    "tree": "iceduck.describe_cli",
    "health": "iceduck.maintenance.cli",
    "maintain": "iceduck.maintenance.cli",
    "serve": "iceduck.rest.server",
}


@dataclass(frozen=True, slots=True)
class Command:
    """A subcommand: `configure` adds its arguments, `run` does the work and returns the exit code."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


_COMMANDS: dict[str, Command] = {}


def register_command(command: Command) -> Command:
    """Make `command` available as `iceduck <command.name>`; a second registration replaces the first."""
    _COMMANDS[command.name] = command
    return command


def commands(names: Iterable[str] | None = None) -> dict[str, Command]:
    """The registered subcommands by name, after importing the modules of `names` (None: all)."""
    wanted = COMMAND_MODULES.keys() if names is None else set(names) & COMMAND_MODULES.keys()
    for module in sorted({COMMAND_MODULES[name] for name in wanted}):
        importlib.import_module(module)
    return dict(_COMMANDS)


# -- the warehouse --------------------------------------------------------------------------------


def open_lake(args: argparse.Namespace, *, create: bool = False) -> Lake:
    """The lake on `args.warehouse`. A missing folder is created only when it is the default
    (./warehouse), with `--create`, or when `create` (the demo builds its own); a mistyped path
    is refused rather than becoming a new, empty warehouse. An http(s):// URL is a REST catalog
    (without credentials: a catalog such as `iceduck serve` on loopback).

    DuckDB's own progress bar is not printed: it writes to stdout, into the rows a command prints
    (CSV piped to a file), whenever a statement runs past two seconds; the shell draws its own
    progress line on stderr instead."""
    return without_duckdb_progress_bar(_open_lake(args, create=create))


def without_duckdb_progress_bar(lake: Lake) -> Lake:
    """`lake`, its connection set not to print DuckDB's progress bar (see `open_lake`)."""
    lake.con.execute("SET enable_progress_bar_print = false")
    return lake


def _open_lake(args: argparse.Namespace, *, create: bool) -> Lake:
    if str(args.warehouse).startswith(("http://", "https://")):
        return connect(str(args.warehouse))
    explicit = str(args.warehouse) != DEFAULT_WAREHOUSE
    if is_remote(str(args.warehouse)):  # s3://...: its catalog is a SQLite file in the cache folder
        catalog = os.path.join(catalog_cache_folder(str(args.warehouse)), CATALOG_FILE_NAME)
        if explicit and not os.path.exists(catalog) and not (create or getattr(args, "create", False)):
            raise WarehouseNotFound(
                f"no warehouse at {args.warehouse}: this machine has no catalog for it ({catalog}); "
                "--create makes a new warehouse there"
            )
        return connect(str(args.warehouse))
    path = Path(args.warehouse)
    if explicit and not path.exists() and not (create or getattr(args, "create", False)):
        raise WarehouseNotFound(
            f"no warehouse at {path.resolve()} (check the path; --create makes a new warehouse there)"
        )
    if path.exists() and not path.is_dir():
        raise WarehouseNotFound(f"{path.resolve()} is a file, not a warehouse folder")
    return connect(args.warehouse)


class WarehouseNotFound(IcebergError):
    """The warehouse folder given does not exist (and creating it was not asked for)."""


# -- the shell command ---------------------------------------------------------------------------


def _shell_options(parser: argparse.ArgumentParser, default: object) -> None:
    # Shared by the bare `iceduck` and `iceduck shell`; the subparser's defaults are SUPPRESS so
    # they do not overwrite options given before the subcommand name.
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-c",
        dest="commands",
        metavar="SQL",
        action="append",
        default=default,
        help="run SQL or a dot-command and exit (repeatable); stops at the first error",
    )
    group.add_argument(
        "-f",
        dest="file",
        metavar="FILE",
        default=default,
        help="run a SQL file and exit; stops at the first error",
    )
    parser.add_argument(
        "--mode",
        choices=("box", "csv", "line", "markdown"),
        default=default,
        help="output mode (default: box, as the DuckDB CLI)",
    )


def _run_shell(args: argparse.Namespace) -> int:
    from iceduck.shell import Shell, ShellError, interactive

    sql_commands: list[str] | None = getattr(args, "commands", None)
    file: str | None = getattr(args, "file", None)
    mode: str = getattr(args, "mode", None) or "box"
    try:
        lake = open_lake(args)
    except WarehouseNotFound as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        print(f"Error: cannot open warehouse {args.warehouse}: {e}", file=sys.stderr)
        return 1
    with lake:
        if sql_commands or file:
            shell = Shell(lake, mode=mode, bail=True)
            if file:
                shell.run_file(file)
            for text in sql_commands or []:
                if shell.stopped:
                    break
                shell.run_text(text)
            return shell.exit_code
        if not sys.stdin.isatty():
            shell = Shell(lake, mode=mode)
            shell.run_lines(sys.stdin)
            return shell.exit_code or (1 if shell.errors else 0)
        shell = Shell(lake, mode=mode)
        try:
            interactive(shell)
        except ShellError as e:
            print(f"Error: {e}", file=sys.stderr)
            return 1
        return shell.exit_code


register_command(Command("shell", "SQL shell on the warehouse (the default)", lambda p: None, _run_shell))


# -- the parser ----------------------------------------------------------------------------------


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser: every subcommand named, configured only if `argv` may run it or asks for
    help (None: all of them)."""
    warehouse = os.environ.get(WAREHOUSE_ENV) or DEFAULT_WAREHOUSE
    parser = argparse.ArgumentParser(
        prog="iceduck",
        usage="%(prog)s [--warehouse PATH] [-c SQL | -f FILE] [--mode MODE] [COMMAND ...]",
        description="Apache Iceberg for DuckDB: a SQL shell on the warehouse, and table tools.",
    )
    parser.add_argument(
        "--version", action="version", version=f"iceduck {__version__} (DuckDB v{duckdb.__version__})"
    )
    parser.add_argument(
        "--warehouse",
        metavar="PATH",
        default=warehouse,
        help=f"warehouse folder (default: ${WAREHOUSE_ENV} or ./{DEFAULT_WAREHOUSE}, which is created when missing)",
    )
    parser.add_argument(
        "--create",
        action="store_true",
        default=False,
        help="create the --warehouse folder when it is missing",
    )
    _shell_options(parser, None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    wanted = None if argv is None or "-h" in argv or "--help" in argv else argv
    for command in commands(wanted).values():
        child = sub.add_parser(
            command.name, help=command.help, description=command.help, prog=f"iceduck {command.name}"
        )
        child.add_argument("--warehouse", metavar="PATH", default=argparse.SUPPRESS, help="warehouse folder")
        child.add_argument(
            "--create",
            action="store_true",
            default=argparse.SUPPRESS,
            help="create the warehouse folder if missing",
        )
        if command.name == "shell":
            _shell_options(child, argparse.SUPPRESS)
        command.configure(child)
    for name in sorted(COMMAND_MODULES.keys() - _COMMANDS.keys()):
        sub.add_parser(name)  # not run this time: named (for the usage line), never configured
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `iceduck` command; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    command = _COMMANDS[args.command or "shell"]
    try:
        return command.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`iceduck ... | head`): stop quietly, and keep Python's own
        # flush at exit from raising again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except (IcebergError, OSError, ValueError, duckdb.Error) as e:
        # What the user can act on, as one line (the table, the file, the problem); a bug still
        # shows its traceback.
        print(f"Error: {clean_message(str(e)) or type(e).__name__}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
