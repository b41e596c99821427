"""The DuckDB connection a MERGE / UPDATE ... FROM / DELETE ... USING / upsert on a lake table makes
its copies on and writes from (`iceduck.sql.merge`, `iceduck.sql.upsert`).

Outside a DuckDB transaction that is a cursor of the user's connection: a connection of its own,
whose session settings (UTC for the writer, the filesystems) are not the user's. Inside one (`BEGIN
... COMMIT` on a lake that wrote a DuckDB table, `iceduck.sql.transactions`), a cursor would not
see the rows the transaction wrote, and the user's connection would not see the cursor's copies
(each reads its own snapshot): the work then runs on the user's connection itself. There

- the statements that may fail on purpose (probing the source's alias, a semi-join the copy can
  do without, a function registered already) must not abort the user's transaction, as every
  error does by default: while the work runs, only errors past binding do
  (`current_transaction_invalidation_policy`); the user's own statement runs under the usual rule;
- the user's time zone is put back for the user's statement and at the end (the writer sets UTC);
- the copies are dropped table by table: DuckDB 2.0.1 fails the COMMIT of a transaction that
  created, filled and then dropped with DROP SCHEMA ... CASCADE a table with a PRIMARY KEY (an
  upsert's copy has one).
"""

from __future__ import annotations

import contextlib
from typing import Any

import duckdb

from iceduck.vocabulary import quote_ident, quote_str


def in_transaction(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether DuckDB's own transaction is open on `con`: two statements then share one transaction
    id, where each statement outside one runs in a new transaction. (Probing with BEGIN would abort
    an open transaction: every error does.)"""
    first = con.execute("SELECT txid_current()").fetchall()
    return con.execute("SELECT txid_current()").fetchall() == first


class Working:
    """`cur`: the connection to make the copies on and write from. Around the user's statement on
    `con`: `users_session()` before, `ours()` after; `drop(...)` the copies, then `close()`."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.shared = in_transaction(con)
        self.zone = str(con.execute("SELECT current_setting('TimeZone')").fetchall()[0][0])
        self.cur: Any = con if self.shared else con.cursor()
        self.ours()

    def ours(self) -> None:
        """Errors of binding do not abort the user's transaction (see the module docstring)."""
        if self.shared:
            self.con.execute(
                "SET current_transaction_invalidation_policy = 'SYNTACTIC_ERRORS_DO_NOT_INVALIDATE'"
            )

    def users_session(self) -> None:
        """The user's time zone and error rule back on `con`, for the user's statement."""
        if self.shared:
            self.con.execute(f"SET TimeZone = {quote_str(self.zone)}")
            self.con.execute("SET current_transaction_invalidation_policy = 'STANDARD_POLICY'")

    def drop(self, database: str, schema: str) -> None:
        """Drop the schema of the copies and everything in it (errors ignored: cleaning up)."""
        with contextlib.suppress(duckdb.Error):
            if self.shared:
                for (table,) in self.cur.execute(
                    "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = ?",
                    [database, schema],
                ).fetchall():
                    self.cur.execute(
                        f"DROP TABLE {quote_ident(database)}.{quote_ident(schema)}.{quote_ident(table)}"
                    )
            self.cur.execute(f"DROP SCHEMA IF EXISTS {quote_ident(database)}.{quote_ident(schema)} CASCADE")

    def close(self) -> None:
        if not self.shared:
            self.cur.close()
            return
        # a statement that failed aborted DuckDB's transaction, which then refuses even SET
        with contextlib.suppress(duckdb.TransactionException):
            self.users_session()
