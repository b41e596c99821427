"""`iceduck describe TABLE` and `iceduck tree TABLE` (see iceduck.describe)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from iceduck.commands import Command, open_lake, register_command
from iceduck.describe import describe, table_tree
from iceduck.lake import Lake


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "table", help="ns.table in the warehouse's catalog, a table folder or a metadata file"
    )


def _runner(lines_of: Callable[[Lake, str], list[str]]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        with open_lake(args) as lake:
            print("\n".join(lines_of(lake, args.table)))
        return 0

    return run


register_command(
    Command(
        "describe",
        "A table's schema, partitioning, sort order, properties, snapshot, files and health",
        _configure,
        _runner(describe),
    )
)
register_command(
    Command(
        "tree",
        "A table's tree: metadata.json, snapshots, manifests, data and delete files",
        _configure,
        _runner(table_tree),
    )
)
