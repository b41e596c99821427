"""`CALL enable_logging('Iceberg')`: DuckDB's logger for iceduck's scans, as for the extension.

iceduck's scans write what they skipped to `duckdb_logs()` with the type 'Iceberg' (see
`iceduck.duckdb.scan.logged_sql`), as DuckDB's iceberg extension does. DuckDB only knows the log
types of loaded extensions, so `CALL enable_logging('Iceberg')` on a plain connection asks for the
extension ("Unknown log type"). The statement router (`Lake.sql`, the shell) runs such a call
without the 'Iceberg' type, then selects it by setting: DuckDB's `enabled_log_types` takes any
name, and `write_log(..., log_type := 'Iceberg')` logs under it. On a plain connection the same
settings do it: `SET enabled_log_types = 'Iceberg'; SET logging_mode = 'enable_selected';
SET enable_logging = true` (or `CALL enable_logging()` for every type).
"""

from __future__ import annotations

import duckdb

from iceduck.duckdb.scan import LOG_TYPE
from iceduck.sql.tokens import STRING, Token
from iceduck.vocabulary import quote_str


def _types(tokens: list[Token]) -> tuple[list[str], int] | None:
    """The log types `CALL|PRAGMA enable_logging(<types>, ...)` names first ('T' or ['T', ...]) and
    the index of the token after them; None for another statement."""
    if len(tokens) < 5 or not tokens[0].is_word("CALL", "PRAGMA") or not tokens[1].is_word("ENABLE_LOGGING"):
        return None
    if not tokens[2].is_op("("):
        return None
    if tokens[3].kind == STRING:
        return [tokens[3].text], 4
    if not tokens[3].is_op("["):
        return None
    names, i = [], 4
    while i < len(tokens) and tokens[i].kind == STRING:
        names.append(tokens[i].text)
        i += 1
        if i < len(tokens) and tokens[i].is_op(","):
            i += 1
    return (names, i + 1) if i < len(tokens) and tokens[i].is_op("]") else None


def enables_iceberg_logging(tokens: list[Token]) -> bool:
    """Cheap test: `CALL|PRAGMA enable_logging(...)` whose types name 'Iceberg'."""
    found = _types(tokens)
    return found is not None and any(n.lower() == LOG_TYPE.lower() for n in found[0])


def enable_logging(con: duckdb.DuckDBPyConnection, text: str, tokens: list[Token]) -> None:
    """Run the `enable_logging` call in `text` without the 'Iceberg' type, then select it with
    the other types it names."""
    found = _types(tokens)
    assert found is not None
    names, after = found
    others = [n for n in names if n.lower() != LOG_TYPE.lower()]
    rest = text[tokens[after].start : tokens[-1].end].strip().rstrip(";").strip()
    if others:
        rest = "[" + ", ".join(quote_str(n) for n in others) + "]" + rest
    elif rest.startswith(","):
        rest = rest[1:].lstrip()
    con.execute(f"CALL enable_logging({rest}")
    con.execute(f"SET enabled_log_types = {quote_str(','.join([LOG_TYPE, *others]))}")
    con.execute("SET logging_mode = 'ENABLE_SELECTED'")
