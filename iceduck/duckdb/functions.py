"""SQL table functions: a declarative description, and how it becomes a DuckDB table macro.

A `TableFunction` names its parameters (the table first, then named options with defaults), the
Arrow schema of its rows and a Python `run` that produces them. `install` turns it into

    CREATE TEMP MACRO iceberg_x(t, opt := NULL) AS TABLE
        SELECT <columns> FROM __iceduck_iceberg_x WHERE __args = <the arguments, encoded>

over a keyed source (see `hooks.py`): DuckDB folds the arguments into a constant, pushes the
equality down, and the source calls `run` with the decoded arguments. Arguments therefore work as
constants, named parameters, prepared parameters and expressions like `now() - INTERVAL 7 DAY`; a
per-row argument (LATERAL over a table of paths) is refused with a clear message.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from iceduck.duckdb import hooks

_SEP = "\x1f"  # unit separator between encoded arguments
_NULL = "\x1e"  # stands for SQL NULL (concat_ws would silently drop a NULL)
_KEY = "__args"

Args = Mapping[str, Any]
# `run(args, columns)`: the decoded arguments, and the columns the query reads (None: all), so a
# function can skip costly columns nobody asked for.
Runner = Callable[[Args, list[str] | None], pa.Table | pa.RecordBatchReader]


@dataclass(frozen=True, slots=True)
class Param:
    """A parameter: its name, SQL type (VARCHAR, BIGINT, BOOLEAN, TIMESTAMPTZ) and default (SQL)."""

    name: str
    sql_type: str = "VARCHAR"
    default: str | None = "NULL"  # None: positional and required
    doc: str = ""


@dataclass(frozen=True, slots=True)
class TableFunction:
    """A SQL table function implemented in Python."""

    name: str
    params: tuple[Param, ...]
    schema: pa.Schema
    run: Runner
    doc: str = ""
    rows_estimate: int = 1000
    # `setup` prepares the connection (registers UDFs or sources) before the macro is created;
    # `macro` replaces the generated macro (for rows that come from elsewhere, a macro over
    # `query(...)` say, `schema` then only documents the fixed columns).
    setup: Callable[[duckdb.DuckDBPyConnection], None] | None = None
    macro: str | None = None

    @property
    def source_name(self) -> str:
        return f"__iceduck_{self.name}"

    def macro_sql(self) -> str:
        """The CREATE MACRO statement that exposes this function."""
        signature = ", ".join(
            _ident(p.name) if p.default is None else f"{_ident(p.name)} := {p.default}" for p in self.params
        )
        encoded = ", ".join(f"coalesce({_encode(p)}, chr(30))" for p in self.params)
        # qualified, so a column named like a parameter is not replaced by the argument
        columns = ", ".join(f"__src.{_ident(f.name)}" for f in self.schema)
        return (
            f"CREATE OR REPLACE TEMP MACRO {self.name}({signature}) AS TABLE "
            f"SELECT {columns} FROM {self.source_name} AS __src WHERE __src.{_KEY} = concat_ws(chr(31), {encoded})"
        )

    def decode(self, key: str) -> dict[str, Any]:
        """The Python values of the arguments encoded in `key`."""
        parts = key.split(_SEP)
        if len(parts) != len(self.params):
            raise ValueError(f"{self.name}: could not decode the arguments")
        return {p.name: _decode(p.sql_type, v) for p, v in zip(self.params, parts, strict=True)}


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _encode(p: Param) -> str:
    ref = _ident(p.name)
    if p.sql_type == "TIMESTAMPTZ":
        # epoch microseconds do not depend on the session's TimeZone setting
        return f"CAST(epoch_us(CAST({ref} AS TIMESTAMPTZ)) AS VARCHAR)"
    return f"CAST(CAST({ref} AS {p.sql_type}) AS VARCHAR)"


def _decode(sql_type: str, text: str) -> Any:
    if text == _NULL:
        return None
    if sql_type == "BIGINT":
        return int(text)
    if sql_type == "BOOLEAN":
        return text.lower() == "true"
    if sql_type == "TIMESTAMPTZ":
        return dt.datetime.fromtimestamp(int(text) / 1_000_000, tz=dt.UTC)
    return text


def install(con: duckdb.DuckDBPyConnection, fn: TableFunction) -> None:
    """Register `fn` on the connection: its source and its macro."""
    if fn.setup is not None:
        fn.setup(con)
    schema = fn.schema.append(pa.field(_KEY, pa.string()))

    def open_rows(key: Any, columns: list[str] | None) -> pa.Table | pa.RecordBatchReader:
        return fn.run(fn.decode(str(key)), columns)

    hooks.register_source(
        con,
        hooks.Source(
            name=fn.source_name,
            schema=schema,
            key_column=_KEY,
            open=open_rows,
            rows_estimate=fn.rows_estimate,
            missing_key_message=(
                f"{fn.name}() needs constant arguments (a per-row table argument, as in a LATERAL join, "
                "is not supported)"
            ),
        ),
    )
    con.execute(fn.macro if fn.macro is not None else fn.macro_sql())
