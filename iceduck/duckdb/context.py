"""What the SQL functions of one connection share, and the parameters every table function takes.

The metadata functions (`binding.py`), the scan functions (`scan.py`) and the maintenance functions
(`maintenance.py`) all build on this module, and `binding.py` gathers them, so none of them needs
another to know how a table argument is resolved.
"""

from __future__ import annotations

from typing import Any

from iceduck.catalog.locate import locate_table
from iceduck.duckdb.functions import Args, Param
from iceduck.errors import ValidationError
from iceduck.io.fileio import FileIO
from iceduck.io.storage import default_io
from iceduck.spec.snapshots import Snapshot
from iceduck.table import Table

TABLE = Param("tbl", default=None, doc="metadata.json path, table folder, or ns.table")
VERSION = Param("version", doc="metadata version of a table folder (v<N>.metadata.json)")
SNAPSHOT_PARAMS = (
    Param("snapshot_id", "BIGINT", doc="read this snapshot"),
    Param("as_of", "TIMESTAMPTZ", doc="read the snapshot current at this time"),
    Param("ref", doc="read the head of this branch or tag"),
)
# The DuckDB iceberg extension's names for the same choices, taken by its functions' iceduck
# counterparts (iceberg_scan, iceberg_metadata, ...) so its queries run unchanged.
EXTENSION_SNAPSHOT_PARAMS = (
    Param("snapshot_from_id", "BIGINT", doc="read this snapshot (the extension's name for snapshot_id)"),
    Param("snapshot_from_timestamp", "TIMESTAMPTZ", doc="read the snapshot current at this time (as_of)"),
    Param("allow_moved_paths", "BOOLEAN", "false", doc="accepted; moved tables are always resolved"),
)


def snapshot_choice(args: Args) -> tuple[int | None, Any]:
    """(snapshot_id, as_of) from iceduck's or the extension's parameter names; both names for one
    choice must agree."""
    chosen = []
    for ours, theirs in (("snapshot_id", "snapshot_from_id"), ("as_of", "snapshot_from_timestamp")):
        a, b = args.get(ours), args.get(theirs)
        if a is not None and b is not None and a != b:
            raise ValidationError(f"{ours} := {a} and {theirs} := {b} name different snapshots: give one")
        chosen.append(a if a is not None else b)
    return chosen[0], chosen[1]


class Context:
    """What the functions of one connection share: the catalog that resolves table names, and
    the FileIO (with the connection's S3 settings) its tables are read through."""

    def __init__(self, catalog: Any = None, io: FileIO | None = None) -> None:
        self.catalog = catalog
        self.io: FileIO = io or default_io()

    def table(self, args: Args) -> Table:
        """The table the `tbl` argument names (metadata file, folder or catalog name) at its latest
        commit: the one place a function's table arguments are read. `version` picks a folder's
        metadata version, the extension's `version_name_format` and `metadata_compression_codec`
        say how the folder names its metadata files (each where the function takes it)."""
        location = locate_table(
            str(args["tbl"]),
            version=args.get("version"),
            catalog=self.catalog,
            version_name_format=args.get("version_name_format"),
            metadata_compression_codec=args.get("metadata_compression_codec"),
            io=self.io,
        )
        return Table.from_location(location, io=self.io)

    def snapshot(self, table: Table, args: Args) -> Snapshot | None:
        """The snapshot the `snapshot_id`/`as_of`/`ref` arguments (or the extension's names for the
        first two, see `snapshot_choice`) select; None when the table has none."""
        snapshot_id, as_of = snapshot_choice(args)
        return table.snapshot(snapshot_id=snapshot_id, as_of=as_of, ref=args.get("ref"))

    def table_at(self, args: Args) -> tuple[Table, Snapshot | None]:
        """The table and the snapshot the arguments name."""
        table = self.table(args)
        return table, self.snapshot(table, args)

    def check_table(self, args: Args) -> None:
        """Raise unless the table can be loaded (run when DuckDB binds the call)."""
        self.table(args)

    def check_snapshot(self, args: Args) -> None:
        """Raise unless the table can be loaded and the snapshot arguments pick a snapshot."""
        self.table_at(args)
