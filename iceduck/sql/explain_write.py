"""`EXPLAIN DELETE / UPDATE / MERGE ...` on a lake table: the files the write would touch, and why.

One row per live data file of the current snapshot, nothing written:

* `read`: planning kept the file (it may hold a row the statement changes); the reason says what
  happens to its matching rows (a deletion vector on v3, a position delete file on v2, the file
  rewritten without them under copy-on-write; updated and inserted rows go to new data files);
* `remove`: (DELETE) the file's partition or its column metrics prove every row matches: it is
  dropped whole, unread (`iceduck.read.strict`, the rule DELETE itself follows);
* `skip`: planning left it out; the reason is the planner's (manifest, partition or column bounds).

A MERGE, UPDATE ... FROM or DELETE ... USING is planned as it runs (`iceduck.sql.merge`): the source
is read and its key values become the pruning predicate ("dynamic file pruning"); a WHEN NOT MATCHED
BY SOURCE clause reads every live file.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import duckdb

from iceduck.catalog.base import split_table_name
from iceduck.sql import parse as p
from iceduck.sql.tokens import Token
from iceduck.tables import Tables
from iceduck.transaction.commit import TableCommitter
from iceduck.vocabulary import quote_ident

_MERGE_ON_READ = "merge-on-read"


def explained(tokens: list[Token]) -> list[Token] | None:
    """The statement an `EXPLAIN <DELETE|UPDATE|MERGE ...>` explains (its tokens), else None."""
    if (
        len(tokens) < 3
        or not tokens[0].is_word("EXPLAIN")
        or not tokens[1].is_word("DELETE", "UPDATE", "MERGE")
    ):
        return None
    return tokens[1:]


def explain(
    con: duckdb.DuckDBPyConnection,
    lake: Tables,
    identifier: str,
    text: str,
    tokens: list[Token],
    zone: str | None = None,
) -> Any:
    """The rows (file_path, partition, record_count, action, reason) for the write `text`; its
    WHERE is read in TimeZone `zone` (the session's; None: `con`'s), as the statement reads it."""
    from iceduck.duckdb.scan_plan import scan_plan_table
    from iceduck.read.live import live_state
    from iceduck.read.strict import wholly_matching_reasons
    from iceduck.scan.planner import plan_scan
    from iceduck.sql import merge

    namespace, name = split_table_name(identifier)
    base = TableCommitter(lake.catalog, namespace, name, lake.io).load()
    md = base.metadata
    head = tokens[0].text.upper()
    key = {"DELETE": "write.delete.mode", "UPDATE": "write.update.mode", "MERGE": "write.merge.mode"}[head]
    default = _MERGE_ON_READ if md.format_version >= 2 else "copy-on-write"
    mode = md.properties.get(key, default).lower()
    where = None
    predicate_text: str | None = None
    every_file = None
    if zone is None:
        zone = str(con.execute("SELECT current_setting('TimeZone')").fetchall()[0][0])
    cur = con.cursor()
    try:
        if head == "MERGE" or merge.wants(tokens):
            predicate_text, every_file = _source_predicate(con, cur, merge, md.schema, text, tokens)
        else:
            s = p.parse(text, tokens)
            where = getattr(s, "where", None)
            predicate_text = where
        pruner = lake.pruner(predicate_text, cur, zone) if predicate_text else None
        predicate = pruner(md.schema) if pruner is not None else None
        plan = plan_scan(base, md.current_snapshot(), predicate, report_all=True)
        dropped: dict[str, str] = {}
        if head == "DELETE" and where is not None:
            state = live_state(base, predicate=predicate)
            dropped = wholly_matching_reasons(state, md.schema, lake.exact(where, cur, zone))
    finally:
        cur.close()
    rows = scan_plan_table(plan).to_pylist()
    if mode == _MERGE_ON_READ:
        change = "deletion vector" if md.format_version >= 3 else "position delete file"
        what = f"its matching rows get a {change}"
    else:
        what = "rewritten without its matching rows (copy-on-write)"
    if head != "DELETE":
        what += "; updated and inserted rows go to new data files"
    out = []
    for r in rows:
        if not r["kept"]:
            action, reason = "skip", f"{r['skipped_at']}: {r['reason']}"
        elif r["file_path"] in dropped:
            action, reason = "remove", f"{dropped[r['file_path']]}: dropped whole, unread"
        else:
            why = every_file or (
                "planning cannot rule out a matching row" if predicate is not None else "no pruning predicate"
            )
            action, reason = "read", f"{why}; {what}"
        out.append((r["file_path"], r["partition"], r["record_count"], action, reason))
    order = {"remove": 0, "read": 1, "skip": 2}
    out.sort(key=lambda r: (order[r[3]], r[0]))
    import pyarrow as pa

    table = pa.table(
        {
            "file_path": [r[0] for r in out],
            "partition": [r[1] for r in out],
            "record_count": pa.array([r[2] for r in out], pa.int64()),
            "action": [r[3] for r in out],
            "reason": [r[4] for r in out],
        }
    )
    return con.from_arrow(table)


def _source_predicate(
    con: Any, cur: Any, merge: Any, schema: Any, text: str, tokens: list[Token]
) -> tuple[str | None, str | None]:
    """A MERGE / UPDATE FROM / DELETE USING: the predicate its source implies (as `merge.run`
    derives it), or why every file is read."""
    s = merge.parse(text, tokens)
    if s.by_source:
        return None, "WHEN NOT MATCHED BY SOURCE reads every live row"
    database = str(cur.execute("SELECT current_database()").fetchall()[0][0])
    copies = merge._Copies(database, f"__iceduck_explain_{uuid.uuid4().hex}")
    cur.execute(f"CREATE SCHEMA {quote_ident(database)}.{quote_ident(copies.schema)}")
    try:
        alias, columns = merge._read_source(con, s, copies)
        if alias is None:
            if s.kind != "MERGE" and s.source is None and s.condition is not None:
                return s.slice(*s.condition), None
            return None, "the source is not one table or query: every live file is read"
        found = merge._source_predicate(con, s, schema, copies, alias, columns)
        return found, None if found is not None else "no condition ties the target's columns to the source"
    finally:
        with contextlib.suppress(duckdb.Error):
            cur.execute(f"DROP SCHEMA IF EXISTS {quote_ident(database)}.{quote_ident(copies.schema)} CASCADE")


__all__ = ["explain", "explained"]
