"""`CREATE OR REPLACE TABLE lake.ns.t (...)` / `... AS SELECT ...` on an existing lake table: Iceberg's
atomic replace (`iceduck.transaction.replace`): same table UUID and location, the new schema (field
ids reused by name), partitioning, sort order and rows in one commit, the history kept (older
snapshots stay readable with `AT (VERSION => ...)`). The query may read the table it replaces: it
reads the rows as they were before the statement.

WITH options set properties on top of the existing ones (`format-version` may go up, `location`
cannot change). A table that does not exist yet is simply created.
"""

from __future__ import annotations

import contextlib
from typing import Any

from iceduck.catalog.base import split_table_name
from iceduck.errors import ValidationError
from iceduck.sql import parse as p
from iceduck.sql.types import SqlTypeError, column_definitions, make_schema, relation_fields
from iceduck.tables import Tables
from iceduck.transaction.commit import TableCommitter
from iceduck.transaction.replace import replace_table


def replace_statement(
    con: Any,
    lake: Tables,
    s: p.CreateTable,
    identifier: str,
    rel: Any,
    options: tuple[Any, dict[str, str], Any],
) -> int:
    """Replace the table `identifier` as `s` says (`rel`: the relation of its AS query, None for a
    column list; `options`: its WITH options as (format version or None, properties, location));
    returns the rows written."""
    version, properties, location = options
    namespace, name = split_table_name(identifier)
    committer = TableCommitter(lake.catalog, namespace, name, lake.io)
    current = committer.load().metadata
    if location is not None and location.rstrip("/") != current.location.rstrip("/"):
        raise ValidationError(
            f"table {identifier}: CREATE OR REPLACE cannot move the table to another location"
        )
    target_version = max(version or 0, current.format_version)
    if s.columns is not None:
        defs = column_definitions(con, s.columns)
        if target_version < 3 and any(d.has_default for d in defs):
            raise SqlTypeError(f"table {identifier}: column defaults need format version 3")
        schema = make_schema([d.field() for d in defs], [d.name for d in defs if d.primary_key])
    else:
        schema = make_schema(relation_fields(rel))
    with contextlib.closing(con.cursor()) as cur:
        result = replace_table(
            committer, cur, schema, rel if s.with_data else None,
            partition_by=list(s.partition_by), sort_by=list(s.sort_by), properties=properties,
            format_version=version,
        )  # fmt: skip
    return result.added_rows


__all__ = ["replace_statement"]
