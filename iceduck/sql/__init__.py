"""SQL on the lake: statements about Iceberg tables run through the write API, everything else in DuckDB.

`execute(lake, sql)` is what `Lake.sql` calls; see `iceduck.sql.router` for the rules.
"""

from __future__ import annotations

from iceduck.sql.router import LAKE_DATABASE, SqlError, execute

__all__ = ["LAKE_DATABASE", "SqlError", "execute"]
