"""`iceberg_scan`: the SQL one scan of an Iceberg table runs, planned when DuckDB binds the call.

`iceberg_scan(t, ...)` is a table macro over `query(__iceduck_scan_sql(...))`: a Python scalar UDF,
evaluated once when DuckDB binds the statement, plans the scan (metadata, pruning, delete matching)
and returns SQL text over native `read_parquet` (see `iceduck.read.sql`). DuckDB then runs that SQL
itself: projection and outer WHERE filters reach the Parquet reader, and no row passes through
Python. Deleted positions come from keyed sources registered on the connection
(`install_delete_sources`), which decode deletion vectors and position-delete files when DuckDB
reads them.

Pruning needs the filter before the UDF runs. `filter := 'SQL'` gives it as text: DuckDB parses
and binds it against the table's columns on a private connection in the caller's time zone
(`pushdown.parse_filter`); the predicates it would push into a scan drive manifest, partition and
column-bound pruning, and the text itself is applied to the rows exactly. A natural WHERE reaches
the planner through the front door (`capture`). Beside this module: `catalog_views` (the
`lake.<ns>.<table>` views), `scan_plan` (`iceberg_scan_plan`), `changes` (`iceberg_changes`), and
`scan_functions`, which registers them on a connection.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import inspect
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import duckdb

from iceduck.duckdb import hooks
from iceduck.duckdb.context import (
    EXTENSION_SNAPSHOT_PARAMS,
    SNAPSHOT_PARAMS,
    TABLE,
    VERSION,
)
from iceduck.duckdb.filter_check import check_filter
from iceduck.duckdb.functions import (
    USER_ERRORS,
    Param,
    create_sql_udf,
    datetime_from_epoch_us,
    epoch_us_sql,
    error_sql,
    one_line,
    user_message,
    whole_number,
)
from iceduck.duckdb.pushdown import parse_filter
from iceduck.expr import Predicate, and_
from iceduck.io.fileio import FileIO
from iceduck.read import deletes as read_deletes
from iceduck.read.parquet_columns import clear_footer_caches
from iceduck.read.sql import (
    BITS_SOURCE,
    KEY_COLUMN,
    MASK_SOURCE,
    POSITIONS_SOURCE,
    ReadOptions,
    empty_sql,
    output_columns,
    scan_sql,
    scan_sql_reused,
)
from iceduck.scan import ScanPlan, plan_scan, scan_schema
from iceduck.spec.snapshots import Snapshot
from iceduck.spec.types import Schema
from iceduck.table import Table
from iceduck.vocabulary import SOURCE_ERROR_COLUMN, quote_ident, quote_str

FILTER = Param(
    "filter",
    doc="a SQL predicate on the table's columns and constants (built-in scalar functions; no subqueries, "
    "table, volatile or user functions): prunes files and filters rows",
)
# A macro parameter's default is not evaluated in the caller's session (current_setting('TimeZone')
# there gives the default zone), so the session's zone is read in the macro body.
TIMEZONE = Param("timezone", doc="time zone for filter literals (default: the session's)")
SESSION_ZONE = "current_setting('TimeZone')"
TOKEN_ARGUMENT = "__token"
# Whether DuckDB's logger is on, read in the macro body like the zone: a scan then writes what it
# skipped to `duckdb_logs()` as DuckDB's iceberg extension does (type 'Iceberg', see `logged_sql`).
# Only whether it is on at all: `write_log` keeps or drops a line by the logger's level, mode and
# types itself, and the one setting binds in a fraction of what testing all five does (each bind).
LOGGING_ARGUMENT = "__logging"
LOG_TYPE = "Iceberg"
SESSION_LOGGING = "CAST(current_setting('enable_logging') AS BOOLEAN)"
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
        args += [SESSION_ZONE, SESSION_LOGGING] if self.session_zone else []
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
            return sql_or_error(self.name, lambda: run(args))

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


def snapshot_and_schema(
    table: Table, snapshot_id: int | None, as_of: Any, ref: str | None
) -> tuple[Snapshot | None, Schema]:
    snapshot = table.snapshot(snapshot_id=snapshot_id, as_of=as_of, ref=ref)
    branch = ref is not None and (r := table.metadata.refs.get(ref)) is not None and r.is_branch
    travel = snapshot_id is not None or as_of is not None or (ref is not None and not branch)
    return snapshot, scan_schema(table, snapshot, time_travel=travel)


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
    snapshot, schema = snapshot_and_schema(table, snapshot_id, as_of, ref)
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
# so the same arguments on the same metadata file give the same SQL. Process-wide on purpose: what
# it holds derives from immutable files only, so every connection and lake may share it.
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
        _, schema = snapshot_and_schema(table, snapshot_id, as_of, ref)
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
class ThreadFlag:
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


_described = ThreadFlag()  # binding a statement only to learn its columns


def is_describing(con_id: int) -> bool:
    """Whether the calling thread binds a statement on connection `con_id` only to learn its columns."""
    return _described(con_id)


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


def sql_or_error(name: str, make: Callable[[], str]) -> str:
    """The SQL `make` returns, or a query failing with its error as one line (no wrapper text)."""
    try:
        return make()
    except USER_ERRORS as e:
        return error_sql(user_message(name, e))


def _signature(params: Sequence[Param]) -> str:
    return ", ".join(
        quote_ident(p.name) if p.default is None else f"{quote_ident(p.name)} := {p.default}" for p in params
    )
