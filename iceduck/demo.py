"""`iceduck demo`: build a small Iceberg v3 table with SQL and print its tree of files.

The table is built the way a user would, through `Lake.sql`: a day-partitioned table, an INSERT
of three days, an INSERT of a fourth, and a DELETE (three commits after the CREATE). The tree is
then read back with iceduck's SQL functions, from the current metadata.json through its snapshots,
the current manifest list and its manifests, down to the data files and the Puffin file holding
the deletion vectors, with the facts that matter at each level (sizes, counts, sequence numbers,
partition values, row ids).

Running it again drops the demo table (with its files) and builds it afresh, but only a table
the demo made (it carries the property `iceduck.demo`): a user's own `demo.services` is left alone.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO

from iceduck.cli import Command, register_command
from iceduck.errors import IcebergError
from iceduck.lake import Lake, connect
from iceduck.vocabulary import quote_str

NAMESPACE = "demo"
TABLE = f"{NAMESPACE}.services"
DEMO_PROPERTY = "iceduck.demo"  # marks the table as the demo's own, so a rerun may drop it


class DemoRefused(IcebergError):
    """The demo's table name is taken by a table the demo did not make."""


_ROWS = """SELECT i AS service_id,
       DATE '2026-10-01' + ((i - 1) // 1000)::INTEGER AS service_date,
       ['Amsterdam', 'Utrecht', 'Rotterdam', 'Den Haag', 'Eindhoven'][1 + i % 5] AS station,
       ((i * 7919) % 31)::INTEGER AS delay_min
FROM range({start}, {stop}) AS t(i)"""

# (what it does, the statement)
STEPS: tuple[tuple[str, str], ...] = (
    ("a namespace in the catalog", f"CREATE SCHEMA IF NOT EXISTS {NAMESPACE}"),
    (
        "a format v3 table, one partition per service day",
        f"""CREATE TABLE {TABLE} (
    service_id BIGINT,
    service_date DATE,
    station VARCHAR,
    delay_min INTEGER
) PARTITIONED BY (day(service_date))
  WITH ('iceduck.demo' = 'true')""",
    ),
    ("commit 1: three days of services", f"INSERT INTO {TABLE}\n{_ROWS.format(start=1, stop=3001)}"),
    ("commit 2: a fourth day", f"INSERT INTO {TABLE}\n{_ROWS.format(start=3001, stop=4001)}"),
    (
        "commit 3: delete the worst delays from the 2nd on (deletion vectors, no data file rewritten)",
        f"DELETE FROM {TABLE} WHERE delay_min >= 29 AND service_date >= DATE '2026-10-02'",
    ),
)


def build(lake: Lake, out: TextIO) -> None:
    """Run the demo's statements on the lake, echoing each one and its row count."""
    if NAMESPACE in lake.list_namespaces() and "services" in lake.list_tables(NAMESPACE):
        if lake.table(TABLE).properties.get(DEMO_PROPERTY) != "true":
            raise DemoRefused(
                f"{TABLE} exists in {lake.warehouse.resolve()} and was not made by `iceduck demo`: "
                "leaving it alone (use another --warehouse for the demo)"
            )
        lake.sql(f"DROP TABLE {TABLE} PURGE")
        out.write(f"-- {TABLE} existed: dropped it and its files, building it again\n\n")
    for what, statement in STEPS:
        out.write(f"-- {what}\n")
        out.write("D " + statement.replace("\n", "\n  ") + ";\n")
        rel = lake.sql(statement)
        rows = rel.fetchall() if rel is not None else []
        if rows and rel is not None and rel.columns == ["Count"]:
            out.write(f"  ({rows[0][0]} rows)\n")
        out.write("\n")


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


def tree(lake: Lake, table: str = TABLE) -> list[str]:
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


def _partition(value: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (value or {}).items()) or "unpartitioned"


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


# -- the command ---------------------------------------------------------------------------------


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Build a small day-partitioned Iceberg v3 table (demo.services) in the warehouse with SQL, "
        "then print its tree: metadata.json, snapshots, manifest list, manifests, data files and "
        "deletion vectors. Running it again rebuilds the table."
    )


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Build the demo table in `args.warehouse` and print its tree."""
    out = out or sys.stdout
    try:
        lake = connect(args.warehouse)
    except Exception as e:
        print(f"Error: cannot open warehouse {args.warehouse}: {e}", file=sys.stderr)
        return 1
    with lake:
        out.write(f"Building {TABLE} in the warehouse {lake.warehouse.resolve()} with SQL:\n\n")
        build(lake, out)
        out.write("\n".join(tree(lake)) + "\n\n")
        rows = _Rows(lake)(f"SELECT count(*) AS n FROM lake.{TABLE}")[0]["n"]
        out.write(f"{TABLE} now reads as {rows} rows. Look around:\n")
        for hint in _HINTS:
            out.write(f'  {_command(args)} -c "{hint}"\n')
    return 0


_HINTS: Iterable[str] = (
    f"SELECT station, count(*), avg(delay_min) FROM lake.{TABLE} GROUP BY ALL ORDER BY 1",
    f"SELECT * FROM iceberg_snapshots('{TABLE}')",
    f"SELECT file_path, partition, record_count, readable_metrics FROM iceberg_files('{TABLE}')",
    f"SELECT * FROM iceberg_dv_positions('{TABLE}') LIMIT 10",
)


def _command(args: argparse.Namespace) -> str:
    default = os.environ.get("ICEDUCK_WAREHOUSE") or "warehouse"
    return "iceduck" if str(args.warehouse) == default else f"iceduck --warehouse {args.warehouse}"


register_command(
    Command("demo", "Build a small Iceberg table with SQL and print its tree of files", _configure, run)
)
