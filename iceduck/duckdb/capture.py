"""The front door's pruning: what DuckDB pushes into each reference of a statement (Lake.sql, the shell).

A natural `WHERE` reaches a scan only after the scan's SQL was chosen (the UDF runs when DuckDB
binds the call). So a statement coming through `Lake.sql` is first planned under EXPLAIN with
every `iceberg_scan` call and `lake.<ns>.<t>` view reading a capture slot instead
(`hooks.CaptureSlots`): DuckDB's optimizer pushes into each slot exactly the predicates that hold
for every row of that reference reaching the result (through joins, subqueries, CTEs and
prepared parameters, and not where pushing would be wrong, e.g. the right side of a LEFT JOIN's
WHERE). The predicates of all references with the same arguments are OR-ed (each reference still
applies its own filter, so reading the union is correct) and stored under a fresh token; the
router then rewrites the references in the statement's text to the twin macros carrying the
token, so the real run, and every later re-run of the same relation, prunes with them.

What is planned and stored lives per connection (`FrontDoor`, `front_door(con)`): one lake's
statements neither wait for nor forget another's.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import duckdb

from iceduck.duckdb import hooks
from iceduck.duckdb.context import (
    Context,
    snapshot_choice,
)
from iceduck.duckdb.pushdown import capture_schema, columns_of, only_columns, predicate_from_filter
from iceduck.duckdb.scan import (
    LOGGING_ARGUMENT,
    SCAN,
    SCAN_PARAMS,
    SESSION_LOGGING,
    SESSION_ZONE,
    TOKEN_ARGUMENT,
    is_describing,
    scan_sql_for,
    snapshot_and_schema,
    sql_or_error,
)
from iceduck.expr import TRUE, AlwaysTrue, Predicate, and_, or_
from iceduck.read.sql import ReadOptions
from iceduck.spec.types import Schema
from iceduck.vocabulary import quote_ident, quote_str

CAPTURE_SLOTS = 32

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
    """The statement a connection is planning for the front door: the slots its references read."""

    slots: hooks.CaptureSlots
    calls: list[tuple[Key, int, Schema]] = dataclasses.field(default_factory=list)
    overflow: bool = False
    marked: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(slots=True, eq=False)
class FrontDoor:
    """What the front door keeps for one connection: the statement being planned (one at a time:
    `lock`), and the prunings of the statements planned, by token (the newest `_KEPT_TOKENS`; a
    relation re-binds its text, token included, each time it is read)."""

    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    capturing: _Capturing | None = None
    prunings: OrderedDict[str, StatementPruning] = dataclasses.field(default_factory=OrderedDict)
    prunings_lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def pruning(self, token: str | None, key: Key, zone: str | None) -> tuple[Predicate, Schema] | None:
        """The predicate the statement under `token` pushed into the reference `key`, and the table
        schema it was captured with; None when there is none for this reference in this zone."""
        if token is None:
            return None
        with self.prunings_lock:
            found = self.prunings.get(token)
        if found is None or found.zone != zone:
            return None
        p = found.predicates.get(key)
        return None if p is None or isinstance(p, AlwaysTrue) else (p, found.schemas[key])

    def capture_slot(self, key: Key, schema: Schema, options: ReadOptions) -> str | None:
        """While the connection plans a statement for the front door: the capture slot this
        reference (reading a table of `schema`) reads."""
        state = self.capturing
        if state is None:
            return None
        i = state.slots.claim(capture_schema(schema, options))
        if i is None:
            state.overflow = True
            return None
        state.calls.append((key, i, schema))
        return f"SELECT * FROM {quote_ident(state.slots.name(i))}"


# Each connection's front door, held weakly: a connection dropped takes its prunings along. The
# UDFs a connection calls back hold its FrontDoor themselves (registered with it, see `front_door`).
_DOORS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, FrontDoor] = weakref.WeakKeyDictionary()
_DOORS_LOCK = threading.Lock()


def front_door(con: duckdb.DuckDBPyConnection) -> FrontDoor:
    """The front door's state of `con` (made at first use)."""
    with _DOORS_LOCK:
        found = _DOORS.get(con)
        if found is None:
            found = _DOORS[con] = FrontDoor()
        return found


def capture_slots(con: duckdb.DuckDBPyConnection) -> hooks.CaptureSlots:
    """The capture sources a front door plans statements with, registered on `con`."""
    return hooks.CaptureSlots(con, CAPTURE_SLOTS, predicate_from_filter)


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
    door = front_door(con)
    with door.lock:
        slots.reset()
        state = _Capturing(slots)
        door.capturing = state
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
            door.capturing = None
            calls = [(key, slots.captured(i), schema) for key, i, schema in state.calls]
            slots.reset()
    if state.overflow or not calls:
        return None
    predicates: dict[Key, Predicate] = {}
    schemas: dict[Key, Schema] = {}
    for key, captured, schema in calls:
        p = only_columns(and_(*captured), columns_of(schema)) if captured else TRUE
        predicates[key] = or_(predicates[key], p) if key in predicates else p
        if schemas.setdefault(key, schema) != schema:
            return None  # one reference, two schemas: a commit landed while planning
    if all(isinstance(p, AlwaysTrue) for p in predicates.values()):
        return None  # nothing to prune with: the statement runs as written
    if zone is None:
        rows = con.execute("SELECT current_setting('TimeZone')").fetchall()
        zone = str(rows[0][0]) if rows else None
    token = uuid.uuid4().hex
    with door.prunings_lock:
        door.prunings[token] = StatementPruning(zone, predicates, schemas, dict(state.marked))
        while len(door.prunings) > _KEPT_TOKENS:
            door.prunings.popitem(last=False)
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


def scan_call(con: duckdb.DuckDBPyConnection, token: str, marker: str) -> str | None:
    """`query(...)` of the scan the `iceberg_scan` call marked `marker` makes under the statement
    stored as `token`: its arguments as DuckDB evaluated them while planning (a JSON text), the
    session's time zone and logging read at each bind, as `iceberg_scan`'s macro reads them.
    DuckDB then binds no macro (19 arguments, casts and checks) each time the statement binds; the
    UDF plans exactly as the macro's does. None when the call was not bound while planning, or
    reads as of a time (a timestamp's text means another instant in another time zone)."""
    door = front_door(con)
    with door.prunings_lock:
        found = door.prunings.get(token)
    args = None if found is None else found.calls.get(marker)
    if args is None or any(args.get(n) is not None for n in _ZONED):
        return None
    kept = {n: v for n, v in args.items() if n not in _BOUND_NAMES}
    return (
        f"query({SCAN_ARGS_UDF}({quote_str(json.dumps(kept))}, {SESSION_ZONE}, {SESSION_LOGGING}, "
        f"{quote_str(token)}))"
    )


def scan_args_udf(
    ctx: Context, con_id: int, door: FrontDoor
) -> Callable[[str, str | None, bool | None, str | None], str]:
    """The UDF `scan_call` texts call on connection `con_id`: the scan SQL for the JSON arguments."""

    def call(arguments: str, timezone: str | None, logging: bool | None, token: str | None) -> str:
        a = {**json.loads(arguments), "timezone": timezone, LOGGING_ARGUMENT: logging, TOKEN_ARGUMENT: token}
        return sql_or_error(SCAN.name, lambda: call_sql(ctx, door, a, is_describing(con_id)))

    return call


def keep_statement(con: duckdb.DuckDBPyConnection, token: str) -> bool:
    """Whether the pruning stored under `token` on `con` is still kept (it is then kept longest)."""
    door = front_door(con)
    with door.prunings_lock:
        if token not in door.prunings:
            return False
        door.prunings.move_to_end(token)
        return True


def forget_statements(con: duckdb.DuckDBPyConnection) -> None:
    """Drop every statement pruning stored on `con`: relations made before re-plan without them
    (for when something a captured predicate may have been derived from changed, e.g. a view)."""
    door = front_door(con)
    with door.prunings_lock:
        door.prunings.clear()


def view_key(database: str, identifier: str) -> Key:
    """The key of a catalog view reference (`capture_statement`)."""
    return ("view", database, identifier)


_SCAN_KEY_NAMES = tuple(n for n in SCAN.udf_names if n not in (TOKEN_ARGUMENT, LOGGING_ARGUMENT))


def scan_key(args: dict[str, Any]) -> Key:
    """The key of an `iceberg_scan` reference: every argument but the token (and logging)."""
    return ("scan", *((n, args[n]) for n in _SCAN_KEY_NAMES))


def capture_sql(ctx: Context, door: FrontDoor, a: dict[str, Any]) -> str | None:
    """The SQL of an `iceberg_scan` call while its connection plans a statement for the front door."""
    state = door.capturing
    if state is None:
        return None
    table = ctx.table(a)
    snapshot_id, as_of = snapshot_choice(a)
    _, schema = snapshot_and_schema(table, snapshot_id, as_of, a["ref"])
    options = ReadOptions(row_lineage=bool(a["row_lineage"]), metadata_columns=bool(a["metadata_columns"]))
    marker = a[TOKEN_ARGUMENT]
    if isinstance(marker, str) and marker.startswith(CAPTURE_MARKER):
        state.marked[marker] = dict(a)
    return door.capture_slot(scan_key(a), schema, options)


def call_sql(ctx: Context, door: FrontDoor, a: dict[str, Any], describe: bool = False) -> str:
    """The SQL an `iceberg_scan` call with the (decoded) arguments `a` runs, pruned by what the
    statement its token names pushed into it (`describe`: only its columns, see `describing`)."""
    snapshot_id, as_of = snapshot_choice(a)  # also the extension's snapshot_from_* names
    return scan_sql_for(
        ctx.table(a),
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
        extra=door.pruning(a[TOKEN_ARGUMENT], scan_key(a), a["timezone"]),
        log=a[LOGGING_ARGUMENT] is True,
        describe=describe,
    )
