"""DuckDB column definitions and types as Iceberg fields and types.

DuckDB itself parses what the user wrote: column lists become a temporary table on a private cursor
(`CREATE TEMP TABLE __iceduck_columns_<id> (<the user's columns>)`), read back through
`duckdb_columns()`, `duckdb_constraints()` and the table's `DuckDBPyType`s. So every spelling DuckDB
accepts (`INT8`, `VARCHAR(10)`, `STRUCT(a INT)[]`, `DECIMAL(10,2)`, user-defined enums) works, and the
mapping below only has to handle DuckDB's canonical types.

BIGINT->long, INTEGER/SMALLINT/TINYINT->int, DOUBLE->double, REAL->float, DECIMAL(p,s)->decimal(p,s),
DATE, TIME, TIMESTAMP(_S/_MS)->timestamp, TIMESTAMPTZ->timestamptz, TIMESTAMP_NS->timestamp_ns,
VARCHAR/JSON/ENUM->string, BLOB->binary, UUID, BOOLEAN, STRUCT/LIST/ARRAY/MAP. Unsigned integers map to
the next signed type that holds them; types Iceberg has no equivalent for (HUGEINT, UHUGEINT, UBIGINT,
BIGNUM, INTERVAL, TIME WITH TIME ZONE, TIME_NS, UNION, BIT) are refused, naming the column.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
from duckdb.sqltypes import DuckDBPyType

from iceduck.duckdb.builtins import varying_functions
from iceduck.errors import ValidationError
from iceduck.spec.types import (
    IcebergType,
    NestedField,
    Schema,
)
from iceduck.spec.values import from_python, to_json
from iceduck.vocabulary import quote_ident
from iceduck.write.types import WriteTypeError, assign_fresh_ids, duck_type, iceberg_type_of_duck


class SqlTypeError(ValidationError):
    """A DuckDB type Iceberg cannot hold, or a column definition it cannot express."""


def iceberg_type(t: DuckDBPyType, where: str) -> IcebergType:
    """The Iceberg type for a DuckDB type (nested field ids are placeholders, see `make_schema`);
    `SqlTypeError` naming the column `where` when Iceberg has no such type (the one mapping:
    `iceduck.write.types.iceberg_type_of_duck`)."""
    try:
        return iceberg_type_of_duck(t, where)
    except WriteTypeError as e:
        raise SqlTypeError(str(e)) from None


def make_schema(
    fields: Sequence[NestedField], identifier_names: Sequence[str] = (), *, schema_id: int = 0
) -> Schema:
    """A schema of `fields` (ids reassigned from 1, nested ones after the top level)."""
    names = [f.name.lower() for f in fields]
    dupes = sorted({f.name for f in fields if names.count(f.name.lower()) > 1})
    if dupes:
        raise SqlTypeError(f"duplicate column names: {', '.join(dupes)}")
    fresh, _ = assign_fresh_ids(fields)
    by_name = {f.name: f.id for f in fresh}
    return Schema(
        fresh, schema_id=schema_id, identifier_field_ids=tuple(by_name[n] for n in identifier_names)
    )


@dataclass(frozen=True, slots=True)
class ColumnDef:
    """A column as DuckDB parsed it: name, Iceberg type, NOT NULL, and the DEFAULT value."""

    name: str
    type: IcebergType
    required: bool
    default: Any = None  # a Python value (DuckDB's), None when there is no default
    has_default: bool = False
    primary_key: bool = False

    def field(self) -> NestedField:
        """The top-level field (id 0 until the schema assigns one); the default is the write-default."""
        default_json = to_json(self.type, from_python(self.type, self.default)) if self.has_default else None
        return NestedField(
            0, self.name, self.type, self.required, write_default=default_json,
            has_write_default=self.has_default and default_json is not None,
        )  # fmt: skip


def column_definitions(con: duckdb.DuckDBPyConnection, columns_sql: str) -> list[ColumnDef]:
    """The columns of a CREATE TABLE column list, parsed and typed by DuckDB on a private cursor.

    Constraints Iceberg cannot hold (UNIQUE, CHECK, FOREIGN KEY, generated columns) are refused;
    PRIMARY KEY columns become required identifier fields (which Iceberg does not enforce).
    """
    with contextlib.closing(con.cursor()) as cur:
        table = f"__iceduck_columns_{uuid.uuid4().hex}"
        try:
            cur.execute(f"CREATE TEMP TABLE {table} ({columns_sql})")
        except duckdb.Error as e:
            raise SqlTypeError(f"column definitions ({columns_sql.strip()}): {_duck_message(e)}") from None
        try:
            rel = cur.sql(f"SELECT * FROM temp.main.{table}")
            types = dict(zip(rel.columns, rel.types, strict=True))
            rows = cur.execute(
                "SELECT column_name, is_nullable, column_default, is_generated FROM duckdb_columns() "
                "WHERE database_name = 'temp' AND table_name = ? ORDER BY column_index",
                [table],
            ).fetchall()
            constraints = cur.execute(
                "SELECT constraint_type, constraint_column_names FROM duckdb_constraints() "
                "WHERE database_name = 'temp' AND table_name = ?",
                [table],
            ).fetchall()
            primary: set[str] = set()
            for kind, names in constraints:
                if kind in ("NOT NULL",):
                    continue
                if kind == "PRIMARY KEY":
                    primary.update(names)
                    continue
                raise SqlTypeError(
                    f"{kind} constraints ({', '.join(names)}) are not supported on Iceberg tables "
                    "(NOT NULL and PRIMARY KEY are)"
                )
            out = []
            for name, nullable, default_sql, generated in rows:
                if generated:
                    raise SqlTypeError(
                        f"column {name}: generated columns are not supported on Iceberg tables"
                    )
                t = iceberg_type(types[name], name)
                has_default = default_sql is not None
                value = evaluate_default(cur, default_sql, t, name) if has_default else None
                out.append(
                    ColumnDef(name, t, not nullable or name in primary, value, has_default, name in primary)
                )
            return out
        finally:
            with contextlib.suppress(duckdb.Error):
                cur.execute(f"DROP TABLE IF EXISTS temp.main.{table}")


def type_from_sql(con: duckdb.DuckDBPyConnection, type_sql: str, where: str) -> IcebergType:
    """The Iceberg type for a DuckDB type name as written (`BIGINT`, `DECIMAL(12, 2)`, `VARCHAR[]`)."""
    defs = column_definitions(con, f"{quote_ident(where)} {type_sql}")
    if len(defs) != 1 or defs[0].has_default or defs[0].required:
        raise SqlTypeError(f"column {where}: expected a type, not {type_sql!r}")
    return defs[0].type


def relation_fields(rel: duckdb.DuckDBPyRelation) -> list[NestedField]:
    """Fields for the columns of a query's result (all optional), as for CREATE TABLE ... AS."""
    return [
        NestedField(0, name, iceberg_type(t, name)) for name, t in zip(rel.columns, rel.types, strict=True)
    ]


def evaluate_default(cur: duckdb.DuckDBPyConnection, default_sql: str, t: IcebergType, where: str) -> Any:
    """The value of a DEFAULT expression, which must be a constant (Iceberg defaults are values)."""
    _check_constant(cur, default_sql, where)
    try:
        rows = cur.execute(f"SELECT CAST(({default_sql}) AS {duck_type(t, where)})").fetchall()
    except duckdb.Error as e:
        raise SqlTypeError(f"column {where}: DEFAULT {default_sql}: {_duck_message(e)}") from None
    return rows[0][0]


def _check_constant(cur: duckdb.DuckDBPyConnection, sql: str, where: str) -> None:
    try:
        rows = cur.execute("SELECT json_serialize_sql(?)", [f"SELECT {sql}"]).fetchall()
        tree = json.loads(rows[0][0]) if rows else {}
    except (duckdb.Error, ValueError):
        return  # DuckDB's own evaluation below reports what is wrong
    if tree.get("error"):
        return
    functions: set[str] = set()
    problems: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            kind = node.get("class")
            if kind == "COLUMN_REF":
                problems.append(".".join(node.get("column_names", [])))
            elif kind == "SUBQUERY":
                problems.append("a subquery")
            elif kind == "FUNCTION":
                functions.add(str(node.get("function_name")))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(tree.get("statements", []))
    if functions:
        # the one rule of what varies (`iceduck.duckdb.builtins`), on this connection's catalog (its UDFs)
        problems += [f"{name}()" for name in sorted(varying_functions(cur, sorted(functions)))]
    if problems:
        raise SqlTypeError(
            f"column {where}: DEFAULT {sql} is not a constant ({', '.join(problems)}); Iceberg defaults are "
            "values fixed when the column is defined"
        )


def _duck_message(e: BaseException) -> str:
    return str(e).split("\n\n")[0].strip()
