"""What DuckDB's own catalog says about its functions: one reading per process, on a fresh connection.

DuckDB marks each function overload with a stability (`duckdb_functions().stability`): CONSISTENT
(same arguments, same value), CONSISTENT_WITHIN_QUERY (fixed for one query: `now()`,
`current_setting(...)`, `getvariable(...)`) or VOLATILE (`random()`, `nextval(...)`, `write_log(...)`).
iceduck's one rule, used wherever a text may be evaluated once and its value reused (a pruning
planned from a statement and kept for its next run, a filter's capture kept for the next scan, a
column DEFAULT fixed when the column is defined): a name *varies* when DuckDB has no CONSISTENT
overload of it. A name with both kinds of overloads (`date_part` on a DATE is CONSISTENT, on a
TIMESTAMP WITH TIME ZONE it depends on the TimeZone setting) does not vary by itself; the settings it
reads are part of what the callers key their reuse on.

SQL's value keywords (`CURRENT_TIMESTAMP`, `LOCALTIME`, ...) parse as column references that
DuckDB's binder turns into calls of the functions they stand for; they vary with those functions.

The reading costs a fresh connection and one query (~0.1-0.2 s): it is made on the first question,
not at import, so a process that only runs statements about no lake table never pays for it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import duckdb

# SQL value keywords and the functions DuckDB's binder calls for them (a fact of its grammar).
_VALUE_KEYWORDS = {
    "current_catalog": "current_database",
    "current_date": "current_date",
    "current_schema": "current_schema",
    "current_time": "get_current_time",
    "current_timestamp": "get_current_timestamp",
    "localtime": "current_localtime",
    "localtimestamp": "current_localtimestamp",
}


@dataclass(frozen=True, slots=True)
class Builtins:
    """Lowercase names of a fresh DuckDB connection (no UDF, macro or extension a user added)."""

    names: frozenset[str]  # functions, keywords and types: what may stand before `(`
    varying: frozenset[str]  # functions (and value keywords) with no CONSISTENT overload
    filter_scalars: frozenset[str]  # built-in scalars without side effects (not VOLATILE) and macros


# Process-wide on purpose: a fresh connection's names are the same for every connection of the process.
_LOCK = threading.Lock()
_READ: Builtins | None = None


def builtins() -> Builtins:
    """DuckDB's built-in names, read once per process (thread-safe)."""
    global _READ
    if _READ is None:
        with _LOCK:
            if _READ is None:
                _READ = _read()
    return _READ


def _read() -> Builtins:
    con = duckdb.connect()
    try:
        functions = con.execute(
            "SELECT lower(function_name), bool_or(internal AND ((function_type = 'scalar' AND "
            "stability <> 'VOLATILE') OR function_type = 'macro')) FROM duckdb_functions() GROUP BY 1"
        ).fetchall()
        others = con.execute(
            "SELECT lower(keyword_name) FROM duckdb_keywords() "
            "UNION SELECT lower(type_name) FROM duckdb_types()"
        ).fetchall()
        varying = varying_functions(con)
    finally:
        con.close()
    varying |= {keyword for keyword, function in _VALUE_KEYWORDS.items() if function in varying}
    return Builtins(
        names=frozenset(str(r[0]) for r in functions) | frozenset(str(r[0]) for r in others),
        varying=frozenset(varying),
        filter_scalars=frozenset(str(name) for name, scalar in functions if scalar),
    )


def varying_functions(con: duckdb.DuckDBPyConnection, names: list[str] | None = None) -> set[str]:
    """The functions of `con`'s catalog (of `names` only, when given; lowercase) that have no
    CONSISTENT overload. A macro has no stability: it varies as the functions named in it do."""
    where = "" if names is None else "WHERE lower(function_name) IN (SELECT lower(unnest(?)))"
    rows = con.execute(
        f"SELECT lower(function_name) FROM duckdb_functions() {where} GROUP BY 1 "
        "HAVING NOT bool_or(stability = 'CONSISTENT')",
        [] if names is None else [names],
    ).fetchall()
    return {str(r[0]) for r in rows}


def varies(name: str) -> bool:
    """Whether DuckDB may give `name` (a function or SQL value keyword, any case) a different value
    when the same text runs again (see the module docstring)."""
    return name.lower() in builtins().varying
