"""The `iceduck` command: a SQL shell on the warehouse by default, and subcommands.

    iceduck                          interactive shell (Ctrl-D or .quit to leave)
    iceduck -c "SELECT 42"           run SQL (or a dot-command) and exit
    iceduck -f script.sql            run a file and exit
    echo "SELECT 42;" | iceduck      run piped input
    iceduck --warehouse PATH ...     the warehouse (default ./warehouse, or $ICEDUCK_WAREHOUSE)

Subcommands live in their own modules. A module builds a `Command` and calls `register_command`
when imported, and its name goes into `COMMAND_MODULES` so the parser imports it:

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import duckdb

from iceduck._version import __version__
from iceduck.lake import DEFAULT_WAREHOUSE

WAREHOUSE_ENV = "ICEDUCK_WAREHOUSE"

# Modules that register subcommands when imported (e.g. "iceduck.demo").
COMMAND_MODULES: tuple[str, ...] = ("iceduck.demo", "iceduck.maintenance_cli")


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


def commands() -> dict[str, Command]:
    """Every registered subcommand by name, after importing the modules in `COMMAND_MODULES`."""
    for module in COMMAND_MODULES:
        importlib.import_module(module)
    return dict(_COMMANDS)


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
    from iceduck.lake import connect
    from iceduck.shell import Shell, ShellError, interactive

    sql_commands: list[str] | None = getattr(args, "commands", None)
    file: str | None = getattr(args, "file", None)
    mode: str = getattr(args, "mode", None) or "box"
    try:
        lake = connect(args.warehouse)
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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered subcommand."""
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
        help=f"warehouse folder (default: ${WAREHOUSE_ENV} or ./{DEFAULT_WAREHOUSE}; created when missing)",
    )
    _shell_options(parser, None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for command in commands().values():
        child = sub.add_parser(command.name, help=command.help, description=command.help)
        child.add_argument("--warehouse", metavar="PATH", default=argparse.SUPPRESS, help="warehouse folder")
        if command.name == "shell":
            _shell_options(child, argparse.SUPPRESS)
        command.configure(child)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `iceduck` command; returns the exit code."""
    args = build_parser().parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
