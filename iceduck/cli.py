"""The `iceduck` command: a SQL shell on the warehouse by default, and subcommands.

    iceduck                          interactive shell (Ctrl-D or .quit to leave)
    iceduck -c "SELECT 42"           run SQL (or a dot-command) and exit
    iceduck -f script.sql            run a file and exit
    echo "SELECT 42;" | iceduck      run piped input
    iceduck --warehouse PATH ...     the warehouse (default ./warehouse, or $ICEDUCK_WAREHOUSE)
    iceduck --catalog folder ...     its catalog: sql (catalog.db, the default) or folder (on a bucket:
                                     the catalog on the bucket, shared by every machine)

Subcommands live in their own modules, next to this one on the top layer. A module builds a
`Command` and calls `register_command` (both from `iceduck.commands`, which front ends share, so
they do not import each other) when imported, and `COMMAND_MODULES` maps each command name to its module, so a run imports only
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
from collections.abc import Iterable, Sequence

import duckdb

from iceduck._version import __version__
from iceduck.commands import (
    _COMMANDS,
    Command,
    WarehouseNotFound,
    open_lake,
    register_command,
)
from iceduck.duckdb.functions import clean_message
from iceduck.errors import IcebergError
from iceduck.lake import DEFAULT_WAREHOUSE

WAREHOUSE_ENV = "ICEDUCK_WAREHOUSE"

# command name -> the module that registers it when imported. Importing a module is what a command
# costs at startup (the maintenance stack alone is ~0.2 s), so only the one that runs is imported.
COMMAND_MODULES: dict[str, str] = {
    "demo": "iceduck.demo",
    "describe": "iceduck.describe_cli",
    "tree": "iceduck.describe_cli",
    "health": "iceduck.maintenance_cli",
    "maintain": "iceduck.maintenance_cli",
    "migrate-catalog": "iceduck.catalog_cli",
    "serve": "iceduck.serve.server",
}


def commands(names: Iterable[str] | None = None) -> dict[str, Command]:
    """The registered subcommands by name, after importing the modules of `names` (None: all)."""
    wanted = COMMAND_MODULES.keys() if names is None else set(names) & COMMAND_MODULES.keys()
    for module in sorted({COMMAND_MODULES[name] for name in wanted}):
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
    parser.add_argument(
        "--catalog",
        choices=("sql", "folder"),
        default=None,
        help="the warehouse's catalog: sql (catalog.db; for s3://, gs://, az://... a SQLite file in this "
        "machine's cache folder) or folder (version-hint folders; on a bucket, the catalog on the bucket, "
        "shared by every machine). Default: sql, or folder for a bucket moved with migrate-catalog",
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
        child.add_argument(
            "--catalog", choices=("sql", "folder"), default=argparse.SUPPRESS, help="the warehouse's catalog"
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
