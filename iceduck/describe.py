"""`iceduck describe t` / `.describe t` and `iceduck tree t` / `.tree t`: a table at a glance.

`describe` prints what a user asks first about a table: its schema, partitioning, sort order,
properties, current snapshot, files and sizes, and health state (metadata only; no data file is
read). `table_tree` is the demo's tree (metadata.json down to data files and deletion vectors)
for any table.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Sequence
from typing import Any

from iceduck.lake import Lake
from iceduck.maintenance.health import compute_health
from iceduck.table import Table
from iceduck.vocabulary import quote_str


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
        # Deletion vectors share their Puffin file: each entry names the whole file and its size, so
        # files and bytes are counted once per path and the vectors are counted apart.
        rows = lake.con.execute(
            "SELECT content, count(*), sum(size), sum(records), sum(entries) FROM ("
            " SELECT content, file_path, any_value(file_size_in_bytes) AS size,"
            " sum(record_count) AS records, count(*) AS entries"
            f" FROM iceberg_files({quote_str(table.metadata_location)}) GROUP BY content, file_path"
            ") GROUP BY content ORDER BY content"
        ).fetchall()
        if not rows:
            lines.append("files: none")
        for content, count, size, records, entries in rows:
            what = {
                "DATA": "data",
                "POSITION_DELETES": "position-delete",
                "EQUALITY_DELETES": "equality-delete",
            }
            kind = what.get(str(content), str(content).lower())
            noun = "file" if count == 1 else "files"
            vectors = f" ({_plural(entries, 'deletion vector')})" if entries != count else ""
            lines.append(f"files: {count} {kind} {noun}{vectors}, {_size(size)}, {records} records")
    health = compute_health(table, with_partitions=False)
    lines.append(f"health: {health.state}")
    lines += [f"  {r.message}" for r in health.reasons]
    lines += [f"  recommended: {a.action}" for a in health.actions]
    return lines


# -- the tree ------------------------------------------------------------------------------------


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / 1024 / 1024:.1f} MB"


def _file_size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _str(value: Any) -> str:
    return quote_str(str(value))


class _Rows:
    """Query results as dicts, on the lake's connection."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake

    def __call__(self, sql: str) -> list[dict[str, Any]]:
        rel = self.lake.sql(sql)
        if rel is None:
            return []
        columns = rel.columns
        return [dict(zip(columns, row, strict=True)) for row in rel.fetchall()]


def tree(lake: Lake, table: str) -> list[str]:
    """The table's tree, one line per file or fact: metadata.json, snapshots, the current snapshot's
    manifest list and manifests, and their data files and deletion vectors (grouped by Puffin file)."""
    q = _Rows(lake)
    t = _str(table)
    log = q(f"SELECT file, is_current FROM iceberg_metadata_log({t}) ORDER BY timestamp")
    current = next(r["file"] for r in log if r["is_current"])
    location = os.path.dirname(os.path.dirname(current))

    def rel(path: str) -> str:
        return os.path.relpath(path, location) if path.startswith(location) else path

    top = q(
        f'SELECT "format-version" AS v, "last-sequence-number" AS seq, "next-row-id" AS next_row_id '
        f"FROM read_json({_str(current)})"
    )[0]
    snapshots = q(f"SELECT * FROM iceberg_snapshots({t}) ORDER BY sequence_number")
    schema = q(
        f"SELECT name, type FROM iceberg_schemas({t}) WHERE is_current AND depth = 0 ORDER BY field_id"
    )
    spec = q(f"SELECT name, transform, source_columns FROM iceberg_partition_specs({t}) WHERE is_default")

    lines = [f"{table}  (table folder {location})", ""]
    lines.append(f"metadata.json  {rel(current)}  {_size(_file_size(current))}")
    facts = [f"format v{top['v']}", _plural(len(snapshots), "snapshot"), f"last sequence number {top['seq']}"]
    if top.get("next_row_id") is not None:
        facts.append(f"next-row-id {top['next_row_id']}")
    facts.append(f"{len(log) - 1} earlier metadata files in the log")
    lines.append("│ " + " · ".join(facts))
    lines.append("│ schema: " + ", ".join(f"{r['name']} {r['type']}" for r in schema))
    partitioning = ", ".join(
        f"{r['name']} = {r['transform']}({', '.join(r['source_columns'])})" for r in spec
    )
    lines.append("│ partitioned by: " + (partitioning or "nothing (unpartitioned)"))
    if not snapshots:
        lines.append("└─ no snapshots yet")
        return lines
    for i, s in enumerate(snapshots):
        last = i == len(snapshots) - 1
        lines.append(("└─ " if last else "├─ ") + _snapshot_line(s))
    current_snapshot = (
        snapshots[-1] if snapshots[-1]["is_current"] else next(s for s in snapshots if s["is_current"])
    )
    lines += _manifest_tree(q, t, current_snapshot, rel, indent="   ")
    return lines


def _snapshot_line(s: dict[str, Any]) -> str:
    summary = dict(s["summary"] or {})
    changes = []
    for key, label in (
        ("added-data-files", "data file"),
        ("deleted-data-files", "removed data file"),
        ("added-dvs", "deletion vector"),
        ("added-delete-files", "delete file"),
    ):
        if key == "added-delete-files" and "added-dvs" in summary:
            continue
        if summary.get(key):
            changes.append("+" + _plural(int(summary[key]), label))
    if summary.get("added-records"):
        changes.append(f"+{summary['added-records']} rows")
    # positions in the delete files this commit added (a merged DV carries its predecessor's too)
    if summary.get("added-position-deletes"):
        changes.append(f"+{summary['added-position-deletes']} deleted positions")
    if summary.get("removed-position-deletes"):
        changes.append(f"-{summary['removed-position-deletes']} deleted positions")
    if summary.get("deleted-records"):
        changes.append(f"-{summary['deleted-records']} rows")
    text = f"snapshot {s['snapshot_id']}  seq {s['sequence_number']}  {s['operation']}  {', '.join(changes)}"
    if s.get("first_row_id") is not None:
        text += f"  (first-row-id {s['first_row_id']}, added-rows {s['added_rows']})"
    if s["is_current"]:
        text += "  ← current"
    return text


def _manifest_tree(
    q: Callable[[str], list[dict[str, Any]]],
    t: str,
    snapshot: dict[str, Any],
    rel: Callable[[str], str],
    indent: str,
) -> list[str]:
    at = f"snapshot_id := {int(snapshot['snapshot_id'])}"
    manifests = q(
        f"SELECT * FROM iceberg_manifests({t}, {at}) ORDER BY content = 'DELETES', sequence_number, path"
    )
    entries = q(
        f"SELECT status, content, file_path, partition, record_count, file_size_in_bytes, sequence_number, "
        f"file_sequence_number, first_row_id, referenced_data_file, content_offset, content_size_in_bytes, "
        f"manifest_path FROM iceberg_entries({t}, {at}) ORDER BY file_path, content_offset"
    )
    checks = {
        (r["delete_file_path"], r["content_offset"]): r
        for r in q(f"SELECT delete_file_path, content_offset, ok, problems FROM iceberg_dv_check({t}, {at})")
    }
    manifest_list = snapshot["manifest_list"]
    lines = [
        f"{indent}└─ manifest list  {rel(manifest_list)}  {_size(_file_size(manifest_list))}  "
        f"{_plural(len(manifests), 'manifest')}"
    ]
    indent += "   "
    for i, m in enumerate(manifests):
        last_manifest = i == len(manifests) - 1
        branch, stem = ("└─ ", "   ") if last_manifest else ("├─ ", "│  ")
        lines.append(indent + branch + _manifest_line(m, rel))
        mine = [e for e in entries if e["manifest_path"] == m["path"]]
        lines += [indent + stem + line for line in _entry_lines(mine, rel, checks)]
    return lines


def _manifest_line(m: dict[str, Any], rel: Callable[[str], str]) -> str:
    counts = []
    for key, label in (("added", "added"), ("existing", "existing"), ("deleted", "removed")):
        n = m[f"{key}_files_count"] or 0
        if n:
            counts.append(f"{n} {label}")
    files = "files " + ", ".join(counts) if counts else "no files"
    rows = (m["added_rows_count"] or 0) + (m["existing_rows_count"] or 0)
    what = "rows" if m["content"] == "DATA" else "deleted positions"
    text = (
        f"manifest  {rel(m['path'])}  {_size(m['length'])}  {m['content'].lower()}  seq {m['sequence_number']}  "
        f"{files}, {rows} {what}"
    )
    if m.get("first_row_id") is not None:
        text += f"  first_row_id {m['first_row_id']}"
    bounds = [
        f"{p['lower_bound']}..{p['upper_bound']}"
        if p["lower_bound"] != p["upper_bound"]
        else str(p["lower_bound"])
        for p in m["partition_summaries"] or []
    ]
    if bounds:
        text += f"  partitions {' / '.join(bounds)}"
    return text


def _entry_lines(
    entries: Sequence[dict[str, Any]],
    rel: Callable[[str], str],
    checks: dict[tuple[str, int], dict[str, Any]],
) -> list[str]:
    # Data files and v2 delete files are one line each; deletion vectors sit under their Puffin file.
    items: list[tuple[str, list[str]]] = []
    puffins: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        if e["content"] == "DATA":
            items.append((_data_line(e, rel), []))
        elif e["referenced_data_file"] is not None and e["content_offset"] is not None:
            if e["file_path"] not in puffins:
                puffins[e["file_path"]] = []
                items.append((e["file_path"], []))
            puffins[e["file_path"]].append(e)
        else:
            items.append(
                (
                    f"delete file  {rel(e['file_path'])}  {e['record_count']} positions  {e['status'].lower()}",
                    [],
                )
            )
    out: list[str] = []
    for i, (text, _) in enumerate(items):
        last = i == len(items) - 1
        branch, stem = ("└─ ", "   ") if last else ("├─ ", "│  ")
        if text in puffins:
            dvs = puffins[text]
            out.append(
                f"{branch}puffin  {rel(text)}  {_size(_file_size(text))}  {_plural(len(dvs), 'deletion vector')}  "
                f"seq {dvs[0]['sequence_number']}"
            )
            for j, e in enumerate(dvs):
                sub = "└─ " if j == len(dvs) - 1 else "├─ "
                check = checks.get((e["file_path"], e["content_offset"]))
                verdict = (
                    "" if check is None else ("  ok" if check["ok"] else f"  BROKEN: {check['problems']}")
                )
                end = e["content_offset"] + e["content_size_in_bytes"] - 1
                out.append(
                    f"{stem}{sub}DV for {rel(e['referenced_data_file'])}: {e['record_count']} deleted positions, "
                    f"bytes {e['content_offset']}–{end}{verdict}"
                )
        else:
            out.append(branch + text)
    return out


def _data_line(e: dict[str, Any], rel: Callable[[str], str]) -> str:
    text = (
        f"data  {rel(e['file_path'])}  {e['record_count']} rows  {_size(e['file_size_in_bytes'])}  "
        f"seq {e['sequence_number']}  {e['status'].lower()}"
    )
    first = e["first_row_id"]
    if first is not None:
        text += f"  row ids {first}–{first + e['record_count'] - 1}"
    return text


def table_tree(lake: Lake, identifier: str) -> list[str]:
    """The table's tree of files (as `iceduck demo` prints it)."""
    return tree(lake, identifier)
