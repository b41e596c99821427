"""Naming the file behind DuckDB's Parquet decoding errors (the front door's part of "every error
names the file").

DuckDB's Parquet reader finds damage in page headers and pages only while it decodes them, during
execution, and reports it without the file: `TProtocolException: Invalid data`, `Out of buffer`,
`don't know what type`, `Decode bit width too large`, `Parquet file is likely corrupted, ...`.
These surface as the bare `duckdb.Error` (DuckDB's untyped internal errors), which is how they are
told apart from errors about the statement. On such an error, `named_damage` reads the files of the
last scans iceduck planned (`read.sql.recently_read`), each alone and whole, with DuckDB's own
reader and the scan's read options (some damage shows only when reading by field id); the first
that fails is the damaged one, and the error becomes one
`CorruptFileError` line naming it. A file is named only when reading it alone fails, so a guess
never names an intact file; when none fails, DuckDB's error stands.

`diagnosed(relation)` gives a relation from `Lake.sql` this translation: its fetching methods
(`fetchall`, `df`, `show`, ...) run as DuckDB's do and translate such errors. A plain DuckDB
connection with `iceduck.register(con)` keeps DuckDB's message: no Python code runs when a query
fails there.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import duckdb

from iceduck.duckdb import hooks
from iceduck.errors import CorruptFileError
from iceduck.io.paths import split_scheme
from iceduck.vocabulary import quote_str

# Files read in full per diagnosis at most (the error path only; the first damaged one stops it).
MAX_FILES_CHECKED = 2000
# Parquet reader messages raised with a typed DuckDB error that still name no file
_PARQUET_DAMAGE = ("Parquet file is likely corrupted", "Corrupted file?", "TProtocolException")

# how iceduck's internal objects (functions, macros, sources) are named
_INTERNAL = "__iceduck_"

# Process-wide on purpose: a private connection that re-reads one file alone to name the damage.
_LOCK = threading.Lock()
_CHECKER: list[duckdb.DuckDBPyConnection] = []

F = TypeVar("F", bound=Callable[..., Any])


def decoding_error(e: BaseException) -> bool:
    """Whether `e` is DuckDB reporting damaged bytes without naming the file."""
    if not isinstance(e, duckdb.Error):
        return False
    return type(e) is duckdb.Error or any(text in str(e) for text in _PARQUET_DAMAGE)


def _damage_in(path: str, options: str) -> str | None:
    """DuckDB's error reading `path` alone and whole (as the scan read it: `options` of its
    read_parquet call), None when it reads cleanly."""
    with _LOCK:
        if not _CHECKER:
            _CHECKER.append(duckdb.connect())
        con = _CHECKER[0]
        read = f"read_parquet({quote_str(path)}{', ' + options if options else ''})"
        try:
            for _ in con.sql(f"SELECT * FROM {read}").to_arrow_reader(65536):
                pass
        except duckdb.Error as e:
            return _first_line(e)
    return None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else "cannot be decoded"


def named_damage(e: BaseException) -> CorruptFileError | None:
    """The error naming the damaged file behind DuckDB's decoding error `e`, or None (not such an
    error, or no recently read local file fails alone)."""
    if not decoding_error(e):
        return None
    from iceduck.read.sql import recently_read  # the error path only: `select 1` loads no read stack

    message = _first_line(e)
    for path, source, options in recently_read()[:MAX_FILES_CHECKED]:
        scheme, _ = split_scheme(path)
        if scheme not in (None, "file") or path in str(e):
            continue  # objects in a store are not re-read here; a named file needs no search
        if _damage_in(path, options) is not None:
            what = "damaged Parquet file" if source == path else f"damaged file (its Parquet copy {path})"
            return CorruptFileError(source, f"{what}: {message}")
    return None


def translating(method: F) -> F:
    """`method` with DuckDB's unnamed decoding errors replaced by one naming the damaged file."""

    @functools.wraps(method)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except duckdb.Error as e:
            _raise_named(e)
            raise

    return run  # type: ignore[return-value]


def _raise_named(e: duckdb.Error) -> None:
    """Raise the error naming the damaged file behind `e`, if there is one, or `e` without DuckDB's
    quote of the statement where that quotes the text the front door rewrote (`LINE 1: SELECT *
    FROM query(__iceduck_...`: iceduck's internal names, not what the user wrote); else return."""
    named = named_damage(e)
    if named is not None:
        raise named from None
    lines = str(e).split("\n")
    kept: list[str] = []
    quoted = False  # the line before quoted the rewritten text: its caret line goes too
    for line in lines:
        caret = quoted and bool(line.strip()) and set(line.strip()) <= {"^"}
        quoted = line.startswith("LINE ") and _INTERNAL in line
        if not (quoted or caret):
            kept.append(line)
    if kept != lines:
        raise type(e)("\n".join(kept).rstrip()) from None


def _translating_iterator(method: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    @functools.wraps(method)
    def run(*args: Any, **kwargs: Any) -> Iterator[Any]:
        try:
            yield from method(*args, **kwargs)
        except duckdb.Error as e:
            _raise_named(e)
            raise

    return run


# The relation methods that execute it and hand results over whole (readers stream batches and
# are left as DuckDB's: an error while iterating one names no file).
_EXECUTING = (
    "fetchall", "fetchone", "fetchmany", "fetchdf", "fetchnumpy", "fetch_arrow_table", "df", "to_df",
    "to_arrow_table", "pl", "to_dicts", "show", "execute", "write_csv", "to_csv", "write_parquet",
    "to_parquet", "create", "to_table", "insert_into", "__repr__", "__str__", "_repr_mimebundle_",
)  # fmt: skip


class LakeRelation(duckdb.DuckDBPyRelation):
    """A DuckDB relation whose fetching methods name the damaged file behind an unnamed Parquet
    decoding error (see the module documentation) and leave DuckDB's quote of the front door's
    rewritten text out of errors; otherwise DuckDB's relation unchanged."""

    __slots__ = ()


for _name in _EXECUTING:
    _method = getattr(duckdb.DuckDBPyRelation, _name, None)
    if _method is not None:
        setattr(LakeRelation, _name, translating(_method))
if hasattr(duckdb.DuckDBPyRelation, "iter_rows"):
    LakeRelation.iter_rows = _translating_iterator(duckdb.DuckDBPyRelation.iter_rows)  # type: ignore[method-assign]


def statement_started() -> None:
    """A new statement starts: only scans planned from now on are searched for its damage."""
    reads = sys.modules.get("iceduck.read.sql")  # not loaded: nothing was planned yet
    if reads is not None:
        reads.forget_reads()


def diagnosed(relation: duckdb.DuckDBPyRelation | None) -> duckdb.DuckDBPyRelation | None:
    """`relation` as a `LakeRelation` (same object, same state), None as None."""
    if relation is not None and type(relation) is duckdb.DuckDBPyRelation:
        hooks.retype_relation(relation, LakeRelation)
    return relation
