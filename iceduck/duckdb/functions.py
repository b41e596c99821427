"""SQL table functions: a declarative description, and how it becomes a DuckDB table macro.

A `TableFunction` names its parameters (the table first, then named options with defaults), the
Arrow schema of its rows and a Python `run` that produces them. `install` turns it into

    CREATE TEMP MACRO iceberg_x(t, opt := NULL) AS TABLE
        FROM query(__iceduck_bind_2('iceberg_x', CAST(t AS VARCHAR), CAST(opt AS VARCHAR)))

`__iceduck_bind_<n>` (one scalar UDF per connection and number of arguments) runs when DuckDB
binds the statement: it encodes the arguments as one key, runs the function's `check` (the table
exists, the snapshot exists, ...) and returns

    SELECT <columns> FROM __iceduck_iceberg_x WHERE __args = '<the key>' AND <failing on a failure row> OFFSET 0

over a keyed source (see `hooks.py`): DuckDB pushes the equality down, and the source calls `run`
with the decoded arguments, and the columns the query reads. A user's error while `run` produces
rows (a corrupt file met on the way) comes back as one row carrying the message, which the
SQL raises with DuckDB's `error()` (`vocabulary.keyed_rows`): one line, as for a failed check. A failed check returns
`SELECT error('<one line>')` instead, so the user sees DuckDB's plain `Invalid Input Error: <what
and where>` and none of the wrapper text DuckDB puts around Python exceptions. Because DuckDB casts
the arguments while binding `query(...)`, a wrong argument type gets DuckDB's own conversion error
(`as_of := 'garbage'`); a bare identifier as the table (`iceberg_files(lake.ns.t)`) arrives as its
text. Arguments work as constants, named parameters, prepared parameters and expressions like
`now() - INTERVAL 7 DAY`; a per-row argument (LATERAL over a table of paths) is refused by DuckDB.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import inspect
import re
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb

from iceduck._lazy import LazyModule
from iceduck.duckdb import hooks
from iceduck.errors import IcebergError
from iceduck.io import fsspec_store
from iceduck.io.s3_duckdb import mentions_s3, register_filesystem
from iceduck.io.s3_settings import S3Registry
from iceduck.vocabulary import SOURCE_ERROR_COLUMN, keyed_rows, quote_ident, quote_str

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = LazyModule("pyarrow")

_SEP = "\x1f"  # unit separator between encoded arguments
_NULL = "\x1e"  # stands for SQL NULL in a key
_KEY = "__args"
BIND_UDF = "__iceduck_bind"

Args = Mapping[str, Any]
# `run(args, columns)`: the decoded arguments, and the columns the query reads (None: all), so a
# function can skip costly columns nobody asked for.
Runner = Callable[[Args, list[str] | None], "pa.Table | pa.RecordBatchReader"]
# `check(args)`: raises (IcebergError, ValueError, OSError) when the arguments cannot work; runs when
# DuckDB binds the statement, so the message reaches the user without DuckDB's wrapper text.
Checker = Callable[[Args], None]

# What a user may see of a failure, by exception type: iceduck's own errors and bad values. Anything
# else is a bug and keeps its type name and DuckDB's wrapper, so it is recognisable as one.
USER_ERRORS: tuple[type[BaseException], ...] = (IcebergError, ValueError, OSError, duckdb.Error)


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
    # The Arrow schema of the rows, built when first needed (a bind, the reference docs): registering
    # a function must not import pyarrow. Usually a module's schema constant or cached builder.
    schema_of: Callable[[], pa.Schema]
    run: Runner
    doc: str = ""
    rows_estimate: int = 1000
    # `setup` prepares the connection (registers UDFs or sources) before the macro is created;
    # `macro` replaces the generated macro (for rows that come from elsewhere, a macro over
    # `query(...)` say, `schema` then only documents the fixed columns).
    setup: Callable[[duckdb.DuckDBPyConnection], None] | None = None
    macro: str | None = None
    check: Checker | None = None
    # `installed_if(con)`: False leaves the connection without this function (read_avro yields to
    # DuckDB's own avro extension when that is loaded)
    installed_if: Callable[[duckdb.DuckDBPyConnection], bool] | None = None
    # SQL over the source's column for columns whose DuckDB type Arrow cannot carry: `{}` is the
    # column (`CAST(CAST({} AS JSON) AS VARIANT)` makes JSON text a VARIANT)
    column_sql: Mapping[str, str] | None = None

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of the function's rows."""
        return self.schema_of()

    @property
    def source_name(self) -> str:
        return f"__iceduck_{self.name}"

    def macro_sql(self) -> str:
        """The CREATE MACRO statement that exposes this function."""
        signature = ", ".join(
            quote_ident(p.name) if p.default is None else f"{quote_ident(p.name)} := {p.default}"
            for p in self.params
        )
        args = self.bind_args()
        return (
            f"CREATE OR REPLACE TEMP MACRO {self.name}({signature}) AS TABLE "
            f"FROM query({bind_udf_name(len(args))}({quote_str(self.name)}, {', '.join(args)}))"
        )

    def bind_args(self) -> list[str]:
        """The macro's arguments to the bind UDF, as VARCHAR SQL (NULL stays NULL): each its own
        argument, which costs DuckDB less per call than one string joined in SQL."""
        return [_encode(self.name, p) for p in self.params]

    def select_sql(self, key: str, columns: str | None = None) -> str:
        """The query the macro runs for the encoded arguments `key`: the keyed source's rows
        (`columns`: `columns_sql()`, when the caller keeps it)."""
        # One SELECT over the source, not a projection over `SELECT *`: DuckDB binds every column
        # of every level (~0.8 M instructions for the 13 of iceberg_snapshots' source each time)
        return keyed_rows(self.source_name, _KEY, key, self.columns_sql() if columns is None else columns)

    def columns_sql(self) -> str:
        """The select list of `select_sql`: every column of the schema, in order."""
        wrap = self.column_sql or {}
        return ", ".join(
            f"{wrap[f.name].format(ref)} AS {ref}" if f.name in wrap else ref
            for f in self.schema
            for ref in [quote_ident(f.name)]
        )

    def decode(self, key: str) -> dict[str, Any]:
        """The Python values of the arguments encoded in `key`."""
        parts = key.split(_SEP)
        if len(parts) != len(self.params):
            raise ValueError(f"{self.name}: could not decode the arguments")
        return {p.name: _decode(p.sql_type, v) for p, v in zip(self.params, parts, strict=True)}

    def validate(self, args: Args) -> None:
        """Raise when the arguments cannot work: a NULL table, then the function's own `check`."""
        for p in self.params:
            if p.default is None and args.get(p.name) is None:
                raise ValueError(f"the {_what(p)} argument is required (got NULL)")
        if self.check is not None:
            self.check(args)


def no_columns() -> pa.Schema:
    """The schema of a function whose rows come from its own macro (`TableFunction.macro`)."""
    return pa.schema([])


def _what(p: Param) -> str:
    return "table" if p.name == "tbl" else p.name


def error_sql(message: str) -> str:
    """A query that fails with `message` as DuckDB's own `Invalid Input Error` (one line).

    The error is a table function's argument, which DuckDB evaluates while binding: it surfaces
    before the outer query binds its columns (so no "column not found" hides it) and also when no
    column is read (`count(*)`), under EXPLAIN and with LIMIT 0."""
    return f"SELECT * FROM range(error({quote_str(one_line(message))}))"


def one_line(message: str) -> str:
    """The first line of a message (errors are one line; anything after is detail for debugging)."""
    lines = [line for line in message.strip().splitlines() if line.strip()]
    return lines[0].strip() if lines else "failed"


def user_error_message(name: str, exc: BaseException) -> str | None:
    """`user_message` for the errors users can act on (`USER_ERRORS`), None for a bug."""
    return user_message(name, exc) if isinstance(exc, USER_ERRORS) else None


def user_message(name: str, exc: BaseException) -> str:
    """`<function>: <what went wrong>` for an error the user can act on."""
    text = one_line(str(exc)) if str(exc) else type(exc).__name__
    return text if text.startswith(f"{name}:") or text.startswith(f"{name}()") else f"{name}: {text}"


# DuckDB's wording around a Python exception raised while a statement runs (a source's stream, a
# UDF): `<prefix><ExceptionType>: <message>`. `clean_message` keeps the message.
_WRAPPERS = (
    re.compile(
        r"exporting a stream from the object registered as '__iceduck_(?:view_)?(?P<name>[^']*)' failed: (?:\w+: )?"
    ),
    re.compile(r"Python exception occurred while executing the UDF: (?:\w+: )?"),
)


def clean_message(text: str) -> str:
    """An error's text as a user should read it: DuckDB's wrapper around Python exceptions (and any
    traceback after it) reduced to one line naming the function, and no line naming iceduck's
    internal objects (DuckDB's "Did you mean" may suggest one)."""
    lines = text.strip().splitlines() if text else []
    if not lines:
        return text
    first = lines[0]
    if first.startswith("Traceback (most recent call last)"):
        # a Python error in the filesystem DuckDB reads S3 through: DuckDB's text is its whole
        # traceback; the error's own line (without its class name) is what the user can act on
        return re.sub(r"^[\w.]+: ", "", lines[-1].strip(), count=1)
    for pattern in _WRAPPERS:
        m = pattern.search(first)
        if m is not None:
            name = m.groupdict().get("name")
            rest = first[m.end() :]
            if name and not rest.startswith(f"{name}:"):
                rest = f"{name}: {rest}"
            return first[: m.start()] + rest
    kept = [line for line in lines if "__iceduck" not in line]
    return "\n".join(kept).strip()


# The microseconds of 0001-01-01 and 9999-12-31 23:59:59.999999 UTC: Python's datetime range.
_MIN_MICROS, _MAX_MICROS = -62135596800000000, 253402300799999999
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def epoch_us_sql(expr: str) -> str:
    """SQL for the epoch microseconds of a TIMESTAMPTZ argument (independent of the session's
    TimeZone). `epoch_us` gives NULL for '-infinity' and 'infinity', which would read as "no time
    given": they become the ends of Python's datetime range instead, so `as_of := '-infinity'`
    finds no snapshot rather than the current one."""
    v = f"CAST({expr} AS TIMESTAMPTZ)"
    zero = "TIMESTAMPTZ '1970-01-01 00:00:00+00'"
    return (
        f"coalesce(epoch_us({v}), CASE WHEN {v} > {zero} THEN {_MAX_MICROS} "
        f"WHEN {v} < {zero} THEN {_MIN_MICROS} END)"
    )


def datetime_from_epoch_us(micros: int) -> dt.datetime:
    """The UTC datetime of epoch microseconds (exact; the range ends stand for the infinities)."""
    return _EPOCH + dt.timedelta(microseconds=min(max(micros, _MIN_MICROS), _MAX_MICROS))


def _encode(function: str, p: Param) -> str:
    ref = quote_ident(p.name)
    if p.sql_type == "TIMESTAMPTZ":
        return f"CAST({epoch_us_sql(ref)} AS VARCHAR)"
    if p.sql_type == "BIGINT":
        return f"CAST({whole_number(function, p.name, ref)} AS VARCHAR)"
    if p.sql_type == "VARCHAR":
        return f"CAST({ref} AS VARCHAR)"
    return f"CAST(CAST({ref} AS {p.sql_type}) AS VARCHAR)"


def whole_number(function: str, name: str, ref: str) -> str:
    """SQL casting `ref` to BIGINT that refuses a fraction (DuckDB's cast rounds 1.5 to 2)."""
    message = quote_str(f"{function}: {name} must be a whole number, got ")
    return (
        f"CASE WHEN CAST({ref} AS BIGINT) <> {ref} THEN error({message} || CAST({ref} AS VARCHAR)) "
        f"ELSE CAST({ref} AS BIGINT) END"
    )


def _decode(sql_type: str, text: str) -> Any:
    if text == _NULL:
        return None
    if sql_type == "BIGINT":
        return int(text)
    if sql_type == "BOOLEAN":
        return text.lower() == "true"
    if sql_type == "TIMESTAMPTZ":
        return datetime_from_epoch_us(int(text))
    return text


# Ctrl-C in the shell: DuckDB's interrupt stops its own work, not Python code a function runs (a
# maintenance action writing files). Long-running functions call `check_cancelled` between steps
# and before they commit, so an interrupted run stops and commits nothing.
_CANCEL = threading.Event()


class Cancelled(Exception):
    """The user interrupted the statement (Ctrl-C)."""


def request_cancel() -> None:
    """Ask running functions to stop at their next check (the shell calls this on Ctrl-C)."""
    _CANCEL.set()


def clear_cancel() -> None:
    """Forget an earlier request and any progress (the shell calls this before each statement)."""
    _CANCEL.clear()
    _PROGRESS[0] = None


def check_cancelled(what: str = "interrupted") -> None:
    """Raise `Cancelled` when a cancel was requested."""
    if _CANCEL.is_set():
        raise Cancelled(f"{what}: interrupted, nothing more was committed")


# The latest progress a running function reported (done, total, what), for the shell to show.
_PROGRESS: list[tuple[int, int, str] | None] = [None]


def report_progress(done: int, total: int, what: str) -> None:
    """Record how far a running function is (the shell shows it under a long statement)."""
    _PROGRESS[0] = (done, total, what)


def current_progress() -> tuple[int, int, str] | None:
    """The progress last reported since `clear_cancel`, or None."""
    return _PROGRESS[0]


# The functions installed on each connection, for its bind UDF.
_INSTALLED: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, dict[int, dict[str, TableFunction]]] = (
    weakref.WeakKeyDictionary()
)


# Connections owed their S3 filesystem (`owe_s3_filesystem`), with the settings it reads through.
_S3_OWED: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, S3Registry] = weakref.WeakKeyDictionary()


def owe_s3_filesystem(con: duckdb.DuckDBPyConnection, registry: S3Registry) -> None:
    """Register DuckDB's S3 filesystem on `con` only when iceduck first hands it SQL naming an S3
    path (see `create_sql_udf`), not now: the filesystem loads fsspec (~5 MB), which a connection
    reading local tables never needs."""
    _S3_OWED[con] = registry


# Connections owed their GCS / Azure filesystems (`owe_store_filesystems`), likewise.
_STORE_OWED: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, fsspec_store.StoreRegistry] = (
    weakref.WeakKeyDictionary()
)


def owe_store_filesystems(con: duckdb.DuckDBPyConnection, registry: fsspec_store.StoreRegistry) -> None:
    """As `owe_s3_filesystem`, for the gs:// and az:// / abfss:// filesystems."""
    _STORE_OWED[con] = registry


def create_sql_udf(
    con: duckdb.DuckDBPyConnection, name: str, fn: Callable[..., str], parameters: list[str]
) -> None:
    """(Re)register `fn` as the UDF `name` returning SQL for DuckDB to run (`query(<udf>(...))`).

    When that SQL names an S3 path and `con` is owed its S3 filesystem, the filesystem is registered
    first, through a cursor (code inside a query cannot use that query's connection; a cursor
    registers on the same database), so DuckDB binds the SQL's files through it."""
    owner = weakref.ref(con)  # a function held by the connection must not keep it alive

    @functools.wraps(fn)
    def sql_udf(*args: Any) -> str:
        sql = fn(*args)
        target = owner() if _S3_OWED else None
        registry = _S3_OWED.get(target) if target is not None and mentions_s3(sql) else None
        if target is not None and registry is not None:
            cursor = target.cursor()
            try:
                register_filesystem(cursor, registry, tune=False)
            finally:
                cursor.close()
            _S3_OWED.pop(target, None)
        target = owner() if _STORE_OWED else None
        owed = _STORE_OWED.get(target) if target is not None and fsspec_store.mentions_store(sql) else None
        if target is not None and owed is not None:
            cursor = target.cursor()
            try:
                fsspec_store.register_filesystems(cursor, owed)
            finally:
                cursor.close()
            _STORE_OWED.pop(target, None)
        return sql

    with contextlib.suppress(Exception):  # not registered yet
        con.remove_function(name)
    create: Any = con.create_function  # the stubs do not cover a callable of this shape
    create(name, sql_udf, parameters, "VARCHAR", null_handling="special", side_effects=True)


def bind_udf_name(arity: int) -> str:
    """The bind UDF taking a function's name and `arity` encoded arguments."""
    return f"{BIND_UDF}_{arity}"


def encode_key(values: tuple[str | None, ...]) -> str:
    """The key of the encoded arguments `values` (None for SQL NULL): what the keyed source is
    filtered by and `TableFunction.decode` reads."""
    return _SEP.join(_NULL if v is None else v for v in values)


def bind_sql(fn: TableFunction, key: str, columns: str | None = None) -> str:
    """What the bind UDF returns for `fn` called with the encoded arguments `key` (`columns`: see
    `TableFunction.select_sql`)."""
    try:
        fn.validate(fn.decode(key))
    except USER_ERRORS as e:
        return error_sql(user_message(fn.name, e))
    return fn.select_sql(key, columns)


def _install_bind_udf(con: duckdb.DuckDBPyConnection, arity: int) -> dict[str, TableFunction]:
    """The functions bound by `con`'s bind UDF of `arity` arguments (see `bind_udf_name`),
    registering it first when needed."""
    per_arity = _INSTALLED.get(con)
    if per_arity is None:
        per_arity = _INSTALLED[con] = {}
    installed = per_arity.get(arity)
    if installed is not None:
        return installed
    functions: dict[str, TableFunction] = {}
    selects: dict[str, tuple[TableFunction, str]] = {}  # each function's select list, made once

    def bind(name: str | None, *values: str | None) -> str:
        fn = functions.get(name or "")
        if fn is None:
            return error_sql(f"{name}: not installed on this connection (call iceduck.register(con))")
        kept = selects.get(fn.name)
        if kept is None or kept[0] is not fn:
            kept = selects[fn.name] = (fn, fn.columns_sql())
        return bind_sql(fn, encode_key(values), kept[1])

    # DuckDB reads the number of arguments from the signature
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    names = ["name", *(f"a{i}" for i in range(arity))]
    bind.__signature__ = inspect.Signature([inspect.Parameter(n, kind) for n in names])  # type: ignore[attr-defined]
    create: Any = con.create_function  # the stubs do not cover a callable of this shape
    create(
        bind_udf_name(arity), bind, ["VARCHAR"] * (arity + 1), "VARCHAR", null_handling="special", side_effects=True
    )
    per_arity[arity] = functions
    return functions


def install(con: duckdb.DuckDBPyConnection, fn: TableFunction) -> None:
    """Register `fn` on the connection: its macro, and the keyed source a generated macro reads."""
    if fn.installed_if is not None and not fn.installed_if(con):
        return
    if fn.setup is not None:
        fn.setup(con)
    if fn.macro is not None and BIND_UDF not in fn.macro:
        # a macro of its own (iceberg_scan, read_avro): its rows come from elsewhere, so no keyed
        # source is registered for a `run` nothing reads (each costs the connection memory)
        con.execute(fn.macro)
        _comment(con, fn)
        return
    _install_bind_udf(con, len(fn.bind_args()))[fn.name] = fn  # a generated macro, perhaps adjusted

    def open_rows(key: Any, columns: list[str] | None) -> pa.Table | pa.RecordBatchReader:
        return fn.run(fn.decode(str(key)), columns)

    hooks.register_source(
        con,
        hooks.Source(
            name=fn.source_name,
            schema=fn.schema_of,
            key_column=_KEY,
            open=open_rows,
            rows_estimate=fn.rows_estimate,
            missing_key_message=f"{fn.name}() needs constant arguments",
            error_message=functools.partial(user_error_message, fn.name),
            error_column=SOURCE_ERROR_COLUMN,
        ),
    )
    con.execute(fn.macro if fn.macro is not None else fn.macro_sql())
    _comment(con, fn)


def _comment(con: duckdb.DuckDBPyConnection, fn: TableFunction) -> None:
    if fn.doc:  # shown as the comment column of duckdb_functions()
        con.execute(f"COMMENT ON MACRO TABLE {fn.name} IS {quote_str(one_line(fn.doc))}")
