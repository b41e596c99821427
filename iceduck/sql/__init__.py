"""SQL on the lake: statements about Iceberg tables run through the write API, everything else in DuckDB.

`Router(lake).execute(sql)` is what `Lake.sql` calls (each lake owns one router); see `iceduck.sql.router` for the rules.
`split_script(con, text)` splits a script as DuckDB's `extract_statements` does, also when DuckDB's
parser refuses a statement only iceduck understands (`DROP TABLE ns.t PURGE`).
"""

from __future__ import annotations

from iceduck.sql.classify import ScriptStatement, split_script
from iceduck.sql.lake_names import SqlError
from iceduck.sql.router import LAKE_DATABASE

__all__ = ["LAKE_DATABASE", "ScriptStatement", "SqlError", "split_script"]
