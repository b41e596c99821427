"""The one place iceduck touches DuckDB's private Python hooks.

DuckDB 2.0's Python package has no public way to register a Python table function. Its Arrow scan
protocol (`duckdb._sources.ArrowScanSource` registered with `con._register_arrow_source`) is the
fastest hook measured: it streams Arrow batches and offers predicates for pushdown. iceduck uses it
behind the small `Source` and `NativeSource` interfaces below; nothing else in the package imports `duckdb._sources`.

Private names can change in any release, so the duckdb version is pinned to 2.0.x and
`tests/duckdb/test_duckdb_hooks.py` fails loudly when any hook used here changes.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb
from duckdb import _relation, _sources  # private: see the module docstring

from iceduck._lazy import LazyModule
from iceduck.duckdb.builtins import varies

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = LazyModule("pyarrow")

# Every private attribute used, so a test can check they still exist.
PRIVATE_HOOKS: tuple[str, ...] = (
    "duckdb._sources.ArrowScanSource",
    "duckdb._sources.nodes.Binary",
    "duckdb._sources.nodes.Col",
    "duckdb._sources.nodes.Lit",
    "DuckDBPyConnection._register_arrow_source",
)

# What a source's `open` gets: the value of the constant equality filter on the key column, and
# the names of the columns the query reads (None: all of them).
Opener = Callable[[Any, list[str] | None], "pa.RecordBatchReader | pa.Table"]


@dataclass(frozen=True, slots=True)
class Source:
    """A virtual table whose rows are produced on demand for one key value.

    Queries must filter `key_column = <constant>`; the constant reaches `open`, which returns the
    rows for that key. The key column itself is never materialised by `open`.
    """

    name: str
    # The schema of the rows `open` returns (without the key and error columns, which the source
    # adds as strings), built at the first bind: registering a source must not import pyarrow.
    schema: Callable[[], pa.Schema]
    key_column: str
    open: Opener
    rows_estimate: int = 1000
    missing_key_message: str = "the arguments must be constants"
    # The message a user should read for an exception `open` (or reading its rows) raised, None
    # for a bug: with it, the schema has a string column `error_column`, NULL on every row, and a
    # failure becomes one more row with only that column set (the reading SQL raises it).
    error_message: Callable[[BaseException], str | None] | None = None
    error_column: str = ""


class _KeyedArrowSource(_sources.ArrowScanSource):
    """Adapter from the private ArrowScanSource protocol to `Source`.

    DuckDB asks a source's schema when it is registered and, unless `schema_is_stable`, again at
    every bind. Registration is answered without pyarrow (see `register_source`), every bind with
    the real schema, built on the first one."""

    schema_is_stable = False

    def __init__(self, source: Source, placeholder: object) -> None:
        super().__init__(None)
        self._source = source
        self._placeholder: object | None = placeholder  # what the registration's ask reads
        self._full: pa.Schema | None = None
        self._narrowed: dict[tuple[str, ...], pa.Schema] = {}  # the schema of each column list read

    def _schema_capsule(self) -> object:
        return self.schema().__arrow_c_schema__()

    def schema(self) -> pa.Schema:
        """The rows' schema with the key column (and the error column, if any) appended."""
        if self._full is None:
            source = self._source
            made = [(source.key_column, pa.string())]
            if source.error_column:
                made.append((source.error_column, pa.string()))
            full = source.schema()
            for name, type_ in made:
                full = full.append(pa.field(name, type_))
            self._full = full
        return self._full

    def rows(self) -> int | None:
        return self._source.rows_estimate

    def accepts(self, predicate: Any) -> bool:
        return constant_equality(predicate, self._source.key_column) is not None

    def stream(self, columns: Sequence[int] | None, filters: Sequence[Any]) -> tuple[object, bool]:
        if self._placeholder is not None:  # the registration reading the schema (see register_source)
            placeholder, self._placeholder = self._placeholder, None
            return placeholder, False
        keys = [k for f in filters if (k := constant_equality(f, self._source.key_column)) is not None]
        if not keys:
            raise ValueError(f"{self._source.name}: {self._source.missing_key_message}")
        schema = self.schema()
        wanted = None if columns is None else [schema.field(i).name for i in columns]
        source = self._source
        made = [source.key_column, source.error_column]
        data_columns = None if wanted is None else [c for c in wanted if c not in made]
        try:
            result: pa.RecordBatchReader | pa.Table = source.open(keys[0][0], data_columns or None)
        except Exception as e:
            result = _failure(source, e, schema)
        exact = wanted is not None and len(wanted) > 0
        names = tuple(wanted if wanted else schema.names[:1]) if wanted is not None else tuple(schema.names)
        out_schema = self._narrowed.get(names)
        if out_schema is None:
            out_schema = self._narrowed[names] = pa.schema([schema.field(n) for n in names])
        return _narrow(result, source, schema, keys[0][0], out_schema), exact


def _failure(source: Source, e: Exception, schema: pa.Schema) -> pa.Table:
    """The one row standing for a failure the user should read (re-raises anything else)."""
    message = source.error_message(e) if source.error_message is not None else None
    if message is None:
        raise e
    return pa.table(
        [pa.array([message if f.name == source.error_column else None], f.type) for f in schema], schema=schema
    )


def _narrow(
    result: pa.RecordBatchReader | pa.Table,
    source: Source,
    schema: pa.Schema,
    key_value: Any,
    out_schema: pa.Schema,
) -> object:
    """Export `result` as a stream holding exactly the columns of `out_schema` (fields of `schema`;
    one column for `count(*)`, which reads none, yet DuckDB still needs the row count), in order:
    the key column is the key, the error column NULL unless a failure row carries it."""
    key = source.key_column

    def columns(data: pa.RecordBatch | pa.Table) -> list[Any]:
        arrays: list[Any] = []
        for field in out_schema:
            n = field.name
            if n == key:
                arrays.append(pa.array([key_value] * data.num_rows, field.type))
            elif n == source.error_column and n not in data.schema.names:
                arrays.append(pa.nulls(data.num_rows, pa.string()))
            else:
                column = data.column(n)
                arrays.append(column if column.type == field.type else column.cast(field.type))
        return arrays

    if isinstance(result, pa.Table):
        # Materialised rows cannot fail while read: one table exported as is (DuckDB pulling each
        # batch back through a Python generator costs more than the rows of a metadata table).
        return pa.Table.from_arrays(columns(result), schema=out_schema).__arrow_c_stream__()
    reader = result

    def rows(batch: pa.RecordBatch) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays(columns(batch), schema=out_schema)

    def batches() -> Any:
        try:
            for batch in reader:
                yield rows(batch)
        except Exception as e:  # a failure while reading: the rows so far, then the failure row
            for batch in _failure(source, e, schema).to_batches():
                yield rows(batch)

    return pa.RecordBatchReader.from_batches(out_schema, batches()).__arrow_c_stream__()


def constant_equality(predicate: Any, column: str) -> tuple[Any] | None:
    """`(value,)` when the predicate is `column = constant`, else None."""
    nodes = _sources.nodes
    if (
        isinstance(predicate, nodes.Binary)
        and predicate.op == "="
        and isinstance(predicate.left, nodes.Col)
        and predicate.left.parts == (column,)
        and isinstance(predicate.right, nodes.Lit)
    ):
        return (predicate.right.value,)
    return None


# What a source answers while it is registered: DuckDB reads a schema then, but binds re-ask it.
_PLACEHOLDER_SQL = "SELECT NULL::VARCHAR AS __placeholder LIMIT 0"


def register_source(con: duckdb.DuckDBPyConnection, source: Source) -> None:
    """Make `source` queryable by name on this connection.

    Registration reads the schema once: the adapter has no `__arrow_c_schema__` yet, so DuckDB
    reads it from a first `stream()`, which returns an empty stream DuckDB itself made (no pyarrow).
    Only then does the adapter get the hook (DuckDB looks it up on the instance, as its own
    sources set it), so each bind reads the real schema, built by the first."""
    adapter = _KeyedArrowSource(source, con.sql(_PLACEHOLDER_SQL).__arrow_c_stream__())
    con._register_arrow_source(source.name, adapter)
    adapter._placeholder = None
    adapter.__dict__["__arrow_c_schema__"] = adapter._schema_capsule


# ---------------------------------------------------------------------------------------------
# Keyed sources whose one row DuckDB itself makes (no pyarrow)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NativeSource:
    """A virtual table with one row per key value, handed to DuckDB as Arrow that DuckDB itself
    builds (on a private database, from the values as statement parameters), so that reading it
    loads no pyarrow (~25 MB of a fresh process's peak: issue 28).

    Queries must filter `key_column = <constant>`; `open(key)` returns the row's values in the order
    of `columns` ((name, DuckDB type) pairs), and the row gets the key and, with `error_column`, NULL
    there; a failure `error_message` names becomes a row with only that column set, as in `Source`."""

    name: str
    columns: tuple[tuple[str, str], ...]
    key_column: str
    open: Callable[[Any], Sequence[Any]]
    rows_estimate: int = 1
    error_message: Callable[[BaseException], str | None] | None = None
    error_column: str = ""


# Process-wide on purpose: a private in-memory database that only builds rows (no user state, no
# tables), shared by every connection's native sources.
_NATIVE: duckdb.DuckDBPyConnection | None = None
_NATIVE_LOCK = threading.Lock()


def _native_cursor() -> duckdb.DuckDBPyConnection:
    """A new cursor on the private database native sources build their rows on (one per stream:
    a result left open holds its connection, and DuckDB streams it after `stream()` returns)."""
    global _NATIVE
    with _NATIVE_LOCK:
        if _NATIVE is None:
            _NATIVE = duckdb.connect(config={"threads": 1})
        return _NATIVE.cursor()


class _NativeKeyedSource(_sources.ArrowScanSource):
    """Adapter from the private ArrowScanSource protocol to `NativeSource`. It has no schema hook:
    DuckDB reads the schema from a `stream()` without filters (at registration and at binds),
    answered with the source's columns and no row."""

    def __init__(self, source: NativeSource) -> None:
        super().__init__(None)
        self._source = source
        made = [(source.key_column, "VARCHAR")]
        if source.error_column:
            made.append((source.error_column, "VARCHAR"))
        self._columns: tuple[tuple[str, str], ...] = (*source.columns, *made)
        self._empty = "SELECT " + ", ".join(f"NULL::{t} AS {_ident(n)}" for n, t in self._columns) + " LIMIT 0"

    def rows(self) -> int | None:
        return self._source.rows_estimate

    def accepts(self, predicate: Any) -> bool:
        return constant_equality(predicate, self._source.key_column) is not None

    def stream(self, columns: Sequence[int] | None, filters: Sequence[Any]) -> tuple[object, bool]:
        source = self._source
        keys = [k for f in filters if (k := constant_equality(f, source.key_column)) is not None]
        cursor = _native_cursor()
        if not keys:  # DuckDB reading the schema (a query without the key gets no row)
            return cursor.sql(self._empty).__arrow_c_stream__(), False
        key = keys[0][0]
        data: Sequence[Any] = [None] * len(source.columns)
        error = None
        try:
            data = source.open(key)
        except Exception as e:
            error = source.error_message(e) if source.error_message is not None else None
            if error is None:
                raise
        values = [*data, key, *([error] if source.error_column else [])]
        wanted = list(range(len(self._columns))) if columns is None else list(columns)
        exact = len(wanted) > 0
        picked = wanted or [0]  # `count(*)` reads no column, yet DuckDB still needs the row
        # Each value a parameter, cast to its column's type (a NULL parameter has no type).
        select = ", ".join(f"${k + 1}::{self._columns[i][1]} AS {_ident(self._columns[i][0])}" for k, i in enumerate(picked))
        relation = cursor.sql(f"SELECT {select}", params=[values[i] for i in picked])
        return relation.__arrow_c_stream__(), exact


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def register_native_source(con: duckdb.DuckDBPyConnection, source: NativeSource) -> None:
    """Make `source` queryable by name on this connection (see `NativeSource`)."""
    con._register_arrow_source(source.name, _NativeKeyedSource(source))


# ---------------------------------------------------------------------------------------------
# Predicates the Arrow scan offers, as iceduck expressions (scans)
# ---------------------------------------------------------------------------------------------

PRIVATE_HOOKS += (
    "duckdb._sources.nodes.Unary",
    "duckdb._sources.nodes.Postfix",
    "duckdb._sources.nodes.In",
)


# The predicate nodes DuckDB offers a scan, mirrored in iceduck's own terms so that the private node
# classes stay in this module; `iceduck.duckdb.pushdown` turns them into `iceduck.expr` predicates.


@dataclass(frozen=True, slots=True)
class Column:
    """A column reference (dotted parts for nested fields)."""

    parts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Constant:
    """A constant: a Python value of the column's type (TIMESTAMPTZ as int microseconds)."""

    value: Any


@dataclass(frozen=True, slots=True)
class Binary:
    """`left <op> right`: AND, OR, or a comparison (=, <>, <, <=, >, >=)."""

    op: str
    left: FilterNode
    right: FilterNode


@dataclass(frozen=True, slots=True)
class Unary:
    """`NOT operand`, or `operand IS NULL` / `operand IS NOT NULL` (op is the SQL text)."""

    op: str
    operand: FilterNode


@dataclass(frozen=True, slots=True)
class InList:
    """`operand IN (values...)`."""

    operand: FilterNode
    values: tuple[FilterNode, ...]


@dataclass(frozen=True, slots=True)
class Unknown:
    """Any node kind not mirrored above (function calls, LIKE, ...)."""


FilterNode = Column | Constant | Binary | Unary | InList | Unknown
# A translation of a filter node, None when it cannot be used (the source then declines the filter).
Translate = Callable[[FilterNode], Any]


def filter_node(node: Any) -> FilterNode:
    """The private predicate node DuckDB offers a scan, as a `FilterNode` tree."""
    nodes = _sources.nodes
    if isinstance(node, nodes.Col):
        return Column(tuple(node.parts))
    if isinstance(node, nodes.Lit):
        return Constant(node.value)
    if isinstance(node, nodes.Binary):
        return Binary(node.op, filter_node(node.left), filter_node(node.right))
    if isinstance(node, nodes.Unary | nodes.Postfix):
        return Unary(node.op, filter_node(node.operand))
    if isinstance(node, nodes.In):
        return InList(filter_node(node.operand), tuple(filter_node(v) for v in node.values))
    return Unknown()


class _CaptureSource(_sources.ArrowScanSource):
    """Accepts every predicate it can translate and records it; yields no rows."""

    schema_is_stable = True

    def __init__(self, schema: pa.Schema, translate: Translate) -> None:
        super().__init__(None)
        self._schema = schema
        self._translate: Translate | None = translate
        self.captured: list[Any] = []

    def begin(self, translate: Translate | None) -> list[Any]:
        """Start recording for a new query through `translate` (None: record nothing more);
        returns what was recorded since the last start."""
        captured, self.captured = self.captured, []
        self._translate = translate
        return captured

    def __arrow_c_schema__(self) -> object:
        return self._schema.__arrow_c_schema__()

    def rows(self) -> int | None:
        return 1_000_000

    def accepts(self, predicate: Any) -> bool:
        if self._translate is None:
            return False
        converted = self._translate(filter_node(predicate))
        if converted is None:
            return False
        self.captured.append(converted)
        return True

    def stream(self, columns: Sequence[int] | None, filters: Sequence[Any]) -> tuple[object, bool]:
        return self._schema.empty_table().__arrow_c_stream__(), False


# Process-wide on purpose: a private connection that binds filter texts against a schema in a
# time zone, and its readings, which depend on nothing but (text, schema, zone): no user state.
_SCRATCH: duckdb.DuckDBPyConnection | None = None
_CAPTURED: dict[tuple[str, str, str, Translate], tuple[list[Any], bool]] = {}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SCRATCH_LOCK = threading.Lock()
# What the scratch connection is set to: its session "zone", and the capture "source" registered
# on it with the "schema" text it offers.
_SCRATCH_STATE: dict[str, Any] = {}


def clear_filter_cache() -> None:
    """Forget DuckDB's readings of filter texts."""
    _CAPTURED.clear()


def is_cacheable_filter(where: str) -> bool:
    """False when a word of the filter text names a function whose value may differ at the next scan
    (`now()`, `current_date`, `random()`: DuckDB's catalog says which, `iceduck.duckdb.builtins`)."""
    return not any(varies(word) for word in _WORD.findall(where))


def capture_filter(
    schema: pa.Schema, where: str, translate: Translate, *, timezone: str | None = None
) -> list[Any]:
    """The predicates DuckDB pushes into a scan of `schema` for `WHERE <where>`, each through
    `translate` (those it maps to None are left out).

    DuckDB parses and binds the text (casts, constant folding, BETWEEN, IN lists) on a private
    connection set to the caller's time zone, so literals mean what they mean in the caller's query.
    The conjuncts DuckDB would not push (or that cannot be translated) are left out: the result is
    implied by the filter, which is what pruning needs. Errors in the text raise duckdb.Error.
    """
    return _captured(schema, where, translate, timezone)[0]


def capture_exact_filter(
    schema: pa.Schema, where: str, translate: Translate, *, timezone: str | None = None
) -> list[Any] | None:
    """What `capture_filter` returns, when it is the whole filter: DuckDB pushed every part of it
    into the scan and the scan accepted every part (its plan keeps no Filter above the scan);
    None when some part stays with DuckDB (a function call, an OR across columns)."""
    captured, exact = _captured(schema, where, translate, timezone)
    return captured if exact else None


def _captured(
    schema: pa.Schema, where: str, translate: Translate, timezone: str | None
) -> tuple[list[Any], bool]:
    """(the predicates the scan accepted, whether they are the whole filter), from one EXPLAIN of
    the filter over the capture source (planning pushes the filters; nothing runs), kept per text
    unless the text names a function whose value varies."""
    zone = timezone or "UTC"
    key = (schema.to_string(), where, zone, translate)
    cacheable = is_cacheable_filter(where)
    if cacheable and key in _CAPTURED:
        captured, exact = _CAPTURED[key]
        return list(captured), exact
    captured, plan = _capture(
        schema, f"EXPLAIN SELECT 1 FROM __iceduck_capture WHERE ({where})", translate, zone
    )
    text = "\n".join(str(cell) for row in plan for cell in row)
    exact = re.search(r"\bFilter\b|\bFILTER\b", text) is None
    if cacheable:
        if len(_CAPTURED) > 1024:
            _CAPTURED.clear()
        _CAPTURED[key] = (list(captured), exact)
    return captured, exact


def _capture(schema: pa.Schema, sql: str, translate: Translate, zone: str) -> tuple[list[Any], list[Any]]:
    """Run `sql` over the capture source on the scratch connection: (what the source accepted, rows)."""
    global _SCRATCH
    schema_text = schema.to_string()
    with _SCRATCH_LOCK:
        if _SCRATCH is None:
            _SCRATCH = duckdb.connect()
            _SCRATCH_STATE.clear()
        con = _SCRATCH
        # The zone and the source stay set between calls (each a statement or catalog change on
        # the scratch connection, ~1 ms of a cold 1,000-file plan): set again only when they differ.
        if _SCRATCH_STATE.get("zone") != zone:
            _SCRATCH_STATE.pop("zone", None)
            con.execute(f"SET TimeZone = '{zone.replace(chr(39), chr(39) * 2)}'")
            _SCRATCH_STATE["zone"] = zone
        source = _SCRATCH_STATE.get("source")
        if not isinstance(source, _CaptureSource) or _SCRATCH_STATE.get("schema") != schema_text:
            if source is not None:
                _SCRATCH_STATE.pop("source")
                con.unregister("__iceduck_capture")
            source = _CaptureSource(schema, translate)
            con._register_arrow_source("__iceduck_capture", source)
            _SCRATCH_STATE.update(source=source, schema=schema_text)
        source.begin(translate)
        try:
            rows = con.execute(sql).fetchall()
        finally:
            captured = source.begin(None)
    return captured, rows


# ---------------------------------------------------------------------------------------------
# The connection's catalog version
# ---------------------------------------------------------------------------------------------

PRIVATE_HOOKS += ("DuckDBPyConnection._catalog_version",)


def catalog_version(con: duckdb.DuckDBPyConnection) -> int:
    """A counter of the statements that may change what a name binds to or how a statement plans
    (DDL, SET, ATTACH, INSERT, EXPLAIN, registering an object, ...) run on `con`'s database,
    cursors included; a plain SELECT leaves it. Python UDFs (create_function) do not move it."""
    return int(con._catalog_version())


PRIVATE_HOOKS += (
    "duckdb._relation._reading_source",
    "duckdb._relation._markers",
    "duckdb._relation._encodable",
    "duckdb._relation._strip_semicolons",
)


def lazy_select(
    con: duckdb.DuckDBPyConnection, text: str, binding: Callable[[], AbstractContextManager[Any]]
) -> duckdb.DuckDBPyRelation | None:
    """The lazy relation `con.sql(text)` makes for `text`, one statement without parameters,
    its one bind at the call (which only learns the relation's columns) run inside `binding()`;
    None when `con.sql` would not make a lazy relation of it (not a query, a bind DuckDB defers, a
    statement that writes, parameter markers) or the bind fails, having run nothing: the caller
    then runs `con.sql(text)`, which reports what is wrong. Every read of the relation binds and
    runs `text` outside `binding()`, as `con.sql`'s relation does."""
    text = _relation._strip_semicolons(_relation._encodable(text))
    if _relation._markers(text):
        return None
    with binding():
        try:
            return _relation._reading_source(con, text, (), None, "")
        except duckdb.Error:
            return None


PRIVATE_HOOKS += (
    "duckdb._relation.DuckDBPyRelation._make",
    "duckdb._relation.DuckDBPyRelation._schema",
    "duckdb._relation.DuckDBPyRelation._version",
    "duckdb._relation.DuckDBPyRelation._handles",
    "duckdb._relation.DuckDBPyRelation._captured",
    "duckdb._relation.Sql",
    "duckdb._relation._unnamed",
)

# What a relation's bind learnt of its columns (DuckDB's names and types), kept opaque.
Signature = Any


def relation_signature(relation: duckdb.DuckDBPyRelation) -> Signature | None:
    """The columns the bind making `relation` (a `lazy_select` relation) learnt, for making the
    relation of the same text again without that bind (`relation_for`); None when its text reads
    Python objects by name (DuckDB holds them for the relation: each relation takes its own)."""
    if relation._handles or relation._captured:
        return None
    return relation._schema


def relation_for(con: duckdb.DuckDBPyConnection, text: str, signature: Signature) -> duckdb.DuckDBPyRelation:
    """The lazy relation `lazy_select` makes of `text`, made without binding anything: for a text
    whose bind gave `signature` before. Nothing of the signature is trusted: the first question
    about the relation's columns (`columns`, `types`, a relation built on it) binds `text` anew,
    and every read binds and runs it, as the relation `lazy_select` makes does."""
    text = _relation._strip_semicolons(_relation._encodable(text))
    relation = _relation.DuckDBPyRelation._make(
        con, _relation.Sql(text, ()), alias=_relation._unnamed(), schema=signature
    )
    # no catalog version is negative: DuckDB asks the columns again at the first question
    relation._version = -1
    return relation


def retype_relation(relation: duckdb.DuckDBPyRelation, cls: type[duckdb.DuckDBPyRelation]) -> None:
    """Make `relation` (the object DuckDB returned, its state untouched) an instance of `cls`, a
    slot-less Python subclass of DuckDBPyRelation: DuckDB's binding permits the `__class__` switch,
    and a subclass cannot be constructed around an existing relation any other way."""
    relation.__class__ = cls


# ---------------------------------------------------------------------------------------------
# Capture slots: what DuckDB's optimizer pushes into each table reference of a statement
# ---------------------------------------------------------------------------------------------


def _unclaimed() -> pa.Schema:
    """The schema of a slot not claimed by a reference (a registered source needs a column)."""
    return pa.schema([("__unclaimed", pa.int32())])


class _CaptureSlot(_CaptureSource):
    """A capture source whose schema is set just before DuckDB binds it (a slot of a pool reused
    across statements); it is only planned, under EXPLAIN."""

    schema_is_stable = False

    def __init__(self, translate: Translate) -> None:
        super().__init__(_unclaimed(), translate)

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    @schema.setter
    def schema(self, value: pa.Schema) -> None:
        self._schema = value


class CaptureSlots:
    """A fixed pool of capture sources registered on one connection (`__iceduck_capture_<i>`).

    While a statement is planned under EXPLAIN, each table reference that should be observed
    claims a slot (`claim(schema)` gives the name to read from); afterwards `captured(i)` holds the
    predicates DuckDB's optimizer pushed into that reference, i.e. those that must hold for every
    row of it that can reach the statement's result.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, size: int, translate: Translate) -> None:
        self._slots = [_CaptureSlot(translate) for _ in range(size)]
        self._used = 0
        for i, slot in enumerate(self._slots):
            con._register_arrow_source(self.name(i), slot)

    @staticmethod
    def name(i: int) -> str:
        return f"__iceduck_capture_{i}"

    def reset(self) -> None:
        for slot in self._slots[: self._used]:
            slot.captured = []
            slot.schema = _unclaimed()
        self._used = 0

    def claim(self, schema: pa.Schema) -> int | None:
        """The next free slot, reading `schema`; None when the pool is used up."""
        if self._used >= len(self._slots):
            return None
        i = self._used
        self._used += 1
        self._slots[i].schema = schema
        self._slots[i].captured = []
        return i

    def captured(self, i: int) -> list[Any]:
        return list(self._slots[i].captured)
