"""Reading Iceberg tables from SQL: `iceberg_scan`, `iceberg_scan_plan`, `iceberg_changes`, catalog views.

`iceberg_scan(t, ...)` is a table macro over `query(__iceduck_scan_sql(...))`: a Python scalar UDF,
evaluated once when DuckDB binds the statement, plans the scan (metadata, pruning, delete matching)
and returns SQL text over native `read_parquet` (see `iceduck.read.sql`). DuckDB then runs that SQL
itself: projection and outer WHERE filters reach the Parquet reader, and no row passes through
Python. Deleted positions come from two keyed Arrow sources registered on the connection, which
decode deletion vectors and position-delete files when DuckDB reads them.

Pruning needs the filter before the UDF runs. `filter := 'SQL'` gives it as text: DuckDB parses
and binds it against the table's columns on a private connection in the caller's time zone
(`hooks.capture_filter`); the predicates it would push into a scan drive manifest, partition and
column-bound pruning, and the text itself is applied to the rows exactly. A natural WHERE reaches
the planner through the front door (`capture_statement`, used by `Lake.sql`): the statement is
planned once under EXPLAIN with each reference reading a capture slot, and the references are
rewritten to twin macros carrying a token under which DuckDB's pushed predicates are kept.

`attach_catalog_views(con, catalog)` exposes every table of a catalog as `lake.<ns>.<table>`: a view
over `query()` of the native SQL a UDF plans at each bind (the latest commit), like `iceberg_scan`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import inspect
import json
import sys
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import duckdb

from iceduck._lazy import LazyModule
from iceduck.catalog.base import change_token
from iceduck.duckdb import hooks
from iceduck.duckdb.context import (
    EXTENSION_SNAPSHOT_PARAMS,
    SNAPSHOT_PARAMS,
    TABLE,
    VERSION,
    Context,
    snapshot_choice,
)
from iceduck.duckdb.filter_check import check_filter
from iceduck.duckdb.functions import (
    USER_ERRORS,
    Args,
    Param,
    TableFunction,
    create_sql_udf,
    datetime_from_epoch_us,
    epoch_us_sql,
    error_sql,
    no_columns,
    one_line,
    user_message,
    whole_number,
)
from iceduck.duckdb.pushdown import predicate_from_filter
from iceduck.errors import IcebergError, ValidationError
from iceduck.expr import TRUE, AlwaysTrue, Predicate, and_, or_
from iceduck.expr.binding import rewrite_not
from iceduck.expr.expressions import PREFIX, Comparison, Reference, SetPredicate, Unary
from iceduck.expr.visitors import map_leaves
from iceduck.io.fileio import FileIO
from iceduck.io.storage import default_io
from iceduck.read import deletes as read_deletes
from iceduck.read.sql import (
    BITS_SOURCE,
    KEY_COLUMN,
    MASK_SOURCE,
    POSITIONS_SOURCE,
    ReadOptions,
    clear_footer_caches,
    empty_sql,
    output_columns,
    scan_sql,
    scan_sql_reused,
)
from iceduck.read.types import arrow_type
from iceduck.scan import ScanPlan, plan_scan, plan_since, scan_schema
from iceduck.spec.snapshots import Snapshot
from iceduck.spec.transforms import Operation
from iceduck.spec.types import UUID, Schema
from iceduck.table import Table
from iceduck.vocabulary import SOURCE_ERROR_COLUMN, quote_ident, quote_str

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = LazyModule("pyarrow")

FILTER = Param(
    "filter",
    doc="a SQL predicate on the table's columns and constants (built-in scalar functions; no subqueries, "
    "table, volatile or user functions): prunes files and filters rows",
)
# A macro parameter's default is not evaluated in the caller's session (current_setting('TimeZone')
# there gives the default zone), so the session's zone is read in the macro body.
TIMEZONE = Param("timezone", doc="time zone for filter literals (default: the session's)")
_SESSION_ZONE = "current_setting('TimeZone')"
TOKEN_ARGUMENT = "__token"
# Whether DuckDB's logger is on, read in the macro body like the zone: a scan then writes what it
# skipped to `duckdb_logs()` as DuckDB's iceberg extension does (type 'Iceberg', see `logged_sql`).
# Only whether it is on at all: `write_log` keeps or drops a line by the logger's level, mode and
# types itself, and the one setting binds in a fraction of what testing all five does (each bind).
LOGGING_ARGUMENT = "__logging"
LOG_TYPE = "Iceberg"
_SESSION_LOGGING = "CAST(current_setting('enable_logging') AS BOOLEAN)"
SCAN_PARAMS = (
    TABLE,
    *SNAPSHOT_PARAMS,
    FILTER,
    Param("row_lineage", "BOOLEAN", "false", "add _row_id and _last_updated_sequence_number"),
    Param("metadata_columns", "BOOLEAN", "false", "add _file and _pos"),
    Param("allow_bare_deletion_vectors", "BOOLEAN", "false", "read legacy DV files without Puffin framing"),
    Param("prune", "BOOLEAN", "true", "false: read every file (results are the same)"),
    Param(
        "delete_mode", default="'bitmap'", doc="how position deletes are applied: bitmap, positional or anti"
    ),
    VERSION,
    Param(
        "version_name_format", doc="metadata file name patterns of a table folder (v%s%s.metadata.json,...)"
    ),
    Param("metadata_compression_codec", doc="'gzip' for a folder of gzip metadata files"),
    *EXTENSION_SNAPSHOT_PARAMS,
)


@dataclasses.dataclass(frozen=True, slots=True)
class QueryMacro:
    """A table macro over `query(<udf>(...))` whose Python UDF returns the SQL to run.

    The parameters are declared once; the macro's signature, the arguments it passes (each cast to
    what the UDF takes: BIGINT refusing fractions, TIMESTAMPTZ as epoch microseconds), the UDF's
    DuckDB types and the decoding back to Python values all derive from them. With `session_zone`
    the UDF also gets the caller's TimeZone setting as an argument named `timezone`, and whether
    logging is on (`__logging`).
    """

    name: str
    udf: str
    params: tuple[Param, ...]
    session_zone: bool = False
    # The name of a twin macro taking a front-door token first (`Lake.sql` rewrites calls to it):
    # the UDF then gets the token as a last argument named `__token` (NULL from the public macro).
    pruned: str | None = None

    @property
    def udf_names(self) -> list[str]:
        names = [p.name for p in self.params] + (["timezone", LOGGING_ARGUMENT] if self.session_zone else [])
        return names + ([TOKEN_ARGUMENT] if self.pruned else [])

    @property
    def udf_types(self) -> list[str]:
        types = ["BIGINT" if p.sql_type == "TIMESTAMPTZ" else p.sql_type for p in self.params]
        zone = ["VARCHAR", "BOOLEAN"] if self.session_zone else []
        return types + zone + (["VARCHAR"] if self.pruned else [])

    def _argument(self, p: Param) -> str:
        ref = quote_ident(p.name)
        if p.sql_type == "TIMESTAMPTZ":
            return epoch_us_sql(ref)
        if p.sql_type == "BIGINT":
            return whole_number(self.name, p.name, ref)
        return f"CAST({ref} AS {p.sql_type})"

    def _call(self, token: str | None) -> str:
        args = [self._argument(p) for p in self.params]
        args += [_SESSION_ZONE, _SESSION_LOGGING] if self.session_zone else []
        if self.pruned:
            args.append("NULL" if token is None else token)
        return f"FROM query({self.udf}({', '.join(args)}))"

    def macro_sql(self) -> str:
        """The CREATE MACRO statement."""
        return (
            f"CREATE OR REPLACE TEMP MACRO {self.name}({_signature(self.params)}) AS TABLE {self._call(None)}"
        )

    def pruned_macro_sql(self) -> str:
        """The CREATE MACRO statement of the twin taking a front-door token first."""
        assert self.pruned is not None
        token = quote_ident(TOKEN_ARGUMENT)
        return (
            f"CREATE OR REPLACE TEMP MACRO {self.pruned}({token}, {_signature(self.params)}) AS TABLE "
            f"{self._call(f'CAST({token} AS VARCHAR)')}"
        )

    def python_udf(self, run: Callable[[dict[str, Any]], str]) -> Callable[..., str]:
        """A UDF (positional arguments in `udf_names` order) calling `run` with the decoded arguments
        by name (DuckDB reads the number of arguments from its signature). A NULL table and the
        errors users cause come back as a query failing with one line."""
        names = self.udf_names
        zoned = {p.name for p in self.params if p.sql_type == "TIMESTAMPTZ"}

        def call(*values: Any) -> str:
            args = dict(zip(names, values, strict=True))
            for name in zoned:
                args[name] = _as_of(args[name])
            if args["tbl"] is None:
                return error_sql(f"{self.name}: the table argument is required (got NULL)")
            return _sql_or_error(self.name, lambda: run(args))

        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        call.__signature__ = inspect.Signature([inspect.Parameter(n, kind) for n in names])  # type: ignore[attr-defined]
        return call

    def install_udf(self, con: duckdb.DuckDBPyConnection, run: Callable[[dict[str, Any]], str]) -> None:
        """(Re)register the UDF on the connection."""
        create_sql_udf(con, self.udf, self.python_udf(run), self.udf_types)


SCAN = QueryMacro(
    "iceberg_scan", "__iceduck_scan_sql", SCAN_PARAMS, session_zone=True, pruned="__iceduck_scan_pruned"
)


# ---------------------------------------------------------------------------------------------
# Planning from arguments
# ---------------------------------------------------------------------------------------------


def _snapshot(
    table: Table, snapshot_id: int | None, as_of: Any, ref: str | None
) -> tuple[Snapshot | None, Schema]:
    snapshot = table.snapshot(snapshot_id=snapshot_id, as_of=as_of, ref=ref)
    branch = ref is not None and (r := table.metadata.refs.get(ref)) is not None and r.is_branch
    travel = snapshot_id is not None or as_of is not None or (ref is not None and not branch)
    return snapshot, scan_schema(table, snapshot, time_travel=travel)


def capture_schema(schema: Schema, options: ReadOptions) -> pa.Schema:
    """The Arrow schema of a scan's output, for binding filter text the way DuckDB will.

    UUID columns are offered as VARCHAR: DuckDB pushes no filter at all into an Arrow UUID column,
    while `uuid = '<text>'` binds to the same comparison on text; `_only_columns` keeps only what
    means the same on either type."""
    fields = [pa.field(f.name, pa.string() if f.type == UUID else arrow_type(f.type)) for f in schema.fields]
    extra = {
        "_file": pa.string(),
        "_pos": pa.int64(),
        "_row_id": pa.int64(),
        "_last_updated_sequence_number": pa.int64(),
    }
    names = {n for n, _ in output_columns(schema, options)}
    fields += [pa.field(n, t) for n, t in extra.items() if n in names]
    return pa.schema(fields)


def parse_filter(
    text: str, schema: Schema, *, timezone: str | None = None, options: ReadOptions | None = None
) -> Predicate:
    """The pruning predicate (unbound) DuckDB derives from a SQL filter on a table's columns.

    Only conjuncts DuckDB would push into a scan survive; leaves on metadata columns become TRUE
    (after NOTs are pushed down, so the result is still implied by the filter).
    """
    options = options or ReadOptions()
    try:
        captured = hooks.capture_filter(
            capture_schema(schema, options), text, predicate_from_filter, timezone=timezone
        )
    except duckdb.Error as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        columns = ", ".join(f.name for f in schema.fields)
        raise ValidationError(f"invalid filter {text!r}: {first} (columns: {columns})") from None
    return _only_columns(and_(*captured), _columns_of(schema)) if captured else TRUE


def exact_filter(text: str, schema: Schema, *, timezone: str | None = None) -> Predicate | None:
    """The predicate (unbound) that is exactly the SQL filter on the table's columns: a row matches
    the filter if and only if it matches the predicate; None when DuckDB keeps some part of the
    filter to itself or a part is about other than the table's own columns (see `parse_filter`)."""
    try:
        captured = hooks.capture_exact_filter(
            capture_schema(schema, ReadOptions()), text, predicate_from_filter, timezone=timezone
        )
    except duckdb.Error:
        return None
    if not captured:
        return None
    whole = rewrite_not(and_(*captured))
    return whole if _only_columns(whole, _columns_of(schema)) == whole else None


def plan_for(
    table: Table,
    *,
    snapshot_id: int | None = None,
    as_of: Any = None,
    ref: str | None = None,
    filter_text: str | None = None,
    timezone: str | None = None,
    options: ReadOptions | None = None,
    prune: bool = True,
    report_all: bool = False,
    extra: Predicate | None = None,
    report_skipped: bool = False,
) -> ScanPlan:
    """Pick the snapshot and plan a scan of the table with an optional filter text (the table as
    the function's arguments name it: `Context.table`).

    `extra` is a further pruning predicate (unbound, implied by the query: what DuckDB pushed into
    this reference, see `capture_statement`); it prunes but is not applied to rows."""
    if filter_text:
        check_filter(filter_text)  # columns and constants only, whether or not it prunes
    snapshot, schema = _snapshot(table, snapshot_id, as_of, ref)
    predicate = None
    if filter_text and prune:
        predicate = parse_filter(filter_text, schema, timezone=timezone, options=options)
    if extra is not None and prune:
        predicate = extra if predicate is None else and_(predicate, extra)
    return plan_scan(
        table,
        snapshot,
        predicate,
        schema=schema,
        prune=prune,
        report_all=report_all,
        report_skipped=report_skipped,
    )


# SQL of recent scans: metadata files, manifests, data and delete files never change once written,
# so the same arguments on the same metadata file give the same SQL.
_SQL_CACHE: OrderedDict[tuple[Any, ...], tuple[str, str]] = OrderedDict()  # (SQL, described SQL)
_SQL_CACHE_LOCK = threading.Lock()


def clear_scan_caches() -> None:
    """Forget everything scans cache: SQL of recent scans, filter readings, DV bit strings, what was
    read from data file footers, and the parsed metadata files, manifest lists and manifests
    (`iceduck.table.clear_caches`): a "cold" run then costs what a fresh process pays."""
    from iceduck.table import clear_caches

    with _SQL_CACHE_LOCK:
        _SQL_CACHE.clear()
    hooks.clear_filter_cache()
    read_deletes.clear_caches()
    clear_footer_caches()
    clear_caches()


def scan_sql_for(
    table: Table,
    *,
    snapshot_id: int | None = None,
    as_of: Any = None,
    ref: str | None = None,
    filter_text: str | None = None,
    row_lineage: bool = False,
    metadata_columns: bool = False,
    allow_bare: bool = False,
    prune: bool = True,
    delete_mode: str = "bitmap",
    timezone: str | None = None,
    extra: tuple[Predicate, Schema] | None = None,
    log: bool = False,
    describe: bool = False,
) -> str:
    """The SQL `iceberg_scan` runs for these arguments (`extra`: a pruning predicate implied by the
    query, see `plan_for`, with the table schema it holds for: it is dropped when the scan reads
    another schema; `log`: the SQL also logs what was skipped). With `describe` the scan is planned
    all the same (its errors are raised) and the SQL returned only has its columns (see
    `describing`)."""
    options = ReadOptions(
        row_lineage=row_lineage,
        metadata_columns=metadata_columns,
        filter_sql=filter_text or None,
        deletes=delete_mode,
        allow_bare_dvs=allow_bare,
    )
    pruning = None
    if extra is not None:
        predicate, captured_with = extra
        _, schema = _snapshot(table, snapshot_id, as_of, ref)
        pruning = predicate if schema == captured_with else None
    key: tuple[Any, ...] | None = None
    st = table.io.stamp(table.metadata_location)
    if st is not None:
        key = (table.metadata_location, st[0], st[1], snapshot_id, as_of, ref)
        key += (filter_text, options, prune, timezone, repr(pruning), log)
    cached: tuple[str, str] | None = None
    if key is not None:
        with _SQL_CACHE_LOCK:
            if key in _SQL_CACHE:
                _SQL_CACHE.move_to_end(key)
                cached = _SQL_CACHE[key]
        if cached is not None:
            scan_sql_reused(cached[0])  # its files are what this statement reads (duckdb/damage.py)
            return cached[1] if describe else cached[0]
    plan = plan_for(
        table,
        snapshot_id=snapshot_id,
        as_of=as_of,
        ref=ref,
        filter_text=filter_text,
        timezone=timezone,
        options=options,
        prune=prune,
        extra=pruning,
        report_skipped=log,
    )
    sql = logged_sql(scan_sql(plan, options), skip_messages(plan)) if log else scan_sql(plan, options)
    described = empty_sql(output_columns(plan.schema, options))  # what a scan with no files returns
    if key is not None and (filter_text is None or hooks.is_cacheable_filter(filter_text)):
        with _SQL_CACHE_LOCK:
            _SQL_CACHE[key] = (sql, described)
            while len(_SQL_CACHE) > 256:
                _SQL_CACHE.popitem(last=False)
    return described if describe else sql


# A relation Lake.sql makes binds its statement once to learn its columns, and again (with the
# scans' real SQL) each time it is read. For that first bind the scans and catalog views return
# only their columns' types: DuckDB then binds no read_parquet call (~1 ms for 40 files). The
# thread is the one binding (DuckDB calls a UDF it folds at bind time on it), the connection the
# one whose functions are called.
class _ThreadFlag:
    """Which connection the calling thread is in the middle of one kind of bind on (see `describing`
    and `attach_catalog_views`): the UDFs DuckDB calls back on that thread read it."""

    def __init__(self) -> None:
        self._local = threading.local()

    @contextlib.contextmanager
    def on(self, con: duckdb.DuckDBPyConnection) -> Iterator[None]:
        before = getattr(self._local, "con_id", None)
        self._local.con_id = id(con)
        try:
            yield
        finally:
            self._local.con_id = before

    def __call__(self, con_id: int) -> bool:
        return getattr(self._local, "con_id", None) == con_id


_described = _ThreadFlag()  # binding a statement only to learn its columns
_creating_views = _ThreadFlag()  # DuckDB binding the catalog views it is creating


def describing(con: duckdb.DuckDBPyConnection) -> contextlib.AbstractContextManager[None]:
    """While the calling thread binds a statement on `con` only to learn its columns (a lazy
    relation being made, never run: `hooks.lazy_select`), its scans and catalog views plan as
    always (their errors are raised) but return SQL with their columns and no rows."""
    return _described.on(con)


def skip_messages(plan: ScanPlan) -> list[str]:
    """What a scan logs: one line per manifest and data file pruning skipped, worded like DuckDB's
    iceberg extension (`'data_file': '<path>'`, so the path is the second `': '`-separated part)."""
    out = [
        f"Iceberg Filter Pushdown, skipped 'manifest_file': '{path}', {why}"
        for path, why in plan.skipped_manifests
    ]
    for s in plan.skipped:
        where = "partition " if s.level == "partition" else ""
        out.append(f"Iceberg Filter Pushdown, skipped 'data_file': '{s.file.file_path}', {where}{s.reason}")
    return out


def logged_sql(sql: str, messages: Sequence[str]) -> str:
    """`sql` that also writes `messages` to DuckDB's log (type 'Iceberg') when it runs.

    Written when the statement executes, not when it binds: a Python relation binds once when it
    is made and again each time it is read, and the log should say what each run skipped."""
    if not messages:
        return sql
    values = ", ".join(f"({quote_str(m)})" for m in messages)
    write = f"write_log(__m, log_type := {quote_str(LOG_TYPE)}, level := 'info')"
    return f"SELECT * FROM ({sql}) WHERE (SELECT count({write}) FROM (VALUES {values}) AS __log(__m)) >= 0"


def _as_of(micros: int | None) -> dt.datetime | None:
    return None if micros is None else datetime_from_epoch_us(micros)


# ---------------------------------------------------------------------------------------------
# The front door: pruning by what DuckDB pushes into each reference (Lake.sql and the shell)
# ---------------------------------------------------------------------------------------------
#
# A natural `WHERE` reaches a scan only after the scan's SQL was chosen (the UDF runs when DuckDB
# binds the call). So a statement coming through `Lake.sql` is first planned under EXPLAIN with
# every `iceberg_scan` call and `lake.<ns>.<t>` view reading a capture slot instead
# (`hooks.CaptureSlots`): DuckDB's optimizer pushes into each slot exactly the predicates that hold
# for every row of that reference reaching the result (through joins, subqueries, CTEs and
# prepared parameters, and not where pushing would be wrong, e.g. the right side of a LEFT JOIN's
# WHERE). The predicates of all references with the same arguments are OR-ed (each reference still
# applies its own filter, so reading the union is correct) and stored under a fresh token; the
# router then rewrites the references in the statement's text to the twin macros carrying the
# token, so the real run, and every later re-run of the same relation, prunes with them.

CAPTURE_SLOTS = 32
VIEW_SQL_UDF = "__iceduck_view_sql"
VIEW_PRUNED_MACRO = "__iceduck_view_pruned"
# Statements whose tokens are kept (a relation re-binds its text each time it is read).
_KEPT_TOKENS = 256
Key = tuple[Any, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class StatementPruning:
    """The pruning predicates of one statement's references, by reference arguments, and the
    session time zone they were read in (a reference bound in another zone gets none), and the
    table schema each reference was planned with (a reference bound to another schema, after a
    commit changed it, gets none). `calls`: the decoded arguments of the `iceberg_scan` calls the
    front door marked (`scan_call`), by marker."""

    zone: str | None
    predicates: dict[Key, Predicate]
    schemas: dict[Key, Schema]
    calls: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(slots=True)
class _Capturing:
    con_id: int
    slots: hooks.CaptureSlots
    calls: list[tuple[Key, int, Schema]] = dataclasses.field(default_factory=list)
    overflow: bool = False
    marked: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


_CAPTURING: _Capturing | None = None
_CAPTURE_LOCK = threading.Lock()
_PRUNINGS: OrderedDict[str, StatementPruning] = OrderedDict()
_PRUNINGS_LOCK = threading.Lock()


def capture_slots(con: duckdb.DuckDBPyConnection) -> hooks.CaptureSlots:
    """The capture sources a front door plans statements with, registered on `con`."""
    return hooks.CaptureSlots(con, CAPTURE_SLOTS, predicate_from_filter)


@dataclasses.dataclass(frozen=True, slots=True)
class _Columns:
    """A table's own top-level column names, and which of them are UUIDs (captured as text)."""

    names: frozenset[str]
    uuids: frozenset[str]


def _columns_of(schema: Schema) -> _Columns:
    return _Columns(
        frozenset(f.name for f in schema.fields), frozenset(f.name for f in schema.fields if f.type == UUID)
    )


def _capture_slot(con_id: int, key: Key, schema: Schema, options: ReadOptions) -> str | None:
    """While `con_id` plans a statement for the front door: the capture slot this reference
    (reading a table of `schema`) reads."""
    state = _CAPTURING
    if state is None or state.con_id != con_id:
        return None
    i = state.slots.claim(capture_schema(schema, options))
    if i is None:
        state.overflow = True
        return None
    state.calls.append((key, i, schema))
    return f"SELECT * FROM {quote_ident(state.slots.name(i))}"


def _only_columns(p: Predicate, top: _Columns) -> Predicate:
    """`p` with leaves on other columns than the table's own (metadata columns) made TRUE, and
    leaves on UUID columns kept only where text and UUID semantics agree; NOTs are pushed down
    first, so the result is still implied by `p`."""

    def keep(leaf: Unary | Comparison | SetPredicate) -> Predicate:
        term = leaf.term
        if not isinstance(term, Reference):
            return leaf
        if term.path[0] not in top.names:
            return TRUE
        if term.path[0] in top.uuids and not _same_as_uuid(leaf):
            return TRUE
        return leaf

    return map_leaves(rewrite_not(p), keep)


def _same_as_uuid(leaf: Unary | Comparison | SetPredicate) -> bool:
    """Whether a leaf DuckDB bound on a UUID column offered as text holds as a UUID predicate.

    The text may have been a UUID literal (`uuid = '1571EFFB-...'`, cast to UUID) or a comparison
    of the column's text (`uuid::VARCHAR < '...'`): equality and IN imply UUID equality either way
    (the column's text is canonical); order and inequality agree only for canonical literals
    (lowercase, hyphenated), whose text order is the UUIDs' byte order."""
    if isinstance(leaf, Unary):
        return True
    values = [leaf.value] if isinstance(leaf, Comparison) else list(leaf.values)
    try:
        parsed = [uuid.UUID(v) for v in values if isinstance(v, str)]
    except ValueError:
        return False
    if len(parsed) != len(values):
        return False
    if leaf.op in (Operation.EQ, Operation.IN):
        return True
    if leaf.op in PREFIX:
        return False
    return all(str(u) == v for u, v in zip(parsed, values, strict=True))


def capture_statement(
    con: duckdb.DuckDBPyConnection,
    slots: hooks.CaptureSlots,
    sql: str,
    params: Any = None,
    *,
    zone: str | None = None,
    same_as: str | None = None,
    query_at: int = 0,
) -> tuple[str, frozenset[Key]] | None:
    """Plan `EXPLAIN <sql>` with every scan reference reading a capture slot; store what DuckDB pushed
    into each under a new token. Returns (token, the references' keys), or None when the statement
    cannot be planned so (DuckDB reports its errors when it runs) or no reference gets a predicate.
    `zone`: the session's TimeZone setting when the caller knows it (else it is read); `same_as`:
    the statement `sql` was derived from (views inlined), which must bind, to the same columns and
    types, else None; `query_at`: where the query starts in both texts (the SELECT of an INSERT or
    CREATE TABLE AS: only a query can be DESCRIBEd; the heads before it are the same)."""
    global _CAPTURING
    with _CAPTURE_LOCK:
        slots.reset()
        state = _Capturing(id(con), slots)
        _CAPTURING = state
        try:
            if same_as is not None:
                described = [
                    con.execute(f"DESCRIBE {q[query_at:]}", params).fetchall() for q in (same_as, sql)
                ]
                if [r[:2] for r in described[0]] != [r[:2] for r in described[1]] or state.overflow:
                    return None
                slots.reset()
                state.calls.clear()
                state.marked.clear()
            con.execute(f"EXPLAIN {sql}", params).fetchall()
        except duckdb.Error:
            return None
        finally:
            _CAPTURING = None
            calls = [(key, slots.captured(i), schema) for key, i, schema in state.calls]
            slots.reset()
    if state.overflow or not calls:
        return None
    predicates: dict[Key, Predicate] = {}
    schemas: dict[Key, Schema] = {}
    for key, captured, schema in calls:
        p = _only_columns(and_(*captured), _columns_of(schema)) if captured else TRUE
        predicates[key] = or_(predicates[key], p) if key in predicates else p
        if schemas.setdefault(key, schema) != schema:
            return None  # one reference, two schemas: a commit landed while planning
    if all(isinstance(p, AlwaysTrue) for p in predicates.values()):
        return None  # nothing to prune with: the statement runs as written
    if zone is None:
        rows = con.execute("SELECT current_setting('TimeZone')").fetchall()
        zone = str(rows[0][0]) if rows else None
    token = uuid.uuid4().hex
    with _PRUNINGS_LOCK:
        _PRUNINGS[token] = StatementPruning(zone, predicates, schemas, dict(state.marked))
        while len(_PRUNINGS) > _KEPT_TOKENS:
            _PRUNINGS.popitem(last=False)
    return token, frozenset(predicates)


# `iceberg_scan` calls the front door marks while planning a statement (`capture_marker`): their
# decoded arguments are kept, so the rewritten statement can call the scan with them directly.
CAPTURE_MARKER = "\x1ecall "
SCAN_ARGS_UDF = "__iceduck_scan_args"
# The arguments passed again at each bind, as the macro passes them: the session's, and the token.
_BOUND_NAMES = ("timezone", LOGGING_ARGUMENT, TOKEN_ARGUMENT)
_ZONED = tuple(p.name for p in SCAN_PARAMS if p.sql_type == "TIMESTAMPTZ")


def capture_marker(i: int) -> str:
    """The token the front door gives the i-th `iceberg_scan` call of a statement while planning it."""
    return f"{CAPTURE_MARKER}{i}"


def scan_call(token: str, marker: str) -> str | None:
    """`query(...)` of the scan the `iceberg_scan` call marked `marker` makes under the statement
    stored as `token`: its arguments as DuckDB evaluated them while planning (a JSON text), the
    session's time zone and logging read at each bind, as `iceberg_scan`'s macro reads them.
    DuckDB then binds no macro (19 arguments, casts and checks) each time the statement binds; the
    UDF plans exactly as the macro's does. None when the call was not bound while planning, or
    reads as of a time (a timestamp's text means another instant in another time zone)."""
    with _PRUNINGS_LOCK:
        found = _PRUNINGS.get(token)
    args = None if found is None else found.calls.get(marker)
    if args is None or any(args.get(n) is not None for n in _ZONED):
        return None
    kept = {n: v for n, v in args.items() if n not in _BOUND_NAMES}
    return (
        f"query({SCAN_ARGS_UDF}({quote_str(json.dumps(kept))}, {_SESSION_ZONE}, {_SESSION_LOGGING}, "
        f"{quote_str(token)}))"
    )


def _scan_args_udf(ctx: Context, con_id: int) -> Callable[[str, str | None, bool | None, str | None], str]:
    """The UDF `scan_call` texts call on connection `con_id`: the scan SQL for the JSON arguments."""

    def call(arguments: str, timezone: str | None, logging: bool | None, token: str | None) -> str:
        a = {**json.loads(arguments), "timezone": timezone, LOGGING_ARGUMENT: logging, TOKEN_ARGUMENT: token}
        return _sql_or_error(SCAN.name, lambda: _scan_sql(ctx, ctx.table(a), a, _described(con_id)))

    return call


def keep_statement(token: str) -> bool:
    """Whether the pruning stored under `token` is still kept (it is then kept longest)."""
    with _PRUNINGS_LOCK:
        if token not in _PRUNINGS:
            return False
        _PRUNINGS.move_to_end(token)
        return True


def forget_statements() -> None:
    """Drop every stored statement pruning: relations made before re-plan without them (for when
    something a captured predicate may have been derived from changed, e.g. a view)."""
    with _PRUNINGS_LOCK:
        _PRUNINGS.clear()


def _pruning(token: str | None, key: Key, zone: str | None) -> tuple[Predicate, Schema] | None:
    """The predicate the statement under `token` pushed into the reference `key`, and the table
    schema it was captured with; None when there is none for this reference in this zone."""
    if token is None:
        return None
    with _PRUNINGS_LOCK:
        found = _PRUNINGS.get(token)
    if found is None or found.zone != zone:
        return None
    p = found.predicates.get(key)
    return None if p is None or isinstance(p, AlwaysTrue) else (p, found.schemas[key])


def view_key(database: str, identifier: str) -> Key:
    """The key of a catalog view reference (`capture_statement`)."""
    return ("view", database, identifier)


_SCAN_KEY_NAMES = tuple(n for n in SCAN.udf_names if n not in (TOKEN_ARGUMENT, LOGGING_ARGUMENT))


def scan_key(args: dict[str, Any]) -> Key:
    """The key of an `iceberg_scan` reference: every argument but the token (and logging)."""
    return ("scan", *((n, args[n]) for n in _SCAN_KEY_NAMES))


# ---------------------------------------------------------------------------------------------
# Connection setup: the UDFs and the keyed delete sources
# ---------------------------------------------------------------------------------------------


def _keyed(produce: Callable[[str], Any], key: Any, _columns: list[str] | None) -> Any:
    return produce(str(key))


def _delete_error(e: BaseException) -> str | None:
    """What a user reads when deleted positions cannot be read (the message names the file)."""
    return one_line(str(e) or type(e).__name__) if isinstance(e, USER_ERRORS) else None


def bits_without_pyarrow() -> bool:
    """Whether connections registered now get the live-row bits without pyarrow: only while the
    process has not imported it (then it costs the scan nothing to use)."""
    return "pyarrow" not in sys.modules


def install_delete_sources(con: duckdb.DuckDBPyConnection, io: FileIO) -> None:
    """Register the keyed sources scans read deleted positions from (idempotent per connection),
    reading deletion vectors and delete files through `io` (the connection's)."""
    # The live-row bits. In a process without pyarrow: one row of BLOB[] that DuckDB builds itself,
    # so a scan with deletion vectors loads no pyarrow (~25 MB of a fresh process's peak); where
    # pyarrow is loaded already, an Arrow table (the same row, ~1 ms instead of ~3-6 per statement).
    if bits_without_pyarrow():
        hooks.register_native_source(
            con,
            hooks.NativeSource(
                name=BITS_SOURCE,
                columns=(("bits", "BLOB[]"),),
                key_column=KEY_COLUMN,
                open=lambda key: (read_deletes.live_bit_strings(str(key), io=io),),
                error_message=_delete_error,
                error_column=SOURCE_ERROR_COLUMN,
            ),
        )
        arrow_sources: tuple[Any, ...] = ()
    else:
        arrow_sources = ((BITS_SOURCE, read_deletes.bits_schema, read_deletes.alive_bits, 1),)
    sources = (
        *arrow_sources,
        (MASK_SOURCE, read_deletes.mask_schema, read_deletes.alive_mask, 1_000_000),
        (POSITIONS_SOURCE, read_deletes.positions_schema, read_deletes.deleted_positions, 100_000),
    )
    for name, schema, produce, rows in sources:
        hooks.register_source(
            con,
            hooks.Source(
                name=name,
                schema=schema,
                key_column=KEY_COLUMN,
                open=functools.partial(_keyed, functools.partial(produce, io=io)),
                rows_estimate=rows,
                error_message=_delete_error,
                error_column=SOURCE_ERROR_COLUMN,
            ),
        )


def _capture_sql(ctx: Context, con_id: int, a: dict[str, Any]) -> str | None:
    """The SQL of an `iceberg_scan` call while its connection plans a statement for the front door."""
    if _CAPTURING is None or _CAPTURING.con_id != con_id:
        return None
    table = ctx.table(a)
    snapshot_id, as_of = snapshot_choice(a)
    _, schema = _snapshot(table, snapshot_id, as_of, a["ref"])
    options = ReadOptions(row_lineage=bool(a["row_lineage"]), metadata_columns=bool(a["metadata_columns"]))
    marker = a[TOKEN_ARGUMENT]
    state = _CAPTURING
    if isinstance(marker, str) and marker.startswith(CAPTURE_MARKER) and state is not None:
        state.marked[marker] = dict(a)
    return _capture_slot(con_id, scan_key(a), schema, options)


def _scan_sql(ctx: Context, table: Table, a: dict[str, Any], describe: bool = False) -> str:
    """The SQL an `iceberg_scan` call with the (decoded) arguments `a` runs over `table`
    (`describe`: only its columns, see `describing`)."""
    snapshot_id, as_of = snapshot_choice(a)  # also the extension's snapshot_from_* names
    return scan_sql_for(
        table,
        snapshot_id=snapshot_id,
        as_of=as_of,
        ref=a["ref"],
        filter_text=a["filter"],
        row_lineage=bool(a["row_lineage"]),
        metadata_columns=bool(a["metadata_columns"]),
        allow_bare=bool(a["allow_bare_deletion_vectors"]),
        prune=a["prune"] is not False,
        delete_mode=a["delete_mode"] or "bitmap",
        timezone=a["timezone"],
        extra=_pruning(a[TOKEN_ARGUMENT], scan_key(a), a["timezone"]),
        log=a[LOGGING_ARGUMENT] is True,
        describe=describe,
    )


def _setup(ctx: Context) -> Any:
    def setup(con: duckdb.DuckDBPyConnection) -> None:
        install_delete_sources(con, ctx.io)
        con_id = id(con)

        def scan(a: dict[str, Any]) -> str:
            captured = _capture_sql(ctx, con_id, a)
            if captured is not None:
                return captured
            return _scan_sql(ctx, ctx.table(a), a, _described(con_id))

        def changes(a: dict[str, Any]) -> str:
            return changes_sql_for(
                ctx.table(a), from_snapshot=a["from_snapshot"], to_snapshot=a["to_snapshot"]
            )

        SCAN.install_udf(con, scan)
        create_sql_udf(
            con, SCAN_ARGS_UDF, _scan_args_udf(ctx, con_id), ["VARCHAR", "VARCHAR", "BOOLEAN", "VARCHAR"]
        )
        CHANGES.install_udf(con, changes)
        con.execute(SCAN.pruned_macro_sql())

    return setup


def _sql_or_error(name: str, make: Callable[[], str]) -> str:
    """The SQL `make` returns, or a query failing with its error as one line (no wrapper text)."""
    try:
        return make()
    except USER_ERRORS as e:
        return error_sql(user_message(name, e))


def _signature(params: Sequence[Param]) -> str:
    return ", ".join(
        quote_ident(p.name) if p.default is None else f"{quote_ident(p.name)} := {p.default}" for p in params
    )


CHANGES = QueryMacro(
    "iceberg_changes",
    "__iceduck_changes_sql",
    (
        TABLE,
        Param(
            "from_snapshot",
            "BIGINT",
            doc="changes after this snapshot (default: since the table was created)",
        ),
        Param("to_snapshot", "BIGINT", doc="up to and including this snapshot (default: the current one)"),
        VERSION,
    ),
)


def _with_session_zone(fn: TableFunction) -> TableFunction:
    """`fn` with its generated macro reading the session's time zone when `timezone` is not given."""
    given = 'CAST("timezone" AS VARCHAR)'
    macro = fn.macro_sql()
    assert given in macro
    return dataclasses.replace(fn, macro=macro.replace(given, f"coalesce({given}, {_SESSION_ZONE})"))


def _unused(args: Args, columns: list[str] | None) -> pa.Table:  # rows come from the macro's query
    raise IcebergError("internal: this function is a macro over query()")


# ---------------------------------------------------------------------------------------------
# iceberg_scan_plan
# ---------------------------------------------------------------------------------------------

@functools.cache
def scan_plan_schema() -> pa.Schema:
    """`iceberg_scan_plan`'s rows (built at first use: pyarrow loads then)."""
    delete_file = pa.struct(
        [
            ("path", pa.string()),
            ("kind", pa.string()),
            ("sequence_number", pa.int64()),
            ("record_count", pa.int64()),
        ]
    )
    return pa.schema(
        [
            ("file_path", pa.string()),
            ("partition", pa.string()),
            ("spec_id", pa.int32()),
            ("record_count", pa.int64()),
            ("file_size_in_bytes", pa.int64()),
            ("data_sequence_number", pa.int64()),
            ("kept", pa.bool_()),
            ("skipped_at", pa.string()),
            ("reason", pa.string()),
            ("delete_files", pa.list_(delete_file)),
        ]
    )


def _changes_schema() -> pa.Schema:
    """The fixed columns of `iceberg_changes` (the table's own columns follow them)."""
    return pa.schema([("change_type", pa.string()), ("snapshot_id", pa.int64()), ("sequence_number", pa.int64())])


def _partition_text(table: Table, schema: Schema, spec_id: int, partition: Sequence[Any]) -> str:
    spec = table.metadata.spec_by_id(spec_id)
    if spec is None or not spec.fields:
        return ""
    parts = []
    try:
        types = spec.partition_type(schema).fields
    except Exception:
        types = ()
    for i, (f, value) in enumerate(zip(spec.fields, partition, strict=False)):
        try:
            shown = f.transform.to_human(types[i].type, value) if i < len(types) else str(value)
        except Exception:
            shown = "null" if value is None else str(value)
        parts.append(f"{f.name}={shown}")
    return "/".join(parts)


def scan_plan_table(plan: ScanPlan) -> pa.Table:
    """One row per data file of the snapshot: kept (with its deletes) or skipped (level and reason)."""
    rows: dict[str, list[Any]] = {n: [] for n in scan_plan_schema().names}
    table, schema = plan.table, plan.schema

    def add(
        d: Any, seq: int, kept: bool, level: str | None, reason: str | None, deletes: list[dict[str, Any]]
    ) -> None:
        for name, value in (
            ("file_path", d.file_path),
            ("partition", _partition_text(table, schema, d.spec_id, d.partition)),
            ("spec_id", d.spec_id),
            ("record_count", d.record_count),
            ("file_size_in_bytes", d.file_size_in_bytes),
            ("data_sequence_number", seq),
            ("kept", kept),
            ("skipped_at", level),
            ("reason", reason),
            ("delete_files", deletes),
        ):
            rows[name].append(value)

    for t in plan.tasks:
        deletes = [
            {
                "path": x.path,
                "kind": x.kind,
                "sequence_number": x.sequence_number,
                "record_count": x.file.record_count,
            }
            for x in t.deletes
        ]
        add(t.file, t.data_sequence_number, True, None, None, deletes)
    for s in plan.skipped:
        add(s.file, s.data_sequence_number, False, s.level, s.reason, [])
    return pa.table(rows, schema=scan_plan_schema())


def _plan_run(ctx: Context) -> Any:
    def run(args: Args, columns: list[str] | None) -> pa.Table:
        plan = plan_for(
            ctx.table(args),
            snapshot_id=args.get("snapshot_id"),
            as_of=args.get("as_of"),
            ref=args.get("ref"),
            filter_text=args.get("filter"),
            timezone=args.get("timezone"),
            report_all=True,
        )
        return scan_plan_table(plan)

    return run


# ---------------------------------------------------------------------------------------------
# iceberg_changes
# ---------------------------------------------------------------------------------------------


def changes_sql_for(table: Table, *, from_snapshot: int | None, to_snapshot: int | None) -> str:
    """SQL listing the rows each snapshot after `from_snapshot` up to `to_snapshot` inserted, deleted or updated.

    Each snapshot is compared with its parent, reading only the data files whose rows or deletes
    changed. On v3 tables rows are paired by `_row_id`: a row present before and after whose
    `_last_updated_sequence_number` changed is an update (`update_before`, `update_after`); on
    older tables a row is identified by its file and position, so an update shows as delete + insert.
    """
    md = table.metadata
    to = table.snapshot(snapshot_id=to_snapshot)
    schema = md.schema
    options = ReadOptions(row_lineage=True, metadata_columns=True)
    names = [f.name for f in schema.fields]
    cols = ", ".join(quote_ident(n) for n in names)
    head = [("change_type", "VARCHAR"), ("snapshot_id", "BIGINT"), ("sequence_number", "BIGINT")]
    out_columns = [
        *head,
        *(
            (f.name, c)
            for f, (_, c) in zip(schema.fields, output_columns(schema, ReadOptions()), strict=True)
        ),
        ("_row_id", "BIGINT"),
    ]
    if to is None:
        return empty_sql(out_columns)
    chain = list(reversed(md.ancestors_of(to.snapshot_id)))
    if from_snapshot is not None:
        ids = [s.snapshot_id for s in chain]
        if from_snapshot not in ids:
            raise ValidationError(
                f"{table.metadata_location}: snapshot {from_snapshot} is not an ancestor of {to.snapshot_id}"
            )
        chain = chain[ids.index(from_snapshot) + 1 :]
    v3 = md.format_version >= 3
    parts: list[str] = []
    after: ScanPlan | None = None
    for i, snap in enumerate(chain):
        if after is None:
            parent = (
                md.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
            )
            before = plan_scan(table, parent, schema=schema)
        else:
            before = after  # the chain is consecutive: the last snapshot's plan is this one's parent's
        # only the manifests this snapshot added are read (the planner's incremental form)
        after = plan_since(table, snap, before)
        if snap.operation == "replace":
            # The spec's `replace`: files were rewritten, no row changed (compaction, manifest
            # rewrites). On v2 its rows would pair by file and position and show as deleted and
            # re-inserted; Java's changelog scan skips these snapshots too.
            continue
        before_tasks = {t.path: t for t in before.tasks}
        after_tasks = {t.path: t for t in after.tasks}
        changed = {
            p
            for p in set(before_tasks) | set(after_tasks)
            if p not in before_tasks
            or p not in after_tasks
            or _deletes_of(before_tasks[p]) != _deletes_of(after_tasks[p])
        }
        if not changed:
            continue
        b_sql = scan_sql(_restrict(before, changed), options)
        a_sql = scan_sql(_restrict(after, changed), options)
        sid, seq = snap.snapshot_id, snap.sequence_number
        tag = f"{quote_str(str(sid))}::BIGINT AS snapshot_id, {seq}::BIGINT AS sequence_number"
        b, a = f"__b{i}", f"__a{i}"
        ctes = f"WITH {b} AS ({b_sql}), {a} AS ({a_sql}) "
        if v3:
            key = "USING (_row_id)"
            parts.append(
                ctes
                + f"SELECT 'delete' AS change_type, {tag}, {cols}, _row_id FROM {b} ANTI JOIN {a} {key} "
                + f"UNION ALL SELECT 'insert', {tag}, {cols}, _row_id FROM {a} ANTI JOIN {b} {key} "
                + f"UNION ALL SELECT 'update_before', {tag}, {_qualified(b, names)}, {b}._row_id FROM {b} JOIN {a} {key} "
                + f"WHERE {a}._last_updated_sequence_number IS DISTINCT FROM {b}._last_updated_sequence_number "
                + f"UNION ALL SELECT 'update_after', {tag}, {_qualified(a, names)}, {a}._row_id FROM {a} JOIN {b} {key} "
                + f"WHERE {a}._last_updated_sequence_number IS DISTINCT FROM {b}._last_updated_sequence_number"
            )
        else:
            on = f"ON {b}._file = {a}._file AND {b}._pos = {a}._pos"
            parts.append(
                ctes
                + f"SELECT 'delete' AS change_type, {tag}, {_qualified(b, names)}, {b}._row_id FROM {b} ANTI JOIN {a} {on} "
                + f"UNION ALL SELECT 'insert', {tag}, {_qualified(a, names)}, {a}._row_id FROM {a} ANTI JOIN {b} {on}"
            )
    if not parts:
        return empty_sql(out_columns)
    return "\nUNION ALL\n".join(f"({p})" for p in parts)


def _deletes_of(task: Any) -> list[tuple[str, int | None]]:
    return sorted((d.path, d.file.content_offset) for d in task.deletes)


def _qualified(alias: str, names: list[str]) -> str:
    return ", ".join(f"{alias}.{quote_ident(n)}" for n in names)


def _restrict(plan: ScanPlan, paths: set[str]) -> ScanPlan:
    return ScanPlan(
        plan.table,
        plan.snapshot,
        plan.schema,
        plan.predicate,
        tuple(t for t in plan.tasks if t.path in paths),
    )


# ---------------------------------------------------------------------------------------------
# The functions
# ---------------------------------------------------------------------------------------------


def scan_functions(ctx: Context) -> list[TableFunction]:
    """iceberg_scan, iceberg_scan_plan and iceberg_changes for `all_functions`."""
    setup = _setup(ctx)
    return [
        TableFunction(
            SCAN.name,
            SCAN.params,
            no_columns,
            _unused,
            "The table's rows: columns by field id, every kind of delete applied, files pruned by `filter`; "
            "`metadata_columns` adds `_file`, `_pos`, `row_lineage` adds `_row_id`, `_last_updated_sequence_number`",
            setup=setup,
            macro=SCAN.macro_sql(),
        ),
        _with_session_zone(
            TableFunction(
                "iceberg_scan_plan",
                (TABLE, *SNAPSHOT_PARAMS, FILTER, VERSION, TIMEZONE),
                scan_plan_schema,
                _plan_run(ctx),
                "One row per data file: kept (with the delete files it needs) or skipped, at which level and why",
                rows_estimate=10_000,
            )
        ),
        TableFunction(
            CHANGES.name,
            CHANGES.params,
            _changes_schema,
            _unused,
            "Rows inserted, deleted and updated by each snapshot after `from_snapshot` up to `to_snapshot` "
            "(change_type 'insert', 'delete', 'update_before', 'update_after'; updates paired by `_row_id` on v3), "
            "then the table's columns and `_row_id`",
            macro=CHANGES.macro_sql(),
        ),
    ]


# ---------------------------------------------------------------------------------------------
# Catalog views
# ---------------------------------------------------------------------------------------------


def _safe_name(database: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in database.lower())


def view_sql_udf(database: str) -> str:
    """The UDF the `<database>.<ns>.<table>` views read their SQL from."""
    return f"{VIEW_SQL_UDF}_{_safe_name(database)}"


def view_pruned_macro(database: str) -> str:
    """The table macro the front door rewrites a `<database>.<ns>.<table>` reference to:
    `(identifier, token)`."""
    return f"{VIEW_PRUNED_MACRO}_{_safe_name(database)}"


# (connection id, identifier) of views being declared for a table that cannot be planned now
_DECLARING: set[tuple[int, str]] = set()


def _install_view_functions(con: duckdb.DuckDBPyConnection, catalog: Any, database: str) -> None:
    io = getattr(catalog, "io", None)  # the catalog's own S3 settings
    con_id = id(con)
    # identifier -> (the catalog's change token when it was loaded, the table): a view bound again
    # while nothing was committed to the catalog reads the same table without asking the catalog
    loaded: dict[str, tuple[Hashable, Table]] = {}

    def load(identifier: str) -> Table:
        token = change_token(catalog)  # before loading: a commit after it is seen next time
        found = loaded.get(identifier)
        if token is not None and found is not None and found[0] == token:
            return found[1]
        table = Table.load(identifier, catalog=catalog, io=io)
        if token is not None:
            loaded[identifier] = (token, table)
        return table

    def view_sql(identifier: str | None, zone: str | None, logging: bool | None, token: str | None) -> str:
        if (con_id, str(identifier)) in _DECLARING:
            # Declaring the view of a table that cannot be planned now (a missing or unreadable
            # file): DuckDB binds a view when it is created, so it gets a placeholder; every later
            # read binds again and fails with the table's own one-line error.
            return "SELECT 1 AS __unreadable LIMIT 0"

        def make() -> str:
            table = load(str(identifier))
            if _creating_views(con_id):
                # DuckDB binds a view when it is created only to learn its columns: no planning, no
                # read_parquet call (a 4,000-file table's took ~0.9 s, mostly its footers' field ids)
                schema = scan_schema(table, table.metadata.current_snapshot())
                return empty_sql(output_columns(schema, ReadOptions()))
            key = view_key(database, str(identifier))
            if _CAPTURING is not None and _CAPTURING.con_id == con_id:
                schema = scan_schema(table, table.metadata.current_snapshot())
                captured = _capture_slot(con_id, key, schema, ReadOptions())
                if captured is not None:
                    return captured
            return scan_sql_for(
                table,
                timezone=zone,
                extra=_pruning(token, key, zone),
                log=logging is True,
                describe=_described(con_id),
            )

        return _sql_or_error(f"{database}.{identifier}", make)

    udf = view_sql_udf(database)
    create_sql_udf(con, udf, view_sql, ["VARCHAR", "VARCHAR", "BOOLEAN", "VARCHAR"])
    con.execute(
        f"CREATE OR REPLACE TEMP MACRO {view_pruned_macro(database)}(__identifier, {quote_ident(TOKEN_ARGUMENT)}) "
        f"AS TABLE FROM query({udf}(__identifier, {_SESSION_ZONE}, {_SESSION_LOGGING}, {quote_ident(TOKEN_ARGUMENT)}))"
    )


def attach_catalog_views(con: duckdb.DuckDBPyConnection, catalog: Any, database: str = "lake") -> list[str]:
    """Expose every table of `catalog` as the view `<database>.<namespace>.<table>` on `con`.

    Each view is `query()` over the SQL a UDF plans when DuckDB binds it: the table's latest commit,
    read by native `read_parquet` like `iceberg_scan`. Identity-partition values prune files before
    they are opened on any connection; through `Lake.sql` (the front door) the statement's WHERE
    prunes manifests, partitions and files. Returns the views created. Views are readable on `con`
    itself (not on its cursors); call again after tables are created or dropped.
    """
    install_delete_sources(con, getattr(catalog, "io", None) or default_io())
    _install_view_functions(con, catalog, database)
    con.execute(f"ATTACH IF NOT EXISTS ':memory:' AS {quote_ident(database)}")
    created: list[str] = []
    udf = view_sql_udf(database)
    with _creating_views.on(con):
        _create_views(con, catalog, database, udf, created)
    return created


def _create_views(
    con: duckdb.DuckDBPyConnection, catalog: Any, database: str, udf: str, created: list[str]
) -> None:
    pending = list(catalog.list_namespaces())
    while pending:
        ns = pending.pop(0)
        pending.extend(catalog.list_namespaces(ns))
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(database)}.{quote_ident(ns)}")
        for name in catalog.list_tables(ns):
            identifier = f"{ns}.{name}"
            create = (
                f"CREATE OR REPLACE VIEW {quote_ident(database)}.{quote_ident(ns)}.{quote_ident(name)} AS "
                f"FROM query({udf}({quote_str(identifier)}, {_SESSION_ZONE}, {_SESSION_LOGGING}, NULL))"
            )
            try:
                con.execute(create)
            except duckdb.Error:
                # One table that cannot be read must neither hide the others nor read as "does
                # not exist": its view is declared, and reading it reports why.
                _DECLARING.add((id(con), identifier))
                try:
                    con.execute(create)
                finally:
                    _DECLARING.discard((id(con), identifier))
            created.append(f"{database}.{ns}.{name}")


__all__ = [
    "CAPTURE_SLOTS",
    "StatementPruning",
    "attach_catalog_views",
    "capture_marker",
    "capture_slots",
    "capture_statement",
    "changes_sql_for",
    "clear_scan_caches",
    "describing",
    "forget_statements",
    "parse_filter",
    "plan_for",
    "scan_call",
    "scan_functions",
    "scan_key",
    "scan_plan_table",
    "scan_sql_for",
    "view_key",
    "view_pruned_macro",
    "view_sql_udf",
]
