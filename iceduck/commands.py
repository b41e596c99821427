"""What the `iceduck` command's front ends share: the `Command` a subcommand module registers, the
registry `iceduck.cli` dispatches from, and opening the warehouse a command names (`open_lake`).

Subcommand modules (`iceduck.demo`, `iceduck.describe_cli`, `iceduck.maintenance_cli`, the REST
server's `serve`) import this module, never `iceduck.cli`: the front ends sit side by side on the top
layer, and `iceduck.cli` imports a subcommand's module only when that command runs.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from iceduck.catalog.sql import CATALOG_FILE_NAME, catalog_cache_folder
from iceduck.errors import IcebergError
from iceduck.io.storage import is_remote
from iceduck.lake import DEFAULT_WAREHOUSE, connect, default_catalog_kind

if TYPE_CHECKING:
    from iceduck.lake import Lake


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
    kind = getattr(args, "catalog", None)
    if is_remote(str(args.warehouse)):
        # s3://, gs://, az://...: this machine's SQLite file in the cache folder, or the catalog on
        # the bucket (--catalog folder, or after `iceduck migrate-catalog`), which needs no creating
        kind = kind or default_catalog_kind(str(args.warehouse))
        catalog = os.path.join(catalog_cache_folder(str(args.warehouse)), CATALOG_FILE_NAME)
        if (
            kind == "sql"
            and explicit
            and not os.path.exists(catalog)
            and not (create or getattr(args, "create", False))
        ):
            raise WarehouseNotFound(
                f"no warehouse at {args.warehouse}: this machine has no catalog for it ({catalog}); "
                "--create makes a new warehouse there, --catalog folder opens the catalog on the bucket"
            )
        return connect(str(args.warehouse), catalog=kind)
    path = Path(args.warehouse)
    if explicit and not path.exists() and not (create or getattr(args, "create", False)):
        raise WarehouseNotFound(
            f"no warehouse at {path.resolve()} (check the path; --create makes a new warehouse there)"
        )
    if path.exists() and not path.is_dir():
        raise WarehouseNotFound(f"{path.resolve()} is a file, not a warehouse folder")
    return connect(args.warehouse, catalog=kind)


def catalog_kind(args: argparse.Namespace) -> str:
    """The catalog `open_lake` opens for `args`: `--catalog` when given, else "sql", or "folder" for a
    bucket this machine moved with `iceduck migrate-catalog` (`default_catalog_kind`)."""
    kind = getattr(args, "catalog", None)
    if kind:
        return str(kind)
    return default_catalog_kind(str(args.warehouse)) if is_remote(str(args.warehouse)) else "sql"


def sql_catalog_only(args: argparse.Namespace, command: str) -> str | None:
    """Why `command` (which serves the SQLite catalog only) cannot run on the catalog `args` name, as
    one line; None when it can."""
    if catalog_kind(args) != "folder":
        return None
    why = "--catalog folder" if getattr(args, "catalog", None) else "its catalog was moved onto the bucket"
    return (
        f"{command} serves a warehouse's SQLite catalog (catalog.db) only, and {args.warehouse} is opened "
        f"with the folder catalog ({why}), which keeps no views, multi-table commits or renames to serve; "
        "open it embedded (iceduck --catalog folder) or serve a warehouse with a SQLite catalog"
    )


class WarehouseNotFound(IcebergError):
    """The warehouse folder given does not exist (and creating it was not asked for)."""
