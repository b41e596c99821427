"""`BEGIN ... COMMIT` / `ROLLBACK` on a lake: statements on Iceberg tables committed all or nothing.

    BEGIN;                                   -- also BEGIN TRANSACTION, START TRANSACTION
    INSERT INTO lake.shop.orders VALUES (...);
    UPDATE lake.shop.stock SET n = n - 1 WHERE item = 7;
    SELECT * FROM lake.shop.orders;          -- sees the row inserted above
    COMMIT;                                  -- also END, COMMIT TRANSACTION; or ROLLBACK / ABORT

The lake's `Router` hands these statements here (`handles`, `run`). BEGIN puts a
`iceduck.transaction.multi_table.StagingCatalog` in front of the lake's catalog and of every
attached Iceberg catalog (the write API's, the views', the SQL functions'); DuckDB's own
transaction opens at the first statement that may write DuckDB's own objects (`before_duck`), so
a transaction on lake tables alone runs no lake statement inside a DuckDB transaction. Each write inside commits to the staging catalog only: later statements read it
(views and `iceberg_scan` resolve through the staging catalog), other connections and processes
do not see it. COMMIT sends every table's changes to its catalog in one commit (SQLite: one
database transaction swapping every pointer; REST: `POST .../transactions/commit`), then commits
DuckDB's transaction (when one was opened). ROLLBACK deletes every file the transaction wrote and rolls DuckDB back.

As in DuckDB, one transaction writes Iceberg tables of one catalog (DuckDB's rule for attached
databases); DuckDB's own tables may be written beside them. A statement that fails inside the
transaction (on a lake table or in DuckDB) aborts it: later statements still run as DuckDB lets
them, and COMMIT then rolls everything back and says so (DuckDB alone rolls back without a word).
If the Iceberg commit fails (another writer changed a table: its requirement fails), nothing is
committed anywhere: the lake's files are deleted and DuckDB's transaction is rolled back too. The
Iceberg commit comes first; should DuckDB's own COMMIT then fail, the Iceberg tables stay
committed and the error says so.

Inside a transaction: INSERT, UPDATE, DELETE, TRUNCATE, MERGE, ALTER TABLE (columns, properties,
partitioning) of existing tables. CREATE/DROP TABLE or SCHEMA, RENAME, ATTACH, DETACH and
expiring snapshots are refused with one line; as any failed statement, the refusal aborts the
transaction (ROLLBACK).
The Python write API on the same lake (`lake.table(...).append(...)`) stages too: it commits
through the same catalog attribute the staging catalog stands in.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import duckdb

from iceduck.errors import CommitConflictError, ValidationError
from iceduck.sql.tokens import WORD, Token

if TYPE_CHECKING:
    from iceduck.transaction.multi_table import StagingCatalog


class Router(Protocol):
    """What this module needs of `iceduck.sql.router.Router` (which imports this module)."""

    con: duckdb.DuckDBPyConnection
    front: Any
    transaction: Any  # the open BEGIN ... COMMIT of this router's lake (a `_Transaction`), or None

    @property
    def lake(self) -> Any: ...

    def refresh_views(self, *, only_if_changed: bool = False) -> None: ...


__all__ = [
    "TransactionStateError",
    "active",
    "before_duck",
    "check_write",
    "close",
    "failed",
    "handles",
    "refuse_inside",
    "run",
]

_BEGIN, _COMMIT, _ROLLBACK = "begin", "commit", "rollback"
_KINDS = {
    "BEGIN": _BEGIN,
    "START": _BEGIN,
    "COMMIT": _COMMIT,
    "END": _COMMIT,
    "ROLLBACK": _ROLLBACK,
    "ABORT": _ROLLBACK,
}
_REFUSED_HEADS = ("ATTACH", "DETACH")
# statements that may write DuckDB's own objects (a SELECT may call a writing function, which
# DuckDB's transaction would not cover either way: its effects are not rolled back by iceduck)
_Type = duckdb.StatementType
_DUCK_WRITES = frozenset(
    {
        _Type.INSERT, _Type.UPDATE, _Type.DELETE, _Type.CREATE, _Type.DROP, _Type.ALTER, _Type.MERGE_INTO,
        _Type.COPY, _Type.COPY_DATABASE, _Type.CALL, _Type.LOAD, _Type.EXPORT, _Type.VACUUM, _Type.ANALYZE,
        _Type.MULTI,
    }
)  # fmt: skip


class TransactionStateError(ValidationError):
    """A transaction statement that cannot run now (BEGIN inside one, ...); nothing changed."""


@dataclass(slots=True)
class _Installed:
    """One catalog a transaction stands in front of, and how to put the real one back."""

    staging: StagingCatalog
    restore: list[tuple[Any, str, Any]] = field(default_factory=list)  # (object, attribute, value)
    reattach: tuple[Any, str] | None = None  # (AttachedCatalogs, database name)


@dataclass(slots=True)
class _Transaction:
    installed: list[_Installed]
    routers: list[Router]
    aborted: str | None = None  # the first error inside the transaction
    duck_open: bool = False  # whether DuckDB's own transaction is open (`before_duck`)


# -- recognising ------------------------------------------------------------------------------------


def _kind(tokens: list[Token]) -> str | None:
    words = [t for t in tokens if not t.is_op(";")]
    if not words or words[0].kind != WORD:
        return None
    kind = _KINDS.get(words[0].text.upper())
    if kind is None:
        return None
    rest = [t.text.upper() for t in words[1:]]
    if words[0].text.upper() == "START":
        return kind if rest == ["TRANSACTION"] else None
    if rest in ([], ["TRANSACTION"], ["WORK"]):
        return kind
    return None


def handles(tokens: list[Token]) -> bool:
    """Whether the statement is BEGIN / START TRANSACTION / COMMIT / END / ROLLBACK / ABORT."""
    return _kind(tokens) is not None


def active(router: Router) -> bool:
    """Whether a transaction is open on the lake of `router` (its main router)."""
    return router.transaction is not None


def check_write(lake: Any, identifier: str) -> bool:
    """Before a write to `identifier` of `lake`'s catalog: True when a transaction holds it (the
    write then stages; `TransactionStateError` if the transaction already wrote another catalog),
    False when no transaction is open on that catalog."""
    from iceduck.transaction.multi_table import StagingCatalog

    staging = lake.catalog
    if not isinstance(staging, StagingCatalog):
        return False
    for other in staging.group:
        if other is not staging and other.written:
            raise TransactionStateError(
                f"{identifier}: this transaction writes tables of catalog '{other.name}' already "
                f"({', '.join(t.identifier for t in other.written)}); one transaction commits to one "
                "catalog, as DuckDB writes one attached database per transaction"
            )
    return True


def failed(router: Router, error: BaseException) -> None:
    """A statement failed while a transaction is open: the transaction is aborted (as DuckDB's)."""
    txn: _Transaction | None = router.transaction
    if txn is not None and txn.aborted is None:
        txn.aborted = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


# -- running ------------------------------------------------------------------------------------------


def run(router: Router, tokens: list[Token]) -> None:
    """Run BEGIN, COMMIT or ROLLBACK (`handles(tokens)` is true); ATTACH/DETACH inside are refused."""
    kind = _kind(tokens)
    if kind == _BEGIN:
        _begin(router)
    elif kind == _COMMIT:
        _commit(router)
    else:
        _rollback(router)


def refuse_inside(router: Router, tokens: list[Token]) -> None:
    """`TransactionStateError` for a statement a transaction cannot hold (ATTACH, DETACH)."""
    if router.transaction is not None and tokens and tokens[0].kind == WORD and tokens[0].text.upper() in _REFUSED_HEADS:
        raise TransactionStateError(
            f"{tokens[0].text.upper()} cannot run inside BEGIN ... COMMIT on a lake; COMMIT or ROLLBACK first"
        )


def _begin(router: Router) -> None:
    from iceduck.transaction.multi_table import StagingCatalog

    if router.transaction is not None:
        raise TransactionStateError(
            "BEGIN: a transaction is open already on this lake (COMMIT or ROLLBACK it first)"
        )
    con = router.con
    try:  # DuckDB's own transaction (a user's `con.begin()` outside Lake.sql) must not be open
        con.execute("BEGIN TRANSACTION")
        con.execute("ROLLBACK")
    except duckdb.TransactionException:
        raise TransactionStateError(
            "BEGIN: DuckDB's connection is inside a transaction opened outside Lake.sql; end it first"
        ) from None
    installed: list[_Installed] = []
    routers: list[Router] = [router]
    lake = router.lake
    main = StagingCatalog(lake.catalog, lake.io)
    one = _Installed(main, [(lake, "catalog", lake.catalog)])
    catalogs = getattr(lake, "catalogs", None)
    if catalogs is not None and getattr(catalogs, "main", None) is lake.catalog:
        one.restore.append((catalogs, "main", catalogs.main))
    installed.append(one)
    front = router.front
    for key, attached in dict(getattr(front, "_attached", {}) or {}).items():
        tables = attached.tables
        staging = StagingCatalog(tables.catalog, tables.io)
        item = _Installed(staging, [(tables, "catalog", tables.catalog)])
        registry = getattr(front, "catalogs", None)
        if registry is not None and registry.get(key) is tables.catalog:
            item.reattach = (registry, key)
        installed.append(item)
        routers.append(attached.router)
    group = [i.staging for i in installed]
    for item in installed:
        item.staging.group = group
        for obj, attr, _ in item.restore:
            setattr(obj, attr, item.staging)
        if item.reattach is not None:
            item.reattach[0].attach(item.reattach[1], item.staging)
    txn = _Transaction(installed, routers)
    router.transaction = txn
    try:
        _refresh(txn)  # the views now resolve through the staging catalogs
    except BaseException:
        _end(router, txn)
        raise


def before_duck(router: Router, kind: duckdb.StatementType | None) -> None:
    """Before a statement DuckDB runs on its own objects (`kind`: its type, as DuckDB's parser says):
    inside a transaction, DuckDB's own transaction is opened at the first one that may write (see
    the module docstring)."""
    txn: _Transaction | None = router.transaction
    if txn is None or txn.duck_open or kind not in _DUCK_WRITES:
        return
    router.con.execute("BEGIN TRANSACTION")
    txn.duck_open = True


def _commit(router: Router) -> None:
    txn: _Transaction | None = router.transaction
    if txn is None:
        router.con.execute("COMMIT")  # DuckDB's own (it says when no transaction is active)
        return
    con = router.con
    aborted = txn.aborted or (_duck_aborted(con) if txn.duck_open else None)
    if aborted is not None:
        _rollback(router)
        raise TransactionStateError(
            f"COMMIT: the transaction was rolled back because a statement inside it failed ({aborted}); "
            "nothing was committed"
        )
    writers = [i.staging for i in txn.installed if i.staging.written]
    committed: list[str] = []
    try:
        for staging in writers:  # one at most (`check_write`)
            committed += staging.commit_transaction()
    except BaseException as e:  # the staging catalog cleaned up after itself
        _end(router, txn, duck="ROLLBACK")
        if isinstance(e, CommitConflictError):
            raise CommitConflictError(
                f"COMMIT failed, nothing was committed (every table and DuckDB's changes are as before "
                f"BEGIN): {e}"
            ) from None
        raise
    _end(router, txn, duck="COMMIT", committed=committed)


def _rollback(router: Router) -> None:
    txn: _Transaction | None = router.transaction
    if txn is None:
        router.con.execute("ROLLBACK")  # DuckDB's own (it says when no transaction is active)
        return
    for item in txn.installed:
        item.staging.rollback()
    _end(router, txn, duck="ROLLBACK")


def close(router: Router) -> None:
    """The lake closes: an open transaction is rolled back (its files deleted), as DuckDB rolls back
    its own when a connection closes."""
    if router.transaction is not None:
        with contextlib.suppress(Exception):
            _rollback(router)


def _end(
    router: Router, txn: _Transaction, duck: str | None = None, committed: list[str] | None = None
) -> None:
    """Put the real catalogs back, end DuckDB's transaction (`duck`), bring the views up to date."""
    router.transaction = None
    for item in txn.installed:
        for obj, attr, value in item.restore:
            setattr(obj, attr, value)
        if item.reattach is not None:
            registry, key = item.reattach
            if registry.get(key) is item.staging:
                registry.attach(key, item.staging.catalog)
    error: duckdb.Error | None = None
    if duck is not None and txn.duck_open:
        try:
            router.con.execute(duck)
        except duckdb.Error as e:
            error = e
    _refresh(txn)
    if error is not None and duck == "COMMIT":
        if not committed:
            raise error
        raise TransactionStateError(
            f"COMMIT: the Iceberg tables were committed ({', '.join(committed)}), but DuckDB's own commit "
            f"failed and its changes were rolled back: {str(error).splitlines()[0]}"
        )


def _refresh(txn: _Transaction) -> None:
    for r in txn.routers:
        r.refresh_views()


def _duck_aborted(con: duckdb.DuckDBPyConnection) -> str | None:
    """DuckDB's reason when its transaction was aborted by a failed statement, else None."""
    try:
        con.execute("SELECT 1").fetchall()
    except duckdb.TransactionException as e:
        return str(e).splitlines()[0]
    return None
