"""`iceduck describe t` / `.describe t` and `iceduck tree t` / `.tree t`: a table at a glance.

`describe` prints what a user asks first about a table: its schema, partitioning, sort order,
properties, current snapshot, files and sizes, and health state (metadata only; no data file is
read). `table_tree` is the demo's tree (metadata.json down to data files and deletion vectors)
for any table.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from iceduck.cli import Command, open_lake, register_command
from iceduck.demo import tree
from iceduck.lake import Lake
from iceduck.maintenance.health import compute_health
from iceduck.table import Table


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n = n / 1024  # type: ignore[assignment]
    return f"{n} B"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def describe(lake: Lake, identifier: str) -> list[str]:
    """The lines `iceduck describe` prints for a table (a catalog name, folder or metadata file)."""
    table = Table.load(identifier, catalog=lake.catalog)
    md = table.metadata
    lines = [f"{identifier}  (Iceberg format v{md.format_version}, uuid {md.table_uuid})"]
    lines.append(f"location: {md.location}")
    lines.append(f"metadata: {table.metadata_location}")
    lines.append("")
    lines.append(f"schema (id {md.schema.schema_id}):")
    for f in md.schema.fields:
        required = "required" if f.required else "optional"
        lines.append(f"  {f.id:>3}  {f.name}  {f.type}  {required}")
    spec = md.default_spec
    schema = md.schema
    if spec.fields:
        terms = [
            f"{pf.name} = {pf.transform}({', '.join(schema.column_name(i) or str(i) for i in pf.source_ids)})"
            for pf in spec.fields
        ]
        lines.append(f"partitioned by (spec {spec.spec_id}): " + ", ".join(terms))
    else:
        lines.append("partitioned by: nothing (unpartitioned)")
    order = md.default_sort_order
    if order.fields:
        keys = [
            f"{schema.column_name(sf.source_ids[0]) or sf.source_ids[0]} {sf.direction.value} {sf.null_order.value}"
            if str(sf.transform) == "identity"
            else f"{sf.transform}({schema.column_name(sf.source_ids[0])}) {sf.direction.value} {sf.null_order.value}"
            for sf in order.fields
        ]
        lines.append(f"sorted by (order {order.order_id}): " + ", ".join(keys))
    else:
        lines.append("sorted by: nothing (unsorted)")
    if md.properties:
        lines.append("properties:")
        lines += [f"  {k} = {v}" for k, v in sorted(md.properties.items())]
    else:
        lines.append("properties: none")
    lines.append("")
    snapshot = md.current_snapshot()
    if snapshot is None:
        lines.append(f"current snapshot: none ({len(md.snapshots)} snapshots)")
    else:
        at = dt.datetime.fromtimestamp(snapshot.timestamp_ms / 1000, tz=dt.UTC).strftime(
            "%Y-%m-%d %H:%M:%S UTC"
        )
        operation = snapshot.summary.get("operation", "?")
        lines.append(
            f"current snapshot: {snapshot.snapshot_id} ({operation}, {at}, sequence number "
            f"{snapshot.sequence_number}); {len(md.snapshots)} snapshots, {len(md.refs)} refs"
        )
        rows = lake.con.execute(
            "SELECT content, count(*), sum(file_size_in_bytes), sum(record_count) "
            f"FROM iceberg_files({_quote(table.metadata_location)}) GROUP BY content ORDER BY content"
        ).fetchall()
        if not rows:
            lines.append("files: none")
        for content, count, size, records in rows:
            what = {
                "DATA": "data",
                "POSITION_DELETES": "position-delete",
                "EQUALITY_DELETES": "equality-delete",
            }
            kind = what.get(str(content), str(content).lower())
            noun = "file" if count == 1 else "files"
            lines.append(f"files: {count} {kind} {noun}, {_size(size)}, {records} records")
    health = compute_health(table, with_partitions=False)
    lines.append(f"health: {health.state}")
    lines += [f"  {r.message}" for r in health.reasons]
    lines += [f"  recommended: {a.action}" for a in health.actions]
    return lines


def table_tree(lake: Lake, identifier: str) -> list[str]:
    """The table's tree of files (as `iceduck demo` prints it)."""
    return tree(lake, identifier)


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "table", help="ns.table in the warehouse's catalog, a table folder or a metadata file"
    )


def _runner(lines_of: Any) -> Any:
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
